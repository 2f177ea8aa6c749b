"""BSARD-aware run checks (bsard_demo.evaluation.checks) on crafted runs: each fires on its fault, a
clean run gets none, and the figures they report equal what evaluate() gives the repaired run."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from bsard_demo.dataset import Dataset
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.checks import (
    CODES,
    Finding,
    check_depth,
    check_ids_shifted,
    check_near_random,
    check_run,
    check_wrong_split,
    random_hit_probability,
    similarity_score,
    similarity_scores,
)
from bsard_demo.runs import Run, read_run_bytes
from bsard_demo.sources import load_dataset


@pytest.fixture(scope="module")
def sample() -> Dataset:
    return load_dataset("sample")


@pytest.fixture(scope="module")
def bm25_scores(sample):
    """A decent run: BM25 on the sample's test questions, top 100, as {qid: {docid: score}}."""
    from bsard_demo.retrievers.bm25 import BM25Retriever

    retriever = BM25Retriever.build(sample.articles, use_cache=False)
    questions = sample.questions("test")
    hits = retriever.search_many(list(questions["question"]), 100)
    return {q: {h.article_id: float(h.score) for h in hs} for q, hs in zip(questions["id"], hits)}


def perfect_rankings(qrels, corpus_ids, depth=100, seed=0):
    """Gold articles first, then other corpus articles up to ``depth``."""
    rnd = random.Random(seed)
    out = {}
    for q, gold in qrels.items():
        rest = [d for d in rnd.sample(list(corpus_ids), min(len(corpus_ids), depth + len(gold))) if d not in gold]
        out[q] = tuple(sorted(gold, key=int)) + tuple(rest[: max(0, depth - len(gold))])
    return out


def shift(rankings, by):
    return {q: tuple(str(int(d) + by) for d in docs) for q, docs in rankings.items()}


def file_entries_of(scores, with_ranks=True, lower_is_better=False):
    """The (rank, score) pairs a file would hold, in file order: best first."""
    out = {}
    for q, docs in scores.items():
        ordered = sorted(docs.items(), key=lambda kv: kv[1], reverse=not lower_is_better)
        out[q] = [(i if with_ranks else None, s) for i, (_, s) in enumerate(ordered, 1)]
    return out


def codes(findings):
    return [f.code for f in findings]


# --- helpers --------------------------------------------------------------------------------

def test_random_hit_probability_matches_hypergeometric():
    from scipy.stats import hypergeom

    for n, g, d in [(22633, 1, 100), (22633, 57, 100), (220, 3, 11), (50, 5, 50), (10, 0, 5), (10, 3, 9), (10, 3, 7)]:
        exact = 1 - Fraction(math.comb(n - g, d), math.comb(n, d))
        assert random_hit_probability(n, g, d) == pytest.approx(float(exact), abs=1e-14)
        assert random_hit_probability(n, g, d) == pytest.approx(1 - hypergeom(n, g, d).pmf(0) if g else 0.0, abs=1e-9)
    assert random_hit_probability(22633, 1, 100) == pytest.approx(100 / 22633, rel=1e-12)


def test_check_depth():
    assert check_depth(22633) == 100 and check_depth(None) == 100
    assert check_depth(220) == 11 and check_depth(2000) == 100 and check_depth(5) == 1


def test_finding_to_dict():
    f = Finding("near_random", "m", "h", "fig", {"x": 1})
    assert f.to_dict() == {"code": "near_random", "severity": "warning", "message": "m", "hint": "h", "figure": "fig",
                           "values": {"x": 1}}


# --- clean runs ---------------------------------------------------------------------------------

def test_clean_runs_get_no_finding(sample, bm25_scores):
    qrels = sample.qrels("test")
    other = {"train": set(sample.qrels("train"))}
    bm25 = Run.from_scores(bm25_scores)
    assert evaluate(qrels, bm25).means["recall@100"] > 0.5  # really a decent run
    perfect = perfect_rankings(qrels, sample.article_ids)
    for rankings in (bm25, perfect):
        for kwargs in ({"corpus_ids": sample.article_ids}, {"corpus_size": len(sample.articles)}, {}):
            assert check_run(rankings, qrels, split="test", other_splits=other, **kwargs) == []
        assert check_near_random(rankings, qrels, corpus_ids=sample.article_ids) is None
        assert check_ids_shifted(rankings, qrels, corpus_ids=sample.article_ids) is None


# --- ids_shifted --------------------------------------------------------------------------------

