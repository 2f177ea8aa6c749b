"""Hybrid tuning: every part searched once, then each fusion setting (RRF k, weights, α) scored
on those rankings (:func:`tune_hybrid`), exactly as the product fuses. See :mod:`bsard_demo.tuning`."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..dataset import Dataset
from ..retrievers.base import DEFAULT_DEPTH, Hit, Progress, id_ranks, rank_all, report_progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, search_all
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_RRF_K, FUSION_METHODS, FusionConfig
from ..retrievers.hybrid_specs import hybrid_parts, hybrid_spec
from ..retrievers.kind_flags import fmt
from ..retrievers.kinds import HYBRID
from ..retrievers.registry import RetrieverSpec, build_retriever
from .result import DEFAULT_MEASURE, TuneResult, TuneTarget, as_measure, run_command, split_questions

#: RRF constants searched for a hybrid (60 is Cormack et al.'s and the product's default).
RRF_KS: tuple[float, ...] = (10.0, 20.0, 30.0, 60.0, 100.0)
#: Weights tried for every part but the first (whose weight stays 1; RRF and the weighted sum
#: rank the same under a common scale of all weights).
WEIGHT_GRID: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0)
#: α (weight of the first part) for a weighted fusion of two parts.
ALPHA_GRID: tuple[float, ...] = tuple(i / 10 for i in range(11))


@dataclass(frozen=True)
class FusionSetting:
    """One fusion to try: RRF with ``rrf_k`` and ``weights``, or weighted min-max with ``alpha``
    (two parts) or ``weights``. ``weights=None`` means all 1."""

    method: str
    rrf_k: float | None = None
    weights: tuple[float, ...] | None = None
    alpha: float | None = None

    @classmethod
    def of(cls, config: FusionConfig) -> "FusionSetting":
        """The setting of a (validated) fusion: its method, RRF k (RRF only), weights and α."""
        return cls(config.method, rrf_k=config.rrf_k if config.method == "rrf" else None,
                   weights=None if config.weights is None else tuple(config.weights), alpha=config.alpha)

    def config(self) -> FusionConfig:
        """This setting as the product's fusion (:class:`~bsard_demo.retrievers.hybrid.FusionConfig`)."""
        return FusionConfig(self.method, rrf_k=self.rrf_k, weights=self.weights, alpha=self.alpha)

    def options(self) -> dict:
        """Hybrid RetrieverSpec options for this setting."""
        return self.config().spec_options()

    def row(self) -> dict:
        return {"method": self.method, "rrf_k": self.rrf_k,
                "weights": ",".join(fmt(w) for w in self.weights) if self.weights is not None else "",
                "alpha": self.alpha}


def fusion_grid(n_parts: int, *, methods: Sequence[str] = ("rrf", "weighted"), rrf_ks: Sequence[float] = RRF_KS,
                weight_grid: Sequence[float] = WEIGHT_GRID,
                alphas: Sequence[float] = ALPHA_GRID) -> list[FusionSetting]:
    """The settings :func:`tune_hybrid` tries by default: per RRF k, every weight of the parts
    after the first from ``weight_grid`` (the first stays 1; all-1 is written ``weights=None``);
    weighted min-max over ``alphas`` for two parts, over the same weights for more."""
    if n_parts < 2:
        raise ValueError("a hybrid fuses at least two retrievers")
    out: list[FusionSetting] = []
    combos = [tuple(float(w) for w in ws)
              for ws in product(sorted({float(w) for w in weight_grid}), repeat=n_parts - 1)]

    def weights(ws: tuple[float, ...]) -> tuple[float, ...] | None:
        return None if all(w == 1.0 for w in ws) else (1.0, *ws)

    for method in methods:
        if method == "rrf":
            out += [FusionSetting("rrf", rrf_k=float(k), weights=weights(ws))
                    for k in sorted({float(k) for k in rrf_ks}) for ws in combos]
        elif method == "weighted":
            if n_parts == 2:
                out += [FusionSetting("weighted", alpha=float(a)) for a in sorted({float(a) for a in alphas})]
            else:
                out += [FusionSetting("weighted", weights=weights(ws)) for ws in combos]
        else:
            raise ValueError(f"unknown fusion method {method!r}; choose {' or '.join(FUSION_METHODS)}")
    return out


