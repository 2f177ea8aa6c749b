"""The scoring engine against the paper's recipe, trec_eval (pytrec_eval) and ir_measures."""
from __future__ import annotations

import random

import ir_measures
import pytest
import pytrec_eval

from bsard_demo.evaluation import evaluate, gold_ranks, recall_curve
from bsard_demo.evaluation.metrics import compute_metrics
from bsard_demo.runs import Entry, Run


def recipe(relevant, ranked, k):
    """The paper's recipe (bsard_demo.evaluation.metrics docstring), written out literally as an
    independent reference."""
    rel = set(relevant)
    top = ranked[:k]
    recall = len(rel & set(top)) / len(rel)
    hits, s = 0, 0.0
    for i, d in enumerate(top, 1):
        if d in rel:
            hits += 1
            s += hits / i
    ap = s / len(rel)
    rr = next((1 / i for i, d in enumerate(top, 1) if d in rel), 0.0)
    return recall, ap, rr


def test_compute_metrics_hand_example():
    # relevant at ranks 2 and 4 of 5; third relevant doc never retrieved
    r, ap, rr = compute_metrics({"a", "b", "c"}, ["x", "a", "y", "b", "z"], k=100)
    assert r == pytest.approx(2 / 3)
    assert ap == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert rr == pytest.approx(1 / 2)
    assert compute_metrics({"a"}, ["x", "a"], k=1) == (0.0, 0.0, 0.0)
    assert compute_metrics(set(), ["a"], k=5) == (0.0, 0.0, 0.0)


def test_compute_metrics_counts_repeated_doc_once():
    r, ap, rr = compute_metrics({"a", "b"}, ["a", "a", "b"], k=10)
    assert (r, ap, rr) == (1.0, pytest.approx((1 + 2 / 3) / 2), 1.0)


def random_case(seed: int, n_q: int = 40, n_docs: int = 300):
    rnd = random.Random(seed)
    docs = [str(rnd.randint(1, 5000)) for _ in range(n_docs)]
    qrels = {}
    for q in range(n_q):
        qrels[str(q)] = set(rnd.sample(docs, rnd.choice([1, 1, 2, 3, 5, 8, 20])))
    entries = []
    for q in list(qrels)[: int(n_q * 0.8)]:  # some questions missing from the run
        for _ in range(rnd.randint(1, 600)):
            score = rnd.choice([1.0, 2.0, 2.5, 3.0]) if rnd.random() < 0.5 else round(rnd.random(), 2)  # many ties
            entries.append(Entry(q, rnd.choice(docs), score))
    for q in range(3):  # questions not in the split
        entries.append(Entry(f"extra{q}", "1", 1.0))
    return qrels, entries


@pytest.mark.parametrize("seed", range(6))
def test_evaluate_equals_recipe_and_trec_eval(seed):
    qrels, entries = random_case(seed)
    run = Run.from_entries(entries)
    ks = (10, 100, 500)
    ev = evaluate(qrels, run, ks)
    assert ev.missing_questions == sum(q not in run for q in qrels)
    assert ev.unknown_questions == 3
    assert len(ev.per_question) == len(qrels)
    # the recipe, question by question, with missing questions scoring 0
    for k in ks:
        for qid, rel in qrels.items():
            expected = recipe(rel, list(run.get(qid, ())), k)
            got = tuple(ev.per_question.loc[qid, [f"recall@{k}", f"map@{k}", f"mrr@{k}"]])
            assert got == pytest.approx(expected, abs=1e-12)
            assert compute_metrics(rel, list(run.get(qid, ())), k) == pytest.approx(expected, abs=1e-12)
    # trec_eval: dict run with the best score per doc (duplicates keep best), cut to top k
    best: dict[str, dict[str, float]] = {}
    for e in entries:
        d = best.setdefault(e.qid, {})
        d[e.docid] = max(d.get(e.docid, float("-inf")), e.score)
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items()}
    n = len(qrels)  # trec_eval -c: questions absent from the run count as 0
    # recall_k and map_cut_k on the FULL run: trec_eval orders and cuts it itself, so ties at
    # the cutoff are broken by trec_eval, not by us
    full = pytrec_eval.RelevanceEvaluator(tq, {f"recall.{k}" for k in ks} | {f"map_cut.{k}" for k in ks}).evaluate(best)
    for k in ks:
        for ours, theirs in ((f"recall@{k}", f"recall_{k}"), (f"map@{k}", f"map_cut_{k}")):
            expected = sum(full[q][theirs] for q in full if q in qrels) / n
            assert ev.means[ours] == pytest.approx(expected, abs=1e-12), (ours, k)
        # recip_rank has no cutoff in trec_eval: give it the run cut to its top k
        cut = {q: {d: best[q][d] for d in run[q][:k]} for q in run}
        te = pytrec_eval.RelevanceEvaluator(tq, {"recip_rank"}).evaluate(cut)
        expected = sum(te[q]["recip_rank"] for q in te if q in qrels) / n
        assert ev.means[f"mrr@{k}"] == pytest.approx(expected, abs=1e-12), k


