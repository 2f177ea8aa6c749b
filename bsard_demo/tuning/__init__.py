"""Tuning on a train split: BM25's k1 × b grid (the BSARD paper's protocol) and a hybrid's fusion.

:func:`tune_bm25` scores every ``(k1, b)`` of a grid — by default the paper's k1 ∈ [0, 8] step
0.5 × b ∈ [0, 1] step 0.1, 187 points — on the questions of a split, by one measure (default
``recall@100``; any of ``recall@k``, ``map@k``, ``mrr@k``, ``ndcg@10``), and returns the best
settings with the command line that uses them. :func:`tune_hybrid` does the same for a hybrid's
fusion: the RRF constant k and per-system weights, and the weighted fusion's α (two systems) or
weights (more).

Conventions:
- a number here equals what ``python -m bsard_demo run`` + ``evaluate`` give for the same
  settings on the same split: every point is scored by :func:`bsard_demo.evaluation.evaluate` on
  the top-k rankings (k = the measure's cutoff), and those rankings are exactly the product's —
  the same articles in the same order, ties by article id descending as strings, the same
  scores (the tests compare them with :class:`~bsard_demo.retrievers.bm25.BM25Retriever` and
  :class:`~bsard_demo.retrievers.hybrid.HybridRetriever` on several grid points).
- BM25 is computed on ONE tokenised corpus (:class:`TermMatrix`: a terms × articles matrix of
  term frequencies, document lengths and document frequencies, built once): per ``(k1, b)``
  the BM25 weights of every (term, article) pair are one vectorised numpy pass over that
  matrix's data, with the arithmetic of bm25s (the engine of the product's BM25, float64,
  same operation order), and all questions are scored by one sparse product per batch, summed
  in the retriever's term order, so the scores are bit for bit the retriever's.
- a hybrid's parts are searched once, to the hybrid's depth; every fusion setting reuses those
  rankings. Fused scores are computed vectorised; where a sum of more than two terms could
  differ from the product's :func:`math.fsum` in its last bit, the candidates near the cut are
  re-summed with :func:`math.fsum`, so the top k are exact.
- questions without any relevant article cannot be scored and are left out (as in
  ``evaluate``); the figure is the macro average over the others.
- when several settings reach the best figure, the one closest to the starting settings wins
  (BM25: k1 = 1.0, b = 0.6 unless others were given; hybrid: RRF k = 60, equal weights, α = 0.5):
  a tie is no evidence to move away from them.

Speed (BSARD-scale synthetic corpus, 22,633 articles, 886 train questions, 2 shared cores):
see docs/benchmarks.md, "Tuning" (``bench/bench_tune.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..dataset import Dataset
from ..retrievers.base import Progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION
from ..retrievers.bm25 import BM25Settings
from ..retrievers.registry import RetrieverSpec
from .bm25 import B_GRID, K1_GRID, TermMatrix, tune_bm25
from .fusion import ALPHA_GRID, RRF_KS, WEIGHT_GRID, FusionSetting, fusion_grid, tune_hybrid
from .result import DEFAULT_MEASURE, TuneResult, TuneTarget, run_command

KINDS = ("bm25", "hybrid")

__all__ = ["ALPHA_GRID", "B_GRID", "DEFAULT_MEASURE", "K1_GRID", "KINDS", "RRF_KS", "WEIGHT_GRID", "FusionSetting",
           "TuneTarget", "TermMatrix", "TuneOptions", "TuneResult", "fusion_grid", "run_command", "tune", "tune_bm25",
           "tune_hybrid"]


@dataclass
class TuneOptions:
    """What ``python -m bsard_demo tune`` passes (parsed options), for :func:`tune`."""

    retriever: str = "bm25"
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
    if options.retriever == "bm25":
        spec = options.spec or RetrieverSpec("bm25")
        if spec.kind != "bm25":
            raise ValueError(f"a bm25 tuning needs a bm25 spec, not {spec.kind}")
        return tune_bm25(dataset, options.split, measure=options.measure, settings=BM25Settings(**spec.options),
                         k1_grid=options.k1_grid, b_grid=options.b_grid, with_description=options.with_description,
                         data=options.data, progress=progress)
    return tune_hybrid(dataset, options.split, spec=options.spec, measure=options.measure,
                       settings=options.fusion_settings, with_description=options.with_description,
                       data=options.data, cache_root=options.cache_root, progress=progress, notice=notice)
