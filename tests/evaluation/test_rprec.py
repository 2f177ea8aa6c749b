"""R-Precision (``rprec``) against trec_eval's ``Rprec`` (pytrec_eval): randomized runs with score ties,
repeated documents, questions missing from the run, questions not in the split and an unlabelled
question; then the real BSARD test labels with a few runs, through every output format of ``evaluate``.

The product's conventions, which the references are given the same way: ties are ordered by article
id descending (trec_eval's rule; Run orders them so); a document listed twice keeps its best score
(Run keeps its best position; pytrec_eval takes a dict, one score per document); a question missing
from the run scores 0 (``trec_eval -c``); a question without relevant article is left out.
"""
from __future__ import annotations

import csv
import io
import json
import random

import pytest
import pytrec_eval
from hypothesis import Phase, given, settings, strategies as st

from bsard_demo.cli.main import main
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.measures import column_label, extra_columns
from bsard_demo.evaluation.metrics import gold_positions, rprec_from_positions
from bsard_demo.evaluation.report import display_columns
from bsard_demo.evaluation.stamp import strip_stamp
from bsard_demo.runs.run import Entry, Run


def literal_rprec(relevant, ranked) -> float:
    """Independent reference: the definition on the ranked list, written out."""
    rel = set(relevant)
    r = len(rel)
    return len(rel & set(ranked[:r])) / r if r else 0.0


def best_scores(entries) -> dict[str, dict[str, float]]:
    """The dict run pytrec_eval takes: a repeated doc keeps its best score."""
    best: dict[str, dict[str, float]] = {}
    for e in entries:
        d = best.setdefault(e.qid, {})
        d[e.docid] = max(d.get(e.docid, float("-inf")), e.score)
    return best


def trec_rprec(qrels, scores) -> dict[str, float]:
    """pytrec_eval's Rprec per labelled question, 0 for a question missing from the run (-c)."""
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items() if rel}
    te = pytrec_eval.RelevanceEvaluator(tq, {"Rprec"}).evaluate({q: s for q, s in scores.items() if s})
    return {q: te[q]["Rprec"] if q in te else 0.0 for q in tq}


def test_hand_examples():
    # R = 3: two of the top three are relevant
    assert rprec_from_positions(gold_positions({"a", "b", "c"}, ["a", "x", "b", "c"]), 3) == pytest.approx(2 / 3)
    # a ranking shorter than R: the missing ranks are misses
    assert rprec_from_positions(gold_positions({"a", "b", "c", "d"}, ["a"]), 4) == 0.25
    # a repeated document counts once (Run keeps its best position; positions are first occurrences)
    assert rprec_from_positions(gold_positions({"a", "b"}, ["a", "a", "b"]), 2) == 0.5
    assert rprec_from_positions([], 0) == 0.0 and rprec_from_positions([1], 1, 500) == 1.0  # k is ignored


docs = st.sampled_from([f"d{i}" for i in range(12)] + ["10", "9", "b"])  # ids whose string order differs
scores = st.sampled_from([1.0, 2.0, 2.5, 3.0, 0.5])  # few values: many ties
questions = st.sampled_from(["q0", "q1", "q2", "q3"])


def check_against_pytrec_eval(qrels, entries):
    run = Run.from_entries(entries)
    ev = evaluate(qrels, run, (1, 5))
    expected = trec_rprec(qrels, best_scores(entries))
    assert list(ev.per_question.index) == list(expected)
    for qid, value in expected.items():
        assert ev.per_question.loc[qid, "rprec"] == pytest.approx(value, abs=1e-12)
        assert ev.per_question.loc[qid, "rprec"] == pytest.approx(literal_rprec(qrels[qid], list(run.get(qid, ()))))
    mean = sum(expected.values()) / len(expected) if expected else 0.0
    assert ev.means["rprec"] == pytest.approx(mean, abs=1e-12)


@settings(max_examples=400, deadline=None, phases=[p for p in Phase if p != Phase.explain])  # explain: minutes
@given(qrels=st.dictionaries(questions, st.lists(docs, max_size=12), min_size=1),
       rankings=st.dictionaries(st.sampled_from(["q0", "q1", "q2", "q3", "other"]),
                                st.lists(st.tuples(docs, scores), min_size=1, max_size=40)))
def test_equals_pytrec_eval_rprec_on_random_runs(qrels, rankings):
    """Relevant lists with repeats (R = distinct articles), ties, repeated documents, missing and
    unknown questions, unlabelled questions (an empty list)."""
    check_against_pytrec_eval({q: set(rel) for q, rel in qrels.items()},
                              [Entry(q, d, s) for q, ranked in rankings.items() for d, s in ranked])


