"""Altair charts of the Score page: DataFrame in, chart out (no Streamlit here).

Conventions: labels are in French; runs keep the order in which they first appear in the input
(colour legend and bar order); every chart is ``width="container"`` and has tooltips; the data
each chart draws is the pandas frame documented in its docstring (aggregates are computed here
in pandas, by :func:`category_means` and :func:`distribution_bins`, not by Vega transforms), so
what the chart shows can be checked from ``chart.to_dict()``. Metric columns are renamed to
``value`` inside the charts: names like ``recall@100`` are awkward as Vega-Lite field names.
"""
from __future__ import annotations

from typing import Sequence

import altair as alt
import numpy as np
import pandas as pd

from ..evaluation import DEFAULT_KS
from ..evaluation.measures import column_label
from . import french

RUN_TITLE = "Système"
#: Every measure in %, as the measures table: d3's format, in :data:`FRENCH_NUMBERS`' marks.
VALUE_FORMAT = ".1%"
_AXIS_PERCENT = ".0%"
#: Vega-Lite's number locale for French (:func:`french_chart`): decimal comma, narrow no-break spaces.
FRENCH_NUMBERS = {"decimal": ",", "thousands": french.THIN, "grouping": [3], "currency": ["", f"{french.THIN}€"],
                  "percent": f"{french.THIN}%"}
#: Category labels of a crowded axis turned so that each is read on a phone (390 px).
_SLANTED = {"labelAngle": -40, "labelOverlap": False, "labelLimit": 140}
#: k at which :func:`recall_curve_chart` draws vertical rules (the reported cutoffs).
CUTOFFS = DEFAULT_KS
#: Bins of :func:`distribution_bins`: exactly 0, five intervals, exactly 1 (labels in French).
BIN_LABELS = ("0 %", "]0 ; 20 %]", "]20 ; 40 %]", "]40 ; 60 %]", "]60 ; 80 %]", "]80 ; 100 %[", "100 %")
_BIN_TOL = 1e-12


def french_chart(chart):
    """``chart`` with French numbers (:data:`FRENCH_NUMBERS`): « 12,5 % », « 1 000 »."""
    return chart.configure(locale={"number": FRENCH_NUMBERS})


def metric_label_fr(metric: str) -> str:
    """French display name (:attr:`bsard_demo.evaluation.measures.Measure.label_fr`): ``recall@100`` →
    ``Rappel@100``, ``map@100`` → ``MAP@100``, ``mrr@100`` → ``MRR@100``; other names unchanged."""
    return column_label(metric, french=True)


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    absent = [c for c in columns if c not in df.columns]
    if absent:
        raise ValueError(f"{what}: missing column(s) {', '.join(map(repr, absent))}; expected {', '.join(columns)}")


def _runs(df: pd.DataFrame) -> list[str]:
    return [str(r) for r in pd.unique(df["run"])]


def _metric_values(df: pd.DataFrame, metric: str, what: str) -> pd.Series:
    values = pd.to_numeric(df[metric], errors="coerce")
    if values.isna().any():
        raise ValueError(f"{what}: column {metric!r} has missing or non-numeric values")
    return values.astype(float)


