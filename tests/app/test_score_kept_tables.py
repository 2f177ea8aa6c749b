"""The Score page's French tables kept per board (:func:`bsard_demo.app.score_ui.kept_dataframe`): the element a
kept table sends is the one ``st.dataframe`` of the same Styler sends, and a later visit sends it again without
making the Styler (the per-visit cost of docs/benchmarks.md, "Per-visit cost after issues 37 and 38")."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from _app_helpers import assert_clean, set_app_env, start


@pytest.fixture(autouse=True)
def app_env(monkeypatch, tmp_path_factory):
    return set_app_env(monkeypatch, tmp_path_factory.getbasetemp() / "app-cache", "sample")


def tables_script():
    """Every French table of the page, on a board of two runs of the sample: each drawn twice, by
    ``st.dataframe`` of its Styler (today's element) and by ``kept_dataframe``. Counts the Stylers made."""
    from functools import partial

    import streamlit as st

    from _app_helpers import sample_run_trec
    from bsard_demo.app import score_ui
    from bsard_demo.app.score_compare import comparison
    from bsard_demo.app.score_drill import drill_down, gold_ranks_frame
    from bsard_demo.app.score_tables import french_view, measure_headers, score_tables
    from bsard_demo.app.score_uploads import score_files
    from bsard_demo.sources import load_sample

    @st.cache_resource
    def board_of_the_test():  # one board for both runs of the script, as a board kept per process
        files = [(f"r{seed}.trec", sample_run_trec(seed=seed).encode()) for seed in (31, 32)]
        return score_files(files, load_sample(), "test")

    board = board_of_the_test()
    tables = score_tables(board)
    made = st.session_state.setdefault("made", [])
    ds, runs = board.dataset, {r.name: r.file.run for r in board.runs if r.usable}
    qid = tables.per_question_text["qid"].iloc[0]
    dd = drill_down(ds, board.split, qid, runs["r31.trec"])
    pairs = comparison(board, "recall@100").pairs
    views = {
        "measures": partial(french_view, tables.shown, percents=measure_headers(tables.shown)),
        "per question": partial(french_view, tables.per_question_text, fractions=["recall@100", "map@100"]),
        ("gold ranks", "r31.trec", qid): partial(french_view, gold_ranks_frame(dd, runs)),
        ("comparison", "recall@100"): partial(french_view, pairs, fractions=["mean_a", "mean_b", "diff"],
                                              decimals=["p_permutation_holm"]),
    }
    options = {"hide_index": True, "width": "stretch", "column_config": {"qid": st.column_config.Column("n°")}}
    for key, view in views.items():
        st.dataframe(view(), **options)
        score_ui.kept_dataframe(board, key, lambda view=view: made.append(1) or view(), **options)


def test_a_kept_table_is_the_element_st_dataframe_sends_and_is_made_once():
    at = AppTest.from_function(tables_script, default_timeout=60).run()
    assert_clean(at)
    first = [d.proto for d in at.dataframe]
    first_kept = [p.SerializeToString() for p in first[1::2]]
    assert len(first) == 8 and at.session_state["made"] == [1] * 4
    for today, kept in zip(first[::2], first[1::2]):
        assert kept.arrow_data.styler.display_values  # a Styler's element: numbers as values, French text shown
        assert kept.arrow_data.styler.uuid != today.arrow_data.styler.uuid  # pandas draws each Styler's id
        today.arrow_data.styler.ClearField("uuid")
        kept.arrow_data.styler.ClearField("uuid")
        assert kept.SerializeToString() == today.SerializeToString()
    at.run()  # a rerun, as a second visitor: every kept table sent again as it was, its id included, no Styler made
    assert_clean(at)
    assert [d.proto.SerializeToString() for d in at.dataframe[1::2]] == first_kept
    assert at.session_state["made"] == [1] * 4


def test_a_second_visitor_gets_the_first_visitors_tables(monkeypatch):
    """Two sessions score the same built-in run: the second makes no French table of the board's own (the
    drill-down's, kept by question and run, included) and its table elements are byte for byte the first's."""
    from bsard_demo.app import score_tables

    made = []
    real = score_tables.french_view

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(score_tables, "french_view", counting)
    sent, after_first = [], None
    for _ in range(2):
        at = start("pages/score.py")
        at.button(key="builtin").click().run()
        assert_clean(at)
        sent.append([d.proto.SerializeToString() for d in at.dataframe])
        after_first = len(made) if after_first is None else after_first
    assert len(made) == after_first  # none when an earlier test of this process scored the same run
    assert len(sent[0]) >= 4 and sent[0] == sent[1]