class _FusionTable:
    """Every part's ranking of every question, flattened once: for question ``i`` rows
    ``offsets[i]:offsets[i + 1]`` list the articles any part returned (corpus positions),
    their rank in each part (0 = absent) and their min-max normalised score in each part."""

    def __init__(self, per_part: Sequence[Sequence[Sequence[Hit]]], position: Mapping[str, int]):
        n_q = len(per_part[0])
        self.n_parts = len(per_part)
        docs_all, ranks_all, norms_all, offsets = [], [], [], [0]
        for i in range(n_q):
            index: dict[str, int] = {}
            entries: list[tuple[int, int, int, float]] = []  # (row, part, rank, norm)
            for p, runs in enumerate(per_part):
                hits = runs[i]
                first: dict[str, tuple[int, float]] = {}
                for rank, h in enumerate(hits, start=1):
                    if h.article_id not in first:
                        first[h.article_id] = (rank, float(h.score))
                if first:
                    values = [s for _, s in first.values()]
                    lo, hi = min(values), max(values)
                for doc, (rank, s) in first.items():
                    row = index.setdefault(doc, len(index))
                    norm = 1.0 if hi == lo else (s - lo) / (hi - lo)
                    entries.append((row, p, rank, norm))
            n = len(index)
            ranks = np.zeros((n, self.n_parts))
            norms = np.zeros((n, self.n_parts))
            present = np.zeros((n, self.n_parts), dtype=bool)
            for row, p, rank, norm in entries:
                ranks[row, p] = rank
                norms[row, p] = norm
                present[row, p] = True
            docs_all.append(np.fromiter((position[d] for d in index), dtype=np.int64, count=n))
            ranks_all.append(ranks)
            norms_all.append(np.where(present, norms, 0.0))
            offsets.append(offsets[-1] + n)
        self.docs = np.concatenate(docs_all) if docs_all else np.zeros(0, dtype=np.int64)
        self.ranks = np.concatenate(ranks_all) if ranks_all else np.zeros((0, self.n_parts))
        self.norms = np.concatenate(norms_all) if norms_all else np.zeros((0, self.n_parts))
        self.present = self.ranks > 0
        self.offsets = np.asarray(offsets, dtype=np.int64)

    def contributions(self, s: FusionSetting) -> np.ndarray:
        """Each (article, part) term of the fused score, with the product's arithmetic
        (``w / (k + rank)`` or ``w * norm``; 0 where the part did not return the article)."""
        w = np.asarray(s.config().weights_for(self.n_parts), dtype=np.float64)
        if s.method == "rrf":
            with np.errstate(divide="ignore"):
                terms = w / (s.rrf_k + self.ranks)
        else:
            terms = w * self.norms
        return np.where(self.present, terms, 0.0)

    def rankings(self, s: FusionSetting, k: int, article_ids: Sequence[str], id_rank: np.ndarray) -> list[list[Hit]]:
        terms = self.contributions(s)
        approx = terms.sum(axis=1)
        exact_sum = self.n_parts <= 2  # a + b is correctly rounded: equal to math.fsum([a, b])
        out = []
        for i in range(len(self.offsets) - 1):
            lo, hi = self.offsets[i], self.offsets[i + 1]
            scores, docs = approx[lo:hi], self.docs[lo:hi]
            if not exact_sum and hi - lo:
                # fsum and a plain sum of n terms differ by < n ulps: re-sum every article that a
                # margin of 4n ulps around the k-th score could let in, then order exactly
                kk = min(k, hi - lo)
                kth = np.partition(scores, len(scores) - kk)[len(scores) - kk]
                tol = 4 * self.n_parts * np.finfo(np.float64).eps * max(float(np.abs(scores).max()), 1e-300)
                cand = np.flatnonzero(scores >= kth - tol)
                block = terms[lo:hi][cand]
                scores = np.array([math.fsum(r) for r in block.tolist()])
                docs = docs[cand]
            out.append(rank_all(scores, article_ids, id_rank, k, rows=docs))
        return out


