"""What a kind of retriever is, whole where it is registered (:class:`RetrieverKind`, :func:`register`,
:func:`retriever_kinds`): its build or parts, its command-line flags both ways, its French menu label and Search
column, its link settings, whether ``tune`` searches it; the front ends read it and name no kind
(tests/test_layout.py). The built-in kinds register in :mod:`.kinds`. A :class:`RetrieverSpec` says what to build
(:func:`build_retriever`); a hybrid's, with the product's default fusion: :mod:`.hybrid_specs`.

Every kind's options and defaults: docs/design.md, 'bsard_demo/retrievers/registry.py'.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..dataset import DataError, Dataset
from .base import Progress, Retriever
from .hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_RRF_K

#: The kind of a hybrid's first part, and its name among the hybrid's systems (``--weights``
#: and the Search page's weights name it first).
BASE_PART = "bm25"


class Builder(Protocol):
    def __call__(self, spec: "RetrieverSpec", dataset: Dataset, *, cache_root: Path | None,
                 progress: Progress | None, notice: Callable[[str], None] | None) -> Retriever: ...


@dataclass(frozen=True)
class Flag:
    """One command-line flag a kind brings to ``run``, ``index`` and ``tune``: ``names`` and
    ``keywords`` as :meth:`argparse.ArgumentParser.add_argument` takes them, ``group`` the help
    section it is listed in (``None``: with the command's own options). A flag is *given* when its
    value is not its default (:attr:`default`); a kind that does not :attr:`~RetrieverKind.takes`
    it refuses it."""

    names: tuple[str, ...]
    keywords: Mapping[str, Any] = field(default_factory=dict)
    group: str | None = None

    @property
    def dest(self) -> str:
        return self.keywords.get("dest") or self.names[0].lstrip("-").replace("-", "_")

    @property
    def default(self) -> Any:
        return self.keywords.get("default")


@dataclass(frozen=True)
class Setting:
    """A setting of a kind a Search link and the page's widgets carry (beside the built-in
    kinds' own, :mod:`bsard_demo.app.link_codec`): the spec option ``option``, its link parameter
    ``param``, its ``default`` and the values a link may hold (``choices``, as text); ``words``:
    the page's French name of it."""

    option: str
    param: str
    default: str
    choices: tuple[str, ...]
    words: str = ""


@dataclass(frozen=True)
class ColumnChoice:
    """What the Search page's widgets chose for its columns (the page's words: encoder keys,
    mapped to what a dense retriever takes by ``targets``), handed to each kind's
    :attr:`~RetrieverKind.column`."""

    encoder: str = "use"
    hybrid_encoders: Sequence[str] | None = None
    fusion: str = DEFAULT_FUSION
    rrf_k: float = DEFAULT_RRF_K
    alpha: float = DEFAULT_ALPHA
    weights: Sequence[float] | None = None
    targets: Mapping[str, str] = field(default_factory=dict)
    structure: bool = False
    model: str | None = None  # the learned model offered here (a kind with ``offered="with_model"``)
    settings: Mapping[str, str] = field(default_factory=dict)  # link parameter -> value (:class:`Setting`)

    def target(self, key: str) -> str:
        return self.targets.get(key, key)


def _default_column(kind: "RetrieverKind", choice: ColumnChoice) -> tuple[str, "RetrieverSpec"]:
    """A kind without a column of its own: its label, its spec with its :attr:`~RetrieverKind.settings`."""
    options = {s.option: choice.settings.get(s.param, s.default) for s in kind.settings}
    return kind.label, RetrieverSpec(kind.name, options)


@dataclass(frozen=True)
class RetrieverKind:
    """One kind of retriever, whole: every front end reads it and names no kind.

    - ``name`` (the spec's kind, ``--retriever NAME``), a one-line ``summary`` (``run --help``'s
      list of the kinds, where the README points), the ``options`` its spec takes, and ``build``
      (``build(spec, dataset, cache_root=, progress=, notice=)``, the corpus checked already);
      a kind made of ``parts`` (``parts(spec)``: the part specs) is built from them by ``assemble``
      (``assemble(spec, built_parts, dataset)``) instead, so the app shares the parts' indexes
      with the other columns (:mod:`bsard_demo.app.state`) and names the parts in its why-lines;
      ``prepare(spec)``, when a kind has one, starts the slow loads of building ``spec`` in the
      background (e5's ONNX graph and session), for every part before the first is built
      (:func:`prepare_parts`). It never raises: the build reports what fails.
    - The command line: ``flags`` it brings (added once, in registration order), ``takes`` the
      flags it reads (its own and other kinds': their ``dest``), ``from_args(values)`` the spec of
      those values (``None``: the kind with its defaults), ``to_flags(spec, notes)`` the ``run``
      flags that build ``spec`` (``tune``'s printed command; a setting with no flag is a line of
      ``notes``); ``tunable``: ``tune`` grid-searches it.
    - The Search page (French): ``label`` its short name (default: its name), ``title`` its words for a
      citizen, the systems menu's and the column's heading (default: its label), ``offered``
      ``"always"`` (the systems menu and the Score page's built-ins), ``"with_model"`` (only when
      a model of its kind is at hand: :attr:`ColumnChoice.model`) or ``"never"`` (reached another
      way: neighbours is an "encoder" of the dense column); ``column(choice)`` its column's label
      and spec (default: the label, its spec with ``settings`` as chosen); ``settings`` the
      :class:`Setting` a link carries for it; ``link_params`` the page's own link parameters its
      column reads (the dense encoder, the hybrid's fusion: :mod:`bsard_demo.app.link_codec`), written
      in a link only when the kind is among its systems."""

    name: str
    summary: str
    options: frozenset[str]
    build: Builder | None = None
    parts: Callable[["RetrieverSpec"], list["RetrieverSpec"]] | None = None
    assemble: Callable[["RetrieverSpec", list[Retriever], Dataset], Retriever] | None = None
    prepare: Callable[["RetrieverSpec"], None] | None = None
    flags: tuple[Flag, ...] = ()
    takes: frozenset[str] = frozenset()
    from_args: Callable[[Mapping[str, Any]], "RetrieverSpec"] | None = None
    to_flags: Callable[["RetrieverSpec", list[str]], list[str]] | None = None
    tunable: bool = False
    label: str = ""
    title: str = ""
    offered: str = "always"
    column: Callable[[ColumnChoice], tuple[str, "RetrieverSpec"]] | None = None
    settings: tuple[Setting, ...] = ()
    link_params: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)
        if not self.title:
            object.__setattr__(self, "title", self.label)
        if (self.build is None) == (self.parts is None or self.assemble is None):
            raise ValueError(f"a retriever kind {self.name!r} is built by build, or by parts and assemble")
        if self.offered not in ("always", "with_model", "never"):
            raise ValueError(f"offered: always, with_model or never, not {self.offered!r}")
        if self.settings and self.column is not None:
            raise ValueError(f"{self.name}: a kind with its own column reads its settings there")
        if self.settings and not {s.option for s in self.settings} <= self.options:
            raise ValueError(f"{self.name}: a setting's option is not one of the kind's options")

    def spec_of(self, values: Mapping[str, Any]) -> "RetrieverSpec":
        """The spec of the command line's ``values`` (flag dest -> value)."""
        return self.from_args(values) if self.from_args is not None else RetrieverSpec(self.name)

    def flags_of(self, spec: "RetrieverSpec", notes: list[str]) -> list[str]:
        """The ``run`` flags after ``--retriever NAME`` that build ``spec``."""
        if self.to_flags is not None:
            return self.to_flags(spec, notes)
        if spec.options:
            notes.append(f"{self.name} option(s) {', '.join(sorted(spec.options))} are not run options")
        return []

    def column_of(self, choice: ColumnChoice) -> tuple[str, "RetrieverSpec"]:
        """The Search page's column of this kind for ``choice``: ``(label, spec)``."""
        return self.column(choice) if self.column is not None else _default_column(self, choice)


