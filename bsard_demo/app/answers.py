"""The Search page's answers for a citizen (``pages/search.py``): the already answered training questions
the neighbours part drew on (« Questions proches déjà traitées », the ``PANEL_TOP`` closest of those at least
``DEFAULT_MIN_SIMILARITY`` similar, or the one line of :func:`panel_reason`), why each hybrid
hit is there (a why-line), and the results to take away (CSV, Markdown).

Conventions: docs/design.md, 'bsard_demo/app/answers.py'.
"""
from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from ..dataset import Dataset
from ..evaluation.report import formula_safe
from ..retrievers.base import Retriever
from ..retrievers.hybrid import first_ranks
from ..retrievers.kinds import BM25, HYBRID, NEIGHBOURS_KIND
from ..retrievers.neighbours import (
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_SPLIT,
    NEIGHBOURS,
    Neighbour,
    NeighboursRetriever,
    labelled_questions,
)
from ..retrievers.ranker import ADAPTER_INPUT, ADAPTER_INPUTS
from ..retrievers.registry import BASE_PART
from .search_page import ColumnResult, breadcrumb_text, describe_article

#: How many training questions the panel shows.
PANEL_TOP = 5
PANEL_TITLE = "Questions proches déjà traitées"
_HYBRID_WORD = HYBRID.label
#: How a part of a hybrid or of the learned ranker is named in a why-line (other parts by their encoder key): a query
#: adapter ``adaptateur``, the ranker's adapter on another base than ``use`` ``adaptateur e5``.
PART_WORDS = {BASE_PART: BM25.label, ADAPTER_INPUT: "adaptateur",
              **{s: f"adaptateur {b}" for b, s in ADAPTER_INPUTS.items() if s != ADAPTER_INPUT}}


@dataclass(frozen=True)
class CitedArticle:
    """An article a training question cites; ``shown``: ``(column, rank)`` of every column whose
    displayed hits hold it."""

    article_id: str
    reference: str
    breadcrumb: tuple[str, ...]
    in_corpus: bool
    shown: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SimilarQuestion:
    """A training question of the panel; ``similarity``: 0–1 (:class:`~bsard_demo.retrievers.neighbours.SelfScores`,
    1 for the same words)."""

    qid: str
    category: str
    text: str
    similarity: float
    cited: tuple[CitedArticle, ...]

    @property
    def percent(self) -> int:
        """The similarity as a whole percentage, as a reader is shown it (« 62 % »)."""
        return int(round(100 * self.similarity))

    @property
    def cited_shown(self) -> int:
        """How many of its cited articles are among the displayed hits."""
        return sum(1 for c in self.cited if c.shown)


def neighbours_part(retrievers: Iterable[Retriever]) -> NeighboursRetriever | None:
    """The neighbours retriever among ``retrievers`` (a column of its own, or a hybrid's part)."""
    for retriever in retrievers:
        if isinstance(retriever, NeighboursRetriever):
            return retriever
        found = neighbours_part(getattr(retriever, "retrievers", ()))
        if found is not None:
            return found
    return None


def panel_reason(dataset: Dataset, active: bool, questions: Sequence[SimilarQuestion] | None = None) -> str | None:
    """The one line said instead of the panel: ``None`` when the panel is shown (``active``: the
    chosen systems include the neighbours part; ``questions``: its questions, :func:`similar_questions`,
    none when no training question is at least ``DEFAULT_MIN_SIMILARITY`` similar)."""
    if dataset.articles is None:
        return None
    if DEFAULT_SPLIT not in dataset.splits:
        return (f"{PANEL_TITLE} : indisponibles, ce jeu de données n'a pas de questions d'entraînement "
                f"(split « {DEFAULT_SPLIT} »).")
    if not labelled_questions(dataset, DEFAULT_SPLIT)[0]:
        return (f"{PANEL_TITLE} : indisponibles, aucune question du split « {DEFAULT_SPLIT} » ne cite un article "
                "de ce corpus.")
    if not active:
        return (f"{PANEL_TITLE} : ajoutez « {NEIGHBOURS_KIND.title} » aux encodeurs du classement combiné (réglages "
                "avancés) pour voir les questions déjà traitées les plus proches de la vôtre.")
    if questions is not None and not questions:
        return (f"{PANEL_TITLE} : aucune question déjà traitée ne ressemble assez à la vôtre (il en faut une "
                f"similaire à au moins {round(100 * DEFAULT_MIN_SIMILARITY)} %).")
    return None


def short_column(name: str) -> str:
    """A column's name as the panel marks it: a hybrid's settings left out (« Hybride »)."""
    return _HYBRID_WORD if name.startswith(_HYBRID_WORD + " ") else name


def shown_ranks(columns: Sequence[ColumnResult]) -> dict[str, tuple[tuple[str, int], ...]]:
    """``{article id: ((column, rank), ...)}`` over the displayed hits, columns in order (by
    :func:`short_column`)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for column in columns:
        for hit in column.hits:
            out.setdefault(hit.article_id, []).append((short_column(column.name), hit.rank))
    return {a: tuple(v) for a, v in out.items()}


def similar_questions(neighbours: Sequence[Neighbour], dataset: Dataset, columns: Sequence[ColumnResult], *,
                      split: str = DEFAULT_SPLIT, top: int = PANEL_TOP,
                      min_similarity: float = DEFAULT_MIN_SIMILARITY) -> list[SimilarQuestion]:
    """The panel's questions: the first ``top`` of ``neighbours`` at least ``min_similarity`` similar (whatever
    threshold the part that found them had: the learned ranker's has none), with their category and every
    article they cite in the dataset's labels (in label order)."""
    frame = dataset.questions(split) if split in dataset.splits else None
    rows = {} if frame is None else {str(q): (c, ids) for q, c, ids in zip(frame["id"], frame["category"],
                                                                           frame["article_ids"])}
    known = dataset.article_ids or frozenset()
    shown = shown_ranks(columns)
    out = []
    for n in [n for n in neighbours if n.similarity >= min_similarity][:max(top, 0)]:
        category, ids = rows.get(n.question_id, ("", n.article_ids))
        cited = []
        for doc in dict.fromkeys(str(a) for a in ids):
            reference, crumbs, _ = describe_article(dataset, doc)
            cited.append(CitedArticle(doc, reference, crumbs, doc in known, shown.get(doc, ())))
        out.append(SimilarQuestion(n.question_id, str(category or ""), n.text, n.similarity, tuple(cited)))
    return out