def test_questions_without_gold_are_left_out_as_trec_eval_does():
    qrels = {"a": {"1"}, "b": set(), "c": {"2", "3"}}
    scores = {"a": {"1": 1.0, "9": 0.5}, "b": {"1": 1.0}, "c": {"9": 2.0, "3": 1.0}}
    ev = evaluate(qrels, Run.from_scores(scores), (10,))
    assert ev.unlabelled_questions == 1 and list(ev.per_question.index) == ["a", "c"]
    te = pytrec_eval.RelevanceEvaluator({q: {d: 1 for d in r} for q, r in qrels.items()},
                                        {"recall.10", "map_cut.10", "recip_rank"}).evaluate(scores)
    assert "b" not in te
    for ours, theirs in (("recall@10", "recall_10"), ("map@10", "map_cut_10"), ("mrr@10", "recip_rank")):
        assert ev.means[ours] == pytest.approx(sum(v[theirs] for v in te.values()) / len(te), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_recall_and_ap_equal_ir_measures(seed):
    """ir_measures' R@k and AP@k are valid references (its RR@k is not: see README)."""
    qrels, entries = random_case(100 + seed)
    run = Run.from_entries(entries)
    ev = evaluate(qrels, run, (100,))
    best: dict[str, dict[str, float]] = {}
    for e in entries:
        d = best.setdefault(e.qid, {})
        d[e.docid] = max(d.get(e.docid, float("-inf")), e.score)
    cut = {q: {d: best[q][d] for d in run[q][:100]} for q in run}
    measures = [ir_measures.R @ 100, ir_measures.AP @ 100]
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items()}
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, tq, cut)}
    for qid in qrels:
        for ours, measure in (("recall@100", "R@100"), ("map@100", "AP@100")):
            expected = theirs.get((qid, measure), 0.0)  # absent from the run: 0
            assert ev.per_question.loc[qid, ours] == pytest.approx(expected, abs=1e-12)
    agg = ir_measures.calc_aggregate(measures, tq, cut)
    assert ev.means["recall@100"] == pytest.approx(agg[ir_measures.R @ 100], abs=1e-12)
    assert ev.means["map@100"] == pytest.approx(agg[ir_measures.AP @ 100], abs=1e-12)


def test_tie_order_is_trec_eval_rule():
    run = Run.from_scores({"q": {"9": 1.0, "10": 1.0, "2": 2.0, "b": 1.0}})
    # score desc, then docid desc as strings: "9" > "b"? no: "b" > "9" > "10"
    assert run["q"] == ("2", "b", "9", "10")
    ranked = Run.from_rankings({"q": ["c", "a", "b", "a"]})
    assert ranked["q"] == ("c", "a", "b")


def test_duplicate_keeps_best_position():
    run = Run.from_entries([Entry("q", "a", 0.1), Entry("q", "b", 0.5), Entry("q", "a", 0.9)])
    assert run["q"] == ("a", "b")


def test_recall_curve_matches_evaluate():
    qrels, entries = random_case(7)
    run = Run.from_entries(entries)
    curve = recall_curve(qrels, run, 500)
    ev = evaluate(qrels, run, (1, 100, 500))
    for k in (1, 100, 500):
        assert curve.loc[curve["k"] == k, "recall"].item() == pytest.approx(ev.means[f"recall@{k}"], abs=1e-12)
    assert curve["recall"].is_monotonic_increasing


def test_gold_ranks():
    assert gold_ranks(["a", "z", "a"], ["x", "a", "y"]) == {"a": 2, "z": None}


def test_real_test_labels_against_trec_eval(real_bsard):
    """On the real 222 test questions: a random run over 22,633 ids equals trec_eval."""
    qrels = real_bsard.qrels("test")
    assert len(qrels) == 222 and len(qrels["274"]) == 6
    rnd = random.Random(0)
    scores = {}
    for q, rel in qrels.items():
        if rnd.random() < 0.05:
            continue  # missing question
        docs = {str(rnd.randint(1, 22633)): round(rnd.random(), 1) for _ in range(500)}
        for d in rel:
            if rnd.random() < 0.5:
                docs[d] = round(rnd.random(), 1)
        scores[q] = docs
    run = Run.from_scores(scores)
    ev = evaluate(qrels, run)
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items()}
    for k in (100, 200, 500):
        cut = {q: {d: scores[q][d] for d in run[q][:k]} for q in run}
        te = pytrec_eval.RelevanceEvaluator(tq, {f"recall.{k}", f"map_cut.{k}", "recip_rank"}).evaluate(cut)
        for ours, theirs in ((f"recall@{k}", f"recall_{k}"), (f"map@{k}", f"map_cut_{k}"), (f"mrr@{k}", "recip_rank")):
            assert ev.means[ours] == pytest.approx(sum(v[theirs] for v in te.values()) / 222, abs=1e-12)
