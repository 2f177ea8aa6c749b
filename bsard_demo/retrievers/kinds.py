"""The built-in kinds, each whole in its one :func:`~.registry.register` call: BM25, dense, neighbours, hybrid,
learned ranker. Their command line is :mod:`.kind_flags`; their Search page words are here (French, the one
place outside bsard_demo/app/ that holds some: a kind's menu label and column wording belong to its
registration, so a new kind needs no edit in the app, tests/retrievers/test_registry_kinds.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..dataset import Dataset
from .base import Retriever
from .bm25 import BM25Retriever, BM25Settings
from .dense import DenseRetriever
from .encoders import DEFAULT_ENCODER, resolve_encoder
from .hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_RRF_K, FusionConfig, FusionError
from .hybrid_specs import hybrid_parts, hybrid_spec, make_hybrid, model_folder
from .kind_flags import (
    BM25_FLAGS,
    DENSE_FLAGS,
    HYBRID_FLAGS,
    bm25_flags,
    bm25_from_args,
    dense_flags,
    dense_from_args,
    dests,
    hybrid_flags,
    hybrid_from_args,
    neighbours_flags,
    ranker_flags,
    ranker_from_args,
)
from .neighbours import NEIGHBOURS, NeighboursRetriever
from .ranker import build_ranker, is_ranker_folder, part_specs
from .registry import ColumnChoice, RetrieverKind, RetrieverSpec, register

#: The Search page's words for a fusion (:meth:`~bsard_demo.retrievers.hybrid.FusionConfig.label`).
FUSION_WORDS = {"rrf": "RRF", "weighted": "pondéré", "alpha": "α"}
#: The column of the neighbours retriever, chosen as the dense column's "encoder".
NEIGHBOURS_COLUMN = "Questions voisines (train)"
#: The learned ranker's menu word.
RANKER_LABEL = "Classement appris"
#: What a hybrid column re-scored along the code's structure adds to its label.
STRUCTURE_WORDS = " + structure du code"


# ------------------------------------------------------------------------------ builds

def _build_bm25(spec: RetrieverSpec, dataset: Dataset, **context) -> Retriever:
    return BM25Retriever.build(dataset.articles, BM25Settings(**spec.options), **context)


def _build_dense(spec: RetrieverSpec, dataset: Dataset, **context) -> Retriever:
    kwargs = {name: value for name, value in spec.options.items() if value is not None}
    return DenseRetriever.build(dataset.articles, **context, **kwargs)


def _prepare_dense(spec: RetrieverSpec) -> None:
    """Starts the encoder's background loads (:meth:`~.e5_onnx.E5OnnxEncoder.prepare`) when it has any."""
    options = spec.options
    try:
        encoder = resolve_encoder(options.get("encoder") or DEFAULT_ENCODER, options.get("backend") or "auto")
    except Exception:  # noqa: BLE001 - the build says why, at its time
        return
    prepare = getattr(encoder, "prepare", None)
    if prepare is not None:
        prepare()


def _build_neighbours(spec: RetrieverSpec, dataset: Dataset, **context) -> Retriever:
    return NeighboursRetriever.build(dataset, **{k: v for k, v in spec.options.items() if v is not None})


def _assemble_hybrid(spec: RetrieverSpec, built: list[Retriever], dataset: Dataset) -> Retriever:
    size = len(dataset.articles) if dataset.articles is not None else None
    return make_hybrid(spec, built, corpus_size=size, articles=dataset.articles)


def ranker_folder(model: str) -> Path:
    """The folder of a learned ranker given as ``--encoder``: a path, or the name of a model of
    the active index bundle. :class:`ValueError` when it is neither."""
    key = str(model or "").strip()
    if not key:
        raise ValueError("--retriever ranker needs its folder: --encoder DIR (written by train --ranker)")
    folder = model_folder(key)
    if folder is None or not is_ranker_folder(folder):
        raise ValueError(f"{key}: not a learned ranker's folder (train --ranker writes one) nor a ranker of the "
                         "active index bundle")
    return folder


def _ranker_parts(spec: RetrieverSpec) -> list[RetrieverSpec]:
    """The ranker's input systems (its record's), each a spec the other columns share."""
    return [RetrieverSpec(*part) for part in part_specs(ranker_folder(spec.options.get("model", ""))).values()]


def _assemble_ranker(spec: RetrieverSpec, built: list[Retriever], dataset: Dataset) -> Retriever:
    by_key = {p.key(): r for p, r in zip(_ranker_parts(spec), built)}
    return build_ranker(dataset, ranker_folder(spec.options.get("model", "")),
                        build=lambda part: by_key[RetrieverSpec(*part).key()])


# ------------------------------------------------------------------------------ Search page columns