def test_zero_based_perfect_run_gets_ids_shifted(sample):
    qrels = sample.qrels("test")
    perfect = perfect_rankings(qrels, sample.article_ids)
    zero_based = shift(perfect, -1)
    f = check_ids_shifted(zero_based, qrels, corpus_ids=sample.article_ids)
    assert f is not None and f.code == "ids_shifted" and f.severity == "warning"
    assert f.values["shift"] == 1 and f.values["recall@100_shifted"] == pytest.approx(1.0)
    assert f.values["recall@100"] == pytest.approx(evaluate(qrels, zero_based).means["recall@100"], abs=1e-12)
    assert "+1" in f.message and "+1" in f.figure and "1-based" in f.hint
    assert codes(check_run(zero_based, qrels, corpus_ids=sample.article_ids)) == ["ids_shifted"]
    # the other way round: ids one too high
    g = check_ids_shifted(shift(perfect, +1), qrels, corpus_ids=sample.article_ids)
    assert g is not None and g.values["shift"] == -1


def test_ids_shifted_reports_the_recall_the_repaired_run_has():
    """An imperfect run (about 60 % of the gold planted in a random top 150), 0-based, some
    questions missing: the R@100 reported for the shift is the repaired run's R@100."""
    qrels = synthetic_qrels(seed=4)
    rnd = random.Random(4)
    run = {}
    for q, gold in list(qrels.items())[5:]:
        docs = [str(rnd.randint(1, 22633)) for _ in range(150)]
        for d in gold:
            if rnd.random() < 0.6:
                docs[rnd.randrange(150)] = d
        run[q] = tuple(dict.fromkeys(docs))
    repaired = evaluate(qrels, run).means["recall@100"]
    assert 0.2 < repaired < 0.6
    shifted = shift(run, -1)
    f = check_ids_shifted(shifted, qrels, corpus_size=22633)
    assert f is not None and f.values["shift"] == 1
    assert f.values["recall@100_shifted"] == pytest.approx(repaired, abs=1e-12)
    assert f.values["recall@100"] == pytest.approx(evaluate(qrels, shifted).means["recall@100"], abs=1e-12)
    assert f"{repaired:.3f}" in f.message


def test_ids_shifted_needs_a_clear_gain(sample, bm25_scores):
    """On the sample, gold articles sit next to each other: BM25's neighbours of the gold are
    nearly as good, so a shifted BM25 run gains too little to call (ratio < 2), and BM25 itself
    is clean."""
    qrels = sample.qrels("test")
    bm25 = Run.from_scores(bm25_scores)
    assert check_ids_shifted(bm25, qrels, corpus_ids=sample.article_ids) is None


def test_ids_shifted_skips_non_numeric_ids():
    qrels = {"1": {"art-1"}, "2": {"art-2"}}
    assert check_ids_shifted({"1": ("art-0",), "2": ("art-1",)}, qrels) is None


def test_ids_shifted_not_fired_by_noise_on_few_questions():
    # two questions matched by the shift only: too few to tell from chance (sign test)
    qrels = {"1": {"10"}, "2": {"20"}, "3": {"30"}}
    rankings = {"1": ("9",), "2": ("19",), "3": ("5",)}
    assert check_ids_shifted(rankings, qrels, corpus_size=1000) is None


# --- near_random --------------------------------------------------------------------------------

def synthetic_qrels(n_q=222, n_docs=22633, seed=0):
    rnd = random.Random(seed)
    return {str(q): {str(rnd.randint(1, n_docs)) for _ in range(rnd.choice([1, 1, 2, 3, 5, 8, 20]))}
            for q in range(n_q)}


def random_rankings(qids, n_docs, depth, seed=0):
    rng = np.random.default_rng(seed)
    return {q: tuple(map(str, rng.choice(np.arange(1, n_docs + 1), size=depth, replace=False))) for q in qids}


def test_random_run_gets_near_random():
    qrels = synthetic_qrels()
    run = random_rankings(qrels, 22633, 5000, seed=1)
    for kwargs in ({"corpus_size": 22633}, {}):  # without a corpus: the id span (≈ 22,633)
        f = check_near_random(run, qrels, **kwargs)
        assert f is not None and f.code == "near_random"
        assert f.values["depth"] == 100 and f.values["questions"] == 222
        assert f.values["hits"] == sum(any(d in qrels[q] for d in run[q][:100]) for q in qrels)
        expected = np.mean([random_hit_probability(f.values["corpus_size"], len(g), 100) for g in qrels.values()])
        assert f.values["random_hit_rate"] == pytest.approx(expected, rel=1e-12)
        assert "id space" in f.hint and "split" in f.hint and "dataset" in f.hint
    assert codes(check_run(run, qrels, corpus_size=22633)) == ["near_random"]


