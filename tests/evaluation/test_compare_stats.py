"""stats.compare_measure (the numbers of CLI ``compare`` and the Score page) against scipy,
statsmodels, exact enumeration and a large-resample sign-flip reference."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from bsard_demo.evaluation.stats import COMPARISON_COLUMNS, Comparison, compare_measure, compare_runs

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def metric_like(rng, n, p_zero=0.4):
    v = np.minimum(rng.integers(0, 5, n) / rng.integers(1, 6, n), 1.0)
    v[rng.random(n) < p_zero] = 0.0
    return v


def runs_of(rng, n, names=("bm25", "dense", "hybrid", "random")):
    qids = [f"q{i}" for i in range(n)]
    base = metric_like(rng, n)
    out = {names[0]: pd.Series(base, index=qids)}
    for i, name in enumerate(names[1:], 1):
        noise = metric_like(rng, n, 0.7) * (0.3 * i)
        out[name] = pd.Series(np.clip(base + noise - 0.1 * i * (rng.random(n) < 0.3), 0, 1), index=qids)
    return out


def sign_flip_reference(d, n_resamples, seed):
    """An independent Monte-Carlo sign-flip test keeping the zero differences (they do not move T)."""
    d = np.asarray(d, float)
    rng = np.random.default_rng(seed)
    t = abs(d.sum())
    count = 0
    for start in range(0, n_resamples, 20000):
        size = min(20000, n_resamples - start)
        signs = rng.integers(0, 2, size=(size, len(d)), dtype=np.int8).astype(float) * 2 - 1
        count += int(np.count_nonzero(np.abs(signs @ d) >= t - 1e-9))
    return count / n_resamples


def exact_sign_flip(d):
    d = np.asarray(d, float)
    t = abs(d.sum())
    hits = sum(abs(np.dot(s, d)) >= t - 1e-9 for s in itertools.product((1.0, -1.0), repeat=len(d)))
    return hits / 2 ** len(d)


def test_pairs_in_input_order_and_means():
    rng = np.random.default_rng(0)
    runs = runs_of(rng, 80)
    cmp = compare_measure(runs, "recall@100")
    assert isinstance(cmp, Comparison) and cmp.measure == "recall@100" and cmp.questions == 80
    assert list(cmp.runs) == list(runs)
    for name, s in runs.items():
        assert cmp.runs[name] == pytest.approx(s.mean(), abs=1e-15)
    assert list(zip(cmp.pairs.run_a, cmp.pairs.run_b)) == list(itertools.combinations(runs, 2))
    for row in cmp.pairs.itertuples():
        a, b = runs[row.run_a].to_numpy(), runs[row.run_b].to_numpy()
        d = a - b
        assert row.diff == pytest.approx(a.mean() - b.mean(), abs=1e-15)
        assert (row.wins, row.ties, row.losses) == (int((d > 1e-12).sum()), int((abs(d) <= 1e-12).sum()),
                                                    int((d < -1e-12).sum()))


def test_p_ttest_equals_scipy():
    rng = np.random.default_rng(1)
    runs = runs_of(rng, 222)
    cmp = compare_measure(runs, "recall@100")
    for row in cmp.pairs.itertuples():
        expected = sps.ttest_rel(runs[row.run_a].to_numpy(), runs[row.run_b].to_numpy()).pvalue
        assert row.p_ttest == pytest.approx(expected, abs=1e-9, rel=1e-9)


def test_degenerate_pairs():
    qids = [str(i) for i in range(10)]
    x = pd.Series(np.linspace(0, 1, 10), index=qids)
    cmp = compare_measure({"a": x, "b": x.copy(), "c": x + 0.1}, "m")
    rows = {(r.run_a, r.run_b): r for r in cmp.pairs.itertuples()}
    same = rows[("a", "b")]
    assert same.p_ttest == 1.0 and same.p_permutation == 1.0 and not same.significant  # all differences 0
    assert (same.wins, same.ties, same.losses) == (0, 10, 0)
    shifted = rows[("a", "c")]
    # constant non-zero difference: t infinite → 0; ten equal signs: exact 2 / 1024
    assert shifted.p_ttest == 0.0 and shifted.p_permutation == pytest.approx(2 / 1024, abs=1e-15)


@pytest.mark.parametrize("n", [5, 11, 13])
def test_permutation_exact_below_resample_count(n):
    # with m non-zero differences and 2**m <= 10000 the test enumerates every sign vector
    rng = np.random.default_rng(n)
    a, b = rng.random(n), rng.random(n)
    cmp = compare_measure({"a": pd.Series(a), "b": pd.Series(b)}, "m")
    assert cmp.pairs.p_permutation[0] == pytest.approx(exact_sign_flip(a - b), abs=1e-12)


@pytest.mark.parametrize("n", [14, 16])
def test_permutation_monte_carlo_against_exact_enumeration(n):
    rng = np.random.default_rng(100 + n)
    a, b = rng.random(n), rng.random(n) * 0.8  # small effect: p well inside (0, 1)
    exact = exact_sign_flip(a - b)
    R = 10000
    p = compare_measure({"a": pd.Series(a), "b": pd.Series(b)}, "m", n_resamples=R).pairs.p_permutation[0]
    se = math.sqrt(exact * (1 - exact) / R)
    assert abs(p - exact) <= 4 * se + 1 / (R + 1), (p, exact, se)


@pytest.mark.parametrize("seed", [0, 1])
def test_permutation_against_large_resample_reference(seed):
    rng = np.random.default_rng(10 + seed)
    runs = runs_of(rng, 222, names=("bm25", "dense", "hybrid"))
    R, R_ref = 10000, 200000
    cmp = compare_measure(runs, "recall@100", n_resamples=R, seed=seed)
    informative = 0
    for row in cmp.pairs.itertuples():
        d = runs[row.run_a].to_numpy() - runs[row.run_b].to_numpy()
        ref = sign_flip_reference(d, R_ref, seed=1000 + seed)
        # binomial standard errors of both estimates, the +1 convention's bias, 4 SE
        se = math.sqrt(ref * (1 - ref) / R + ref * (1 - ref) / R_ref)
        assert abs(row.p_permutation - ref) <= 4 * se + 2 / (R + 1), (row.run_a, row.run_b, row.p_permutation, ref)
        informative += 0.001 < ref < 0.999
    assert informative >= 1  # at least one pair is not trivially 0 or 1


def test_holm_equals_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(3)
    runs = runs_of(rng, 60, names=("a", "b", "c", "d", "e"))
    cmp = compare_measure(runs, "recall@100", n_resamples=2000)
    assert len(cmp.pairs) == 10
    for raw, adj in (("p_permutation", "p_permutation_holm"), ("p_ttest", "p_ttest_holm")):
        expected = multitest.multipletests(cmp.pairs[raw].to_numpy(), method="holm")[1]
        np.testing.assert_allclose(cmp.pairs[adj].to_numpy(), expected, rtol=0, atol=1e-12)
    assert cmp.pairs.significant.tolist() == (cmp.pairs.p_permutation_holm < 0.05).tolist()
    strict = compare_measure(runs, "recall@100", n_resamples=2000, alpha=1e-9)
    assert not strict.pairs.significant.any()


def test_same_numbers_as_the_page_table():
    """The page calls compare_runs on the per-question series: compare_measure is that table."""
    rng = np.random.default_rng(4)
    runs = runs_of(rng, 100)
    frames = {n: pd.DataFrame({"recall@100": s, "map@100": s / 2}) for n, s in runs.items()}
    cmp = compare_measure(frames, "map@100", n_resamples=3000, seed=7)
    page = compare_runs({n: f["map@100"] for n, f in frames.items()}, n_resamples=3000, seed=7)
    pd.testing.assert_frame_equal(cmp.pairs, page)
    with pytest.raises(ValueError, match="ndcg@10"):
        compare_measure(frames, "ndcg@10")


def test_to_dict_is_the_json_layout():
    rng = np.random.default_rng(5)
    cmp = compare_measure(runs_of(rng, 30, names=("x.trec", "y.trec", "z.trec")), "recall@100", n_resamples=500)
    d = json.loads(json.dumps(cmp.to_dict(), allow_nan=False))
    assert d["measure"] == "recall@100" and d["questions"] == 30 and list(d["runs"]) == ["x.trec", "y.trec", "z.trec"]
    assert [list(p) for p in d["pairs"]] == [COMPARISON_COLUMNS] * 3
    assert {"run_a", "run_b", "mean_a", "mean_b", "diff", "wins", "ties", "losses", "p_ttest", "p_permutation",
            "p_ttest_holm", "p_permutation_holm", "significant"} == set(d["pairs"][0])
    assert isinstance(d["pairs"][0]["significant"], bool) and isinstance(d["pairs"][0]["wins"], int)
    assert d["permutation"]["n_resamples"] == 500 and d["permutation"]["seed"] == 0


def test_misaligned_runs_are_refused():
    a = pd.Series([0.1, 0.2], index=["1", "2"])
    b = pd.Series([0.1, 0.2], index=["1", "3"])
    with pytest.raises(ValueError, match="same questions"):
        compare_measure({"a": a, "b": b}, "m")
    one = compare_measure({"a": a}, "m")
    assert one.pairs.empty and one.runs == {"a": pytest.approx(0.15)}
