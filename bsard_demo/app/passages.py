"""Passages on the Search page (``pages/search.py``): runs of hits that are consecutive articles of one
section (:func:`group_passages`), and any hit's section read around it (« Voir la section »,
:func:`section_context`).

Conventions: docs/design.md, 'bsard_demo/app/passages.py'.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..dataset import Dataset, hierarchy
from .search_page import ShownHit

#: Articles read before and after a hit or passage in « Voir la section », and their length.
SECTION_AROUND, CONTEXT_CHARS = 2, 400
_ARTICLE_NUMBER = re.compile(r"^(Art(?:icle)?\.?\s+)([^,;]+?)(\s*[,;].*)?$")


@dataclass(frozen=True)
class Entry:
    """One item of a column, in rank order: a hit alone; a passage, led by its best-ranked hit
    (``members``: its hits in corpus order, ``title``); or a hit shown in the passage led by
    ``lead`` (``title`` that passage's)."""

    hit: ShownHit
    members: tuple[ShownHit, ...] = ()
    title: str = ""
    lead: ShownHit | None = None

    @property
    def kind(self) -> str:
        return "passage" if self.members else ("reminder" if self.lead is not None else "hit")


@dataclass(frozen=True)
class ContextArticle:
    """An article of « Voir la section »: ``rank`` in the column when it is a displayed hit."""

    article_id: str
    reference: str
    text: str
    cut: bool
    rank: int | None = None


def passage_title(references: Sequence[str]) -> str:
    """« Art. 947–948, Code civil » from its first and last articles' references (same prefix
    and suffix), else « first – last »."""
    first, last = references[0], references[-1]
    a, b = _ARTICLE_NUMBER.match(first), _ARTICLE_NUMBER.match(last)
    if a and b and a.group(1) == b.group(1) and (a.group(3) or "") == (b.group(3) or ""):
        return f"{a.group(1)}{a.group(2)}–{b.group(2)}{a.group(3) or ''}"
    return f"{first} – {last}"


def _runs(hits: Sequence[ShownHit], dataset: Dataset) -> list[tuple[ShownHit, ...]]:
    """The hits cut into runs of consecutive articles of one section, each in corpus order."""
    positions = [(dataset.article_position(h.article_id), h) for h in hits]
    placed = sorted(((p, h) for p, h in positions if p is not None), key=lambda x: x[0])
    runs: list[list[ShownHit]] = []
    previous: tuple[int, ShownHit] | None = None
    for position, hit in placed:
        if (previous is not None and position == previous[0] + 1 and hit.breadcrumb
                and hit.breadcrumb == previous[1].breadcrumb):
            runs[-1].append(hit)
        else:
            runs.append([hit])
        previous = (position, hit)
    return [tuple(r) for r in runs]


def group_passages(hits: Sequence[ShownHit], dataset: Dataset) -> list[Entry]:
    """The column's hits as the page shows them (docs/design.md, 'bsard_demo/app/passages.py'), in rank order."""
    run_of: dict[str, tuple[ShownHit, ...]] = {}
    for run in _runs(hits, dataset):
        for hit in run:
            run_of[hit.article_id] = run
    out = []
    for hit in hits:
        run = run_of.get(hit.article_id, (hit,))
        if len(run) == 1:
            out.append(Entry(hit))
            continue
        lead = min(run, key=lambda h: h.rank)
        title = passage_title([h.reference or f"Article {h.article_id}" for h in run])
        out.append(Entry(hit, run, title) if lead is hit else Entry(hit, title=title, lead=lead))
    return out


def section_context(dataset: Dataset, members: Sequence[ShownHit], ranks: dict[str, int] | None = None, *,
                    around: int = SECTION_AROUND, chars: int = CONTEXT_CHARS) -> list[ContextArticle]:
    """The articles of ``members``' section from ``around`` before the first to ``around`` after
    the last (corpus order; ``members`` themselves included), cut to ``chars`` characters;
    ``ranks``: the column's ``{article id: rank}``, to mark its hits. Empty when the first member
    is not in the corpus."""
    a = dataset.articles
    positions = [p for p in (dataset.article_position(m.article_id) for m in members) if p is not None]
    if a is None or not positions:
        return []
    crumbs = list(members[0].breadcrumb)
    lo, hi = min(positions), max(positions)
    ranks = ranks or {}
    chosen = []
    for step, edge in ((-1, lo), (1, hi)):
        p, taken = edge + step, 0
        while 0 <= p < len(a) and taken < around and hierarchy(dataset.row(p)) == crumbs:
            chosen.append(p)
            p, taken = p + step, taken + 1
    chosen += [p for p in range(lo, hi + 1) if hierarchy(dataset.row(p)) == crumbs or p in positions]
    out = []
    for p in sorted(set(chosen)):
        row = dataset.row(p)
        doc, text = str(row["id"]), str(row.get("article", "") or "")
        out.append(ContextArticle(doc, str(row.get("reference", "") or ""), text[:chars], len(text) > chars,
                                  ranks.get(doc)))
    return out
