"""What a kind of retriever is, whole where it is registered (:class:`RetrieverKind`, :func:`register`,
:func:`retriever_kinds`): its build or parts, its command-line flags both ways, its French menu label and Search
column, its link settings, whether ``tune`` searches it; the front ends read it and name no kind
(tests/test_layout.py). The built-in kinds register in :mod:`.kinds`. A :class:`RetrieverSpec` says what to build
(:func:`build_retriever`); :func:`hybrid_spec` builds a hybrid's with the product's default fusion (RRF k = 60,
zero-shot dense parts weighted 0.5: :func:`default_weights`).

Every kind's options and defaults: docs/design.md, 'bsard_demo/retrievers/registry.py'.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..dataset import DataError, Dataset
from .adapter import is_adapter_folder
from .base import Progress, Retriever
from .encoder_base import bundled_model
from .encoders import DEFAULT_ENCODER, ENCODER_CHOICES
from .hybrid import DEFAULT_ALPHA, DEFAULT_DEPTH, DEFAULT_FUSION, DEFAULT_RRF_K, FusionConfig, HybridRetriever
from .neighbours import NEIGHBOURS
from .structure import StructureRetriever, StructureSettings, graph_of

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


def default_hybrid_parts() -> list[RetrieverSpec]:
    """BM25 with its defaults + the default dense encoder."""
    return [RetrieverSpec("bm25"), RetrieverSpec("dense")]


# The default fusion (DEFAULT_FUSION, DEFAULT_RRF_K, DEFAULT_ALPHA) is retrievers/hybrid.py's
# (FusionConfig's defaults): reciprocal rank fusion with Cormack et al.'s k = 60.
#: RRF weight of a built-in, zero-shot dense encoder (:data:`~.encoders.ENCODER_CHOICES`) when
#: :func:`hybrid_spec` is given no weights; BM25 and any other encoder (a model folder, e.g. one
#: fine-tuned by ``train``, or a hub id) weigh 1. Why half: docs/effectiveness.md, "Why 0.5 for a
#: zero-shot encoder".
ZERO_SHOT_DENSE_WEIGHT = 0.5
#: RRF weight of the neighbours part (:mod:`~bsard_demo.retrievers.neighbours`) when
#: :func:`hybrid_spec` is given no weights: decided on frlaw-dev's train split, leave-one-out,
#: over 0.25-2 (docs/effectiveness.md, "Label transfer from training questions").
NEIGHBOURS_WEIGHT = 0.5


def parse_encoders(value: str | Sequence[str] | None) -> list[str]:
    """Encoder names from ``"use,e5"`` or a list; ``None`` or empty: the default encoder.
    Raises :class:`ValueError` on an empty item or a repeated encoder."""
    if value is None:
        return [DEFAULT_ENCODER]
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(item).strip() for item in items]
    if not any(names):
        return [DEFAULT_ENCODER]
    if not all(names):
        raise ValueError(f"empty encoder name in {','.join(names)!r}: give names separated by commas, e.g. use,e5")
    # the built-in names are case-insensitive in resolve_encoder
    canonical = [n.lower() if n.lower() in (*ENCODER_CHOICES, NEIGHBOURS) else n for n in names]
    repeated = sorted({n for n in canonical if canonical.count(n) > 1})
    if repeated:
        raise ValueError(f"encoder listed more than once: {', '.join(repeated)}")
    return canonical


def parse_weights(value: str | Sequence[float] | None) -> list[float] | None:
    """Weights from ``"1,0.5,0.5"`` or a list of numbers; ``None`` / empty stays ``None``.
    Raises :class:`ValueError` naming every item that is not a finite number >= 0."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    if isinstance(value, str) and not value.strip():
        return None
    out, bad = [], []
    for item in items:
        try:
            w = float(str(item).strip()) if isinstance(item, str) else float(item)
        except (TypeError, ValueError):
            bad.append(repr(str(item).strip()))
            continue
        if not 0 <= w < float("inf"):
            bad.append(repr(str(item).strip()))
        out.append(w)
    if bad:
        raise ValueError("weights must be finite numbers >= 0, separated by commas (e.g. 1,0.5,0.5); not "
                         f"{', '.join(bad)}")
    return out


def default_weights(encoders: Sequence[str], method: str = DEFAULT_FUSION) -> list[float]:
    """The weights :func:`hybrid_spec` uses when given none, BM25 first: for RRF 1 for BM25, then
    :data:`ZERO_SHOT_DENSE_WEIGHT` for each built-in encoder, :data:`NEIGHBOURS_WEIGHT` for the
    neighbours part and 1 for any other, in order; for
    the weighted fusion all 1 (equal weights, ``alpha`` 0.5 for two systems). A query adapter
    (:mod:`.adapter`: a folder, or a model of the active bundle) weighs as the built-in encoder it
    adapts."""
    if method != "rrf":
        return [1.0] * (1 + len(encoders))
    def weight(name: str) -> float:
        if _is_adapter(name):  # a query adapter keeps its base's weight (decided so: docs/effectiveness.md)
            return ZERO_SHOT_DENSE_WEIGHT
        name = str(name).strip().lower()
        return NEIGHBOURS_WEIGHT if name == NEIGHBOURS else ZERO_SHOT_DENSE_WEIGHT if name in ENCODER_CHOICES else 1.0

    return [1.0] + [weight(e) for e in encoders]


def model_folder(name: str) -> Path | None:
    """The folder ``--encoder NAME`` names: a path that exists, else a model of the active index
    bundle (``None``: neither, or an empty name)."""
    key = str(name or "").strip()
    if not key:
        return None
    path = Path(key).expanduser()
    return path if path.exists() else bundled_model(key)


def _is_adapter(name: str) -> bool:
    folder = model_folder(name)
    return folder is not None and is_adapter_folder(folder)


