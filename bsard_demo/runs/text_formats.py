"""Text -> columns for the whitespace tables (TREC, 3-column) and CSV with a header line, streamed:
:func:`parse_table` reads :class:`~bsard_demo.runs.decode.Chunk` s of whole lines into a
:class:`~bsard_demo.runs.columns.Parsed` for :mod:`bsard_demo.runs.read` and reports every bad line.
A table with a header line goes to :mod:`.csv_format`. The formats and the 3-column rank/score rule:
docs/run-formats.md.

How: docs/design.md, 'bsard_demo/runs/text_formats.py'.
"""
from __future__ import annotations

from collections import Counter
from itertools import chain, compress
from typing import Callable, Iterable, Iterator

import numpy as np

from .columns import UNKNOWN, Columns, Parsed
from .csv_format import header_columns, parse_csv
from .decode import Chunk
from .fields import ArrayFields, TokenFields, positions
from .problems import ProblemList

TREC_FIELDS = "qid Q0 docid rank score tag"
_ARRAY_LIMIT = 4 << 20  # chunks up to this size (all but very long lines) are split with numpy


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\\n`` (or at ``\\r`` in an old-Mac file)."""
    return text.split("\n") if "\n" in text or "\r" not in text else text.split("\r")


def parse_table(chunks: Iterable[Chunk], first_line: int, first: str, problems: ProblemList,
                restart: Callable[[], Iterator[Chunk]]) -> Parsed:
    """The run of a text file whose first non-blank line is ``first`` (line ``first_line``);
    ``chunks`` report their decoding problems to ``problems`` too, and ``restart`` reads the text
    again (without them) when the first pass guessed the layout wrong."""
    header = header_columns(first)
    if header is not None:
        return parse_csv(chunks, first_line, header[0], header[1], problems)
    chunks = iter(chunks)
    head = next(chunks)
    guess = _guess(head)
    table = _TablePass(*guess)
    table.run(chain([head], chunks))
    counts = table.counts
    n6, n3, total = counts.get(6, 0), counts.get(3, 0), sum(counts.values())
    if max(n6, n3) * 2 < total:
        _not_a_run(first, first_line, counts, problems)
        return Parsed(UNKNOWN)
    width = 6 if n6 >= n3 else 3
    by = "score" if width == 6 or not table.looks_like_ranks() else "rank"
    if (width, by) == (3, "rank") and (table.width, table.by) == (3, "score") and table.ranks_complete:
        table.switch_to_ranks()
    elif (width, by) != (table.width, table.by):
        table = _TablePass(width, by)  # the guess was wrong: read again with the layout decided
        table.run(restart())
    for stage in table.stages:
        problems.extend(stage)
    if width == 6:
        return Parsed("trec", table.cols, "score", True, tuple(table.tags))
    return Parsed("3col-" + by, table.cols, by)


def _guess(chunk: Chunk) -> tuple[int, str]:
    """``(width, by)`` the file probably has, from its first chunk."""
    widths = _widths(chunk)
    n6, n3 = int(np.count_nonzero(widths == 6)), int(np.count_nonzero(widths == 3))
    if n6 >= n3:
        return 6, "score"
    probe = _TablePass(3, "score")
    probe.run([chunk])
    return 3, "rank" if probe.looks_like_ranks() else "score"


def _widths(chunk: Chunk) -> np.ndarray:
    """Fields per line of ``chunk`` (0 for a blank line)."""
    text = chunk.text
    if isinstance(text, str) or len(text) > _ARRAY_LIMIT:
        return np.array([len(line.split()) for line in text.split(chunk.newline)], dtype=np.int64)
    return positions(text, chunk.newline[0])[2]


def _not_a_run(first: str, first_line: int, counts: Counter, problems: ProblemList) -> None:
    fields = first.split()
    if len(fields) == 4 and fields[1] in ("0", "Q0"):
        problems.error("qrels_file", "this looks like a qrels file (qid 0 docid relevance: the gold labels), not a run",
                       line=first_line)
    elif "," in first and len(fields) in (1, 2):
        problems.error("csv_without_header", "comma-separated values without a header line; add a header such as "
                                             "qid,docid,score (or qid,docid,rank)", line=first_line)
    else:
        common = max(counts, key=counts.get)
        problems.error("not_a_run",
                       f"this does not look like a run file: most lines have {common} fields, expected 6 "
                       f"({TREC_FIELDS}) or 3 (qid docid rank|score), or a CSV/JSON run", line=first_line)


class _TablePass:
    """One reading of a whitespace table as ``width`` fields per line (``by``: how a 3-column
    file's third field is read). Gathers the field counts of every line (``counts``), the
    statistics of the 3-column rule, the run tags, and the problems in the order the whole-file
    reader reported them (``stages``): field counts, then scores, then ranks (3 columns: the
    third field's problems in the second stage)."""

    def __init__(self, width: int, by: str):
        self.width, self.by = width, by
        self.cols = Columns()
        self.counts: Counter = Counter()
        self.tags: dict[str, None] = {}
        self.fields, self.scores, self.ranks = ProblemList(), ProblemList(), ProblemList()
        self.stages = (self.fields, self.scores, self.ranks)
        self.n_values = self.n_digits = 0
        self._digit_q: list[np.ndarray] = []
        self._digit_v: list[np.ndarray] = []
        # 3 columns read as scores: while every value is also a whole number >= 1, keep the
        # ranks too, so that a file the rule reads as ranks needs no second pass
        self.ranks_complete = width == 3 and by == "score"
        self._alt_ranks: list[np.ndarray] = []

    def run(self, chunks: Iterable[Chunk]) -> None:
        expected = f"{self.width} fields ({TREC_FIELDS})" if self.width == 6 else "3 fields (qid docid rank|score)"
        for chunk in chunks:
            text = chunk.text
            arrays = isinstance(text, bytes) and len(text) <= _ARRAY_LIMIT and b"\x00" not in text
            if arrays:
                starts, ends, widths = positions(text, chunk.newline[0])
            else:
                widths = _widths(chunk)
            nonzero = widths[widths > 0]
            if len(nonzero):
                values, index, n = np.unique(nonzero, return_index=True, return_counts=True)
                for i in np.argsort(index, kind="stable").tolist():  # first-seen order, as Counter(widths)
                    self.counts[int(values[i])] += int(n[i])
            good = widths == self.width
            all_good = len(nonzero) == np.count_nonzero(good)
            if not all_good:  # lines of another width: errors, and skipped
                for i in np.flatnonzero(~good & (widths > 0)).tolist():
                    self.fields.error("bad_field_count", f"expected {expected}, found {int(widths[i])}",
                                      line=chunk.line + i, kind="wrong number of fields")
            if not np.count_nonzero(good):
                continue
            if arrays:
                if not all_good:
                    keep = np.repeat(good, widths)
                    starts, ends = starts[keep], ends[keep]
                fields = ArrayFields(text, starts, ends, self.width)
            else:
                tokens = text.split()
                if not all_good:
                    tokens = list(compress(tokens, np.repeat(good, widths).tolist()))
                fields = TokenFields(tokens, self.width)
            lines = np.flatnonzero(good) + chunk.line
            if self.width == 6:
                self._six(fields, lines)
            else:
                self._three(fields, lines)

    def _codes(self, fields, j: int, which: str) -> np.ndarray:
        cols = self.cols
        if which == "q":
            return fields.codes(j, cols.q_codes, cols.q_index)
        return fields.codes(j, cols.d_codes, cols.d_index)

    def _six(self, fields, lines: np.ndarray) -> None:
        for tag in fields.first_seen(5):
            self.tags.setdefault(tag)
        scores, bad_s = fields.floats(4, lines, self.scores)
        ranks, bad_r = fields.ints(3, lines, self.ranks)
        q, d = self._codes(fields, 0, "q"), self._codes(fields, 2, "d")
        if bad_s is not None or bad_r is not None:
            keep = ~(bad_s if bad_r is None else bad_r if bad_s is None else bad_s | bad_r)
            q, d, scores, ranks, lines = q[keep], d[keep], scores[keep], ranks[keep], lines[keep]
        self.cols.append(q, d, score=scores, rank=ranks, line=lines)

    def _three(self, fields, lines: np.ndarray) -> None:
        q = self._codes(fields, 0, "q")
        self.n_values += fields.n
        mask, digit_values = fields.digit_values(2)
        if digit_values is not None:
            self.n_digits += len(digit_values)
            self._digit_q.append(q[mask])
            self._digit_v.append(digit_values)
        if self.by == "rank":
            values, bad = fields.ints(2, lines, self.scores, " (the third column holds ranks in this file)", True)
        else:
            values, bad = fields.floats(2, lines, self.scores)
            if self.ranks_complete:
                self.ranks_complete = (bad is None and digit_values is not None and len(digit_values) == fields.n
                                       and bool(np.all(digit_values >= 1)))
                if self.ranks_complete:
                    self._alt_ranks.append(digit_values)
        d = self._codes(fields, 1, "d")
        if bad is not None:
            keep = ~bad
            q, d, values, lines = q[keep], d[keep], values[keep], lines[keep]
        self.cols.append(q, d, line=lines, **{self.by: values})

    def switch_to_ranks(self) -> None:
        """Read a 3-column pass made as scores as ranks: every value was a whole number >= 1
        (so no value has a problem either way)."""
        self.cols.read_scores_as_ranks(self._alt_ranks)
        self.by = "rank"

    def looks_like_ranks(self) -> bool:
        """The 3-column rule of :mod:`bsard_demo.runs.read`: more than half of the values are
        whole numbers (digits only), distinct and starting at 1 within each question, and not
        in decreasing order in every question with two of them or more."""
        if not self.n_values or self.n_digits * 2 <= self.n_values:
            return False
        q = np.concatenate(self._digit_q)
        v = np.concatenate(self._digit_v) if len(self._digit_v) > 1 else self._digit_v[0]
        o = np.argsort(q, kind="stable")  # each question's values in file order
        q, v = q[o], v[o]
        starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
        if not bool(np.all(np.minimum.reduceat(v, starts) == 1)):
            return False
        o2 = np.lexsort((v, q))
        if bool(np.any((q[o2][1:] == q[o2][:-1]) & (v[o2][1:] == v[o2][:-1]))):
            return False  # a value repeated within a question
        multi = bool(np.any(q[1:] == q[:-1]))  # a question with two values or more
        rising = bool(np.any((q[1:] == q[:-1]) & (v[1:] > v[:-1])))  # ... not in decreasing order
        return not (multi and not rising)


