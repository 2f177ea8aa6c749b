"""The one interface every retriever follows.

A retriever is built from a dataset's corpus, answers one or many questions with ranked
:class:`Hit` lists (best first; ties broken by article id descending as strings, the run
convention of :mod:`bsard_demo.run`), and can be saved to / loaded from a cache folder keyed by a
fingerprint of the corpus and its settings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, runtime_checkable

#: ``progress(done, total, message)``: long builds report through it (tqdm in the CLI, a
#: progress bar in the app).
Progress = Callable[[int, int, str], None]


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
