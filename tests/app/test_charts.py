"""bsard_demo.app.charts: mark types, encodings and the data in the Vega-Lite spec, checked against
pandas computations made here."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bsard_demo.app import charts
from bsard_demo.evaluation import evaluate, recall_curve
from bsard_demo.evaluation.stats import metric_table_with_ci

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

CATEGORY_SIZES = {"Famille": 67, "Logement": 66, "Argent": 36, "Justice": 30, "Etrangers": 13, "Travail": 6,
                  "Protection sociale": 4}
RUNS = ["bm25", "dense", "hybride"]


def layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def mark(layer: dict) -> str:
    m = layer["mark"]
    return m if isinstance(m, str) else m["type"]


def values(spec: dict, layer: dict | None = None) -> pd.DataFrame:
    """The records a (layer of a) chart draws, from the spec's named datasets."""
    data = (layer or {}).get("data") or spec["data"]
    return pd.DataFrame(spec["datasets"][data["name"]])


def check_common(chart) -> dict:
    """Every chart: serialisable, container width, a tooltip on every mark; returns the spec."""
    assert chart.to_json()
    spec = chart.to_dict()
    assert spec["width"] == "container"
    for layer in layers(spec):
        assert layer["encoding"].get("tooltip"), f"no tooltip on {mark(layer)}"
    return spec


@pytest.fixture(scope="module")
def per_question() -> pd.DataFrame:
    """One row per (run, question): 222 questions with the test split's category sizes and
    metric values with many exact zeros and ones."""
    rng = np.random.default_rng(0)
    categories = [c for c, n in CATEGORY_SIZES.items() for _ in range(n)]
    rng.shuffle(categories)
    frames = []
    for run in RUNS:
        v = rng.integers(1, 5, 222) / rng.integers(1, 6, 222)
        v = np.minimum(v, 1.0)
        v[rng.random(222) < 0.4] = 0.0
        frames.append(pd.DataFrame({"run": run, "qid": [str(1000 + i) for i in range(222)], "category": categories,
                                    "recall@100": v, "map@100": v * rng.random(222)}))
    return pd.concat(frames, ignore_index=True)


def test_metric_label():
    assert [charts.metric_label_fr(m) for m in ("recall@100", "map@200", "mrr@500", "n_relevant")] == \
        ["Rappel@100", "MAP@200", "MRR@500", "n_relevant"]


# --- metric_bars ------------------------------------------------------------------------------

def test_metric_bars(per_question):
    table = metric_table_with_ci({run: g.set_index("qid") for run, g in per_question.groupby("run", sort=False)},
                                 ["recall@100", "map@100"], n_resamples=500)
    spec = check_common(charts.metric_bars(table))
    bars, rules = spec["layer"]
    assert (mark(bars), mark(rules)) == ("bar", "rule")
    enc = bars["encoding"]
    assert tuple(enc[c]["field"] for c in ("x", "xOffset", "y", "color")) == ("label", "run", "value", "run")
    assert enc["x"]["title"] == "Mesure" and enc["y"]["title"] == "Valeur"
    assert enc["x"]["sort"] == ["Rappel@100", "MAP@100"] and enc["color"]["sort"] == RUNS
    assert (rules["encoding"]["y"]["field"], rules["encoding"]["y2"]["field"]) == ("ci_low", "ci_high")
    drawn = values(spec)
    pd.testing.assert_frame_equal(drawn[["run", "metric", "value", "ci_low", "ci_high"]], table)
    assert drawn["label"].tolist() == [charts.metric_label_fr(m) for m in table["metric"]]
    tooltip_titles = [t["title"] for t in enc["tooltip"]]
    assert "IC 95\u202f% (bas)" in tooltip_titles


def test_metric_bars_rejects_wrong_frame():
    with pytest.raises(ValueError, match="ci_low"):
        charts.metric_bars(pd.DataFrame({"run": ["a"], "metric": ["recall@100"], "value": [0.5]}))


# --- recall_curve_chart -----------------------------------------------------------------------

def test_recall_curve_chart_from_recall_curve():
    rng = np.random.default_rng(1)
    qrels = {str(q): {f"d{q}", f"d{q + 3}"} for q in range(30)}
    docs = [f"d{i}" for i in range(700)]
    curves = []
    for run in RUNS[:2]:
        ranking = {q: list(rng.permutation(docs)) for q in qrels}
        curves.append(recall_curve(qrels, ranking, max_k=500).assign(run=run))
    df = pd.concat(curves, ignore_index=True)
    spec = check_common(charts.recall_curve_chart(df))
    assert [mark(layer) for layer in spec["layer"]] == ["line", "circle", "rule"]
    line, _, rule = spec["layer"]
    enc = line["encoding"]
    assert (enc["x"]["field"], enc["y"]["field"], enc["color"]["field"]) == ("k", "recall", "run")
    assert enc["y"]["title"] == "Rappel@k"
    drawn = values(spec, line)
    pd.testing.assert_frame_equal(drawn, df[["run", "k", "recall"]])
    assert sorted(drawn["k"].unique()) == list(range(1, 501))
    assert values(spec, rule)["k"].tolist() == [100, 200, 500]
    assert rule["encoding"]["x"]["field"] == "k"


def test_recall_curve_chart_drops_rules_outside_the_data():
    df = pd.DataFrame({"run": "a", "k": np.arange(1, 151), "recall": np.linspace(0, 0.5, 150)})
    spec = charts.recall_curve_chart(df).to_dict()
    assert values(spec, spec["layer"][2])["k"].tolist() == [100]
    short = df[df["k"] <= 50]
    assert [mark(layer) for layer in charts.recall_curve_chart(short).to_dict()["layer"]] == ["line", "circle"]


