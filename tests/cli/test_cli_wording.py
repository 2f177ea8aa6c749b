"""The CLI words the core's codes (issue 15 item 3): a data error's advice, a problem's hint, a
progress step; every text is the one the core used to bake in, word for word."""
from __future__ import annotations

from bsard_demo.cli.common import PROBLEM_HINTS
from bsard_demo.progress import STEP_WORDS, Step


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
           Step("loaded_cached", entry="dense", subject="use", what="embeddings (use)"): "loaded cached embeddings (use)",
           Step("loaded_bundle", entry="bm25s", subject="", what="BM25 index"): "loaded BM25 index from the index bundle"}
    assert {s.kind for s in old} == set(STEP_WORDS)
    for step, text in old.items():
        assert str(step) == step == text and isinstance(step, str)
    import pickle

    again = pickle.loads(pickle.dumps(Step("indexing", engine="bm25s")))
    assert again.kind == "indexing" and again.params == {"engine": "bm25s"} and again == "indexing (bm25s)"
