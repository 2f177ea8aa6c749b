"""bsard_demo.evaluation.stats against independent computations (hand-worked examples, enumeration,
textbook formulas, scipy references) and general properties."""
from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as sps

from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.stats import (
    CI_COLUMNS,
    COMPARISON_COLUMNS,
    bootstrap_ci,
    compare_runs,
    holm,
    metric_table_with_ci,
    paired_permutation_test,
    paired_t_test,
    win_tie_loss,
)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

# Per-question values like those of a metric: many exact zeros and ones, rationals between.
unit_values = st.lists(st.sampled_from([0.0, 1.0, 0.5, 1 / 3, 0.25, 0.2, 2 / 3, 0.125, 0.9]), min_size=1, max_size=30)


def metric_like(rng: np.random.Generator, n: int, p_zero: float = 0.4) -> np.ndarray:
    v = rng.integers(0, 5, n) / rng.integers(1, 6, n)
    v = np.minimum(v, 1.0)
    v[rng.random(n) < p_zero] = 0.0
    return v


def enumerate_sign_flips(a, b) -> float:
    """Exact two-sided sign-flip p-value by brute force over all 2**n sign vectors (zeros kept)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    observed = abs(sum(d))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        if abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-9:
            hits += 1
    return hits / total


# --- bootstrap_ci -----------------------------------------------------------------------------

def test_bootstrap_ci_brackets_mean_and_matches_normal_approximation():
    rng = np.random.default_rng(1)
    x = metric_like(rng, 222)
    low, high = bootstrap_ci(x)
    mean = x.mean()
    assert low < mean < high
    # For n = 222 the percentile interval of a mean is close to mean ± 1.96 s / sqrt(n).
    half = 1.959964 * x.std(ddof=1) / math.sqrt(len(x))
    assert low == pytest.approx(mean - half, abs=0.25 * half)
    assert high == pytest.approx(mean + half, abs=0.25 * half)


def test_bootstrap_ci_matches_hand_written_percentile_bootstrap():
    rng = np.random.default_rng(2)
    x = metric_like(rng, 150)
    idx = np.random.default_rng(99).integers(0, len(x), size=(20000, len(x)))
    means = x[idx].mean(axis=1)
    ref_low, ref_high = np.quantile(means, [0.025, 0.975])
    low, high = bootstrap_ci(x, n_resamples=5000)
    assert low == pytest.approx(ref_low, abs=0.012)
    assert high == pytest.approx(ref_high, abs=0.012)


def test_bootstrap_ci_is_reproducible_and_narrows_with_lower_confidence():
    x = metric_like(np.random.default_rng(3), 100)
    assert bootstrap_ci(x, seed=5) == bootstrap_ci(x, seed=5)
    low90, high90 = bootstrap_ci(x, confidence=0.90)
    low99, high99 = bootstrap_ci(x, confidence=0.99)
    assert low99 < low90 and high90 < high99


@pytest.mark.parametrize("values, expected",
                         [([0.1] * 50, (0.1, 0.1)), ([0.0] * 7, (0.0, 0.0)), ([0.75], (0.75, 0.75))])
def test_bootstrap_ci_degenerate_cases_are_point_intervals(values, expected):
    assert bootstrap_ci(values) == expected


@pytest.mark.parametrize("values", [[], [0.1, float("nan")], [[0.1, 0.2]]])
def test_bootstrap_ci_rejects_bad_input(values):
    with pytest.raises(ValueError):
        bootstrap_ci(values)


def test_bootstrap_ci_rejects_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([0.1, 0.2], confidence=95)


# --- paired_permutation_test ------------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    # d = (1, 0, 0.5): signed sums of (1, 0.5) are ±1.5, ±0.5 → |T| >= 1.5 in 2 of 4.
    ([1.0, 0.0, 1.0], [0.0, 0.0, 0.5], 2 / 4),
    # d = (1, 1, 2): sums 4, 2, 2, 0, 0, -2, -2, -4 → |T| >= 4 in 2 of 8.
    ([1.0, 1.0, 2.0], [0.0, 0.0, 0.0], 2 / 8),
    # d = (1, 1, 1, -1), T = 2: sums ±4 (1 each), ±2 (4 each), 0 (6) → |T| >= 2 in 10 of 16.
    ([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], 10 / 16),
    # all four differences positive: only the all-+ and all-− vectors reach |T| = 1.4.
    ([0.2, 0.3, 0.5, 0.4], [0.0, 0.0, 0.0, 0.0], 2 / 16),
])
def test_permutation_test_hand_worked(a, b, expected):
    assert paired_permutation_test(a, b) == pytest.approx(expected, abs=1e-15)


def test_permutation_test_equals_brute_force_enumeration():
    rng = np.random.default_rng(4)
    for n in (1, 2, 5, 9, 12):
        a, b = metric_like(rng, n, 0.2), metric_like(rng, n, 0.2)
        assert paired_permutation_test(a, b) == pytest.approx(enumerate_sign_flips(a, b), abs=1e-12)


def test_permutation_test_equals_scipy_exact_test():
    rng = np.random.default_rng(5)
    for n in (6, 10, 13):
        a, b = rng.random(n), rng.random(n)
        ref = sps.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                   permutation_type="samples", vectorized=True, n_resamples=10**6).pvalue
        assert paired_permutation_test(a, b) == pytest.approx(ref, abs=1e-12)


def test_permutation_monte_carlo_close_to_exact():
    rng = np.random.default_rng(6)
    a, b = rng.random(14), rng.random(14)  # 14 non-zero differences: 16384 sign vectors
    exact = paired_permutation_test(a, b, n_resamples=2**14)
    approx = paired_permutation_test(a, b, n_resamples=4000, seed=1)
    assert approx != exact  # really the Monte-Carlo branch
    assert approx == pytest.approx(exact, abs=0.03)
    assert paired_permutation_test(a, b, n_resamples=4000, seed=1) == approx  # reproducible


def test_permutation_monte_carlo_never_zero():
    a, b = np.ones(100), np.zeros(100)
    assert paired_permutation_test(a, b, n_resamples=999) == pytest.approx(1 / 1000)


def test_permutation_identical_runs_give_one():
    x = metric_like(np.random.default_rng(7), 222)
    assert paired_permutation_test(x, x) == 1.0
    assert paired_permutation_test([], []) == 1.0


def test_permutation_rejects_unpaired():
    with pytest.raises(ValueError, match="length"):
        paired_permutation_test([0.1, 0.2], [0.1])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_permutation_properties(data):
    a = np.array(data.draw(unit_values))
    b = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.1]), min_size=len(a), max_size=len(a))))
    p = paired_permutation_test(a, b, n_resamples=500)
    assert 0.0 < p <= 1.0
    assert paired_permutation_test(b, a, n_resamples=500) == p
    # adding the same per-question value to both runs changes nothing
    shift = np.linspace(0, 0.5, len(a))
    assert paired_permutation_test(a + shift, b + shift, n_resamples=500) == pytest.approx(p)


# --- paired_t_test ----------------------------------------------------------------------------

def test_t_test_matches_formula():
    rng = np.random.default_rng(8)
    a, b = metric_like(rng, 222), metric_like(rng, 222)
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    expected = 2 * sps.t.sf(abs(t), df=len(d) - 1)
    assert paired_t_test(a, b) == pytest.approx(expected, rel=1e-9)
    assert paired_t_test(b, a) == pytest.approx(expected, rel=1e-9)


def test_t_test_hand_worked():
    # d = (1, 2, 3): mean 2, sd 1, t = 2 / (1 / sqrt 3) = 2 sqrt 3 with 2 degrees of freedom;
    # for 2 df, P(|T| > t) = 1 - t / sqrt(2 + t^2) = 1 - 2 sqrt 3 / sqrt 14.
    assert paired_t_test([1, 2, 3], [0, 0, 0]) == pytest.approx(1 - 2 * math.sqrt(3 / 14), rel=1e-12)


@pytest.mark.parametrize("a, b, expected", [
    ([0.5, 0.2, 0.0], [0.5, 0.2, 0.0], 1.0),   # identical
    ([0.6, 0.3, 0.1], [0.5, 0.2, 0.0], 0.0),   # constant non-zero difference (rounding included)
    ([0.7], [0.1], 1.0),                        # a single pair
    ([], [], 1.0),
])
def test_t_test_degenerate_cases(a, b, expected):
    assert paired_t_test(a, b) == expected


# --- holm -------------------------------------------------------------------------------------

def test_holm_textbook_example():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → max-accumulated 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_monotone_and_capped():
    # 0.3·3 = 0.9, 0.4·2 = 0.8 → 0.9, 0.5·1 → 0.9
    assert holm([0.5, 0.4, 0.3]) == pytest.approx([0.9, 0.9, 0.9])
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([0.02]) == [0.02]
    assert holm([]) == []


def test_holm_ties_keep_values_equal():
    assert holm([0.01, 0.01, 0.2]) == pytest.approx([0.03, 0.03, 0.2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=20))
def test_holm_properties(p):
    adj = holm(p)
    assert len(adj) == len(p)
    for raw, a in zip(p, adj):
        assert raw <= a <= 1.0
        assert a <= min(1.0, raw * len(p)) + 1e-15  # never worse than Bonferroni
    order = np.argsort(p, kind="stable")
    assert all(adj[i] <= adj[j] for i, j in zip(order, order[1:]))


def test_holm_rejects_bad_pvalues():
    with pytest.raises(ValueError):
        holm([0.1, 1.5])
    with pytest.raises(ValueError):
        holm([float("nan")])


def test_holm_matches_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = np.random.default_rng(9).random(15) ** 3
    expected = multitest.multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(list(expected))


# --- win_tie_loss -----------------------------------------------------------------------------

def test_win_tie_loss_counts():
    a = [1.0, 0.5, 0.0, 0.3, 0.1 + 0.2]
    b = [0.0, 0.5, 0.2, 0.1, 0.3]  # last pair differs only by rounding: a tie
    assert win_tie_loss(a, b) == (2, 2, 1)
    assert win_tie_loss(b, a) == (1, 2, 2)
    assert win_tie_loss(a, b, tol=0.25) == (1, 4, 0)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_win_tie_loss_properties(data):
    a = data.draw(unit_values)
    b = data.draw(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=len(a), max_size=len(a)))
    w, t, lo = win_tie_loss(a, b)
    assert w + t + lo == len(a)
    assert win_tie_loss(b, a) == (lo, t, w)
    assert win_tie_loss(a, a) == (0, len(a), 0)


# --- compare_runs -----------------------------------------------------------------------------

@pytest.fixture
def three_runs():
    rng = np.random.default_rng(10)
    qids = [str(i) for i in range(60)]
    base = metric_like(rng, 60)
    better = np.minimum(1.0, base + (rng.random(60) < 0.5) * 0.5)
    other = metric_like(rng, 60)
    return {
        "bm25": pd.Series(base, index=qids),
        "hybrid": pd.Series(better, index=qids),
        "dense": pd.Series(other, index=qids),
    }


def test_compare_runs_rows_match_the_single_functions(three_runs):
    table = compare_runs(three_runs, n_resamples=3000, seed=4)
    assert list(table.columns) == COMPARISON_COLUMNS
    assert list(zip(table["run_a"], table["run_b"])) == [("bm25", "hybrid"), ("bm25", "dense"), ("hybrid", "dense")]
    for row in table.itertuples():
        a, b = three_runs[row.run_a].to_numpy(), three_runs[row.run_b].to_numpy()
        assert row.mean_a == pytest.approx(a.mean()) and row.mean_b == pytest.approx(b.mean())
        assert row.diff == pytest.approx(a.mean() - b.mean())
        assert (row.wins, row.ties, row.losses) == win_tie_loss(a, b)
        assert row.p_permutation == paired_permutation_test(a, b, n_resamples=3000, seed=4)
        assert row.p_ttest == paired_t_test(a, b)
    assert table["p_permutation_holm"].tolist() == holm(table["p_permutation"].tolist())
    assert table["p_ttest_holm"].tolist() == holm(table["p_ttest"].tolist())
    assert table["significant"].tolist() == (table["p_permutation_holm"] < 0.05).tolist()
    assert table["significant"].dtype == bool
    # hybrid (run_b of the first pair) adds 0.5 to about half the questions: clearly better
    first = table.iloc[0]
    assert first["wins"] == 0 and first["losses"] > 15 and first["diff"] < 0 and bool(first["significant"])


def test_compare_runs_aligns_on_question_ids(three_runs):
    shuffled = dict(three_runs)
    shuffled["dense"] = three_runs["dense"].sample(frac=1.0, random_state=0)
    assert not shuffled["dense"].index.equals(three_runs["dense"].index)
    pd.testing.assert_frame_equal(compare_runs(shuffled, n_resamples=500), compare_runs(three_runs, n_resamples=500))


def test_compare_runs_rejects_different_question_sets(three_runs):
    runs = dict(three_runs)
    runs["dense"] = three_runs["dense"].drop("7").rename({"3": "x99"})
    with pytest.raises(ValueError, match="same questions") as err:
        compare_runs(runs)
    assert "x99" in str(err.value) and "7" in str(err.value)


def test_compare_runs_rejects_duplicated_ids_and_nan():
    with pytest.raises(ValueError, match="not unique"):
        compare_runs({"a": pd.Series([0.1, 0.2], index=["1", "1"]), "b": pd.Series([0.1, 0.2], index=["1", "1"])})
    with pytest.raises(ValueError, match="NaN"):
        compare_runs({"a": pd.Series([0.1, np.nan], index=["1", "2"]), "b": pd.Series([0.1, 0.2], index=["1", "2"])})


def test_compare_runs_identical_runs_are_not_significant(three_runs):
    table = compare_runs({"x": three_runs["bm25"], "y": three_runs["bm25"].copy()})
    row = table.iloc[0]
    assert row["p_permutation"] == 1.0 and row["p_ttest"] == 1.0 and not row["significant"]
    assert (row["wins"], row["ties"], row["losses"]) == (0, 60, 0)


def test_compare_runs_with_fewer_than_two_runs(three_runs):
    for runs in ({}, {"bm25": three_runs["bm25"]}):
        table = compare_runs(runs)
        assert table.empty and list(table.columns) == COMPARISON_COLUMNS


# --- metric_table_with_ci, on the output of evaluate() ----------------------------------------

def test_metric_table_with_ci_on_evaluations():
    rng = np.random.default_rng(11)
    qrels = {str(q): {f"d{q}", f"d{q + 1}"} for q in range(40)}
    docs = [f"d{i}" for i in range(300)]
    runs = {name: {q: list(rng.permutation(docs)) for q in qrels} for name in ("random-1", "random-2")}
    evaluations = {name: evaluate(qrels, run).per_question for name, run in runs.items()}
    metrics = ["recall@100", "map@100", "mrr@500"]
    table = metric_table_with_ci(evaluations, metrics, n_resamples=1000, seed=3)
    assert list(table.columns) == CI_COLUMNS
    assert list(zip(table["run"], table["metric"])) == [(r, m) for r in runs for m in metrics]
    for row in table.itertuples():
        values = evaluations[row.run][row.metric]
        assert row.value == pytest.approx(values.mean())
        assert (row.ci_low, row.ci_high) == bootstrap_ci(values.to_numpy(), n_resamples=1000, seed=3)
        assert row.ci_low <= row.value <= row.ci_high
    comparison = compare_runs({name: pq["recall@100"] for name, pq in evaluations.items()}, n_resamples=1000)
    assert len(comparison) == 1 and 0 < comparison.loc[0, "p_permutation"] <= 1


def test_metric_table_with_ci_rejects_missing_metric():
    frame = pd.DataFrame({"recall@100": [0.1, 0.2]})
    with pytest.raises(ValueError, match="map@100"):
        metric_table_with_ci({"bm25": frame}, ["recall@100", "map@100"])


def test_scipy_stats_is_imported_on_first_use_only():
    """A cold ``run`` and a cold Search page import bsard_demo.evaluation (the CLI's commands, the
    training records) but never test anything: scipy.stats (~1 s of imports) waits for a test."""
    code = ("import sys, bsard_demo.cli.main, bsard_demo.evaluation, bsard_demo.training; "
            "assert 'scipy.stats' not in sys.modules, 'scipy.stats imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert 0 < paired_t_test([0.1, 0.5, 0.2], [0.3, 0.2, 0.6]) < 1  # and on first use it is there
