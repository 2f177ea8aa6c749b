"""The one interface every retriever follows.

A retriever is built from a dataset's corpus, answers one or many questions with ranked
:class:`Hit` lists (best first; ties broken by article id descending as strings, the run
convention of :mod:`bsard_demo.runs.run`), and can be saved to / loaded from a cache folder keyed by a
fingerprint of the corpus and its settings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from ..progress import STEP_WORDS, Step  # noqa: F401 - the steps builds report, with Progress

#: ``progress(done, total, message)``: long builds report through it (tqdm in the CLI, a
#: progress bar in the app). The library's own steps report a :class:`Step` as the message.
Progress = Callable[[int, int, str], None]


def report_progress(progress: Progress | None, done: int, total: int, message: str) -> None:
    """``progress(done, total, message)`` when there is a ``progress`` to report to."""
    if progress is not None:
        progress(done, total, message)

#: Articles fetched per retriever for fusion and for the Search page (so missed gold articles
#: still get a rank).
DEFAULT_DEPTH = 1000


def clip_k(k: int, size: int | None) -> int:
    """``k`` as an int, at most ``size`` (no cap when ``size`` is falsy); ``ValueError`` below 1."""
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    return min(k, size) if size else k


@dataclass(frozen=True)
class Hit:
    """One ranked article: its id (a string, as in the dataset) and the retriever's score."""

    article_id: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    #: Short human name with its settings, e.g. ``"bm25 k1=1.0 b=0.6"``; used as a run tag.
    name: str

    def search(self, question: str, k: int = 100) -> list[Hit]:
        """The ``k`` best articles for one question, best first."""
        ...

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        """:meth:`search` for many questions at once (batched where the engine allows)."""
        ...


def id_ranks(article_ids: Sequence[str]) -> np.ndarray:
    """Each article's position in ascending string order of the ids (for :func:`rank_all`)."""
    ids = np.array([str(a) for a in article_ids], dtype=object)
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[np.argsort(ids, kind="stable")] = np.arange(len(ids))
    return ranks


def rank_rows(scores: np.ndarray, id_rank: np.ndarray, k: int,
              rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best articles as arrays ``(rows, scores)``: their corpus rows (int64) and scores
    (``scores``' dtype), best first; score descending, ties by article id descending as strings
    (``id_rank`` from :func:`id_ranks`), so a tie at the cut keeps the greatest ids.

    ``scores[j]`` is the score of article ``rows[j]`` (``rows`` default: every article, in corpus
    order); only the candidates that can reach the top ``k`` are sorted. The learned ranker reads
    its inputs this way (:meth:`~.ranker.RankerRetriever.search_parts`): a :class:`Hit` per article
    cost it 1.06 of 6.2 CPU s on frlaw-dev test (149 questions x 5 systems x 1,000 hits)."""
    scores = np.asarray(scores)
    rows = np.arange(len(scores)) if rows is None else np.asarray(rows)
    n = len(scores)
    k = min(int(k), n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64), scores[:0]
    if k < n:
        kth = np.partition(scores, n - k)[n - k]
        candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(n)
    order = np.lexsort((-id_rank[rows[candidates]], -scores[candidates]))[:k]
    chosen = candidates[order]
    return rows[chosen].astype(np.int64, copy=False), scores[chosen]


def ranked_hits(rows: np.ndarray, scores: np.ndarray, article_ids: Sequence[str]) -> list[Hit]:
    """The :class:`Hit` list of a ranking given as arrays (:func:`rank_rows`): exact floats."""
    return [Hit(article_ids[r], v) for r, v in zip(np.asarray(rows).tolist(), np.asarray(scores).tolist())]


def rank_all(scores: np.ndarray, article_ids: Sequence[str], id_rank: np.ndarray, k: int,
             rows: np.ndarray | None = None) -> list[Hit]:
    """:func:`rank_rows` as :class:`Hit` lists (``article_ids`` in corpus order)."""
    return ranked_hits(*rank_rows(scores, id_rank, k, rows), article_ids)
