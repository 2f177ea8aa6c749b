"""The Score page's comparisons: run A against run B question by question (the scatter, its click
that opens a question's drill-down) and the pairwise significance table, with the function and
settings of ``python -m bsard_demo compare`` (:data:`bsard_demo.evaluation.stats.STATS`), so the
page's numbers are the CLI's.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping, MutableMapping

import pandas as pd

from ..evaluation.scoring import Scoreboard
from ..evaluation.stats import STATS, TIE_TOL, StatsSettings, compare_measure, win_tie_loss
from . import french
from .charts import metric_label_fr
from .highlight import md_escape
from .score_drill import open_question
from .score_tables import shown_metrics


def comparison(board: Scoreboard, metric: str, *, settings: StatsSettings = STATS):
    """:func:`bsard_demo.evaluation.stats.compare_measure` of the usable runs on ``metric``: the function
    and settings (:data:`bsard_demo.evaluation.stats.STATS`) of ``python -m bsard_demo compare``, so the
    page's numbers are the CLI's. Made once per board, measure and settings
    (:meth:`~bsard_demo.evaluation.scoring.Scoreboard.memo`): every pair's permutation test, 10,000 sign
    vectors, is the same for every visitor of the board (shared: read it, never change it)."""
    return board.memo(("comparison", metric, settings), lambda: compare_measure(
        {n: ev.per_question for n, ev in board.evaluations.items()}, metric,
        n_resamples=settings.resamples, seed=settings.seed, alpha=settings.alpha))


def significant_label(settings: StatsSettings = STATS) -> str:
    """The comparison table's header of ``significant``: ``significatif (α = 0,05)``."""
    return f"significatif (α = {french.decimal(settings.alpha)})"


#: The pairwise table's column labels.
COMPARISON_LABELS = {
    "run_a": "run A", "run_b": "run B", "mean_a": "moyenne A", "mean_b": "moyenne B", "diff": "A − B",
    "wins": "A gagne", "ties": "égalités", "losses": "A perd", "p_permutation": "p permutation",
    "p_ttest": "p test t", "p_permutation_holm": "p permutation (Holm)", "p_ttest_holm": "p test t (Holm)",
    "significant": significant_label(),
}
#: The comparison's columns the page shows (the download has them all).
SHOWN_COMPARISON = ("run_a", "run_b", "significant", "diff", "p_permutation_holm", "mean_a", "mean_b", "wins", "ties",
                    "losses")  # the verdict first: on a phone the table scrolls sideways, the verdict stays in view
#: The shown comparison's narrow columns (the counts).
NARROW_COMPARISON = tuple(COMPARISON_LABELS[k] for k in ("wins", "ties", "losses"))


def comparison_shown(table: pd.DataFrame) -> pd.DataFrame:
    """The page's pairwise table: the columns of :data:`SHOWN_COMPARISON` ``table`` has, with their French labels."""
    return table[[c for c in SHOWN_COMPARISON if c in table.columns]].rename(columns=COMPARISON_LABELS)


def ab_summary(a: str, b: str, metric: str, view) -> str:
    """The line under the A-vs-B chart: who is better on how many questions (the pairwise comparison's counts)."""
    return (f"A = **{md_escape(a)}**, B = **{md_escape(b)}** · {md_escape(metric_label_fr(metric))} : "
            f"A meilleur sur **{view.wins}** questions, égalité sur **{view.ties}**, B meilleur sur "
            f"**{view.losses}** (les mêmes décomptes que la comparaison deux à deux).")


def permutation_caption(settings: StatsSettings = STATS) -> str:
    """The French caption under the comparison table, stating ``settings`` (resamples, seed, alpha)."""
    n = french.integer(settings.resamples)
    return (f"Test de permutation apparié ({n} tirages, graine {settings.seed}, p = (1 + #{{|T*| ≥ |T|}}) / (1 + {n}), "
            f"exact quand 2^m ≤ {n}) et test t apparié (scipy), p-valeurs corrigées par Holm sur toutes les paires ; "
            f"« significatif » : p permutation (Holm) < {french.decimal(settings.alpha)}. « A gagne / égalités / A "
            "perd » : nombre de questions où A fait mieux, pareil ou moins bien que B. Les mêmes nombres que "
            "`python -m bsard_demo compare`.")


#: Outcome of a question in the A-vs-B view (wins, ties, losses of A, as
#: :func:`bsard_demo.evaluation.stats.win_tie_loss`).
OUTCOMES = ("A meilleur", "égalité", "B meilleur")
#: The A-vs-B chart's point selection (its name in the Vega-Lite spec and in the selection state).
SELECTION = "question"


