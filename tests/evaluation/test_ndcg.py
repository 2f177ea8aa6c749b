"""nDCG@10 (binary gains) against trec_eval's ndcg_cut_10 (pytrec_eval) and a literal recipe."""
from __future__ import annotations

import math
import random

import pytest
import pytrec_eval

from bsard_demo.evaluation import EXTRA_COLUMNS, cutoff_columns, evaluate
from bsard_demo.evaluation.metrics import gold_positions, ndcg_from_positions
from bsard_demo.runs.run import Entry, Run


def compute_ndcg(relevant, ranked, k: int = 10) -> float:
    """nDCG@k of one ranking by the live formula (metrics.ndcg_from_positions, what evaluate uses)."""
    rel = set(relevant)
    return ndcg_from_positions(gold_positions(rel, ranked[:k]), len(rel), k)


def literal_ndcg(relevant, ranked, k=10):
    """Independent reference: the textbook formula on the ranked list, written out."""
    rel = set(relevant)
    seen, dcg = set(), 0.0
    for i, d in enumerate(ranked[:k], 1):
        if d in rel and d not in seen:
            dcg += 1 / math.log2(i + 1)
        seen.add(d)
    idcg = sum(1 / math.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
    return dcg / idcg if idcg else 0.0


def random_case(seed: int, n_q: int = 40, n_docs: int = 120):
    """Qrels and run entries with many score ties, repeated docs, questions missing from the run,
    questions of the run not in the qrels and one unlabelled question."""
    rnd = random.Random(seed)
    docs = [str(rnd.randint(1, 5000)) for _ in range(n_docs)]
    qrels = {str(q): set(rnd.sample(docs, rnd.choice([1, 1, 2, 3, 5, 8, 12, 20]))) for q in range(n_q)}
    qrels["empty"] = set()
    entries = []
    for q in list(qrels)[: int(n_q * 0.8)] + ["empty"]:
        for _ in range(rnd.randint(1, 60)):
            score = rnd.choice([1.0, 2.0, 2.5, 3.0]) if rnd.random() < 0.6 else round(rnd.random(), 1)
            entries.append(Entry(q, rnd.choice(docs), score))
    for q in range(3):
        entries.append(Entry(f"extra{q}", "1", 1.0))
    return qrels, entries


def best_scores(entries):
    """The dict run pytrec_eval takes: a repeated doc keeps its best score (as Run keeps its best position)."""
    best: dict[str, dict[str, float]] = {}
    for e in entries:
        d = best.setdefault(e.qid, {})
        d[e.docid] = max(d.get(e.docid, float("-inf")), e.score)
    return best


def test_hand_example():
    # relevant at ranks 2 and 4; three relevant in all
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert compute_ndcg({"a", "b", "c"}, ["x", "a", "y", "b", "z"]) == pytest.approx(dcg / idcg, abs=1e-15)
    assert compute_ndcg({"a"}, ["a"]) == 1.0
    assert compute_ndcg({"a"}, ["x"] * 10 + ["a"]) == 0.0  # rank 11 is outside the cut
    assert compute_ndcg(set(), ["a"]) == 0.0
    assert compute_ndcg({"a", "b"}, ["a", "a", "b"]) == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    # more than 10 relevant: the ideal ranking is ten hits, so ten hits score 1
    many = [str(i) for i in range(30)]
    assert compute_ndcg(many, many[:10]) == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ValueError):
        ndcg_from_positions([1], 1, 0)


