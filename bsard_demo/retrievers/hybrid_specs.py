"""A hybrid's spec: :func:`hybrid_spec` fuses BM25 with dense and neighbours parts under the product's default
fusion (RRF k = 60, zero-shot dense parts weighted 0.5: :func:`default_weights`), :func:`hybrid_parts` reads a
hybrid spec's parts back and :func:`make_hybrid` assembles built parts. The kind itself registers in
:mod:`.kinds`; options and defaults: docs/design.md, 'bsard_demo/retrievers/registry.py'.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from .adapter import is_adapter_folder
from .base import Retriever
from .encoder_base import bundled_model
from .encoders import DEFAULT_ENCODER, ENCODER_CHOICES
from .hybrid import DEFAULT_ALPHA, DEFAULT_DEPTH, DEFAULT_FUSION, DEFAULT_RRF_K, FusionConfig, HybridRetriever
from .neighbours import NEIGHBOURS
from .registry import BASE_PART, RetrieverSpec
from .structure import StructureRetriever, StructureSettings, graph_of


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