# --- category_breakdown -----------------------------------------------------------------------

def test_category_breakdown_means_and_counts(per_question):
    spec = check_common(charts.category_breakdown(per_question, "recall@100"))
    assert mark(spec) == "bar"
    enc = spec["encoding"]
    assert tuple(enc[c]["field"] for c in ("y", "yOffset", "x", "color")) == ("category", "run", "value", "run")
    assert enc["y"]["title"] == "Catégorie" and "Rappel@100" in enc["x"]["title"]
    assert enc["y"]["sort"] == list(CATEGORY_SIZES)  # by decreasing number of questions
    assert {"field": "questions", "type": "quantitative", "title": "Questions"} in enc["tooltip"]
    drawn = values(spec).set_index(["run", "category"])
    expected = per_question.groupby(["run", "category"])["recall@100"].mean()
    assert len(drawn) == len(expected) == len(RUNS) * len(CATEGORY_SIZES)
    for key, mean in expected.items():
        assert drawn.loc[key, "value"] == pytest.approx(mean)
        assert drawn.loc[key, "questions"] == CATEGORY_SIZES[key[1]]


def test_category_breakdown_on_real_test_split(real_bsard):
    questions = real_bsard.questions("test")
    qrels = real_bsard.qrels("test")
    # a run that finds every gold article of every other question and nothing for the rest
    run = {q: sorted(qrels[q]) for i, q in enumerate(qrels) if i % 2 == 0}
    pq = evaluate(qrels, run).per_question
    categories = questions.set_index("id")["category"]
    df = pd.DataFrame({"run": "oracle/2", "qid": pq.index, "category": categories.loc[pq.index].to_numpy(),
                       "recall@100": pq["recall@100"].to_numpy()})
    drawn = values(charts.category_breakdown(df, "recall@100").to_dict())
    assert dict(zip(drawn["category"], drawn["questions"])) == CATEGORY_SIZES
    assert drawn["category"].tolist() == list(CATEGORY_SIZES)
    found = {c: sum(1 for i, q in enumerate(qrels) if i % 2 == 0 and categories[q] == c) for c in CATEGORY_SIZES}
    for row in drawn.itertuples():
        assert row.value == pytest.approx(found[row.category] / CATEGORY_SIZES[row.category])


def test_category_breakdown_rejects_missing_metric(per_question):
    with pytest.raises(ValueError, match="mrr@100"):
        charts.category_breakdown(per_question, "mrr@100")


# --- per_question_distribution ----------------------------------------------------------------

def test_per_question_distribution_counts(per_question):
    spec = check_common(charts.per_question_distribution(per_question, "recall@100"))
    assert mark(spec) == "bar"
    enc = spec["encoding"]
    assert tuple(enc[c]["field"] for c in ("x", "xOffset", "y", "color")) == ("bin", "run", "questions", "run")
    assert enc["y"]["title"] == "Nombre de questions" and enc["x"]["sort"] == list(charts.BIN_LABELS)
    drawn = values(spec)
    assert len(drawn) == len(RUNS) * 7
    for run, group in per_question.groupby("run"):
        v = group["recall@100"].to_numpy()
        expected = [
            (v == 0).sum(),
            ((v > 0) & (v <= 0.2)).sum(), ((v > 0.2) & (v <= 0.4)).sum(), ((v > 0.4) & (v <= 0.6)).sum(),
            ((v > 0.6) & (v <= 0.8)).sum(), ((v > 0.8) & (v < 1)).sum(), (v == 1).sum(),
        ]
        mine = drawn[drawn["run"] == run].sort_values("order")
        assert mine["questions"].tolist() == expected
        assert mine["share"].to_numpy() == pytest.approx(np.array(expected) / 222)
        assert sum(expected) == 222 and expected[0] > 50  # the fixture's many zeros get their own bar


def test_distribution_bin_edges():
    df = pd.DataFrame({"run": "a", "qid": list("abcdefghij"),
                       "m": [0.0, 1e-6, 0.2, 0.2 + 1e-6, 0.4, 0.6, 0.8, 0.8 + 1e-6, 1 - 1e-6, 1.0]})
    bins = charts.distribution_bins(df, "m")
    assert bins["questions"].tolist() == [1, 2, 2, 1, 1, 2, 1]


def test_per_question_distribution_rejects_out_of_range_values():
    df = pd.DataFrame({"run": "a", "qid": ["1", "2"], "n_retrieved": [3.0, 500.0]})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        charts.per_question_distribution(df, "n_retrieved")


def test_charts_do_not_import_streamlit():
    code = "import sys, bsard_demo.app.charts; assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_measure_is_in_percent_with_french_numbers():
    table = pd.DataFrame({"run": ["a"], "metric": ["recall@100"], "value": [0.5], "ci_low": [0.4], "ci_high": [0.6]})
    spec = charts.french_chart(charts.metric_bars(table)).to_dict()
    assert spec["config"]["locale"]["number"]["decimal"] == ","
    assert spec["layer"][0]["encoding"]["y"]["axis"]["format"] == "%" or \
        spec["layer"][0]["encoding"]["y"]["axis"]["format"].endswith("%")
    assert charts.VALUE_FORMAT.endswith("%") and charts.BIN_LABELS[-1] == "100 %"