@pytest.mark.parametrize("seed", range(20))
def test_equals_pytrec_eval_rprec_on_seeded_runs(seed):
    """Larger cases than hypothesis draws: R up to 30, rankings of up to 80 entries over 60 ids."""
    rnd = random.Random(seed)
    pool = [str(i) for i in range(60)]
    qrels = {f"q{i}": set(rnd.sample(pool, rnd.randint(0, 30))) for i in range(30)}
    entries = [Entry(q, rnd.choice(pool), rnd.choice([1.0, 2.0, 0.5]) if rnd.random() < 0.6 else rnd.random())
               for q in [*qrels, "other"] if rnd.random() < 0.85 for _ in range(rnd.randint(1, 80))]
    check_against_pytrec_eval(qrels, entries)


def test_rprec_does_not_depend_on_the_cutoffs():
    rnd = random.Random(3)
    qrels = {str(q): {str(rnd.randint(1, 300)) for _ in range(rnd.randint(1, 40))} for q in range(30)}
    run = Run.from_scores({q: {str(rnd.randint(1, 300)): rnd.random() for _ in range(200)} for q in qrels})
    a, b = evaluate(qrels, run, (1,)), evaluate(qrels, run, (100, 200, 500))
    assert a.per_question["rprec"].tolist() == b.per_question["rprec"].tolist()
    assert "rprec" not in evaluate(qrels, run, (1,), extra=("ndcg@10",)).means


def real_runs(qrels) -> dict[str, dict[str, dict[str, float]]]:
    """A few runs on the real labels: random with planted gold and ties, near-perfect, short (top 3
    only, shorter than many R), and one that leaves out a tenth of the questions."""
    rnd = random.Random(0)
    out = {"random": {}, "good": {}, "short": {}, "missing": {}}
    for q, rel in qrels.items():
        docs = {str(d): round(rnd.random(), 1) for d in rnd.sample(range(1, 22634), 300)}  # ties: one decimal
        for d in rel:
            if rnd.random() < 0.5:
                docs[d] = round(rnd.random(), 1)
        out["random"][q] = docs
        good = {d: 1.0 - i / 1000 for i, d in enumerate(sorted(rel)) if rnd.random() < 0.8}
        good.update({str(d): 0.5 for d in rnd.sample(range(1, 22634), 20) if str(d) not in rel})  # a tie block
        out["good"][q] = good
        out["short"][q] = dict(sorted(good.items(), key=lambda kv: -kv[1])[:3])
        if rnd.random() > 0.1:
            out["missing"][q] = docs
    return out


def score_once(monkeypatch) -> list:
    """Make ``evaluate``'s scoring of the same files, split and cut-offs happen once: the first call scores them
    (:func:`~bsard_demo.evaluation.scoring.score_runs`), the next ones, which must ask for the same, get that
    board to render. Five formats of one evaluation read and scored the same four 67k-line runs five times
    (~3 CPU s). Returns the calls' keys."""
    from bsard_demo.cli import evaluate as cli_evaluate

    real, boards, calls = cli_evaluate.score_runs, {}, []

    def scored(ds, split, sources, ks, **kwargs):
        key = (ds.name, split, tuple((s.name, str(s.path), s.lower_is_better) for s in sources), tuple(ks),
               tuple(sorted(kwargs.items())))
        calls.append(key)
        if key not in boards:
            boards[key] = real(ds, split, sources, ks, **kwargs)
        return boards[key]

    monkeypatch.setattr(cli_evaluate, "score_runs", scored)
    return calls