def tune_hybrid(dataset: Dataset, split: str = "train", *, spec: RetrieverSpec | None = None,
                measure: str | TuneTarget = DEFAULT_MEASURE, settings: Sequence[FusionSetting] | None = None,
                with_description: bool = DEFAULT_WITH_DESCRIPTION, data: str | None = None,
                cache_root: Path | None = None, progress: Progress | None = None,
                notice: Callable[[str], None] | None = None, parts: Sequence | None = None) -> TuneResult:
    """Search a hybrid's fusion settings on ``split`` (conventions: docs/design.md, 'bsard_demo/tuning/__init__.py').

    ``spec``: the hybrid (its parts and depth; default :func:`hybrid_spec`, BM25 + the default
    dense encoder with the default weights); its
    own fusion settings are the "start" point. ``settings``: the fusions to try (default
    :func:`fusion_grid`). ``parts``: already built retrievers of the spec's parts, to reuse.
    Each part is built (or loaded from the index cache) and searched once, to the hybrid's depth."""
    t0 = time.perf_counter()
    m = as_measure(measure)
    spec = spec or hybrid_spec()  # the product's default hybrid (RRF k=60, USE weighted 0.5)
    if spec.kind != HYBRID.name:
        raise ValueError(f"tune_hybrid tunes a hybrid retriever, not {spec.kind}")
    part_specs = hybrid_parts(spec)
    n = len(part_specs)
    settings = list(settings) if settings is not None else fusion_grid(n)
    if not settings:
        raise ValueError("no fusion setting to try")
    start = FusionSetting.of(FusionConfig.from_options(spec.options, n).validate(n))
    for s in settings:
        s.config().validate(n)  # the product's checks of a fusion
    qids, texts, qrels = split_questions(dataset, split, with_description)
    if parts is None:
        parts = [build_retriever(p, dataset, cache_root=cache_root, progress=progress, notice=notice)
                 for p in part_specs]
    if len(parts) != n:
        raise ValueError(f"{len(parts)} built parts for a hybrid of {n}")
    stages = {"build parts": time.perf_counter() - t0}
    article_ids = [str(a) for a in dataset.articles["id"]]
    size = len(article_ids)
    k = min(m.k, size)
    depth = min(max(k, int(spec.options.get("depth", DEFAULT_DEPTH))), size)
    t1 = time.perf_counter()
    per_part = []
    for i, r in enumerate(parts):
        def part_progress(done: int, total: int, message: str, i=i) -> None:
            report_progress(progress, done, total, f"searching {split} questions ({i + 1}/{n}: {r.name})")  # noqa: B023 -- called within this search_all
        per_part.append(search_all(r, texts, depth, part_progress))
    stages["search parts"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    table = _FusionTable(per_part, {a: i for i, a in enumerate(article_ids)})
    id_rank = id_ranks(article_ids)
    points = list(dict.fromkeys(settings))
    if start not in points:
        points.append(start)
    rows, by_setting = [], {}
    for i, s in enumerate(points):
        report_progress(progress, i, len(points), f"fusion grid ({len(points)} settings)")
        hits = table.rankings(s, k, article_ids, id_rank)
        run = {q: [h.article_id for h in hs] for q, hs in zip(qids, hits)}
        row = {**s.row(), **m.evaluate(qrels, run)}
        by_setting[s] = row
        if s in settings:
            rows.append(row)
    report_progress(progress, len(points), len(points), f"fusion grid ({len(points)} settings)")
    stages["fusion grid"] = time.perf_counter() - t2
    grid = pd.DataFrame(rows)

    def distance(s: FusionSetting) -> tuple:
        ws = s.weights or (1.0,) * n
        k_gap = abs(math.log((s.rrf_k + 1) / (_or(start.rrf_k, DEFAULT_RRF_K) + 1))) if s.rrf_k is not None else 0.0
        return (s.method != start.method, k_gap, sum(abs(math.log(w)) if w > 0 else math.inf for w in ws),
                abs(_or(s.alpha, DEFAULT_ALPHA) - _or(start.alpha, DEFAULT_ALPHA)))

    top = max(r[m.name] for r in rows)
    best_setting = min((s for s in settings if by_setting[s][m.name] == top), key=distance)
    if by_setting[start][m.name] > top:
        best_setting = start
    options = {key: value for key, value in spec.options.items() if key not in ("method", "rrf_k", "weights", "alpha")}
    best_spec = RetrieverSpec(HYBRID.name, {**options, "retrievers": part_specs, **best_setting.options()})
    command, notes = run_command(best_spec, data, with_description=with_description)
    return TuneResult(kind=HYBRID.name, measure=m.name, dataset=dataset.name, split=split, questions=len(qids),
                      grid=grid,
                      setting_columns=("method", "rrf_k", "weights", "alpha"), best=_clean(best_setting.row()),
                      best_value=by_setting[best_setting][m.name], start=_clean(start.row()),
                      start_value=by_setting[start][m.name], spec=best_spec, command=command,
                      seconds=time.perf_counter() - t0, notes=notes, stages=stages)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _clean(row: dict) -> dict:
    return {k: v for k, v in row.items() if v not in (None, "")}
