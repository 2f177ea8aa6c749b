"""The decisions the pages used to take themselves, now in bsard_demo.app and tested without
Streamlit: the Search page's gold lookup and retriever failures, the Score page's per-question
table, downloads, misses and chart specs (computed once per board; its built-in-run protocol is in
test_score_page_model.py)."""
from __future__ import annotations

import pandas as pd
import pytest

from _app_helpers import sample_run_trec
from bsard_demo.app import score_tables as score_table_module
from bsard_demo.app.score_tables import display_metrics, metrics_frame, score_tables, to_csv_bytes
from bsard_demo.app.score_uploads import score_files
from bsard_demo.app.search_examples import examples_of
from bsard_demo.app.search_page import build_columns, column_specs
from bsard_demo.dataset import Dataset
from bsard_demo.evaluation.report import metrics_table, per_question_table


def test_examples_come_from_test_then_the_first_split(sample):
    ex = examples_of(sample)
    test = sample.questions("test")
    assert ex.split == "test" and list(ex.texts) == list(test["id"])
    first = test.iloc[0]
    assert ex.labels[first["id"]].startswith(f"n° {first['id']} · {first['category'] or 'sans catégorie'} · ")
    only_train = Dataset(name="x", kind="local", articles=sample.articles, splits={"train": sample.questions("train")})
    assert examples_of(only_train).split == "train"
    none = examples_of(Dataset(name="y", kind="local", articles=sample.articles, splits={}))
    assert none.split is None and none.texts == {} and none.gold_for("1", "q") is None


def test_gold_only_while_the_question_is_the_examples_text(sample):
    ex = examples_of(sample)
    row = sample.questions("test").iloc[3]
    gold = ex.gold_for(row["id"], row["question"].strip())
    assert gold is not None and gold.qid == row["id"] and gold.split == "test"
    assert gold.article_ids == list(row["article_ids"]) and gold.category == row["category"]
    assert ex.gold_for(row["id"], row["question"].strip() + " modifiée") is None  # edited: a free question
    assert ex.gold_for(None, row["question"].strip()) is None
    assert ex.gold_for("no such id", row["question"].strip()) is None


def test_a_failing_retriever_does_not_stop_the_others():
    specs = column_specs(["bm25", "dense", "hybrid"], encoder="nope")
    built = []

    def build(label, spec):
        built.append(label)
        if spec.kind == "dense":
            raise ValueError("encoder 'nope' unavailable")
        if spec.kind == "hybrid":
            raise OSError(28, "No space left on device")
        return f"retriever {label}"

    retrievers, failures = build_columns(specs, build)
    assert built == list(specs)
    assert retrievers == {"BM25": "retriever BM25"}
    assert failures == {"Dense (nope)": "encoder 'nope' unavailable",
                        "Hybride RRF k=60 (nope)": "[Errno 28] No space left on device"}

    def crash(label, spec):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError):  # a bug is not a "retriever unavailable" message
        build_columns(specs, crash)


def test_per_question_table_is_computed_once(sample, monkeypatch):
    files = [("a.trec", sample_run_trec(0).encode()), ("b.trec", sample_run_trec(1, drop=3).encode())]
    board = score_files(files, sample, "test")
    questions = sample.questions("test")
    calls = []
    real = score_table_module.per_question_table

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(score_table_module, "per_question_table", counting)
    tables = score_tables(board)
    assert len(calls) == 1
    assert score_tables(board) is tables and len(calls) == 1  # kept on the board: a second visit reads it
    expected = per_question_table(board.evaluations, questions)
    pd.testing.assert_frame_equal(tables.per_question, expected)
    assert to_csv_bytes(tables.per_question) == to_csv_bytes(expected)  # the download, byte for byte
    assert list(tables.per_question_text.columns) == \
        list(expected.columns[:3]) + ["question"] + list(expected.columns[3:])
    text = questions.set_index("id")["question"]
    assert list(tables.per_question_text["question"]) == [text[q] for q in expected["qid"]]
    pd.testing.assert_frame_equal(tables.metrics, metrics_table(board.evaluations))
    pd.testing.assert_frame_equal(tables.shown, display_metrics(metrics_frame(board)))


def test_score_tables_without_usable_runs(sample):
    board = score_files([("bad.trec", b"not a run")], sample, "test")
    tables = score_tables(board)
    assert tables.per_question.empty and tables.per_question_text.empty and tables.metrics.empty


def test_the_examples_and_a_boards_intervals_are_made_once(sample):
    """Per dataset and per board, not per visit: the Search page's examples (examples_of) and the Score
    chart's bootstrap intervals (ci_frame), each equal to a fresh computation."""
    from bsard_demo.evaluation.stats import metric_table_with_ci

    assert examples_of(sample) is examples_of(sample)
    board = score_files([("run.trec", sample_run_trec().encode())], sample, "test")
    first = score_table_module.ci_frame(board, ["recall@100"], n_resamples=200)
    assert score_table_module.ci_frame(board, ["recall@100"], n_resamples=200) is first
    fresh = metric_table_with_ci({n: ev.per_question for n, ev in board.evaluations.items()}, ["recall@100"],
                                 n_resamples=200, seed=0)
    pd.testing.assert_frame_equal(first, fresh)
    assert score_table_module.ci_frame(board, ["map@100"], n_resamples=200) is not first  # another key