@pytest.mark.slow  # the real labels through five output formats
def test_real_bsard_labels_in_every_output_format(tmp_path, real_bsard_dir, real_bsard, capsys, monkeypatch):
    """On the 222 real test questions (R from 1 to 57), each run's R-Prec equals pytrec_eval's Rprec
    in the library, in the JSON, CSV, Markdown, LaTeX and table outputs and the per-question file
    (the runs scored once, by the first format's ``evaluate``: :func:`score_once`)."""
    qrels = real_bsard.qrels("test")
    assert max(len(r) for r in qrels.values()) == 57
    runs = real_runs(qrels)
    expected = {}
    for name, run_scores in runs.items():
        per_q = trec_rprec(qrels, run_scores)
        expected[name] = sum(per_q.values()) / 222
        ev = evaluate(qrels, Run.from_scores(run_scores))
        for q, v in per_q.items():
            assert ev.per_question.loc[q, "rprec"] == pytest.approx(v, abs=1e-12)
        assert ev.means["rprec"] == pytest.approx(expected[name], abs=1e-12)
    assert len({round(v, 6) for v in expected.values()}) == len(expected)  # the runs differ
    paths = []
    for name, run_scores in runs.items():
        paths.append(tmp_path / f"{name}.trec")
        paths[-1].write_text(Run.from_scores(run_scores).to_trec(name))
    base = ["evaluate", *map(str, paths), "--data", str(real_bsard_dir)]
    outputs, calls = {}, score_once(monkeypatch)
    for fmt in ("json", "csv", "markdown", "latex", "table"):
        args = base + ["--format", fmt] + (["--per-query", str(tmp_path / "pq.csv")] if fmt == "csv" else [])
        assert main(args) == 0
        outputs[fmt] = capsys.readouterr().out
    assert len(calls) == 5 and len(set(calls)) == 1  # each format asked for the same scoring
    js = json.loads(outputs["json"])["runs"]
    rows = {r["run"]: r for r in csv.DictReader(io.StringIO(strip_stamp(outputs["csv"])))}
    per_q = list(csv.DictReader(io.StringIO(strip_stamp((tmp_path / "pq.csv").read_text()))))

    def cells(text: str, sep: str) -> dict[str, dict[str, str]]:
        lines = [ln for ln in text.splitlines() if sep in ln and "---" not in ln and "midrule" not in ln]
        split = lambda ln: [c.strip().rstrip("\\").strip() for c in ln.strip().strip("|").split(sep)]  # noqa: E731
        header = split(lines[0])
        return {row[0]: dict(zip(header, row)) for row in map(split, lines[1:])}

    md, tex = cells(outputs["markdown"], "|"), cells(outputs["latex"], "&")
    table_lines = {ln.split()[0]: ln.split() for ln in outputs["table"].splitlines() if ".trec " in ln}
    header = next(ln.split() for ln in outputs["table"].splitlines() if ln.startswith("run "))
    for name, value in expected.items():
        run = f"{name}.trec"
        assert js[run]["rprec"] == pytest.approx(value, abs=1e-9)
        assert float(rows[run]["rprec"]) == pytest.approx(value, abs=1e-6)
        assert md[run]["R-Prec"] == tex[run]["R-Prec"] == f"{100 * value:.2f}"
        assert table_lines[run][header.index("R-Prec")] == f"{100 * value:.2f}"
        mine = [float(r["rprec"]) for r in per_q if r["run"] == run]
        assert len(mine) == 222 and sum(mine) / 222 == pytest.approx(value, abs=1e-5)
    # the published tables' order: R@k, MAP, R-Prec, then nDCG@10 and MRR last
    columns = [column_label(c) for c in display_columns((100, 200, 500), extra_columns())]
    assert header[:1 + len(columns)] == ["run", *columns]
    assert header[1:6] == ["R@100", "R@200", "R@500", "MAP@100", "R-Prec"]  # first, as QABISAR's Table 1
    assert "R-Prec: precision at rank R" in outputs["table"]


@pytest.mark.slow  # the real labels, two permutation tests
def test_compare_on_rprec_equals_the_per_question_values(tmp_path, real_bsard_dir, real_bsard, capsys):
    """``compare --measure rprec`` (also ``R-Prec``): the means are trec_eval's, the test runs on them."""
    qrels = real_bsard.qrels("test")
    runs = real_runs(qrels)
    paths = []
    for name in ("random", "good"):
        paths.append(tmp_path / f"{name}.trec")
        paths[-1].write_text(Run.from_scores(runs[name]).to_trec(name))
    for spelled in ("rprec", "R-Prec"):
        assert main(["compare", *map(str, paths), "--data", str(real_bsard_dir), "--measure", spelled,
                     "--format", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["measure"] == "rprec"
        for name in ("random", "good"):
            expected = sum(trec_rprec(qrels, runs[name]).values()) / 222
            assert out["runs"][f"{name}.trec"] == pytest.approx(expected, abs=1e-9)
        pair = out["pairs"][0]
        assert pair["wins"] + pair["ties"] + pair["losses"] == 222 and pair["p_permutation"] < 0.05
    assert main(["compare", *map(str, paths), "--data", str(real_bsard_dir), "--measure", "rprec"]) == 0
    assert "R-Prec A" in capsys.readouterr().out