@pytest.mark.parametrize("seed", range(8))
def test_equals_pytrec_eval_ndcg_cut_10(seed):
    qrels, entries = random_case(seed)
    run = Run.from_entries(entries)
    ev = evaluate(qrels, run, (100,), extra=("ndcg@10",))
    assert "ndcg@10" in ev.per_question.columns and "ndcg@10" in ev.means
    labelled = {q: r for q, r in qrels.items() if r}
    assert list(ev.per_question.index) == list(labelled)  # unlabelled left out, missing counted
    best = best_scores(entries)
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items()}
    # the run cut to its top 10 with scores consistent with our order: trec_eval re-sorts by
    # score desc, docid desc, which is exactly Run's order
    cut = {q: {d: best[q][d] for d in run[q][:10]} for q in run}
    te = pytrec_eval.RelevanceEvaluator(tq, {"ndcg_cut.10"}).evaluate(cut)
    # and the full run: trec_eval orders and cuts it itself
    full = pytrec_eval.RelevanceEvaluator(tq, {"ndcg_cut.10"}).evaluate(best)
    for qid in labelled:
        ours = ev.per_question.loc[qid, "ndcg@10"]
        assert ours == pytest.approx(te[qid]["ndcg_cut_10"] if qid in te else 0.0, abs=1e-9)
        assert ours == pytest.approx(full[qid]["ndcg_cut_10"] if qid in full else 0.0, abs=1e-9)
        assert ours == pytest.approx(literal_ndcg(labelled[qid], list(run.get(qid, ()))), abs=1e-12)
    expected = sum(te[q]["ndcg_cut_10"] for q in te if q in labelled) / len(labelled)  # -c: missing count 0
    assert ev.means["ndcg@10"] == pytest.approx(expected, abs=1e-9)


def test_positions_function_matches_list_function():
    rnd = random.Random(3)
    for _ in range(200):
        rel = {str(rnd.randint(0, 30)) for _ in range(rnd.randint(1, 12))}
        ranked = [str(rnd.randint(0, 30)) for _ in range(rnd.randint(0, 40))]
        expected = literal_ndcg(rel, ranked)
        assert ndcg_from_positions(gold_positions(rel, ranked), len(rel), 10) == pytest.approx(expected, abs=1e-12)
        assert compute_ndcg(rel, ranked) == pytest.approx(expected, abs=1e-12)


def test_ndcg_is_independent_of_ks_and_off_by_default():
    qrels, entries = random_case(11)
    run = Run.from_entries(entries)
    a = evaluate(qrels, run, (1,), extra=("ndcg@10",))
    b = evaluate(qrels, run, (5, 500), extra=EXTRA_COLUMNS)
    assert a.per_question["ndcg@10"].tolist() == b.per_question["ndcg@10"].tolist()
    assert list(b.per_question.columns[:len(cutoff_columns((5, 500))) + len(EXTRA_COLUMNS)]) == \
        cutoff_columns((5, 500)) + list(EXTRA_COLUMNS)
    plain = evaluate(qrels, run, (5, 500), extra=())
    assert "ndcg@10" not in plain.per_question.columns and "ndcg@10" not in plain.means
    # the other columns do not change when the extra one is added
    cols = cutoff_columns((5, 500))
    assert plain.per_question[cols].equals(b.per_question[cols])
    with pytest.raises(ValueError, match="ndcg@20"):
        evaluate(qrels, run, (5,), extra=("ndcg@20",))


def test_real_test_labels_against_trec_eval(real_bsard):
    qrels = real_bsard.qrels("test")
    rnd = random.Random(1)
    scores = {}
    for q, rel in qrels.items():
        if rnd.random() < 0.05:
            continue  # missing question
        docs = {str(rnd.randint(1, 22633)): round(rnd.random(), 1) for _ in range(200)}
        for d in rel:
            if rnd.random() < 0.5:
                docs[d] = rnd.choice([0.9, 1.0])  # tied with ~10-20 random docs each, around the cut
        scores[q] = docs
    run = Run.from_scores(scores)
    ev = evaluate(qrels, run, extra=("ndcg@10",))
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items()}
    cut = {q: {d: scores[q][d] for d in run[q][:10]} for q in run}
    te = pytrec_eval.RelevanceEvaluator(tq, {"ndcg_cut.10"}).evaluate(cut)
    for qid in qrels:
        assert ev.per_question.loc[qid, "ndcg@10"] == pytest.approx(te.get(qid, {}).get("ndcg_cut_10", 0.0), abs=1e-9)
    assert ev.means["ndcg@10"] == pytest.approx(sum(v["ndcg_cut_10"] for v in te.values()) / 222, abs=1e-9)
    assert ev.means["ndcg@10"] > 0.1  # the planted gold articles really score
