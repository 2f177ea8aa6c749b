"""Where misses land on the Score page (bsard_demo.app.score_misses): the chart data are the library's counts
(``evaluate --misses``), and the drill-down's line counts the gold articles the run left out of its top k."""
from __future__ import annotations

import pytest

from _app_helpers import assert_clean, sample_run_trec, set_app_env, start
from bsard_demo.app.score_misses import CLASS_FR, class_labels, misses_frame, nearest_notes, question_line, runs_rows
from bsard_demo.app.score_uploads import score_files
from bsard_demo.evaluation.misses import CLASSES, board_misses, misses_table


@pytest.fixture(scope="module")
def board(sample):
    files = [("a.trec", sample_run_trec(seed=1, depth=40).encode()),
             ("b.trec", sample_run_trec(seed=2, drop=3).encode())]
    return score_files(files, sample, "test", ks=(10, 100))


def test_the_chart_data_are_the_librarys_counts(board):
    misses = board_misses(board)
    table = misses_table(misses)
    for k in (10, 100):
        frame = misses_frame(misses, k)
        assert list(frame["run"].unique()) == ["a.trec", "b.trec"] and list(frame["class"][:6]) == class_labels()
        for row in frame.to_dict("records"):
            cls = CLASSES[row["order"]]
            assert row["count"] == table.loc[(row["run"], k), cls]
            assert row["share"] == pytest.approx(table.loc[(row["run"], k), f"{cls}_share"])
            assert row["missed"] == table.loc[(row["run"], k), "missed"]
    frame = misses_frame(misses, 10)
    for runs in (["b.trec"], ["b.trec", "a.trec"]):  # the A-vs-B chart's rows: those of the per-run chart
        pair = runs_rows(frame, runs)
        assert list(pair["run"].unique()) == runs and pair.index.tolist() == list(range(6 * len(runs)))
        assert pair.equals(misses_frame({r: misses[r] for r in runs}, 10))  # what counting them again gives


def test_the_drill_down_line_counts_what_the_top_k_leaves_out(board, sample):
    misses = board_misses(board)
    run = next(r for r in board.runs if r.name == "a.trec").file.run
    checked = 0
    for qid, gold in board.qrels.items():
        left_out = set(gold) - set(list(run.get(qid, ()))[:10])
        lines = misses["a.trec"].question_lines(qid, 10)
        line = question_line(lines, 10)
        notes = nearest_notes(lines, 10, {})
        assert set(notes) == left_out
        if left_out:
            assert line.startswith(f"Articles pertinents manqués dans le top 10 : {len(left_out)} — ")
            assert all(any(label in n for label in CLASS_FR.values()) for n in notes.values())
            checked += 1
        else:
            assert line == "Aucun article pertinent manqué dans le top 10."
    assert checked


def test_the_page_shows_where_misses_land(monkeypatch, tmp_path_factory, sample):
    set_app_env(monkeypatch, tmp_path_factory.getbasetemp() / "app-cache", "sample")
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("a.trec", sample_run_trec(seed=1, depth=40).encode()).run()
    assert_clean(at)
    assert any(t.label == "Articles manqués" for t in at.tabs)
    qid = at.selectbox(key="dd_qid").value
    gold = sample.qrels("test")[qid]
    ranking = sample_run_trec(seed=1, depth=40).splitlines()
    top = [line.split()[2] for line in ranking if line.split()[0] == qid][:100]
    left_out = set(gold) - set(top)
    captions = [c.value.replace("\\", "") for c in at.caption]
    expected = (f"Articles pertinents manqués dans le top 100 : {len(left_out)} — " if left_out
                else "Aucun article pertinent manqué dans le top 100.")
    assert any(c.startswith(expected) for c in captions), captions


def test_the_totals_under_the_chart(board):
    from bsard_demo.app.score_misses import totals_line

    misses = board_misses(board)
    expected = " ; ".join(f"{name} {int((m.lines['k'] == 10).sum())}" for name, m in misses.items())
    assert totals_line(misses_frame(misses, 10), 10) == f"Articles pertinents manqués dans le top 10 : {expected}."


def test_the_charts_draw_the_frame_with_the_legend_below(board):
    from bsard_demo.app.charts import misses_ab, misses_bars

    misses = board_misses(board)
    frame = misses_frame(misses, 10)
    pair = runs_rows(frame, ["a.trec", "b.trec"])
    for chart in (misses_bars(frame, class_labels()), misses_ab(pair, class_labels())):
        spec = chart.to_dict()
        (values,) = spec["datasets"].values()
        assert sorted((v["run"], v["class"], v["count"]) for v in values) == \
            sorted(zip(frame["run"], frame["class"], frame["count"]))
        assert spec["encoding"]["color"]["legend"]["orient"] == "bottom"  # room for the bars on a phone