def metric_bars(df: pd.DataFrame, *, confidence: float = 0.95) -> alt.LayerChart:
    """Grouped bars of each metric per run, with the bootstrap interval as an error bar.

    Expects the long table of :func:`bsard_demo.evaluation.stats.metric_table_with_ci`: columns ``run,
    metric, value, ci_low, ci_high`` (one row per run and metric). Metrics appear along x in
    input order (French labels, column ``label``), one bar per run inside each group.
    ``confidence`` only labels the tooltip.
    """
    _require(df, ["run", "metric", "value", "ci_low", "ci_high"], "metric_bars")
    data = df[["run", "metric", "value", "ci_low", "ci_high"]].copy()
    data["run"] = data["run"].astype(str)
    data["label"] = data["metric"].map(metric_label_fr)
    runs = _runs(data)
    labels = list(pd.unique(data["label"]))
    ci = f"IC {french.percent(confidence)}"
    tooltip = [
        alt.Tooltip("run:N", title=RUN_TITLE),
        alt.Tooltip("label:N", title="Mesure"),
        alt.Tooltip("value:Q", title="Valeur", format=VALUE_FORMAT),
        alt.Tooltip("ci_low:Q", title=f"{ci} (bas)", format=VALUE_FORMAT),
        alt.Tooltip("ci_high:Q", title=f"{ci} (haut)", format=VALUE_FORMAT),
    ]
    base = alt.Chart(data).encode(
        x=alt.X("label:N", title="Mesure", sort=labels, axis=alt.Axis(**_SLANTED)),
        xOffset=alt.XOffset("run:N", sort=runs),
        tooltip=tooltip,
    )
    bars = base.mark_bar().encode(
        y=alt.Y("value:Q", title="Valeur", axis=alt.Axis(format=_AXIS_PERCENT)),
        color=alt.Color("run:N", title=RUN_TITLE, sort=runs),
    )
    errors = base.mark_rule(color="black", strokeWidth=1.5).encode(y="ci_low:Q", y2="ci_high:Q")
    return alt.layer(bars, errors).properties(width="container", height=320)


def recall_curve_chart(df: pd.DataFrame, *, cutoffs: Sequence[int] = CUTOFFS) -> alt.LayerChart:
    """Macro recall@k against k, one line per run, with dashed vertical rules at ``cutoffs``.

    Expects columns ``run, k, recall`` (e.g. :func:`bsard_demo.evaluation.recall_curve` with a
    ``run`` column added, k = 1 … 500). Rules outside the range of ``k`` in the data are left out.
    Invisible points on the lines carry the tooltip of each (run, k).
    """
    _require(df, ["run", "k", "recall"], "recall_curve_chart")
    data = df[["run", "k", "recall"]].copy()
    data["run"] = data["run"].astype(str)
    runs = _runs(data)
    x = alt.X("k:Q", title="Nombre d'articles retournés (k)", scale=alt.Scale(nice=False))
    y = alt.Y("recall:Q", title="Rappel@k", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=_AXIS_PERCENT))
    color = alt.Color("run:N", title=RUN_TITLE, sort=runs)
    tooltip = [
        alt.Tooltip("run:N", title=RUN_TITLE),
        alt.Tooltip("k:Q", title="k"),
        alt.Tooltip("recall:Q", title="Rappel@k", format=VALUE_FORMAT),
    ]
    lines = alt.Chart(data).mark_line().encode(x=x, y=y, color=color, tooltip=tooltip)
    points = alt.Chart(data).mark_circle(opacity=0, size=40).encode(x=x, y=y, color=color, tooltip=tooltip)
    layers = [lines, points]
    if len(data):
        low, high = data["k"].min(), data["k"].max()
        marks = pd.DataFrame({"k": [int(k) for k in cutoffs if low <= k <= high]})
        if len(marks):
            layers.append(alt.Chart(marks).mark_rule(strokeDash=[4, 4], color="gray").encode(
                x=alt.X("k:Q"), tooltip=[alt.Tooltip("k:Q", title="Seuil k")]))
    return alt.layer(*layers).properties(width="container", height=360)


