"""Problems found in user input (run files, dataset folders).

Every reader gathers *all* problems of a file into one :class:`ProblemList` instead of stopping
at the first: a user fixes a file once, not once per line. Severity ``error`` means the line or
the file cannot be used; ``warning`` means it was used anyway.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One problem of an input; ``line`` is 1-based, ``None`` for the file as a whole."""

    severity: Severity
    message: str
    line: int | None = None

    def as_dict(self) -> dict:
        return {"severity": self.severity, "line": self.line, "message": self.message}

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.severity}: {where}{self.message}"


@dataclass
class ProblemList:
    """Problems of one input. Keeps at most ``cap`` problems per message kind but counts them all.

    ``kind`` groups repeated problems (e.g. the same bad field on 100,000 lines): the first
    ``cap`` of each kind are kept with their line numbers, the rest are only counted so that a
    huge bad file cannot exhaust memory, and :meth:`summary` reports the totals.
    """

    cap: int = 50
    items: list[Problem] = field(default_factory=list)
    totals: Counter = field(default_factory=Counter)
    _severity_of: dict = field(default_factory=dict)

    def add(self, severity: Severity, message: str, line: int | None = None, kind: str | None = None) -> None:
        key = kind or message
        self.totals[key] += 1
        self._severity_of[key] = severity
        if self.totals[key] <= self.cap:
            self.items.append(Problem(severity, message, line))

    def error(self, message: str, line: int | None = None, kind: str | None = None) -> None:
        self.add("error", message, line, kind)

    def warning(self, message: str, line: int | None = None, kind: str | None = None) -> None:
        self.add("warning", message, line, kind)

    def extend(self, other: "ProblemList") -> None:
        for key, n in other.totals.items():
            self.totals[key] += n
            self._severity_of[key] = other._severity_of[key]
        self.items.extend(other.items)

    @property
    def has_errors(self) -> bool:
        return any(self._severity_of[k] == "error" for k in self.totals)

    def count(self, severity: Severity) -> int:
        return sum(n for k, n in self.totals.items() if self._severity_of[k] == severity)

    def omitted(self) -> list[Problem]:
        """One summary problem per kind whose occurrences went beyond the display cap."""
        return [
            Problem(self._severity_of[k], f"… and {n - self.cap} more like this ({n} in all): {k}")
            for k, n in self.totals.items()
            if n > self.cap
        ]

    def all(self) -> list[Problem]:
        """Kept problems in line order (file-level first), then the 'and N more' summaries."""
        ordered = sorted(self.items, key=lambda p: (p.line is not None, p.line or 0))
        return ordered + self.omitted()

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.all())

    def __len__(self) -> int:
        return sum(self.totals.values())

    def __bool__(self) -> bool:
        return bool(self.totals)