def hybrid_column(encoders: Sequence[str], *, fusion: str = DEFAULT_FUSION, rrf_k: float = DEFAULT_RRF_K,
                  alpha: float = DEFAULT_ALPHA, weights: Sequence[float] | None = None,
                  targets=None, structure: bool = False) -> tuple[str, RetrieverSpec]:
    """``(label, spec)`` of a hybrid column fusing BM25 with a dense part per encoder (keys,
    mapped to what the dense retriever takes by ``targets``; default: the key itself). The spec
    is :func:`~.hybrid_specs.hybrid_spec`'s, so a column with the default settings is the CLI's
    ``run --retriever hybrid``.

    ``fusion="rrf"``: reciprocal rank fusion with constant ``rrf_k`` and ``weights`` (one per
    system, BM25 first; ``None``: the product's defaults, BM25 1, a built-in zero-shot encoder
    0.5, any other 1); ``"weighted"``: min-max normalised scores, ``alpha`` the weight of BM25
    when there are two systems and no ``weights``, else ``weights`` (default all 1). The label
    (:meth:`~.hybrid.FusionConfig.label` in :data:`FUSION_WORDS`) shows the weights unless all are
    1. Raises :class:`ValueError` on an unknown fusion, no encoder, or a wrong number of weights
    (checked by :meth:`~.hybrid.FusionConfig.validate`). ``structure``: with the code's structure
    re-scoring (:mod:`.structure`)."""
    encoders = list(dict.fromkeys(encoders))
    if not encoders:
        raise ValueError("a hybrid needs at least one dense encoder")
    n = 1 + len(encoders)
    targets = targets or {}
    by_alpha = FusionConfig(fusion, weights=weights).takes_alpha(n)
    try:
        spec = hybrid_spec([targets.get(e, e) for e in encoders], method=fusion,
                           rrf_k=float(rrf_k) if fusion == "rrf" else None,
                           weights=None if weights is None else [float(w) for w in weights],
                           alpha=float(alpha) if by_alpha else None, structure=True if structure else None)
    except FusionError as exc:
        if exc.code == "weight_count":  # the systems by the page's keys, not the models' folders
            raise ValueError(f"{exc.params['given']} weights for {n} systems (BM25, {', '.join(encoders)})") from None
        raise
    label = FusionConfig.from_options(spec.options, n).label(n, FUSION_WORDS)
    return f"Hybride {label} ({' + '.join(encoders)}){STRUCTURE_WORDS if structure else ''}", spec


def _dense_column(c: ColumnChoice) -> tuple[str, RetrieverSpec]:
    if c.target(c.encoder) == NEIGHBOURS:
        return NEIGHBOURS_COLUMN, RetrieverSpec(NEIGHBOURS)  # not an encoder: its own retriever
    return f"Dense ({c.encoder})", RetrieverSpec("dense", {"encoder": c.target(c.encoder)})


def _hybrid_column(c: ColumnChoice) -> tuple[str, RetrieverSpec]:
    return hybrid_column(c.hybrid_encoders or [c.encoder], fusion=c.fusion, rrf_k=c.rrf_k, alpha=c.alpha,
                         weights=c.weights, targets=c.targets, structure=c.structure)


def _ranker_column(c: ColumnChoice) -> tuple[str, RetrieverSpec]:
    if not c.model:
        raise ValueError("no learned ranker is offered here (train --ranker writes one)")
    return f"{RANKER_LABEL} ({Path(c.model).name})", RetrieverSpec("ranker", {"model": c.model})


# ------------------------------------------------------------------------------ the kinds

BM25 = register(RetrieverKind(
    "bm25", "BM25 over each article's text with its reference and headers (the default)",
    frozenset(BM25Settings.__dataclass_fields__), _build_bm25, flags=BM25_FLAGS, takes=dests(BM25_FLAGS),
    from_args=bm25_from_args, to_flags=bm25_flags, tunable=True, label="BM25",
    title="Mots de la question (BM25)"))
DENSE = register(RetrieverKind(
    "dense", "a dense encoder: `use`, `e5`, `minilm`, a sentence-transformers model or folder, a query adapter",
    frozenset({"encoder", "fields", "pooling", "window", "batch_size", "backend"}), _build_dense, flags=DENSE_FLAGS,
    takes=dests(DENSE_FLAGS), from_args=dense_from_args, to_flags=dense_flags, label="Dense",
    title="Sens de la question (dense)", column=_dense_column, link_params=("enc",), prepare=_prepare_dense))
NEIGHBOURS_KIND = register(RetrieverKind(
    NEIGHBOURS, "the articles cited by the most similar questions of the `train` split",
    frozenset({"split", "n", "min_similarity"}), _build_neighbours, to_flags=neighbours_flags, label=NEIGHBOURS_COLUMN,
    title="Questions proches",
    offered="never"))
HYBRID = register(RetrieverKind(
    "hybrid", "BM25 fused with dense and/or neighbours parts (reciprocal rank fusion, or a weighted sum)",
    frozenset({"retrievers", "method", "rrf_k", "alpha", "weights", "normalisation", "depth", "structure"}),
    parts=hybrid_parts, assemble=_assemble_hybrid, flags=HYBRID_FLAGS,
    takes=dests(DENSE_FLAGS + BM25_FLAGS + HYBRID_FLAGS), from_args=hybrid_from_args, to_flags=hybrid_flags,
    tunable=True, label="Hybride", title="Classement combiné", column=_hybrid_column,
    link_params=("henc", "struct", "fusion", "rrfk", "alpha", "w")))
RANKER = register(RetrieverKind(
    "ranker", "a learned ranker (LambdaRank trees, `train --ranker`) over BM25, `use`, the adapter, the neighbours, "
              "`e5` and the code's structure: `--encoder DIR`", frozenset({"model"}), parts=_ranker_parts,
    assemble=_assemble_ranker, takes=frozenset({"encoder"}), from_args=ranker_from_args, to_flags=ranker_flags,
    label=RANKER_LABEL, offered="with_model", column=_ranker_column))
