"""Build any retriever from a small declarative spec (used by the CLI and the app).

``RetrieverSpec(kind, options)``:

- ``"bm25"``: options are :class:`~bsard_demo.retrievers.bm25.BM25Settings` fields (``k1``, ``b``,
  ``method``, ``engine``, ``fields``, ``stem``, ``stopwords``, ``keep_numbers``).
- ``"dense"``: ``encoder`` (a name of :data:`~bsard_demo.retrievers.encoders.ENCODER_CHOICES`, a
  sentence-transformers id or a folder; default: the dense module's default encoder), and
  ``fields``, ``pooling``, ``window``, ``batch_size`` passed to
  :meth:`~bsard_demo.retrievers.dense.DenseRetriever.build`.
- ``"hybrid"``: ``retrievers`` (specs of the parts; default BM25 + the default dense encoder),
  ``method`` (``"rrf"`` | ``"weighted"``, default ``"rrf"``), ``rrf_k`` (60), ``alpha`` (0.5, the
  weight of the first part), ``weights``, ``normalisation``, ``depth`` (1000).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..dataset import DataError, Dataset
from .base import Progress, Retriever
from .bm25 import BM25Retriever, BM25Settings
from .hybrid import DEFAULT_DEPTH, HybridRetriever

KINDS = ("bm25", "dense", "hybrid")
_BM25_OPTIONS = frozenset(BM25Settings.__dataclass_fields__)
_DENSE_OPTIONS = frozenset({"encoder", "fields", "pooling", "window", "batch_size"})
_HYBRID_OPTIONS = frozenset({"retrievers", "method", "rrf_k", "alpha", "weights", "normalisation", "depth"})


@dataclass(frozen=True)
class RetrieverSpec:
    """What to build: ``kind`` and its ``options`` (see the module docstring)."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown retriever {self.kind!r}; choose {', '.join(KINDS)}")
        allowed = {"bm25": _BM25_OPTIONS, "dense": _DENSE_OPTIONS, "hybrid": _HYBRID_OPTIONS}[self.kind]
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


def build_retriever(spec: RetrieverSpec, dataset: Dataset, *, cache_root: Path | None = None,
                    progress: Progress | None = None, notice: Callable[[str], None] | None = None) -> Retriever:
    """Build (or load from the cache) the retriever ``spec`` over ``dataset``'s articles.

    Raises :class:`~bsard_demo.dataset.DataError` when the dataset has no article corpus and
    :class:`ValueError` on bad options."""
    if dataset.articles is None:
        raise DataError(f"{dataset.name}: no article corpus (articles.csv), so nothing to search")
    if len(dataset.articles) == 0:
        raise DataError(f"{dataset.name}: the article corpus is empty")
    options = dict(spec.options)
    if spec.kind == "bm25":
        return BM25Retriever.build(dataset.articles, BM25Settings(**options), cache_root=cache_root,
                                   progress=progress, notice=notice)
    if spec.kind == "dense":
        from .dense import DenseRetriever  # imported late: pulls in the encoders

        kwargs = {name: value for name, value in options.items() if value is not None}
        return DenseRetriever.build(dataset.articles, cache_root=cache_root, progress=progress, notice=notice, **kwargs)
    built = [build_retriever(p, dataset, cache_root=cache_root, progress=progress, notice=notice) for p in hybrid_parts(spec)]
    return make_hybrid(spec, built, corpus_size=len(dataset.articles))


def hybrid_parts(spec: RetrieverSpec) -> list[RetrieverSpec]:
    """The part specs of a hybrid spec (dicts become specs; default: :func:`default_hybrid_parts`)."""
    parts = spec.options.get("retrievers") or default_hybrid_parts()
    return [p if isinstance(p, RetrieverSpec) else RetrieverSpec(p["kind"], p.get("options", {})) for p in parts]


def make_hybrid(spec: RetrieverSpec, parts: Sequence[Retriever], corpus_size: int | None = None) -> HybridRetriever:
    """The :class:`HybridRetriever` of a hybrid ``spec`` over already built ``parts`` (in the order
    of :func:`hybrid_parts`), for callers that build and share the parts themselves."""
    options = spec.options
    return HybridRetriever(
        list(parts),
        method=options.get("method", "rrf"),
        rrf_k=options.get("rrf_k", 60),
        alpha=options.get("alpha", 0.5),
        depth=options.get("depth", DEFAULT_DEPTH),
        weights=options.get("weights"),
        normalisation=options.get("normalisation", "minmax"),
        corpus_size=corpus_size,
    )