def hybrid_spec(encoders: str | Sequence[str] | None = None, *, method: str = DEFAULT_FUSION,
                rrf_k: float | None = None, weights: str | Sequence[float] | None = None, alpha: float | None = None,
                normalisation: str = "minmax", bm25_options: Mapping[str, Any] | None = None,
                dense_options: Mapping[str, Any] | None = None, depth: int | None = None,
                structure: Mapping[str, Any] | bool | None = None) -> RetrieverSpec:
    """A hybrid spec fusing BM25 (``bm25_options``) with one dense retriever per encoder of
    ``encoders`` (``"use,e5"`` or a list; default: the default encoder), each with
    ``dense_options`` (``fields``, ``pooling``, ``window``, ``batch_size``, ``backend``); the name
    :data:`~bsard_demo.retrievers.neighbours.NEIGHBOURS` in ``encoders`` adds the neighbours part
    there instead of a dense one (``"neighbours"`` alone: BM25 + neighbours).

    - ``method="rrf"``: weighted reciprocal rank fusion ``sum_i w_i / (rrf_k + rank_i)``
      (``rrf_k`` default :data:`DEFAULT_RRF_K`);
    - ``method="weighted"``: ``sum_i w_i * minmax_i(score)`` (``normalisation="none"``: raw
      scores); with two parts and no ``weights``, ``alpha`` (default 0.5) weighs BM25 and
      ``1 - alpha`` the dense part.

    ``weights``: one per system in order (BM25 first, then the encoders as listed), as numbers or
    ``"1,0.5,0.5"``; RRF's default is :func:`default_weights` (BM25 1, a built-in zero-shot
    encoder 0.5, any other 1; see :data:`ZERO_SHOT_DENSE_WEIGHT`), stored in the spec, so
    ``hybrid_spec()`` is the product's default hybrid: BM25 + use, RRF k = 60, weights 1, 0.5.
    The weighted fusion's default stays equal weights (``alpha`` 0.5 for two systems).
    ``rrf_k`` is ignored by ``"weighted"``. Everything is checked here, so a bad combination fails
    before any index is built: :class:`ValueError` with a message naming the systems.
    (A hybrid spec written by hand without ``weights``, such as ``RetrieverSpec("hybrid")``,
    keeps meaning equal weights.)"""
    names = parse_encoders(encoders)
    systems = [BASE_PART, *names]
    fusion = FusionConfig(method, rrf_k=DEFAULT_RRF_K if rrf_k is None else rrf_k, weights=parse_weights(weights),
                          alpha=alpha, normalisation=normalisation,
                          depth=DEFAULT_DEPTH if depth is None else depth).validate(len(systems), systems)
    if fusion.method == "rrf" and fusion.weights is None:
        fusion = replace(fusion, weights=tuple(default_weights(names, method)))
    if fusion.takes_alpha(len(systems)) and fusion.alpha is None:
        fusion = replace(fusion, alpha=DEFAULT_ALPHA)
    options: dict[str, Any] = {
        "retrievers": [RetrieverSpec(BASE_PART, dict(bm25_options or {}))]
        + [RetrieverSpec("neighbours") if name == NEIGHBOURS
           else RetrieverSpec("dense", {**dict(dense_options or {}), "encoder": name}) for name in names],
        **fusion.spec_options(),
    }
    if fusion.method == "weighted":
        options["normalisation"] = fusion.normalisation
    if depth is not None:
        options["depth"] = int(depth)
    if structure is not None and structure is not False:
        options["structure"] = StructureSettings.from_options({} if structure is True else structure).as_dict()
    return RetrieverSpec("hybrid", options)


def system_labels(spec: RetrieverSpec) -> list[str]:
    """Short names of a hybrid's systems in fusion order (``["bm25", "use", "e5"]``), to label
    one weight each in a UI; a dense part is named by its encoder (:func:`part_name`)."""
    return [part_name(p) for p in hybrid_parts(spec)]


def part_name(part: RetrieverSpec) -> str:
    """A hybrid part as ``--encoder`` and the UI name it: ``bm25``, a dense part's encoder, or
    :data:`~bsard_demo.retrievers.neighbours.NEIGHBOURS`."""
    if part.kind == "dense":
        return str(part.options.get("encoder") or DEFAULT_ENCODER)
    return NEIGHBOURS if part.kind == "neighbours" else part.kind


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


def hybrid_parts(spec: RetrieverSpec) -> list[RetrieverSpec]:
    """The part specs of a hybrid spec (dicts become specs; default: :func:`default_hybrid_parts`)."""
    parts = spec.options.get("retrievers") or default_hybrid_parts()
    return [p if isinstance(p, RetrieverSpec) else RetrieverSpec(p["kind"], p.get("options", {})) for p in parts]


def make_hybrid(spec: RetrieverSpec, parts: Sequence[Retriever], corpus_size: int | None = None,
                articles=None) -> Retriever:
    """The :class:`HybridRetriever` of a hybrid ``spec`` over already built ``parts`` (in the order
    of :func:`hybrid_parts`), for callers that build and share the parts themselves; with the
    spec's ``structure``, wrapped in a :class:`~.structure.StructureRetriever` over the graph of
    ``articles`` (the corpus, then required: :class:`ValueError` without it)."""
    hybrid = HybridRetriever(list(parts), fusion=FusionConfig.from_options(spec.options, len(parts)),
                             corpus_size=corpus_size)
    structure = spec.options.get("structure")
    if structure is None:
        return hybrid
    if articles is None:
        raise ValueError("a hybrid with structure re-scoring needs the corpus' articles (make_hybrid(..., articles=))")
    return StructureRetriever(hybrid, graph_of(articles), StructureSettings.from_options(structure))
