"""The Score page's new decisions, without Streamlit: built-in systems, the A-vs-B view and its
click, the drill-down's gold articles (text, rank in every run), coded problems and distance runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from _app_helpers import sample_run_trec
from bsard_demo.app import charts
from bsard_demo.app.score_builtin_runs import BuiltinRun, builtin_name, builtin_run_text
from bsard_demo.app.score_builtins import baseline_specs
from bsard_demo.app.score_compare import OUTCOMES, SELECTION, ab_view, chart_clicked, chart_key, comparison, picked_qid

# Wrapped by hand (isort skips it): one name a line would repeat test_search_logic.py's imports line for line.
from bsard_demo.app.score_drill import (
    ABSENT,
    DD_QID,
    DD_RUN,
    PQ_FILTER,
    RANK_PREFIX,
    article_text_html,
    drill_down,
    gold_ranks_frame,
    is_long,
    open_question,
)
from bsard_demo.app.score_tables import score_tables, shown_metrics
from bsard_demo.app.score_uploads import problems_frame, score_files
from bsard_demo.app.search_page import column_specs
from bsard_demo.evaluation import measures
from bsard_demo.evaluation.report import display_columns
from bsard_demo.evaluation.stats import compare_measure
from bsard_demo.retrievers.registry import menu_kinds
from bsard_demo.runs import Run


@pytest.fixture(scope="module")
def board(sample):
    files = [(f"s{i}.trec", sample_run_trec(seed=i, drop=i).encode()) for i in range(3)]
    return score_files(files, sample, "test")


def test_baselines_are_the_search_pages_systems():
    specs = baseline_specs()
    assert specs == column_specs(menu_kinds(), encoder="use")  # every kind the menu offers, the registry's order
    assert list(specs)[0] == "BM25" and [s.kind for s in specs.values()] == menu_kinds()
    assert builtin_name("BM25") == "BM25 intégré"
    assert builtin_name("Dense (use)", "question+description") == "Dense (use) intégré (question + description)"


def test_builtin_runs_protocol():
    session: dict = {}
    calls = []

    def build(label, query_text):
        calls.append((label, query_text))
        if label == "broken":
            return None
        run = Run.from_scores({"1": {label: 1.0}}, tags=(query_text,))
        return run, builtin_run_text(run)

    def files(runs):
        return [(name, run.rankings, blob) for name, run, blob in runs.built()]

    runs = BuiltinRun(session, "data", "test")
    assert runs.built() == [] and not runs.settle(True, build) and calls == []  # nothing asked for
    BuiltinRun.request(session, "train", "BM25")  # another split: not built here, and forgotten
    assert not BuiltinRun(session, "data", "test").settle(True, build) and BuiltinRun.WANTED not in session
    BuiltinRun.request(session, "test", "BM25")
    assert not BuiltinRun(session, "data", "test").settle(False, build) and calls == []  # no corpus
    BuiltinRun.request(session, "test", "BM25")
    assert BuiltinRun(session, "data", "test").settle(True, build) and calls == [("BM25", "question")]
    BuiltinRun.request(session, "test", "Dense (use)", "question+description")
    BuiltinRun(session, "data", "test").settle(True, build)
    BuiltinRun.request(session, "test", "BM25")  # already there: not rebuilt
    BuiltinRun(session, "data", "test").settle(True, build)
    BuiltinRun.request(session, "test", "broken")  # a build that failed stores nothing
    BuiltinRun(session, "data", "test").settle(True, build)
    runs = BuiltinRun(session, "data", "test")
    assert calls == [("BM25", "question"), ("Dense (use)", "question+description"), ("broken", "question")]
    assert files(runs) == [("BM25 intégré", {"1": ("BM25",)}, b"1 Q0 BM25 1 1.0 question\n"),
                           ("Dense (use) intégré (question + description)", {"1": ("Dense (use)",)},
                            b"1 Q0 Dense (use) 1 1.0 question+description\n")]
    assert runs.has("BM25") and not runs.has("BM25", "question+description")
    assert BuiltinRun(session, "other", "test").built() == [] and BuiltinRun(session, "data", "train").built() == []
    BuiltinRun.drop(session, "BM25 intégré")
    assert [n for n, _, _ in BuiltinRun(session, "data", "test").built()] == \
        ["Dense (use) intégré (question + description)"]
    BuiltinRun.request(session, "train", "BM25")  # a run for another split replaces the old ones (bounded memory)
    assert BuiltinRun(session, "data", "train").settle(True, build)
    assert BuiltinRun(session, "data", "test").built() == [] and len(session[BuiltinRun.STORED]) == 1
    BuiltinRun.drop(session)
    BuiltinRun.drop(session)  # twice is harmless
    assert BuiltinRun.STORED not in session


def test_ab_view_counts_are_compare_measures(board, sample):
    """The A-vs-B counts (stats.win_tie_loss, no permutation test) are the comparison's."""
    tables = score_tables(board)
    for metric in ("recall@100", "ndcg@10"):
        view = ab_view(board, tables.per_question_text, "s0.trec", "s2.trec", metric)
        pair = compare_measure({n: board.evaluations[n].per_question for n in ("s0.trec", "s2.trec")}, metric).pairs
        assert (view.wins, view.ties, view.losses) == tuple(int(pair.iloc[0][c]) for c in ("wins", "ties", "losses"))
        pts = view.points
        assert list(pts.columns) == ["qid", "category", "question", "run_a", "run_b", "a", "b", "outcome"]
        assert list(pts["qid"]) == list(sample.questions("test")["id"])
        assert list(pts["a"]) == list(board.evaluations["s0.trec"].per_question[metric])
        assert list(pts["b"]) == list(board.evaluations["s2.trec"].per_question[metric])
        counts = pts["outcome"].value_counts()
        assert [int(counts.get(o, 0)) for o in OUTCOMES] == [view.wins, view.ties, view.losses]
        assert set(pts["run_a"]) == {"s0.trec"} and set(pts["run_b"]) == {"s2.trec"}
    # the page's full comparison has the same counts for that pair
    row = comparison(board, "recall@100").pairs.iloc[1]
    assert (row["run_a"], row["run_b"]) == ("s0.trec", "s2.trec")
    view = ab_view(board, tables.per_question_text, "s0.trec", "s2.trec", "recall@100")
    assert (view.wins, view.ties, view.losses) == (row["wins"], row["ties"], row["losses"])
    with pytest.raises(ValueError, match="two different runs"):
        ab_view(board, tables.per_question_text, "s1.trec", "s1.trec", "recall@100")