def category_means(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Mean of ``metric`` per run and category, with the number of questions behind each mean.

    Expects one row per (run, question) with columns ``run, category, <metric>``; returns columns
    ``run, category, value, questions``, runs in input order and categories by decreasing number
    of questions (then by name).
    """
    _require(df, ["run", "category", metric], "category_breakdown")
    data = pd.DataFrame({
        "run": df["run"].astype(str).to_numpy(),
        "category": df["category"].astype(str).to_numpy(),
        "value": _metric_values(df, metric, "category_breakdown").to_numpy(),
    })
    runs = _runs(data)
    grouped = data.groupby(["run", "category"], sort=False)["value"].agg(["mean", "size"]).reset_index()
    grouped = grouped.rename(columns={"mean": "value", "size": "questions"})
    sizes = grouped.groupby("category")["questions"].max()
    categories = sorted(sizes.index, key=lambda c: (-sizes[c], c))
    grouped["run"] = pd.Categorical(grouped["run"], categories=runs, ordered=True)
    grouped["category"] = pd.Categorical(grouped["category"], categories=categories, ordered=True)
    grouped = grouped.sort_values(["category", "run"]).reset_index(drop=True)
    grouped["run"] = grouped["run"].astype(str)
    grouped["category"] = grouped["category"].astype(str)
    grouped["questions"] = grouped["questions"].astype(int)
    return grouped[["run", "category", "value", "questions"]]


def category_breakdown(df: pd.DataFrame, metric: str) -> alt.Chart:
    """Horizontal grouped bars: mean of ``metric`` per category (y) and run (colour).

    Expects per-question rows with columns ``run, category, <metric>``; the chart draws
    :func:`category_means` (columns ``run, category, value, questions``), and the tooltip gives
    the number of questions of each category.
    """
    data = category_means(df, metric)
    runs = _runs(data)
    categories = list(pd.unique(data["category"]))
    label = metric_label_fr(metric)
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y("category:N", title="Catégorie", sort=categories),
        yOffset=alt.YOffset("run:N", sort=runs),
        x=alt.X("value:Q", title=f"{label} (moyenne par catégorie)", axis=alt.Axis(tickCount=5, format=_AXIS_PERCENT)),
        color=alt.Color("run:N", title=RUN_TITLE, sort=runs),
        tooltip=[
            alt.Tooltip("run:N", title=RUN_TITLE),
            alt.Tooltip("category:N", title="Catégorie"),
            alt.Tooltip("value:Q", title=f"{label} moyen", format=VALUE_FORMAT),
            alt.Tooltip("questions:Q", title="Questions"),
        ],
    ).properties(width="container", height=alt.Step(14, **{"for": "offset"}))


def distribution_bins(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Number of questions per run in each bin of :data:`BIN_LABELS`.

    Expects one row per (run, question) with columns ``run, <metric>`` (values in [0, 1]). Bins:
    exactly 0, ]0 ; 0,2], ]0,2 ; 0,4], ]0,4 ; 0,6], ]0,6 ; 0,8], ]0,8 ; 1[, exactly 1 (0 and 1
    within 1e-12). Returns columns ``run, bin, order, questions, share`` with every bin present
    for every run (count 0 included), ``share`` = questions / questions of the run.
    """
    _require(df, ["run", metric], "per_question_distribution")
    values = _metric_values(df, metric, "per_question_distribution").to_numpy()
    if np.any((values < -_BIN_TOL) | (values > 1 + _BIN_TOL)):
        raise ValueError(f"per_question_distribution: {metric!r} values must lie in [0, 1]")
    inner = np.clip(np.ceil(values / 0.2 - 1e-9).astype(int), 1, 5)
    order = np.where(values <= _BIN_TOL, 0, np.where(values >= 1 - _BIN_TOL, 6, inner))
    data = pd.DataFrame({"run": df["run"].astype(str).to_numpy(), "order": order})
    runs = _runs(data)
    counts = data.groupby(["run", "order"]).size()
    rows = []
    for run in runs:
        total = int((data["run"] == run).sum())
        for i, label in enumerate(BIN_LABELS):
            n = int(counts.get((run, i), 0))
            rows.append({"run": run, "bin": label, "order": i, "questions": n, "share": n / total})
    return pd.DataFrame(rows, columns=["run", "bin", "order", "questions", "share"])


def per_question_distribution(df: pd.DataFrame, metric: str) -> alt.Chart:
    """Histogram of the per-question values of ``metric``, one bar per run in each bin.

    Expects columns ``run, qid, <metric>`` (one row per run and question; ``qid`` is not drawn).
    Exact 0 (nothing found) and exact 1 get their own bins so that the many zeros stay readable
    next to the intermediate values; the chart draws :func:`distribution_bins`.
    """
    _require(df, ["run", "qid", metric], "per_question_distribution")
    data = distribution_bins(df, metric)
    runs = _runs(data)
    label = metric_label_fr(metric)
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("bin:N", title=f"{label} par question", sort=list(BIN_LABELS), axis=alt.Axis(**_SLANTED)),
        xOffset=alt.XOffset("run:N", sort=runs),
        y=alt.Y("questions:Q", title="Nombre de questions"),
        color=alt.Color("run:N", title=RUN_TITLE, sort=runs),
        tooltip=[
            alt.Tooltip("run:N", title=RUN_TITLE),
            alt.Tooltip("bin:N", title=label),
            alt.Tooltip("questions:Q", title="Questions"),
            alt.Tooltip("share:Q", title="Part des questions", format=".1%"),
        ],
    ).properties(width="container", height=320)


