"""What one run-file read may spend besides bytes (issue 37): time, lines, entries, questions.

:class:`ReadLimits` holds the limits; :func:`bounded` runs a read under them, and the readers call
:func:`tick` (the clock, at each block of work) and :func:`count_entries` (run lines kept) while they
stream, which raise :class:`ReadOverrun` once a limit is passed: the read stops there and becomes one
``too_slow`` or ``too_large_in_memory`` error. The limits, their measurements and the commands:
docs/reliability.md, "13. Every read bounded in time and memory".
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

#: Largest line of a table format (TREC, 3 columns, CSV) in bytes: a real run's lines have < 200.
MAX_LINE = 64 * 2**10


@dataclass(frozen=True)
class ReadLimits:
    """``seconds`` of wall time for a whole read (a real 45 MB run of 1.1 million lines takes ~4 s on a
    busy 2-core machine); ``max_entries`` run lines (question, article) kept: a real BSARD run of
    depth 1,000 over its 1,108 questions has 1.1 million; ``max_questions`` questions and
    ``max_articles`` distinct article ids (BSARD's corpus has 22,633, frlaw-dev's 29,115), whose
    strings and rankings cost more than entries (docs/reliability.md, section 13); ``max_json_values``:
    values of one JSON document, counted before it is parsed (a JSON value with a distinct article id
    costs ~330 B while parsed, a table's entry ~100 B; a depth-1,000 run of BSARD's 222 test questions
    has 222,000); ``max_line``: bytes of one line of a table format."""

    seconds: float = 20.0
    max_entries: int = 1_200_000
    max_questions: int = 100_000
    max_articles: int = 250_000
    max_json_values: int = 600_000
    max_line: int = MAX_LINE


DEFAULT_LIMITS = ReadLimits()


class ReadOverrun(Exception):
    """A read passed one of its :class:`ReadLimits`: ``code`` (``too_slow``, ``too_large_in_memory``)
    and the message that names the limit."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class _Budget(threading.local):
    limits: ReadLimits | None = None
    deadline: float = float("inf")
    entries: int = 0


_budget = _Budget()


@contextmanager
def bounded(limits: ReadLimits | None) -> Iterator[None]:
    """Run the read of this thread under ``limits`` (None: unbounded, as before issue 37)."""
    saved = (_budget.limits, _budget.deadline, _budget.entries)
    _budget.limits = limits
    _budget.deadline = time.monotonic() + limits.seconds if limits is not None else float("inf")
    _budget.entries = 0
    try:
        yield
    finally:
        _budget.limits, _budget.deadline, _budget.entries = saved


def current() -> ReadLimits | None:
    """The limits of this thread's read (None outside :func:`bounded` or unbounded)."""
    return _budget.limits


def line_limit() -> int | None:
    """The longest table line this thread's read accepts, in bytes (None: any)."""
    return _budget.limits.max_line if _budget.limits is not None else None


def remaining() -> float:
    """Seconds left to this thread's read (infinite outside :func:`bounded` or unbounded)."""
    return max(_budget.deadline - time.monotonic(), 0.0)


def tick() -> None:
    """Raise :class:`ReadOverrun` (``too_slow``) once the read's deadline has passed."""
    if time.monotonic() > _budget.deadline:
        seconds = _budget.limits.seconds
        raise ReadOverrun("too_slow", f"reading the file took longer than the limit of {seconds:g} s "
                                      "and was stopped: the file is hostile or far larger than a run")


def count_entries(n: int) -> None:
    """Count ``n`` more run lines kept; :class:`ReadOverrun` (``too_large_in_memory``) past the limit.
    Also checks the clock."""
    tick()
    limits = _budget.limits
    if limits is None:
        return
    _budget.entries += n
    if _budget.entries > limits.max_entries:
        raise ReadOverrun("too_large_in_memory", too_many_entries(limits))


def check_entries(n: int) -> None:
    """:class:`ReadOverrun` when a structure of ``n`` values (counted before it is built) would pass
    the entry limit."""
    limits = _budget.limits
    if limits is not None and n > limits.max_entries:
        raise ReadOverrun("too_large_in_memory", too_many_entries(limits))


def check_json_values(n: int) -> None:
    """:class:`ReadOverrun` when one JSON document (or JSON Lines record) holds more than the limit of
    values (``n``: its commas, counted before it is parsed)."""
    limits = _budget.limits
    if limits is not None and n >= limits.max_json_values:
        raise ReadOverrun("too_large_in_memory",
                          f"the JSON holds more than {limits.max_json_values:,} values, the limit for one JSON "
                          "document: it was not read (a JSON run costs three times the memory of the same run "
                          "as TREC lines or JSON Lines: save a longer run in one of those)")


def check_ids(questions: int, articles: int) -> None:
    """:class:`ReadOverrun` when a run has more distinct questions or articles than the limits."""
    limits = _budget.limits
    if limits is None:
        return
    if questions > limits.max_questions:
        raise ReadOverrun("too_large_in_memory",
                          f"the run has more than {limits.max_questions:,} questions, the limit for one file: "
                          "it was not read (a run lists at most a few thousand questions)")
    if articles > limits.max_articles:
        raise ReadOverrun("too_large_in_memory",
                          f"the run names more than {limits.max_articles:,} distinct articles, the limit for one "
                          "file: it was not read (BSARD's corpus has 22,633 articles)")


def too_many_entries(limits: ReadLimits) -> str:
    return (f"the run has more than {limits.max_entries:,} lines (question-article pairs), the limit for one "
            "file: it was not read (a run of depth 1,000 over the 1,108 BSARD questions has 1.1 million)")