def test_random_runs_nearly_always_get_near_random():
    # the rule lets a random run through only when its hits exceed expectation + 3 SE: with
    # ~5.5 expected hits of 222, about 0.5 % of random runs; 40 runs (top 100 only: all the
    # check reads), at most 2 may pass
    passed = 0
    for seed in range(40):
        qrels = synthetic_qrels(seed=100 + seed)
        passed += check_near_random(random_rankings(qrels, 22633, 100, seed=seed), qrels, corpus_size=22633) is None
    assert passed <= 2


def test_random_run_on_a_small_corpus_gets_near_random(sample):
    qrels = sample.qrels("test")
    run = random_rankings(qrels, len(sample.articles), 100, seed=3)
    f = check_near_random(run, qrels, corpus_ids=sample.article_ids)
    assert f is not None and f.values["depth"] == 11


def test_near_random_threshold_is_expectation_plus_three_se():
    qrels = {str(q): {str(q)} for q in range(400)}  # one gold each, corpus of 10,000: p = 0.01 at depth 100
    p = 100 / 10000
    se = math.sqrt(p * (1 - p) / 400)
    limit = p + 3 * se  # 0.0249: 10 hits of 400 (0.025) clear it, 9 (0.0225) do not
    for hits, fires in ((9, True), (10, False)):
        run = {}
        for q in qrels:
            docs = [str(10000 - i) for i in range(100)]  # never gold (gold ids are 0 … 399)
            if int(q) < hits:
                docs[50] = q
            run[q] = tuple(docs)
        f = check_near_random(run, qrels, corpus_size=10000)
        assert (f is not None) is fires, (hits, limit)


def test_near_random_skipped_without_corpus_size_for_text_ids():
    qrels = {"1": {"a"}, "2": {"b"}}
    assert check_near_random({"1": ("x",), "2": ("y",)}, qrels) is None


# --- scores_ascending and --lower-is-better ----------------------------------------------------

def reader_ascending(file_entries) -> list[str]:
    """The reader's ``scores_ascending`` warnings (the live check, runs/validate.py) of a file holding
    ``file_entries`` (TREC lines when they have ranks, else ``qid docid score`` lines), in order."""
    with_ranks = all(r is not None for pairs in file_entries.values() for r, _ in pairs)
    lines = [f"{q} Q0 d{i} {r} {s!r} t" if with_ranks else f"{q} d{i} {s!r}"
             for q, pairs in file_entries.items() for i, (r, s) in enumerate(pairs)]
    rf = read_run_bytes(("\n".join(lines) + "\n").encode(), "r")
    return [f"{p.message} [{p.hint}]" for p in rf.problems if p.code == "scores_ascending"]


