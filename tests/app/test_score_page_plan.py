"""The Score page's model (bsard_demo.app.score_page): the split offered first, the uploads read, the
sections shown and every download, checked without Streamlit against the functions that make each file."""
from __future__ import annotations

import hashlib

import pandas as pd

from _app_helpers import sample_run_trec
from bsard_demo.app import score_page as page
from bsard_demo.app.score_builtin_runs import builtin_run_text
from bsard_demo.app.score_tables import score_tables, to_csv_bytes
from bsard_demo.app.score_uploads import run_sources, score_files
from bsard_demo.evaluation import render_table
from bsard_demo.evaluation.stamp import board_stamp, read_stamp, strip_stamp
from bsard_demo.runs import Entry, Run


def test_the_test_split_is_offered_first_else_the_first():
    assert page.default_split(["train", "test"]) == 1
    assert page.default_split(["dev", "train"]) == 0


def test_uploads_beyond_the_limit_are_left_unread():
    read, ignored = page.split_uploads(list("abcde"), limit=3)
    assert (read, ignored) == (list("abc"), list("de"))
    assert page.split_uploads(list("ab"), limit=3) == (list("ab"), [])


def test_downloads_are_the_clis_files(sample):
    files = [("a.trec", sample_run_trec(0).encode()), ("b.trec", sample_run_trec(1, drop=2).encode())]
    board = score_files(files, sample, "test")
    tables = score_tables(board)
    got = {d.file_name: d for d in page.table_downloads(tables, "test")}
    assert got["mesures_test.csv"].data == render_table(tables.metrics, "csv")
    assert got["mesures_test.md"].data == render_table(tables.metrics, "markdown")
    assert got["mesures_test.tex"].data == render_table(tables.metrics, "latex")
    assert got["par_question_test.csv"].data == to_csv_bytes(tables.per_question)
    assert page.compares(board) and not page.compares(score_files(files[:1], sample, "test"))
    caption = page.metrics_caption("x", "test", board)
    assert "split test" in caption and "published" not in caption


def test_a_builtin_run_downloads_as_its_trec_file():
    run = Run.from_entries([Entry("1", "d1", 2.0, 1), Entry("1", "d2", 1.0, 2)], by="score", tags=("bm25",))
    blob = builtin_run_text(run)
    (d,) = page.builtin_downloads([("BM25 *intégré*", run, blob)], "dev")
    assert (d.data, d.file_name, d.key) == (blob, "integre_1_dev.trec", "dl_builtin_0")
    assert "\\*intégré\\*" in d.label  # the name is Markdown-escaped


def test_categories_offered():
    assert page.categories(pd.DataFrame({"category": ["b", "", "a", "b"]})) == ["a", "b"]
    assert page.categories(pd.DataFrame({"qid": ["1"]})) == []


def test_every_table_download_carries_the_boards_stamp(sample):
    files = [("a.trec", sample_run_trec(0).encode()), ("b.trec", sample_run_trec(1, drop=2).encode())]
    board = score_files(files, sample, "test")
    tables = score_tables(board)
    stamp = board_stamp(board, run_sources(files))
    plain = {d.file_name: d.data for d in page.table_downloads(tables, "test")}
    for d in page.table_downloads(tables, "test", stamp):
        text = d.data.decode("utf-8") if isinstance(d.data, bytes) else d.data
        assert read_stamp(text) == stamp, d.file_name
        unstamped = plain[d.file_name]
        assert strip_stamp(text) == (unstamped.decode("utf-8") if isinstance(unstamped, bytes) else unstamped)
    assert stamp["runs"] == {"a.trec": hashlib.sha256(files[0][1]).hexdigest(),
                             "b.trec": hashlib.sha256(files[1][1]).hexdigest()}
