"""The state of the art beside the visitor's runs (bsard_demo.app.score_anchors): every figure is the
anchors table's, in its own column, and none is shown that was not read."""
from __future__ import annotations

import math

import pandas as pd

from bsard_demo.app.score_anchors import PUBLISHED, THIS_RUN, beside_frame, figure_columns
from bsard_demo.evaluation.anchors import ANCHORS


def test_runs_then_every_published_figure_in_its_own_column():
    runs = pd.DataFrame({"recall@100": [0.61234], "recall@200": [0.7], "recall@500": [0.8], "map@100": [0.3],
                         "missing_questions": [0]}, index=["mon run"])
    table = beside_frame(runs)
    assert table.index[0] == "mon run" and table.loc["mon run", "source"] == THIS_RUN
    assert table.loc["mon run", "R@100"] == 61.23 and math.isnan(table.loc["mon run", "Hit@100 (MTEB v1)"])
    assert set(figure_columns(table)) == {"R@100", "R@200", "R@500", "R-Prec", "Hit@100 (MTEB v1)",
                                          "nDCG@10 (MTEB v1, 1 pertinent)"}
    column = {"recall@100": "R@100", "recall@200": "R@200", "recall@500": "R@500", "hit@100": "Hit@100 (MTEB v1)",
              "ndcg@10 (one gold)": "nDCG@10 (MTEB v1, 1 pertinent)", "rprec": "R-Prec"}
    assert set(table.index[1:]) == {a.system for a in ANCHORS}
    for a in ANCHORS:
        if a.measure not in column:  # MAP with no cut-off and the unread MAP@100/MRR@100: not a run column
            continue
        got = table.loc[a.system, column[a.measure]]
        assert table.loc[a.system, "source"] == PUBLISHED
        if a.shown:
            assert got == round(a.value, 2), a
        else:
            assert math.isnan(got) and table.loc[a.system, "chiffre lu"].startswith("non lu"), a
    # a one-gold MTEB figure never lands in a recall column
    mteb = [a.system for a in ANCHORS if a.measure == "hit@100"]
    assert mteb and table.loc[mteb, ["R@100", "R@200", "R@500"]].isna().all().all()


def test_only_the_cutoffs_asked_for():
    table = beside_frame(pd.DataFrame({"recall@100": [0.5]}, index=["r"]), ks=(100,))
    assert [c for c in figure_columns(table) if c.startswith("R@")] == ["R@100"]