# --------------------------------------------------------------------------- why-lines

def part_label(name: str, adapters: Iterable[str] = ()) -> str:
    """A hybrid part's name in a why-line: ``BM25``, ``adaptateur`` (one of ``adapters``, a query adapter;
    :data:`PART_WORDS` names the ranker's adapter inputs), the neighbours part's
    :data:`~bsard_demo.retrievers.neighbours.NEIGHBOURS`, else the encoder key."""
    if name == BASE_PART:
        return PART_WORDS[BASE_PART]
    return PART_WORDS.get(name, PART_WORDS[ADAPTER_INPUT]) if name in set(adapters) else name


def cite_counts(neighbours: Sequence[Neighbour]) -> dict[str, int]:
    """``{article id: how many of ``neighbours`` cite it}``."""
    counts: dict[str, int] = {}
    for n in neighbours:
        for doc in set(n.article_ids):
            counts[doc] = counts.get(doc, 0) + 1
    return counts


def why_line(article_id: str, parts: Sequence[tuple[str, Mapping[str, int]]],
             counts: Mapping[str, int] | None = None) -> str:
    """« BM25 n° 3 · adaptateur n° 12 · 2 questions proches »: each part (``(label, ranks)``, in
    fusion order) that ranks ``article_id``; the neighbours part as the number of its training
    questions citing it (``counts``; its rank when ``counts`` is None). Empty when no part has it."""
    pieces = []
    for label, ranks in parts:
        if label == NEIGHBOURS and counts is not None:
            c = counts.get(article_id, 0)
            if c:
                pieces.append(f"{c} question proche" if c == 1 else f"{c} questions proches")
        elif article_id in ranks:
            pieces.append(f"{'questions proches' if label == NEIGHBOURS else label} n° {ranks[article_id]}")
    return " · ".join(pieces)


def with_why_lines(column: ColumnResult, labels: Sequence[str],
                   counts: Mapping[str, int] | None = None) -> ColumnResult:
    """``column`` with a why-line on each hit, from its parts' rankings (``column.parts``, one per
    label); unchanged when the column is not a hybrid or the labels do not match its parts."""
    if column.parts is None or len(column.parts) != len(labels):
        return column
    parts = [(label, first_ranks(ranking)) for label, ranking in zip(labels, column.parts)]
    return replace(column, hits=[replace(h, why=why_line(h.article_id, parts, counts)) for h in column.hits])


# --------------------------------------------------------------------------- downloads

CRUMBS = "fil d'Ariane"
EXPORT_COLUMNS = ("question", "système", "rang", "référence", CRUMBS, "score", "pourquoi", "lien")


def export_rows(question: str, columns: Sequence[ColumnResult], link: str) -> list[dict[str, object]]:
    """One row per displayed hit (columns in order, hits by rank), with :data:`EXPORT_COLUMNS`."""
    return [{"question": question, "système": column.name, "rang": hit.rank,
             "référence": hit.reference or f"Article {hit.article_id}",
             CRUMBS: breadcrumb_text(hit.breadcrumb),
             "score": float(hit.score), "pourquoi": hit.why, "lien": link}
            for column in columns for hit in column.hits]


def export_csv(rows: Sequence[Mapping[str, object]]) -> bytes:
    """The rows as CSV (UTF-8 with a byte-order mark, so that spreadsheets read the accents),
    text cells that a spreadsheet would take for a formula prefixed with ``'``
    (:func:`~bsard_demo.evaluation.report.formula_safe`, as every CSV of the CLI)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(EXPORT_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: formula_safe(v) for k, v in row.items()})
    return out.getvalue().encode("utf-8-sig")


def _md(value: object) -> str:
    """A Markdown table cell: HTML escaped, pipes and line breaks neutralised."""
    text = html.escape(" ".join(str(value).split()), quote=False)
    return text.replace("|", "\\|").replace("`", "\\`").replace("*", "\\*").replace("_", "\\_").replace("[", "\\[")


def export_markdown(question: str, rows: Sequence[Mapping[str, object]], link: str) -> str:
    """The rows as a Markdown document: the question and the link, then one table per system."""
    lines = [f"# Recherche : {_md(question)}", "", f"Lien de la recherche : <{link}>" if link else "", ""]
    systems = list(dict.fromkeys(str(r["système"]) for r in rows))
    for system in systems:
        lines += [f"## {_md(system)}", "", "| rang | référence | fil d'Ariane | score | pourquoi |",
                  "|---:|---|---|---:|---|"]
        for r in rows:
            if r["système"] == system:
                lines.append(f"| {r['rang']} | {_md(r['référence'])} | {_md(r[CRUMBS])} | "
                             f"{float(r['score']):.4g} | {_md(r['pourquoi'])} |")
        lines.append("")
    return "\n".join(lines)
