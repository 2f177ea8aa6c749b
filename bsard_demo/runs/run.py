"""A retrieval run: for each question, its article ids in ranked order.

Ordering convention (trec_eval's): within a question, entries are ordered by score descending,
ties broken by article id descending compared as strings. A run given only as ranks (no score)
is ordered by rank ascending, ties again by article id descending. An article listed twice for a
question keeps its best position (its first after ordering); later copies are dropped.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from .write import format_run


@dataclass(frozen=True)
class Entry:
    """One line of a run file: an article for a question, with a score and/or a rank."""

    qid: str
    docid: str
    score: float | None = None
    rank: int | None = None
    line: int | None = None


def order_entries(entries: Sequence[Entry], by: str = "score") -> list[Entry]:
    """Order one question's entries by ``"score"`` (descending) or ``"rank"`` (ascending), ties by
    article id descending as strings; drop repeated article ids after their first position."""
    by_doc_desc = sorted(entries, key=lambda e: e.docid, reverse=True)
    if by == "score":
        ordered = sorted(by_doc_desc, key=lambda e: e.score, reverse=True)  # stable: ties keep doc order
    elif by == "rank":
        ordered = sorted(by_doc_desc, key=lambda e: e.rank)
    else:
        raise ValueError(f"order by 'score' or 'rank', not {by!r}")
    seen: set[str] = set()
    out = []
    for e in ordered:
        if e.docid not in seen:
            seen.add(e.docid)
            out.append(e)
    return out


class ScoreTable(Mapping[str, tuple[float, ...]]):
    """Scores per question id as one float64 array and each question's slice of it: a read-only
    mapping whose values are tuples, built on access (a run of a million entries keeps 8 MB of
    scores instead of a million Python floats). Equal to a dict with the same items."""

    def __init__(self, values: np.ndarray, spans: Mapping[str, tuple[int, int]]):
        self._values = np.asarray(values, dtype=float)
        self._spans = dict(spans)

    def __getitem__(self, qid: str) -> tuple[float, ...]:
        a, b = self._spans[qid]
        return tuple(self._values[a:b].tolist())

    def array(self, qid: str) -> np.ndarray:
        """The scores of ``qid`` as a read-only array view."""
        a, b = self._spans[qid]
        view = self._values[a:b]
        view.flags.writeable = False
        return view

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def __contains__(self, qid: object) -> bool:
        return qid in self._spans

    def __repr__(self) -> str:
        return f"ScoreTable({dict(self)!r})"


@dataclass
class Run(Mapping[str, tuple[str, ...]]):
    """Ranked article ids per question id (a read-only mapping), with their scores when known.

    Build it with :meth:`from_entries`, :meth:`from_scores` or :meth:`from_rankings`; all apply
    the ordering convention of this module. ``scores`` (a mapping of tuples: a dict, or the
    reader's :class:`ScoreTable`) are the scores as the file gives them; ``lower_is_better``
    says they are distances, ranked ascending (read with ``lower_is_better=True``). ``file_order``: for
    the questions whose file ranks tied scores otherwise than the tie rule, the articles in the file's own
    rank order (the reader sets it; :mod:`bsard_demo.evaluation.ties` says whether it changes a figure).
    """

    rankings: dict[str, tuple[str, ...]]
    scores: Mapping[str, tuple[float, ...]] | None = None
    name: str = ""
    tags: tuple[str, ...] = field(default=())
    lower_is_better: bool = False
    file_order: Mapping[str, tuple[str, ...]] | None = field(default=None, compare=False, repr=False)

    def __getitem__(self, qid: str) -> tuple[str, ...]:
        return self.rankings[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self.rankings)

    def __len__(self) -> int:
        return len(self.rankings)

    def scored(self, qid: str) -> list[tuple[str, float | None]]:
        """``(article id, score)`` pairs of one question in rank order (score None if unknown)."""
        docs = self.rankings.get(qid, ())
        scores = self.scores.get(qid) if self.scores else None
        return list(zip(docs, scores if scores is not None else [None] * len(docs)))

    @classmethod
    def from_entries(cls, entries: Iterable[Entry], by: str = "score", name: str = "",
                     tags: Sequence[str] = ()) -> "Run":
        grouped: dict[str, list[Entry]] = {}
        for e in entries:
            grouped.setdefault(e.qid, []).append(e)
        rankings, scores = {}, {}
        for qid, group in grouped.items():
            ordered = order_entries(group, by=by)
            rankings[qid] = tuple(e.docid for e in ordered)
            scores[qid] = tuple(e.score if e.score is not None else float("nan") for e in ordered)
        return cls(rankings, scores if by == "score" else None, name=name, tags=tuple(tags))

    @classmethod
    def from_scores(cls, scores: Mapping[str, Mapping[str, float]], name: str = "", tags: Sequence[str] = ()) -> "Run":
        """From ``{qid: {docid: score}}`` (the pytrec_eval / JSON layout)."""
        entries = (Entry(str(q), str(d), float(s)) for q, docs in scores.items() for d, s in docs.items())
        return cls.from_entries(entries, by="score", name=name, tags=tags)

    @classmethod
    def from_rankings(cls, rankings: Mapping[str, Sequence[str]], name: str = "", tags: Sequence[str] = ()) -> "Run":
        """From ``{qid: [docid, ...]}`` already in rank order (first = best)."""
        entries = (Entry(str(q), str(d), None, r) for q, docs in rankings.items() for r, d in enumerate(docs, 1))
        return cls.from_entries(entries, by="rank", name=name, tags=tags)

    def ranking_sha256(self) -> str:
        """The sha256 of the ranking itself, whatever file it came from: the questions sorted, each with its
        articles in rank order (as read and ordered by this module's rules), as compact JSON. The same run saved
        as TREC, JSON, CSV or parquet, or re-spaced, has the same digest; another order, article or question
        has another. 0.05 s for 222 questions x 1,000 articles."""
        body = json.dumps([[q, list(self.rankings[q])] for q in sorted(self.rankings)], ensure_ascii=False,
                          separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    def to_trec(self, tag: str = "run") -> str:
        """TREC 6-column text (``qid Q0 docid rank score tag``, :func:`bsard_demo.runs.write.format_run`);
        scores are synthesised from ranks (decreasing) when unknown, so that re-reading gives the
        same order (with ``lower_is_better=True`` for a run of distances, whose scores are kept)."""
        rankings = []
        for qid, docs in self.rankings.items():
            known = self.scores.get(qid) if self.scores else None
            scores = known if known is not None else [float(len(docs) - i) for i in range(len(docs))]
            rankings.append(list(zip(docs, scores)))
        return format_run(list(self.rankings), rankings, "trec", tag)
