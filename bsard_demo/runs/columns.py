"""What a parser hands over: :class:`Columns` (a run's usable lines as compact parallel arrays, filled chunk by
chunk) in a :class:`Parsed` (the format detected, how to order the lines, the run tags). The parsers
(:mod:`.text_formats`, :mod:`.json_formats`, :mod:`.parquet_format`) return a :class:`Parsed`;
:mod:`.validate` turns its columns into a :class:`~bsard_demo.runs.run.Run`. A million lines keep about 20 MB
(int32 codes, float64 scores), not a Python object per field.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .fields import KeyIndex
from .limits import check_entries, check_ids, tick

#: The format of a file whose layout was not recognised.
UNKNOWN = "unknown"


def _intern(tokens, by_key: dict, by_str: dict, names: list[str]) -> np.ndarray:
    """int32 codes of ``tokens`` (str, or ASCII bytes), new ids numbered in order of appearance."""
    codes = list(map(by_key.get, tokens))
    if None in codes:
        for t in dict.fromkeys(tokens):
            if t not in by_key:
                s = t if isinstance(t, str) else t.decode("ascii")
                c = by_str.get(s)
                if c is None:
                    c = by_str[s] = len(names)
                    names.append(s)
                by_key[t] = c
        codes = list(map(by_key.__getitem__, tokens))
    return np.array(codes, dtype=np.int32)


class Columns:
    """Usable run lines as compact parallel arrays, appended chunk by chunk.

    ``qnames`` / ``dnames`` are the distinct question / article ids in order of first appearance
    (their codes are positions in these lists); after :meth:`finish`, ``q``, ``d`` (codes),
    ``score`` (float64 or None), ``rank`` (int64, object for ranks beyond 64 bits, or None) and
    ``line`` (int64, or None when the format has no lines) are arrays in file order."""

    def __init__(self) -> None:
        self.qnames: list[str] = []
        self.dnames: list[str] = []
        self._q: tuple[dict, dict] = ({}, {})  # str -> code, bytes -> code
        self._d: tuple[dict, dict] = ({}, {})
        self.q_index = KeyIndex(lambda ids: self._new_codes(ids, self._q[0], self.qnames))  # packed ids -> code
        self.d_index = KeyIndex(lambda ids: self._new_codes(ids, self._d[0], self.dnames))
        self._parts: dict[str, list] = {"q": [], "d": [], "score": [], "rank": [], "line": []}
        self.q = self.d = self.score = self.rank = self.line = None
        self.n = 0

    @staticmethod
    def _new_codes(ids: list[str], by_str: dict, names: list[str]) -> list[int]:
        """Codes of ``ids`` (distinct; new ones appended to ``names``)."""
        if by_str.keys().isdisjoint(ids):  # all new: numbered at once
            first = len(names)
            names.extend(ids)
            by_str.update(zip(ids, range(first, len(names))))
            return list(range(first, len(names)))
        out = []
        for s in ids:
            c = by_str.get(s)
            if c is None:
                c = by_str[s] = len(names)
                names.append(s)
            out.append(c)
        return out

    def q_codes(self, tokens: Sequence) -> np.ndarray:
        by_str, by_bytes = self._q
        return _intern(tokens, by_str if tokens and isinstance(tokens[0], str) else by_bytes, by_str, self.qnames)

    def d_codes(self, tokens: Sequence) -> np.ndarray:
        by_str, by_bytes = self._d
        return _intern(tokens, by_str if tokens and isinstance(tokens[0], str) else by_bytes, by_str, self.dnames)

    def append(self, q: np.ndarray, d: np.ndarray, score=None, rank=None, line=None) -> None:
        """Add rows (codes from :meth:`q_codes` / :meth:`d_codes`); give ``score``, ``rank``,
        ``line`` for every chunk or for none."""
        if not len(q):
            return
        self.n += len(q)
        check_entries(self.n)  # the read's limits (.limits): a pass read again starts from 0
        check_ids(len(self.qnames), len(self.dnames))
        tick()
        for name, value in (("q", q), ("d", d), ("score", score), ("rank", rank), ("line", line)):
            if value is not None:
                value = np.asarray(value)
                if name in ("rank", "line") and value.dtype == np.int64 and len(value) \
                        and -2**31 <= int(value.min()) and int(value.max()) < 2**31:
                    value = value.astype(np.int32)  # half the memory; a chunk beyond int32 stays int64
                self._parts[name].append(value)

    def append_ids(self, qids: Sequence[str], docs: Sequence[str], score=None, rank=None, line=None) -> None:
        """:meth:`append` of rows given as id strings and plain lists."""
        if not qids:
            return
        rank_arr = None
        if rank is not None:
            try:
                rank_arr = np.array(rank, dtype=np.int64)
            except OverflowError:
                rank_arr = np.array(rank, dtype=object)
        self.append(self.q_codes(qids), self.d_codes(docs), None if score is None else np.array(score, dtype=float),
                    rank_arr, None if line is None else np.array(line, dtype=np.int64))

    def read_scores_as_ranks(self, ranks: list[np.ndarray]) -> None:
        """Take ``ranks`` (one array per chunk appended) for the values appended as scores, which
        are dropped (a 3-column file first read as scores whose values are all ranks)."""
        self._parts["rank"], self._parts["score"] = list(ranks), []

    @classmethod
    def of_arrays(cls, qnames: list[str], dnames: list[str], q, d, score=None, rank=None, line=None) -> "Columns":
        """Finished columns from their arrays (as :meth:`finish` leaves them), e.g. a child's answer."""
        cols = cls()
        cols.qnames, cols.dnames = qnames, dnames
        cols.q, cols.d, cols.score, cols.rank, cols.line = q, d, score, rank, line
        cols.n = len(q)
        return cols

    def finish(self) -> "Columns":
        for name, parts in self._parts.items():
            if parts:
                setattr(self, name, parts[0] if len(parts) == 1 else np.concatenate(parts))
                parts.clear()
        if self.q is None:
            self.q = self.d = np.zeros(0, dtype=np.int32)
        return self

    def __len__(self) -> int:
        return self.n


@dataclass(frozen=True)
class Parsed:
    """A parser's result: the ``format`` detected (:data:`UNKNOWN` when none), the ``columns`` read
    (None when the file cannot give a run: its errors say why), whether they are ordered ``by``
    ``"score"`` or ``"rank"``, whether ranks given beside scores are to be checked against them
    (``check_ranks``) and the run tags in order of first appearance."""

    format: str = UNKNOWN
    columns: Columns | None = None
    by: str = "score"
    check_ranks: bool = False
    tags: tuple[str, ...] = ()