def test_distance_run_gets_scores_ascending(sample, bm25_scores):
    distances = {q: {d: round(50.0 - s, 3) for d, s in docs.items()} for q, docs in bm25_scores.items()}
    for with_ranks in (True, False):
        (message,) = reader_ascending(file_entries_of(distances, with_ranks=with_ranks, lower_is_better=True))
        assert "[read_as_distances]" in message and "(100.0 %)" in message  # the hint the front ends word
    # a similarity file, and a file of constant scores, do not fire
    assert reader_ascending(file_entries_of(bm25_scores)) == []
    assert reader_ascending({q: [(i, 1.0) for i in range(1, 5)] for q in bm25_scores}) == []
    # ranks, not line order, decide when the file has them
    shuffled = {q: list(reversed(e)) for q, e in file_entries_of(bm25_scores).items()}
    assert reader_ascending(shuffled) == []
    assert reader_ascending({q: [(None, s) for _, s in e] for q, e in shuffled.items()}) != []
    # half or fewer: no finding
    entries = file_entries_of(bm25_scores)
    qids = list(entries)
    half = {q: (list(reversed([(None, s) for _, s in entries[q]])) if i % 2 else [(None, s) for _, s in entries[q]])
            for i, q in enumerate(qids[: 2 * (len(qids) // 2)])}
    assert reader_ascending(half) == []


def test_lower_is_better_scores_exactly_like_similarities(sample):
    """A distance run read with lower_is_better gives the same ranking (ties included: article id
    descending) and the same figures as the similarities."""
    qrels = sample.qrels("test")
    rnd = random.Random(5)
    ids = sorted(sample.article_ids)
    similarity, distance = {}, {}
    for q in qrels:
        docs = rnd.sample(ids, 60) + list(qrels[q])
        sims = {d: rnd.choice([0.5, 1.0, 1.5, 2.0, 2.5]) for d in docs}  # many ties
        similarity[q] = sims
        distance[q] = {d: 10.0 - s for d, s in sims.items()}  # exact in binary: same ties
    as_sim = Run.from_scores(similarity)
    as_dist = Run.from_scores(similarity_scores(distance, lower_is_better=True))
    assert as_dist.rankings == as_sim.rankings
    for q, ranking in as_sim.rankings.items():  # the documented tie order
        for a, b in zip(ranking, ranking[1:]):
            assert similarity[q][a] > similarity[q][b] or (similarity[q][a] == similarity[q][b] and a > b)
    ev_sim = evaluate(qrels, as_sim, (10, 100), extra=("ndcg@10",))
    ev_dist = evaluate(qrels, as_dist, (10, 100), extra=("ndcg@10",))
    assert ev_sim.per_question.equals(ev_dist.per_question)
    naive = evaluate(qrels, Run.from_scores(distance), (10, 100))
    assert naive.means["recall@10"] < ev_sim.means["recall@10"]  # read as similarities: wrong
    assert similarity_score(2.5, True) == -2.5 and similarity_score(2.5, False) == 2.5
    assert similarity_scores(distance, False) == distance


# --- wrong_split --------------------------------------------------------------------------------

def test_train_run_scored_against_test_gets_wrong_split(sample):
    test, train = sample.qrels("test"), sample.qrels("train")
    run = perfect_rankings(train, sample.article_ids)
    f = check_wrong_split(run.keys(), "test", test.keys(), {"train": train.keys(), "test": test.keys()})
    assert f is not None and f.code == "wrong_split"
    assert f.values["other_split"] == "train" and f.values["in_other_split"] == len(train) and f.values["in_split"] == 0
    assert "--split train" in f.hint and f"{len(train)} of the run's {len(train)}" in f.message
    found = check_run(run, test, split="test", corpus_ids=sample.article_ids, other_splits={"train": train.keys()})
    assert codes(found) == ["wrong_split"]


def test_run_of_every_question_is_not_a_wrong_split(sample):
    test, train = sample.qrels("test"), sample.qrels("train")
    # far more train than test questions in the run, but every test question answered
    many_train = [f"t{i}" for i in range(3 * len(test))] + list(train)
    f = check_wrong_split(many_train + list(test), "test", test.keys(), {"train": set(many_train)})
    assert f is None
    # the same run without its test questions is a wrong split
    assert check_wrong_split(many_train, "test", test.keys(), {"train": set(many_train)}) is not None
    assert check_wrong_split(test.keys(), "test", test.keys(), {"train": train.keys()}) is None
    assert check_wrong_split(test.keys(), "test", test.keys(), None) is None


# --- the real test labels (../shared) ------------------------------------------------------------

def test_real_labels(real_bsard):
    test, train = real_bsard.qrels("test"), real_bsard.qrels("train")
    corpus = [str(i) for i in range(1, 22634)]
    perfect = perfect_rankings(test, corpus)
    other = {"train": train.keys()}
    assert check_run(perfect, test, corpus_size=22633, other_splits=other) == []
    f = check_run(shift(perfect, -1), test, corpus_size=22633, other_splits=other)
    assert codes(f) == ["ids_shifted"]
    assert f[0].values["shift"] == 1 and f[0].values["recall@100_shifted"] == pytest.approx(1.0)
    assert f[0].values["recall@100"] == pytest.approx(evaluate(test, shift(perfect, -1)).means["recall@100"], abs=1e-12)
    assert 0.1 < f[0].values["recall@100"] < 0.5  # neighbouring gold articles: not ≈ 0
    g = check_run(random_rankings(test, 22633, 5000), test, corpus_size=22633, other_splits=other)
    assert codes(g) == ["near_random"]
    h = check_run(perfect_rankings(train, corpus), test, other_splits=other)
    assert codes(h) == ["wrong_split"] and h[0].values["in_other_split"] == 886


def test_codes_are_listed():
    assert CODES == ("wrong_split", "ids_shifted", "near_random")
