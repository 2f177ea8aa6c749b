"""Tuning on a train split, for the CLI's ``tune`` (:mod:`bsard_demo.cli.tune`): BM25's k1 × b grid
(:func:`tune_bm25`, the BSARD paper's protocol: by default k1 ∈ [0, 8] step 0.5 × b ∈ [0, 1] step 0.1, 187
points, by ``recall@100``) in :mod:`.bm25`, and a hybrid's fusion (:func:`tune_hybrid`: RRF k, weights, α) in
:mod:`.fusion`; what a tuning found in :mod:`.result`. Every figure equals what ``run`` + ``evaluate`` give
for the same settings on the same split.

Conventions: docs/design.md, 'bsard_demo/tuning/__init__.py'. Speed: docs/benchmarks.md, "Tuning".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..dataset import Dataset
from ..retrievers.base import Progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION
from ..retrievers.bm25 import BM25Settings
from ..retrievers.kinds import BM25
from ..retrievers.registry import RetrieverSpec, retriever_kinds
from .bm25 import B_GRID, K1_GRID, TermMatrix, tune_bm25
from .fusion import ALPHA_GRID, RRF_KS, WEIGHT_GRID, FusionSetting, fusion_grid, tune_hybrid
from .result import DEFAULT_MEASURE, TuneResult, TuneTarget, run_command

#: The kinds ``tune`` searches (their registration's ``tunable``): BM25's k1 x b, a fusion's settings.
KINDS = tuple(k.name for k in retriever_kinds().values() if k.tunable)

__all__ = ["ALPHA_GRID", "B_GRID", "DEFAULT_MEASURE", "K1_GRID", "KINDS", "RRF_KS", "WEIGHT_GRID", "FusionSetting",
           "TuneTarget", "TermMatrix", "TuneOptions", "TuneResult", "fusion_grid", "run_command", "tune", "tune_bm25",
           "tune_hybrid"]


@dataclass
class TuneOptions:
    """What ``python -m bsard_demo tune`` passes (parsed options), for :func:`tune`."""

    retriever: str = BM25.name
    data: str | None = None
    split: str = "train"
    measure: str = DEFAULT_MEASURE
    spec: RetrieverSpec | None = None
    with_description: bool = DEFAULT_WITH_DESCRIPTION
    cache_root: Path | None = None
    k1_grid: Sequence[float] = K1_GRID
    b_grid: Sequence[float] = B_GRID
    fusion_settings: Sequence[FusionSetting] | None = None


def tune(options: TuneOptions, dataset: Dataset, progress: Progress | None = None,
         notice: Callable[[str], None] | None = None) -> TuneResult:
    """The ``tune`` command without its parsing and printing: BM25 or hybrid by ``options``."""
    if options.retriever not in KINDS:
        raise ValueError(f"tune handles {' or '.join(KINDS)}, not {options.retriever!r}")
    if options.retriever == BM25.name:
        spec = options.spec or RetrieverSpec(BM25.name)
        if spec.kind != BM25.name:
            raise ValueError(f"a {BM25.name} tuning needs a {BM25.name} spec, not {spec.kind}")
        return tune_bm25(dataset, options.split, measure=options.measure, settings=BM25Settings(**spec.options),
                         k1_grid=options.k1_grid, b_grid=options.b_grid, with_description=options.with_description,
                         data=options.data, progress=progress)
    return tune_hybrid(dataset, options.split, spec=options.spec, measure=options.measure,
                       settings=options.fusion_settings, with_description=options.with_description,
                       data=options.data, cache_root=options.cache_root, progress=progress, notice=notice)
