"""Tied scores, told once and usefully: every run is ordered by trec_eval's tie rule (article id descending);
a file whose ranks order tied articles otherwise (``Run.file_order``, kept by the reader) gets the
``tie_order`` warning only when its own order would change a figure of the measures computed, with by how
much (:func:`tie_effect`, :func:`add_tie_warning`). Ties that move no figure (float32 scores written by ranx:
every question tied, nothing changed) get no warning; :func:`tie_note` is the one line a front end may say.
"""
from __future__ import annotations

from typing import Mapping

from ..runs import ProblemList, Run
from .aggregate import Evaluation, evaluate
from .measures import column_label

#: Figures are shown in % with two decimals: a change that does not move one of them is no change of figure
#: (on frlaw-dev, bm25 scores cast to float32 and written by ranx: 140 of 150 questions ranked ties otherwise,
#: and the only mean that moved was MAP@1000, by less than 0.005 points).
DECIMALS = 2
#: The rule, as every front end words it.
TIE_RULE = "tied scores are ordered by article id descending (trec_eval's rule)"


def tied_questions(run: Run) -> int:
    """How many questions have two articles with the same score."""
    if not run.scores:
        return 0
    return sum(1 for qid, docs in run.rankings.items() if len(set(run.scores.get(qid) or ())) < len(docs))


def tie_effect(qrels: Mapping[str, frozenset[str]], run: Run, evaluation: Evaluation,
               gains: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float]:
    """How each mean of ``evaluation`` would move (file order minus ours, as a fraction) if the questions of
    ``run.file_order`` kept the file's own order of their tied articles; only the measures whose figure, in %
    with :data:`DECIMALS` decimals, changes."""
    alt = {q: docs for q, docs in (run.file_order or {}).items() if qrels.get(q)}
    n = len(evaluation.per_question)
    if not alt or not n:
        return {}
    other = evaluate({q: qrels[q] for q in alt}, alt, evaluation.ks, gains=gains)
    ours = evaluation.per_question.loc[list(other.per_question.index)]
    moved = {}
    for column, mean in evaluation.means.items():
        delta = float((other.per_question[column] - ours[column]).sum()) / n
        if round(100 * (mean + delta), DECIMALS) != round(100 * mean, DECIMALS):
            moved[column] = delta
    return moved


def add_tie_warning(problems: ProblemList, run: Run, moved: Mapping[str, float]) -> None:
    """The ``tie_order`` warning when ``moved`` (:func:`tie_effect`) is not empty: the rule, then the measures
    that the file's own order would change, largest first, in points."""
    if not moved:
        return
    shown = sorted(moved.items(), key=lambda kv: -abs(kv[1]))[:4]
    figures = ", ".join(f"{column_label(c)} {100 * d:+.2f}" for c, d in shown)
    more = f" and {len(moved) - len(shown)} more" if len(moved) > len(shown) else ""
    problems.warning("tie_order", f"{len(run.file_order or ())} question(s) rank tied scores otherwise than here: "
                                  f"{TIE_RULE}; the file's own order would give {figures}{more} points",
                     kind="tie_order")


def tie_note(run: Run) -> str | None:
    """The one line said of a run with tied scores (``None`` without): how many questions, the rule, and, when
    the file ranked some ties otherwise, that its order moves no figure (else ``tie_order`` says by how much)."""
    n = tied_questions(run)
    if not n:
        return None
    other = len(run.file_order or ())
    return f"{n} question(s) have tied scores: {TIE_RULE}" + (
        f"; the file ranks them otherwise in {other}, which moves no figure shown" if other else "")
