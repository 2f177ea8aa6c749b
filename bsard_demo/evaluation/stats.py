"""Uncertainty and significance for per-question scores (pure functions, no UI): bootstrap intervals,
the paired permutation test, Holm–Bonferroni over all pairs (:func:`compare_runs`), and :func:`compare_measure`,
the one entry point of the CLI ``compare`` command and the Score page, with the settings :data:`STATS`.

Conventions: docs/design.md, 'bsard_demo/evaluation/stats.py'.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd


def scipy_stats():
    """:mod:`scipy.stats`, imported on first use (a test's p-value or interval), not with the package."""
    # scipy.stats: ~1 s of imports that a cold `run` and a cold Search page never need (issue 29)
    from scipy import stats

    return stats


@dataclass(frozen=True)
class StatsSettings:
    """The settings of the paired comparison (:func:`compare_measure`): ``resamples`` random sign
    vectors of the permutation test (exact below), drawn from ``default_rng(seed)``, and the
    ``alpha`` the Holm-adjusted permutation p-value is compared with. Defined once
    (:data:`STATS`): ``compare``, the Score page and their help texts all read it."""

    resamples: int = 10000
    seed: int = 0
    alpha: float = 0.05


#: The one set of comparison settings of the CLI and the Score page.
STATS = StatsSettings()
#: Absolute tolerance under which two per-question values tie (:func:`win_tie_loss`).
TIE_TOL = 1e-12

#: Columns of :func:`compare_runs`.
COMPARISON_COLUMNS = [
    "run_a", "run_b", "mean_a", "mean_b", "diff", "wins", "ties", "losses",
    "p_permutation", "p_ttest", "p_permutation_holm", "p_ttest_holm", "significant",
]
#: Columns of :func:`metric_table_with_ci`.
CI_COLUMNS = ["run", "metric", "value", "ci_low", "ci_high"]

# Differences whose spread is below this (relative to their mean) are treated as constant
# by the t-test, which would otherwise lose all precision (and warn).
_CONSTANT_RTOL = 1e-12
_BATCH = 4096  # sign vectors per matrix product (bounds memory)


def _vector(values, name: str = "values") -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return x


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    x, y = _vector(a, "a"), _vector(b, "b")
    if len(x) != len(y):
        raise ValueError(f"paired samples differ in length ({len(x)} vs {len(y)})")
    return x, y


def bootstrap_ci(values, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``.

    Degenerate cases return the point interval ``(v, v)`` without calling the bootstrap: a single
    value (no spread information) or all values equal (every resample has the same mean).
    Raises ValueError for an empty or non-finite input or a ``confidence`` outside (0, 1).
    """
    x = _vector(values)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if len(x) == 0:
        raise ValueError("cannot bootstrap an empty sample")
    if len(x) == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    res = scipy_stats().bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    low, high = res.confidence_interval
    return float(low), float(high)


def paired_permutation_test(a, b, *, n_resamples: int = STATS.resamples, seed: int = STATS.seed) -> float:
    """Two-sided paired randomization test of ``mean(a - b) == 0`` by random sign flips.

    The statistic is the sum of the signed differences; questions with a zero difference are
    dropped (their sign does not change it). With ``m`` non-zero differences the test is exact
    (all ``2**m`` sign vectors, p = share with ``|T| >= |t_obs|``) when ``2**m <= n_resamples``;
    otherwise it draws ``n_resamples`` random sign vectors and returns ``(count + 1) /
    (n_resamples + 1)`` (Phipson & Smyth 2010), so a Monte-Carlo p-value is never 0.
    Identical inputs give 1.0; swapping ``a`` and ``b`` gives the same p-value.
    """
    x, y = _pair(a, b)
    if n_resamples < 1:
        raise ValueError("n_resamples must be positive")
    d = x - y
    d = d[d != 0]
    m = len(d)
    if m == 0:
        return 1.0
    observed = abs(d.sum())
    # |T| >= |t_obs| up to the rounding of a sum taken in another order.
    threshold = observed - 1e-12 * np.abs(d).sum()
    if m < 63 and 2 ** m <= n_resamples:
        total = 2 ** m
        count = 0
        for start in range(0, total, _BATCH):
            codes = np.arange(start, min(start + _BATCH, total), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> np.arange(m)) & 1)
            count += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
        return min(1.0, count / total)
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, n_resamples, _BATCH):
        size = min(_BATCH, n_resamples - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, m))
        count += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return min(1.0, (count + 1) / (n_resamples + 1))


def paired_t_test(a, b) -> float:
    """Two-sided paired t-test p-value (:func:`scipy.stats.ttest_rel`), never NaN.

    Degenerate cases, where the t statistic is undefined: fewer than two pairs or all differences
    zero → 1.0; all differences equal and non-zero (zero variance, |t| infinite) → 0.0.
    """
    x, y = _pair(a, b)
    d = x - y
    if len(d) < 2:
        return 1.0
    mean = float(d.mean())
    if np.ptp(d) <= _CONSTANT_RTOL * max(abs(mean), np.abs(d).max()):
        return 1.0 if mean == 0 else 0.0
    p = float(scipy_stats().ttest_rel(x, y).pvalue)
    return min(1.0, max(0.0, p))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    With the p-values sorted ascending, ``p_adj(i) = max_{j<=i} min(1, (m - j + 1) * p(j))``
    (1-based): monotone in the sorted order and capped at 1. Ties keep input order.
    """
    p = _vector(pvalues, "pvalues")
    if np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()


def win_tie_loss(a, b, *, tol: float = TIE_TOL) -> tuple[int, int, int]:
    """Numbers of questions where ``a`` beats ``b`` (``a > b + tol``), ties (``|a - b| <= tol``)
    and loses (``a < b - tol``); they add up to the number of questions."""
    x, y = _pair(a, b)
    d = x - y
    wins = int(np.count_nonzero(d > tol))
    losses = int(np.count_nonzero(d < -tol))
    return wins, len(d) - wins - losses, losses


def _aligned(per_question: Mapping[str, pd.Series]) -> dict[str, pd.Series]:
    """The series re-indexed on the first one's questions; ValueError if question sets differ."""
    runs = {str(name): s for name, s in per_question.items()}
    if not runs:
        return {}
    first_name, first = next(iter(runs.items()))
    for name, s in runs.items():
        if not s.index.is_unique:
            raise ValueError(f"run {name!r}: question ids are not unique")
    reference = set(first.index)
    out = {}
    for name, s in runs.items():
        ids = set(s.index)
        if ids != reference:
            only_here = sorted(map(str, ids - reference))
            only_there = sorted(map(str, reference - ids))
            detail = []
            if only_here:
                detail.append(f"{len(only_here)} question(s) only in {name!r} (e.g. {', '.join(only_here[:3])})")
            if only_there:
                detail.append(f"{len(only_there)} question(s) only in {first_name!r} "
                              f"(e.g. {', '.join(only_there[:3])})")
            raise ValueError(f"runs {first_name!r} and {name!r} are not scored on the same questions: "
                             + "; ".join(detail))
        out[name] = s.reindex(first.index)
        if out[name].isna().any():
            raise ValueError(f"run {name!r}: missing (NaN) values")
    return out


def compare_runs(per_question: Mapping[str, pd.Series], *, n_resamples: int = STATS.resamples, seed: int = STATS.seed,
                 alpha: float = STATS.alpha) -> pd.DataFrame:
    """Pairwise comparison of runs on one metric, one row per unordered pair in input order.

    ``per_question`` maps a run name to its per-question values (a Series indexed by question id);
    the series are aligned on their index and must cover the same questions. ``diff`` is
    ``mean_a - mean_b``; ``wins``/``losses`` count questions where ``run_a`` is better/worse.
    Every pair uses the same ``seed`` (so a row equals :func:`paired_permutation_test` on that
    pair). The ``*_holm`` columns are Holm-adjusted over all pairs, separately per test;
    ``significant`` is ``p_permutation_holm < alpha``. Fewer than two runs give an empty table.
    """
    runs = _aligned(per_question)
    rows = []
    for (name_a, sa), (name_b, sb) in combinations(runs.items(), 2):
        a, b = sa.to_numpy(dtype=float), sb.to_numpy(dtype=float)
        wins, ties, losses = win_tie_loss(a, b)
        mean_a, mean_b = (float(a.mean()), float(b.mean())) if len(a) else (0.0, 0.0)
        rows.append({
            "run_a": name_a, "run_b": name_b, "mean_a": mean_a, "mean_b": mean_b,
            "diff": mean_a - mean_b, "wins": wins, "ties": ties, "losses": losses,
            "p_permutation": paired_permutation_test(a, b, n_resamples=n_resamples, seed=seed),
            "p_ttest": paired_t_test(a, b),
        })
    table = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    if rows:
        table["p_permutation_holm"] = holm(table["p_permutation"].tolist())
        table["p_ttest_holm"] = holm(table["p_ttest"].tolist())
        table["significant"] = table["p_permutation_holm"] < alpha
    table["significant"] = table["significant"].astype(bool)
    return table


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare_measure`: the runs' means on ``measure`` (input order) and the
    :func:`compare_runs` table of every pair (``pairs``, columns :data:`COMPARISON_COLUMNS`)."""

    measure: str
    questions: int
    runs: dict[str, float]
    pairs: pd.DataFrame
    n_resamples: int
    seed: int
    alpha: float

    def pair_records(self) -> list[dict]:
        """The pairs as plain-Python dicts (JSON-ready), in :data:`COMPARISON_COLUMNS` order."""
        out = []
        for row in self.pairs.itertuples(index=False):
            rec = dict(zip(COMPARISON_COLUMNS, row))
            for key in ("mean_a", "mean_b", "diff", "p_permutation", "p_ttest", "p_permutation_holm", "p_ttest_holm"):
                rec[key] = float(rec[key])
            for key in ("wins", "ties", "losses"):
                rec[key] = int(rec[key])
            rec["run_a"], rec["run_b"] = str(rec["run_a"]), str(rec["run_b"])
            rec["significant"] = bool(rec["significant"])
            out.append(rec)
        return out

    def to_dict(self) -> dict:
        """``{"questions", "measure", "runs", "pairs", "permutation"}``; the CLI adds dataset and split."""
        return {
            "questions": self.questions, "measure": self.measure, "runs": dict(self.runs), "pairs": self.pair_records(),
            "permutation": {"n_resamples": self.n_resamples, "seed": self.seed, "alpha": self.alpha,
                            "p": "(1 + #{|T*| >= |T|}) / (1 + n_resamples); exact when 2**m <= n_resamples"},
        }


def compare_measure(per_question: Mapping[str, pd.Series | pd.DataFrame], measure: str, *,
                    n_resamples: int = STATS.resamples, seed: int = STATS.seed,
                    alpha: float = STATS.alpha) -> Comparison:
    """Compare runs on ``measure``: each value of ``per_question`` is a run's per-question Series
    of that measure, or its :attr:`bsard_demo.evaluation.Evaluation.per_question` frame (the
    ``measure`` column is taken). Pairs in input order (A before B), tested by :func:`compare_runs`.
    Raises ValueError for a frame without the column, or runs not on the same questions."""
    series = {}
    for name, values in per_question.items():
        if isinstance(values, pd.DataFrame):
            if measure not in values.columns:
                raise ValueError(f"run {name!r}: no measure {measure!r} (have {', '.join(map(str, values.columns))})")
            values = values[measure]
        series[str(name)] = values
    aligned = _aligned(series)
    table = compare_runs(aligned, n_resamples=n_resamples, seed=seed, alpha=alpha)
    means = {name: (float(s.to_numpy(dtype=float).mean()) if len(s) else 0.0) for name, s in aligned.items()}
    questions = len(next(iter(aligned.values()))) if aligned else 0
    return Comparison(measure, questions, means, table, n_resamples, seed, alpha)


def metric_table_with_ci(per_question_by_run: Mapping[str, pd.DataFrame], metrics: Sequence[str], *,
                         confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Long table ``run, metric, value, ci_low, ci_high``: the mean of each metric per run with
    its bootstrap interval (:func:`bootstrap_ci`), runs then metrics in input order. Input of
    :func:`bsard_demo.app.charts.metric_bars`. Raises ValueError for a missing column or empty run."""
    rows = []
    for run, frame in per_question_by_run.items():
        absent = [m for m in metrics if m not in frame.columns]
        if absent:
            raise ValueError(f"run {run!r}: no column {', '.join(map(repr, absent))}")
        if len(frame) == 0:
            raise ValueError(f"run {run!r}: no questions")
        for metric in metrics:
            values = frame[metric].to_numpy(dtype=float)
            low, high = bootstrap_ci(values, confidence=confidence, n_resamples=n_resamples, seed=seed)
            rows.append({"run": str(run), "metric": metric, "value": float(values.mean()), "ci_low": low,
                         "ci_high": high})
    return pd.DataFrame(rows, columns=CI_COLUMNS)
