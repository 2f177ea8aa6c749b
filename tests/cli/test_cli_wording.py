"""The CLI words the core's codes (issue 15 item 3): a data error's advice, a problem's hint, a
progress step; every text is the one the core used to bake in, word for word."""
from __future__ import annotations

import pytest

from bsard_demo.cli.common import DATA_ADVICE, PROBLEM_HINTS, error_text
from bsard_demo.dataset import DataError
from bsard_demo.progress import STEP_WORDS, Step
from bsard_demo.sources import DataUnavailable, load_dataset

OLD_ALTERNATIVES = ("use --data sample (the bundled fictional demo) or --data PATH (a folder with articles.csv and "
                    "questions_<split>.csv)")


def test_data_errors_carry_an_advice_code_the_cli_words(tmp_path):
    with pytest.raises(DataError) as missing:
        load_dataset(tmp_path / "nope")
    assert str(missing.value) == f"{tmp_path / 'nope'}: no such folder" and missing.value.advice == "other_source_or"
    assert error_text(missing.value) == (f"{tmp_path / 'nope'}: no such folder "
                                         f"({OLD_ALTERNATIVES.replace('use ', 'or ')})")
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError) as not_folder:
        load_dataset(tmp_path / "file")
    assert error_text(not_folder.value) == (f"{tmp_path / 'file'}: not a folder; --data takes hub, sample or a folder "
                                            "with articles.csv and questions_<split>.csv")
    hub = DataUnavailable("cannot download articles.csv: offline", "offline")
    assert str(hub) == hub.detail == "cannot download articles.csv: offline"
    assert error_text(hub) == f"cannot download articles.csv: offline; {OLD_ALTERNATIVES}"
    assert error_text(DataError("plain")) == "plain" and error_text(ValueError("v")) == "v" and error_text("s") == "s"
    assert set(DATA_ADVICE) == {"other_source", "other_source_or", "data_words"}


def test_the_problem_hints_are_worded_for_every_code():
    from bsard_demo.runs.problems import HINTS

    assert set(PROBLEM_HINTS) == set(HINTS)


def test_progress_steps_read_as_the_old_english_messages():
    old = {Step("analysing_articles"): "analysing articles", Step("indexing", engine="bm25s"): "indexing (bm25s)",
           Step("indexing", engine="rank_bm25"): "indexing (rank_bm25)",
           Step("embedding_articles", encoder="use"): "embedding articles (use)",
           Step("embedding_questions", encoder="e5"): "embedding questions (e5)",
           Step("searching_questions"): "searching questions",
           Step("saving", entry="bm25s", subject="", what="BM25 index"): "saving BM25 index",
           Step("loaded_cached", entry="dense", subject="use",
                what="embeddings (use)"): "loaded cached embeddings (use)",
           Step("loaded_bundle", entry="bm25s", subject="",
                what="BM25 index"): "loaded BM25 index from the index bundle"}
    newer = {Step("fitting_adapter", encoder="use"): "fitting the query adapter (use)",  # no older message
             Step("fitting_ranker"): "fitting the learned ranker"}
    assert {s.kind for s in old} | {s.kind for s in newer} == set(STEP_WORDS)
    assert all(str(step) == text for step, text in newer.items())
    for step, text in old.items():
        assert str(step) == step == text and isinstance(step, str)
    import pickle

    again = pickle.loads(pickle.dumps(Step("indexing", engine="bm25s")))
    assert again.kind == "indexing" and again.params == {"engine": "bm25s"} and again == "indexing (bm25s)"
