"""The first visitor's system: one rule (:func:`first_visitor`) read by the Search page (its default columns) and by
``run --retriever default``, so a figure a script prints is the page's. Decided on frlaw-dev train (docs/
effectiveness.md, "The first visitor's system"): the learned ranker (70.75 R@100 in 5-fold CV) when one fitted on
this corpus is at hand and ``use``'s embeddings are stored; else BM25 + an adapter + neighbours + structure (67.96);
else BM25 + use + neighbours + structure (65.03); with no embeddings stored, BM25 + neighbours + structure (62.80)
rather than BM25 alone (51.48); without labelled training questions, BM25 + use + structure or BM25 alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .neighbours import NEIGHBOURS
from .registry import RetrieverSpec, hybrid_spec


@dataclass(frozen=True)
class FirstVisitor:
    """What a first visitor sees: ``systems`` (the page's columns, the best last), the hybrid's
    parts after BM25 (``hybrid_encoders``: page keys or ``--encoder`` names) with or without the
    structure re-scoring, and the ranker's key when the best column is the learned ranker."""

    systems: tuple[str, ...]
    hybrid_encoders: tuple[str, ...] = ()
    structure: bool = False
    ranker: str | None = None

    @property
    def best(self) -> str:
        return self.systems[-1]

    def spec(self, target: Callable[[str], str] = str) -> RetrieverSpec:
        """The best column's spec; ``target(key)``: what a key stands for (a folder, a bundled name)."""
        if self.best == "ranker":
            return RetrieverSpec("ranker", {"model": target(self.ranker)})
        if self.best == "hybrid":
            return hybrid_spec([target(e) for e in self.hybrid_encoders], structure=self.structure or None)
        return RetrieverSpec("bm25")


def first_visitor(*, rankers: Sequence[str] = (), dense: Sequence[str] = (), use_stored: bool = False,
                  neighbours: bool = False) -> FirstVisitor:
    """The rule. ``rankers``: the keys of the learned rankers fitted on this corpus and offered
    here, preferred first (the index bundle's first); ``dense``: the dense encoders whose
    embeddings of the corpus are stored, preferred first (a query adapter fitted on it, then
    ``use``); ``use_stored``: ``use``'s are (a ranker reads them: without them no ranker is chosen,
    so a first visitor never waits for a build); ``neighbours``: the dataset has labelled training
    questions."""
    if rankers and use_stored:
        return FirstVisitor(("bm25", "ranker"), ranker=rankers[0])
    parts = tuple(p for p in (dense[0] if dense else None, NEIGHBOURS if neighbours else None) if p)
    if not parts:
        return FirstVisitor(("bm25",))
    return FirstVisitor(("bm25", "hybrid"), parts, structure=True)