@dataclass(frozen=True)
class ABView:
    """Run A against run B on one measure, question by question: ``points`` has one row per
    question (``qid, category, question, run_a, run_b, a, b, outcome``, split order), ``wins`` /
    ``ties`` / ``losses`` are those of :func:`bsard_demo.evaluation.stats.win_tie_loss` (A above, equal to,
    below B), the comparison table's counts."""

    a: str
    b: str
    metric: str
    points: pd.DataFrame
    wins: int
    ties: int
    losses: int


def ab_view(board: Scoreboard, per_question_text: pd.DataFrame, a: str, b: str, metric: str) -> ABView:
    """The A-vs-B view of runs ``a`` and ``b`` (two different usable runs) on ``metric``; the counts
    are :func:`bsard_demo.evaluation.stats.win_tie_loss` of their per-question values, as in :func:`comparison`."""
    if a == b:
        raise ValueError("choose two different runs for A and B")
    evs = board.evaluations
    values_a = evs[a].per_question[metric]
    wins, ties, losses = win_tie_loss(values_a.to_numpy(dtype=float),
                                      evs[b].per_question[metric].reindex(values_a.index).to_numpy(dtype=float))
    cols = ["qid", "category", "question"]
    left = per_question_text[per_question_text["run"] == a][[c for c in cols if c in per_question_text] + [metric]]
    right = per_question_text[per_question_text["run"] == b][["qid", metric]]
    points = left.rename(columns={metric: "a"}).merge(right.rename(columns={metric: "b"}), on="qid", how="left")
    for c in ("category", "question"):
        if c not in points:
            points[c] = ""
    d = points["a"] - points["b"]
    points["outcome"] = [OUTCOMES[0] if x > TIE_TOL else OUTCOMES[2] if x < -TIE_TOL else OUTCOMES[1] for x in d]
    points.insert(3, "run_a", a)
    points.insert(4, "run_b", b)
    points = points[["qid", "category", "question", "run_a", "run_b", "a", "b", "outcome"]].reset_index(drop=True)
    return ABView(a, b, metric, points, wins, ties, losses)


def first_view(board: Scoreboard, a: str, b: str, metric: str, current: str | None) -> bool:
    """Whether runs ``a`` and ``b`` on ``metric``, question ``current`` ringed, is the A-vs-B view a
    visitor's first render of ``board`` shows: the page's defaults (the first two usable runs, the
    first measure offered), nothing ringed. It is the same for every visitor, so the page keeps it with
    the board (:func:`kept_ab_view`): one a board, where keeping every view would keep runs² × measures
    × questions of them."""
    runs = list(board.evaluations)
    return current is None and len(runs) >= 2 and (a, b, metric) == (runs[0], runs[1], shown_metrics(board)[0])


def kept_ab_view(board: Scoreboard, per_question_text: pd.DataFrame, a: str, b: str, metric: str) -> ABView:
    """:func:`ab_view`, made once per board and view (:meth:`~bsard_demo.evaluation.scoring.Scoreboard.memo`;
    for the :func:`first_view` only; shared: read it, never change it)."""
    return board.memo(("A-B view", a, b, metric), lambda: ab_view(board, per_question_text, a, b, metric))


def picked_qid(state, name: str = SELECTION) -> str | None:
    """The question id clicked in the A-vs-B chart: ``state`` is its selection state
    (``{"selection": {name: [{"qid": …}, …]}}``, empty when nothing is selected)."""
    try:
        points = state["selection"][name]
    except (KeyError, TypeError):
        return None
    if not isinstance(points, (list, tuple)):  # {} before any click
        return None
    for p in points:
        if isinstance(p, Mapping) and p.get("qid") is not None:
            return str(p["qid"])
    return None


def chart_key(view: ABView, current: str | None) -> str:
    """The A-vs-B chart's widget key: a new one whenever the runs, the measure or the question the
    drill-down shows change, so the chart's old selection is cleared and any click counts."""
    return "ab_chart_" + hashlib.sha256(repr((view.a, view.b, view.metric, current)).encode()).hexdigest()[:12]


def chart_clicked(session: MutableMapping, chart_key: str, view: ABView) -> None:
    """The A-vs-B chart's ``on_select`` callback: open the clicked question's drill-down (run A)."""
    qid = picked_qid(session.get(chart_key))
    if qid is None:
        return
    cats = dict(zip(view.points["qid"], view.points["category"]))
    if qid in cats:
        open_question(session, qid, run=view.a, category=cats[qid])