_KINDS: dict[str, RetrieverKind] = {}


def register(kind: RetrieverKind) -> RetrieverKind:
    """Add ``kind`` to the kinds every front end offers, after those registered before it."""
    if kind.name in _KINDS:
        raise ValueError(f"a retriever kind {kind.name!r} is registered already")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind :func:`register` added (a test's toy retriever)."""
    _KINDS.pop(name, None)


def retriever_kinds() -> dict[str, RetrieverKind]:
    """The registered kinds by name, in registration order."""
    return dict(_KINDS)


def kind(name: str) -> RetrieverKind:
    """The registered kind ``name`` (:class:`ValueError` naming the kinds when there is none)."""
    if name not in _KINDS:
        raise ValueError(f"unknown retriever {name!r}; choose {', '.join(_KINDS)}")
    return _KINDS[name]


def menu_kinds(with_model: bool = False) -> list[str]:
    """The kinds the Search page's systems menu offers, in registration order: those offered
    always, and with ``with_model`` those offered when a model of theirs is at hand."""
    wanted = ("always", "with_model") if with_model else ("always",)
    return [k.name for k in _KINDS.values() if k.offered in wanted]


def link_params_of(kinds: Sequence[str]) -> frozenset[str]:
    """The link parameters the registered ``kinds`` read (their ``link_params`` and settings')."""
    found = [_KINDS[k] for k in kinds if k in _KINDS]
    return frozenset(p for k in found for p in (*k.link_params, *(s.param for s in k.settings)))


def kind_settings() -> dict[str, Setting]:
    """Every registered kind's :class:`Setting` by its link parameter."""
    return {s.param: s for k in _KINDS.values() for s in k.settings}


@dataclass(frozen=True)
class RetrieverSpec:
    """What to build: ``kind`` and its ``options`` (docs/design.md, 'bsard_demo/retrievers/registry.py')."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown retriever {self.kind!r}; choose {', '.join(_KINDS)}")
        allowed = _KINDS[self.kind].options
        unknown = sorted(set(self.options) - allowed)
        if unknown:
            raise ValueError(f"unknown option(s) for a {self.kind} retriever: {', '.join(unknown)}; "
                             f"allowed: {', '.join(sorted(allowed))}")
        object.__setattr__(self, "options", dict(self.options))

    def key(self) -> str:
        """A stable text form (JSON, sorted keys), e.g. to memoise built retrievers."""
        def plain(value):
            if isinstance(value, RetrieverSpec):
                return {"kind": value.kind, "options": plain(value.options)}
            if isinstance(value, Mapping):
                return {str(k): plain(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            return value
        return json.dumps(plain(self), sort_keys=True, default=str)

    def __hash__(self) -> int:
        return hash(self.key())


def build_retriever(spec: RetrieverSpec, dataset: Dataset, *, cache_root: Path | None = None,
                    progress: Progress | None = None, notice: Callable[[str], None] | None = None) -> Retriever:
    """Build (or load from the cache) the retriever ``spec`` over ``dataset``'s articles.

    Raises :class:`~bsard_demo.dataset.DataError` when the dataset has no article corpus and
    :class:`ValueError` on bad options."""
    if dataset.articles is None:
        raise DataError(f"{dataset.name}: no article corpus (articles.csv), so nothing to search")
    if len(dataset.articles) == 0:
        raise DataError(f"{dataset.name}: the article corpus is empty")
    kind = _KINDS[spec.kind]
    if kind.build is not None:
        return kind.build(spec, dataset, cache_root=cache_root, progress=progress, notice=notice)
    parts = prepare_parts(kind.parts(spec))
    built = [build_retriever(p, dataset, cache_root=cache_root, progress=progress, notice=notice) for p in parts]
    return kind.assemble(spec, built, dataset)


def prepare_parts(parts: Sequence[RetrieverSpec]) -> Sequence[RetrieverSpec]:
    """Starts each part's background loads (its kind's ``prepare``) before the first part is built, so
    they overlap the others' (e5's ~2 s with BM25 and the other embeddings); returns ``parts``."""
    for part in parts:
        prepare = _KINDS[part.kind].prepare  # a spec's kind is registered (RetrieverSpec checks it)
        if prepare is not None:
            prepare(part)
    return parts