#: Colours of the A-vs-B outcomes (A better, tie, B better).
OUTCOME_COLOURS = ("#2e7d32", "#9e9e9e", "#c62828")


def ab_scatter(points: pd.DataFrame, metric: str, *, current: str | None = None, selection: str = "question",
               outcomes: Sequence[str] = ("A meilleur", "égalité", "B meilleur")) -> alt.LayerChart:
    """Run A (x) against run B (y) on ``metric``, one point per question, with the diagonal.

    Expects :class:`bsard_demo.app.score_page.ABView`'s ``points``: columns ``qid, category,
    question, run_a, run_b, a, b, outcome``. Points are coloured by ``outcome`` (in ``outcomes``
    order) and carry a point selection named ``selection`` on the ``qid`` field (a click selects
    one question: the page opens its drill-down). ``current`` (a qid) is ringed: the question the
    drill-down shows. Run names and question texts are data (tooltips), never titles.
    """
    _require(points, ["qid", "category", "question", "run_a", "run_b", "a", "b", "outcome"], "ab_scatter")
    data = points[["qid", "category", "question", "run_a", "run_b", "a", "b", "outcome"]].copy()
    for c in ("qid", "category", "question", "run_a", "run_b", "outcome"):
        data[c] = data[c].astype(str)
    data["a"] = _metric_values(data, "a", "ab_scatter")
    data["b"] = _metric_values(data, "b", "ab_scatter")
    label = metric_label_fr(metric)
    scale = alt.Scale(domain=[0, 1], nice=False)
    x = alt.X("a:Q", title=f"{label} du run A", scale=scale, axis=alt.Axis(format=_AXIS_PERCENT))
    y = alt.Y("b:Q", title=f"{label} du run B", scale=scale, axis=alt.Axis(format=_AXIS_PERCENT))
    pick = alt.selection_point(name=selection, fields=["qid"], on="click", clear="dblclick")
    tooltip = [
        alt.Tooltip("qid:N", title="Question n°"),
        alt.Tooltip("category:N", title="Catégorie"),
        alt.Tooltip("question:N", title="Texte"),
        alt.Tooltip("run_a:N", title="Run A"),
        alt.Tooltip("a:Q", title=f"{label} A", format=VALUE_FORMAT),
        alt.Tooltip("run_b:N", title="Run B"),
        alt.Tooltip("b:Q", title=f"{label} B", format=VALUE_FORMAT),
    ]
    dots = alt.Chart(data).mark_circle(size=70).encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("outcome:N", title="Résultat", sort=list(outcomes),
                        scale=alt.Scale(domain=list(outcomes), range=list(OUTCOME_COLOURS))),
        opacity=alt.condition(pick, alt.value(0.85), alt.value(0.35)),
    ).add_params(pick)
    diagonal = alt.Chart(pd.DataFrame({"a": [0.0, 1.0], "b": [0.0, 1.0]})).mark_line(
        color="gray", strokeDash=[4, 4]).encode(x="a:Q", y="b:Q")
    layers = [diagonal, dots]
    ring = data[data["qid"] == str(current)] if current is not None else data.iloc[0:0]
    if len(ring):
        layers.append(alt.Chart(ring).mark_point(size=260, filled=False, color="black", strokeWidth=2)
                      .encode(x=x, y=y, tooltip=tooltip))
    return alt.layer(*layers).properties(width="container", height=380)