def test_the_chart_selects_questions_by_qid(board, sample):
    tables = score_tables(board)
    view = ab_view(board, tables.per_question_text, "s0.trec", "s1.trec", "recall@100")
    spec = charts.ab_scatter(view.points, "recall@100", current="3").to_dict()
    layers = spec["layer"]
    params = spec.get("params", []) + [p for layer in layers for p in layer.get("params", [])]  # Altair lifts them
    assert [(p["name"], p["select"]["fields"]) for p in params] == [(SELECTION, ["qid"])]
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in layers]
    assert marks == ["line", "circle", "point"]  # the diagonal, the questions, the ring of the drill-down's
    data = {name: rows for name, rows in spec["datasets"].items()}
    diagonal = next(rows for rows in data.values() if len(rows) == 2 and set(rows[0]) == {"a", "b"})
    assert diagonal == [{"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 1.0}]
    ring = next(rows for rows in data.values() if len(rows) == 1)
    assert ring[0]["qid"] == "3"
    tooltips = [t["field"] for t in layers[1]["encoding"]["tooltip"]]
    assert tooltips == ["qid", "category", "question", "run_a", "a", "run_b", "b"]
    assert "s0.trec" not in json.dumps({k: v for k, v in spec.items() if k != "datasets"})  # names are data only
    assert len(charts.ab_scatter(view.points, "recall@100").to_dict()["layer"]) == 2  # no ring without a question


def test_a_click_opens_the_question_and_clears_a_hiding_filter(board, sample):
    tables = score_tables(board)
    view = ab_view(board, tables.per_question_text, "s1.trec", "s2.trec", "recall@100")
    q = sample.questions("test").iloc[4]
    assert picked_qid({"selection": {SELECTION: [{"qid": q["id"]}]}}) == q["id"]
    assert picked_qid({"selection": {SELECTION: {}}}) is None and picked_qid(None) is None
    assert picked_qid({"selection": {SELECTION: [{"vgsid": 3}]}}) is None
    key = chart_key(view, None)
    assert key != chart_key(view, q["id"]) and key.startswith("ab_chart_")
    other = next(c for c in sample.questions("test")["category"] if c != q["category"])
    session = {key: {"selection": {SELECTION: [{"qid": q["id"]}]}}, PQ_FILTER: [other]}
    chart_clicked(session, key, view)
    assert session[DD_QID] == q["id"] and session[DD_RUN] == "s1.trec" and session[PQ_FILTER] == []
    session = {key: {"selection": {SELECTION: [{"qid": q["id"]}]}}, PQ_FILTER: [q["category"]]}
    chart_clicked(session, key, view)
    assert session[PQ_FILTER] == [q["category"]]  # the filter shows it: kept
    session = {key: {"selection": {SELECTION: []}}}
    chart_clicked(session, key, view)
    assert DD_QID not in session  # a cleared selection opens nothing
    session = {key: {"selection": {SELECTION: [{"qid": "not a question"}]}}}
    chart_clicked(session, key, view)
    assert DD_QID not in session
    open_question(session, "7")
    assert session[DD_QID] == "7" and DD_RUN not in session


def test_gold_articles_with_their_text_and_rank_in_every_run(board, sample):
    usable = {r.name: r.file.run for r in board.runs if r.usable}
    q = sample.questions("test").iloc[0]  # s1 and s2 leave it out
    dd = drill_down(sample, "test", q["id"], usable["s0.trec"])
    frame = gold_ranks_frame(dd, usable)
    assert list(frame.columns) == ["article", "référence"] + [RANK_PREFIX + n for n in usable]
    assert list(frame["article"]) == list(q["article_ids"])
    for name, run in usable.items():
        ranking = list(run.get(q["id"], ()))
        want = [str(ranking.index(a) + 1) if a in ranking else ABSENT for a in q["article_ids"]]
        assert list(frame[RANK_PREFIX + name]) == want
    assert set(frame[RANK_PREFIX + "s1.trec"]) == {ABSENT}
    assert [g.text for g in dd.gold] == [sample.article(a)["article"] for a in q["article_ids"]]


def test_article_text_is_escaped_and_shortened():
    text = "Le bail <script>alert(1)</script> & la garantie " + "locative " * 200
    short, full = article_text_html(text, {"garanti"}), article_text_html(text, (), max_chars=None)
    assert "<script>" not in short and "&lt;script&gt;" in short and "&amp;" in short
    assert short.endswith(" …</div>") and len(short) < 700 and is_long(text)
    assert full.count("locative") == 200 and "…" not in full
    assert not is_long("court") and "…" not in article_text_html("court")


def test_problem_table_shows_the_codes(sample):
    shifted = "".join(f"{q} Q0 {int(d) - 1} {r} {50 - r} t\n" for q, gold in sample.qrels("test").items()
                      for r, d in enumerate(sorted(gold, key=int), 1))
    board = score_files([("shifted.trec", shifted.encode()), ("bad.trec", b"1 Q0 23 1 x t\n")], sample, "test")
    frame = problems_frame(board.runs[0].file.problems)
    assert list(frame.columns) == ["ligne", "gravité", "problème", "code"]
    assert "ids_shifted" in list(frame["code"])
    assert list(problems_frame(board.runs[1].file.problems)["code"]) == ["bad_score"]
    # the CLI table's columns (derived from the declared families: a new measure edits no test here)
    assert shown_metrics(board) == display_columns(board.ks, measures.extra_columns())


def distance_pair(sample, seed=5):
    """The same rankings as similarities (best first, scores falling) and as distances (the
    negated scores, rising with rank; file order shuffled), with ties, as TREC text."""
    rng = np.random.default_rng(seed)
    ids = sorted(sample.articles["id"])
    sim, dist = [], []
    for qid in sample.questions("test")["id"]:
        docs = list(rng.permutation(ids)[:40])
        scores = np.sort(np.round(rng.random(40), 1))[::-1]  # best first, with ties
        for r, (d, s) in enumerate(zip(docs, scores), 1):
            sim.append(f"{qid} Q0 {d} {r} {s:.1f} sim")
            dist.append(f"{qid} Q0 {d} {r} {-s:.1f} dist")
    rng.shuffle(dist)
    return "\n".join(sim).encode(), "\n".join(dist).encode()


def test_a_distance_run_scores_like_its_similarities(sample):
    sim, dist = distance_pair(sample)
    board = score_files([("sim.trec", sim), ("dist.trec", dist), ("dist2.trec", dist)], sample, "test",
                        lower_is_better=[False, True])
    ev = board.evaluations
    assert ev["sim.trec"].per_question.equals(ev["dist.trec"].per_question)
    assert dict(board.runs[0].file.run) == dict(board.runs[1].file.run)
    assert not ev["dist2.trec"].per_question.equals(ev["sim.trec"].per_question)  # read as similarities
    codes = [p.code for p in board.runs[2].file.problems]
    assert "scores_ascending" in codes
