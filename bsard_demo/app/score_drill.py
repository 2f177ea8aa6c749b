"""The Score page's drill-down: one question seen through one run (its gold articles with their rank
in every run, the run's first articles, the articles' text), and the session keys of its widgets,
which the A-vs-B chart sets (:func:`open_question`).

An article's text is shown up to :data:`ARTICLE_PREVIEW` characters, the rest behind an expander; the
last :data:`KEPT_TEXTS` texts drawn are kept per process (:func:`article_text_html`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, MutableMapping

import pandas as pd

from ..dataset import Dataset
from ..evaluation import gold_ranks
from ..evaluation.measures import is_measure_column
from ..runs import Run, quote
from .charts import metric_label_fr
from .highlight import highlight_html, md_escape

#: Session keys of the drill-down widgets (a click on the A-vs-B chart sets them).
DD_QID, DD_RUN, PQ_FILTER = "dd_qid", "dd_run", "pq_categories"
#: The per-question table's column labels.
PER_QUESTION_LABELS = {"run": "run", "qid": "question", "category": "catégorie", "question": "texte",
                       "n_relevant": "pertinents", "n_retrieved": "retournés", "missing": "absente du run"}


def open_question(session: MutableMapping, qid: str, *, run: str | None = None, category: str | None = None) -> None:
    """Show question ``qid`` (as seen by ``run``) in the drill-down: set its widgets' state, and
    clear the category filter when it hides that question's ``category``."""
    chosen = session.get(PQ_FILTER) or []
    if chosen and category not in chosen:
        session[PQ_FILTER] = []
    session[DD_QID] = qid
    if run is not None:
        session[DD_RUN] = run


@dataclass(frozen=True)
class GoldRow:
    article_id: str
    reference: str
    rank: int | None
    text: str = ""


@dataclass(frozen=True)
class TopRow:
    rank: int
    article_id: str
    score: float | None
    reference: str
    gold: bool


@dataclass(frozen=True)
class DrillDown:
    """One question seen through one run."""

    qid: str
    question: str
    category: str
    gold: list[GoldRow]
    top: list[TopRow]
    in_run: bool


def drill_down(dataset: Dataset, split: str, qid: str, run: Run, top: int = 20) -> DrillDown:
    """The question, its gold articles with their rank in ``run`` (``None`` when absent) and the
    run's ``top`` first articles; references come from the corpus when it is loaded ("" else)."""
    q = dataset.questions(split)
    row = q[q["id"] == qid]
    if row.empty:
        raise KeyError(f"no question {qid!r} in split {split!r}")
    row = row.iloc[0]
    gold_ids = list(row["article_ids"])
    ranking = run.get(qid, ())
    ranks = gold_ranks(gold_ids, ranking)
    gold_set = set(gold_ids)
    return DrillDown(
        qid=qid, question=str(row["question"]), category=str(row["category"]),
        gold=[GoldRow(a, article_reference(dataset, a), ranks[a], _text(dataset, a)) for a in gold_ids],
        top=[TopRow(i, doc, score if score == score else None, article_reference(dataset, doc), doc in gold_set)
             for i, (doc, score) in enumerate(run.scored(qid)[:top], 1)],
        in_run=qid in run,
    )


def per_question_headers(shown: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The per-question table's measure columns, and the French header of each of its columns that has one."""
    measures = [c for c in shown.columns if is_measure_column(c)]
    headers = {c: metric_label_fr(c) for c in measures}
    headers.update({c: label for c, label in PER_QUESTION_LABELS.items() if c in shown.columns})
    return measures, headers

def gold_heading(g: GoldRow, run_name: str, notes: Mapping[str, str]) -> str:
    """The Markdown line above a gold article's text: its reference, id, rank in ``run_name`` and where the run's
    nearest article stands (``notes``, by article id)."""
    return (f"**{md_escape(g.reference or 'Article ' + g.article_id)}** · id {md_escape(g.article_id)}"
            + (" · rang " + str(g.rank) if g.rank is not None else " · absent du run")
            + f" dans « {md_escape(run_name)} »"
            + (f" · {md_escape(notes[g.article_id])}" if g.article_id in notes else ""))


def top_frame(dd: DrillDown) -> pd.DataFrame:
    """The run's first articles for the question, one row each (rank, article, score, reference, gold)."""
    return pd.DataFrame([{"rang": r.rank, "article": quote(r.article_id, marks=False),  # a 40 MB id: 80 characters
                          "score": r.score, "référence": r.reference, "pertinent": r.gold} for r in dd.top],
                        columns=["rang", "article", "score", "référence", "pertinent"])


def article_reference(dataset: Dataset, article_id: str) -> str:
    """An article's reference in the corpus ("" when it is not there or the corpus is not loaded)."""
    art = dataset.article(article_id)
    return "" if art is None else str(art.get("reference", "") or "")


def _text(dataset: Dataset, article_id: str) -> str:
    art = dataset.article(article_id)
    return "" if art is None else str(art.get("article", "") or "")


#: Column of :func:`gold_ranks_frame` holding a run's ranks; "—" marks an article absent from the run.
RANK_PREFIX, ABSENT = "rang · ", "—"


def gold_ranks_frame(dd: DrillDown, runs: Mapping[str, Run]) -> pd.DataFrame:
    """The gold articles of a drill-down with their rank in every run: columns ``article``,
    ``référence``, then ``rang · <run>`` per run (in order; ``—`` when the article is not in that
    run's ranking, whatever its depth)."""
    rows = []
    ranked = {name: gold_ranks([g.article_id for g in dd.gold], run.get(dd.qid, ())) for name, run in runs.items()}
    for g in dd.gold:
        row = {"article": g.article_id, "référence": g.reference}
        for name, ranks in ranked.items():
            row[RANK_PREFIX + name] = ABSENT if ranks[g.article_id] is None else str(ranks[g.article_id])
        rows.append(row)
    return pd.DataFrame(rows, columns=["article", "référence"] + [RANK_PREFIX + n for n in runs])


#: Characters of an article shown before "…" (the whole text is behind an expander).
ARTICLE_PREVIEW = 500


#: Articles' HTML kept per process (:func:`article_text_html`): every visitor who opens the Score page sees
#: the first question's gold articles, twice each (preview and whole text).
KEPT_TEXTS = 64


def article_text_html(text: str, terms=(), *, max_chars: int | None = ARTICLE_PREVIEW) -> str:
    """An article's text as an escaped HTML fragment (``<div class="bsard-text">``, the
    question's terms in ``<mark>``), cut after about ``max_chars`` characters (None: whole); the last
    :data:`KEPT_TEXTS` are kept, so a second visitor's drill-down does not highlight them again."""
    return _text_html("" if text is None else str(text), frozenset(terms), max_chars)


@lru_cache(maxsize=KEPT_TEXTS)
def _text_html(text: str, terms: frozenset, max_chars: int | None) -> str:
    return f'<div class="bsard-text">{highlight_html(text, terms, max_chars=max_chars)}</div>'


def is_long(text: str, max_chars: int = ARTICLE_PREVIEW) -> bool:
    """Whether :func:`article_text_html` shortens ``text``."""
    return len(text or "") > max_chars