#: Colours of the classes of a miss, nearest (green: a near miss) to farthest (grey: not in the corpus).
MISS_COLOURS = ("#2e7d32", "#7cb342", "#fbc02d", "#fb8c00", "#c62828", "#9e9e9e")


#: The legend of the misses' charts goes under them: at the right it leaves no width for the bars on a phone.
BOTTOM_LEGEND = alt.Legend(orient="bottom", columns=1, labelLimit=260, symbolLimit=0)


def _miss_colour(labels: Sequence[str]) -> alt.Color:
    return alt.Color("class:N", title="Où tombe le raté", sort=list(labels), legend=BOTTOM_LEGEND,
                     scale=alt.Scale(domain=list(labels), range=list(MISS_COLOURS[:len(labels)])))


def misses_bars(df: pd.DataFrame, labels: Sequence[str]) -> alt.Chart:
    """Where each run's misses land: one horizontal bar per run (y), split by class (``labels`` order,
    nearest first) into its share of the run's misses.

    Expects :func:`bsard_demo.app.score_misses.misses_frame`: columns ``run, class, order, count, share,
    missed``; runs in input order; the tooltip gives the count and the run's misses."""
    _require(df, ["run", "class", "order", "count", "share", "missed"], "misses_bars")
    data = df[["run", "class", "order", "count", "share", "missed"]].copy()
    data["run"] = data["run"].astype(str)
    runs = _runs(data)
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y("run:N", title=None, sort=runs, axis=alt.Axis(labelLimit=160)),
        x=alt.X("share:Q", title="Part des articles pertinents manqués", stack="zero",
                axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
        color=_miss_colour(labels), order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("run:N", title=RUN_TITLE), alt.Tooltip("class:N", title="Où"),
                 alt.Tooltip("count:Q", title="Articles manqués"), alt.Tooltip("share:Q", title="Part", format=".1%"),
                 alt.Tooltip("missed:Q", title="Manqués en tout")],
    ).properties(width="container", height=alt.Step(28))


def misses_ab(df: pd.DataFrame, labels: Sequence[str]) -> alt.Chart:
    """Run A against run B: for each class (y, ``labels`` order, nearest first), the number of gold articles
    each run misses there (one horizontal bar per run: the class names stay readable on a phone). Expects
    :func:`bsard_demo.app.score_misses.misses_frame` of the two runs."""
    _require(df, ["run", "class", "count", "share"], "misses_ab")
    data = df[["run", "class", "count", "share"]].copy()
    data["run"] = data["run"].astype(str)
    runs = _runs(data)
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y("class:N", title=None, sort=list(labels), axis=alt.Axis(labelLimit=170)),
        yOffset=alt.YOffset("run:N", sort=runs),
        x=alt.X("count:Q", title="Articles pertinents manqués", axis=alt.Axis(tickCount=4)),
        color=alt.Color("run:N", title=RUN_TITLE, sort=runs, legend=BOTTOM_LEGEND),
        tooltip=[alt.Tooltip("run:N", title=RUN_TITLE), alt.Tooltip("class:N", title="Où"),
                 alt.Tooltip("count:Q", title="Articles manqués"), alt.Tooltip("share:Q", title="Part", format=".1%")],
    ).properties(width="container", height=alt.Step(14, **{"for": "offset"}))