def test_a_boards_downloads_misses_and_charts_are_made_once(sample, monkeypatch):
    """What a scored board's page draws is kept on the board (Scoreboard.memo): a second visitor, or a
    rerun, builds no download, misses frame or chart again, and each kept value equals a fresh one."""
    from bsard_demo.app import score_misses, score_page, score_ui
    from bsard_demo.app.charts import misses_bars
    from bsard_demo.evaluation.misses import board_misses

    files = [("a.trec", sample_run_trec(0).encode()), ("b.trec", sample_run_trec(1, drop=3).encode())]
    board = score_files(files, sample, "test")
    stamp = {"dataset": "sample", "split": "test"}
    made = {"downloads": 0, "misses": 0, "specs": 0}

    def counting(module, name, what):
        real = getattr(module, name)

        def count(*args, **kwargs):
            made[what] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, count)

    counting(score_page, "table_downloads", "downloads")
    counting(score_misses, "misses_frame", "misses")
    counting(score_ui, "altair_to_spec", "specs")
    misses = board_misses(board)
    first = score_page.board_downloads(board, stamp), score_misses.board_misses_frame(board, misses, 100)
    chart = score_ui.chart_spec(board, ("misses", 100), lambda: misses_bars(first[1], score_misses.class_labels()))
    again = score_page.board_downloads(board, stamp), score_misses.board_misses_frame(board, misses, 100)
    assert again[0] is first[0] and again[1] is first[1] and made == {"downloads": 1, "misses": 1, "specs": 1}
    assert score_ui.chart_spec(board, ("misses", 100), lambda: 1 / 0) is chart and made["specs"] == 1
    assert first[0] == tuple(score_page.table_downloads(score_tables(board), "test", stamp))  # a fresh computation
    pd.testing.assert_frame_equal(first[1], score_misses.misses_frame(misses, 100))
    assert score_page.board_downloads(board, None) != first[0]  # another stamp, other files
    assert score_misses.board_misses_frame(board, misses, 200) is not first[1]  # another cut-off
    fresh = score_ui.altair_to_spec(misses_bars(first[1], score_misses.class_labels()))
    assert chart.keys() == fresh.keys() and chart["datasets"] == fresh["datasets"]


def test_a_boards_pairwise_comparison_is_made_once(sample, monkeypatch):
    """The pairwise tests of a measure (score_compare.comparison) are run once per board and measure: a
    second visit reads the kept table, which equals the CLI's compare_measure run afresh."""
    from bsard_demo.app import score_compare
    from bsard_demo.evaluation.stats import STATS, compare_measure

    files = [(f"s{i}.trec", sample_run_trec(seed=i, drop=i).encode()) for i in range(3)]
    board = score_files(files, sample, "test")
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1])
        return compare_measure(*args, **kwargs)

    monkeypatch.setattr(score_compare, "compare_measure", counting)
    first = score_compare.comparison(board, "recall@100")
    assert score_compare.comparison(board, "recall@100") is first and calls == ["recall@100"]
    assert score_compare.comparison(board, "map@100") is not first and calls == ["recall@100", "map@100"]
    fresh = compare_measure({n: ev.per_question for n, ev in board.evaluations.items()}, "recall@100",
                            n_resamples=STATS.resamples, seed=STATS.seed, alpha=STATS.alpha)
    pd.testing.assert_frame_equal(first.pairs, fresh.pairs)


def test_the_first_a_versus_b_view_is_kept_with_the_board(sample):
    """Only the view every visitor's first render shows (the first two runs, the first measure, nothing
    ringed) is kept on the board; it equals a fresh ab_view."""
    from bsard_demo.app.score_compare import ab_view, first_view, kept_ab_view
    from bsard_demo.app.score_tables import shown_metrics

    files = [(f"s{i}.trec", sample_run_trec(seed=i, drop=i).encode()) for i in range(3)]
    board = score_files(files, sample, "test")
    first = shown_metrics(board)[0]
    assert first_view(board, "s0.trec", "s1.trec", first, None)
    assert not first_view(board, "s0.trec", "s1.trec", first, "1")  # a question ringed: a later render
    assert not first_view(board, "s0.trec", "s2.trec", first, None)
    assert not first_view(board, "s0.trec", "s1.trec", shown_metrics(board)[1], None)
    one = score_files(files[:1], sample, "test")
    assert not first_view(one, "s0.trec", "s1.trec", first, None)  # no A against B with one run
    text = score_tables(board).per_question_text
    kept = kept_ab_view(board, text, "s0.trec", "s1.trec", first)
    assert kept_ab_view(board, text, "s0.trec", "s1.trec", first) is kept
    fresh = ab_view(board, text, "s0.trec", "s1.trec", first)
    pd.testing.assert_frame_equal(kept.points, fresh.points)
    assert (kept.wins, kept.ties, kept.losses) == (fresh.wins, fresh.ties, fresh.losses)


def test_french_view_shows_french_numbers_and_empty_cells():
    from bsard_demo.app.score_tables import french_view

    frame = pd.DataFrame({"m": [0.123, 0.5], "gap": [12.345, None], "p": [0.01234, 0.5], "t": ["x", None]})
    html = french_view(frame, fractions=["m"], percents=["gap"], decimals=["p"]).to_html()
    assert "12,3\u202f%" in html and "12,35" in html and "0,0123" in html
    assert "None" not in html and "nan" not in html.lower()
