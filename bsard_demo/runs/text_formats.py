"""Text -> columns for the whitespace tables (TREC, 3-column) and CSV with a header line, streamed:
:func:`parse_table` reads :class:`~bsard_demo.runs.decode.Chunk` s of whole lines into a
:class:`~bsard_demo.runs.columns.Parsed` for :mod:`bsard_demo.runs.read` and reports every bad line.
The formats and the 3-column rank/score rule: docs/run-formats.md.

How: docs/design.md, 'bsard_demo/runs/text_formats.py'.
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from itertools import chain, compress
from typing import Callable, Iterable, Iterator

import numpy as np

from .columns import UNKNOWN, Columns, Parsed
from .decode import Chunk
from .fields import ArrayFields, TokenFields, floats, ints, positions
from .problems import ProblemList, quote

#: Question id column names: ours, ir_measures' (``query_id``) and ranx's (``q_id``), in this order of preference.
QID_NAMES = ("qid", "query_id", "question_id", "q_id")
DOC_NAMES = ("docid", "doc_id", "article_id")
TREC_FIELDS = "qid Q0 docid rank score tag"
_KNOWN_COLUMNS = frozenset(QID_NAMES + DOC_NAMES + ("rank", "score"))
_RELEVANCE = "relevance"  # a qrels table's label column (ir_measures, ranx)
#: A labels table's relevance column, first found wins (ir_measures' ``relevance``, ranx's ``score``):
#: :mod:`.qrels_read` and the parquet parser's ``labels`` mode.
RELEVANCE_NAMES = ("relevance", "rel", "label", "score")
_CSV_BATCH = 50_000
_ARRAY_LIMIT = 4 << 20  # chunks up to this size (all but very long lines) are split with numpy


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\\n`` (or at ``\\r`` in an old-Mac file)."""
    return text.split("\n") if "\n" in text or "\r" not in text else text.split("\r")


def header_columns(first: str) -> tuple[str | None, list[str]] | None:
    """``(delimiter, lower-case column names)`` when ``first`` is a header line, else None.
    The delimiter is None for whitespace."""
    for delim in (",", "\t", ";"):
        if delim in first:
            names = [c.strip().strip("\"'").strip().lower() for c in first.split(delim)]
            if any(n in _KNOWN_COLUMNS for n in names):
                return delim, names
    names = [c.lower() for c in first.split()]
    if sum(n in _KNOWN_COLUMNS for n in names) >= 2:
        return None, names
    return None


def parse_table(chunks: Iterable[Chunk], first_line: int, first: str, problems: ProblemList,
                restart: Callable[[], Iterator[Chunk]]) -> Parsed:
    """The run of a text file whose first non-blank line is ``first`` (line ``first_line``);
    ``chunks`` report their decoding problems to ``problems`` too, and ``restart`` reads the text
    again (without them) when the first pass guessed the layout wrong."""
    header = header_columns(first)
    if header is not None:
        return _parse_csv(chunks, first_line, header[0], header[1], problems)
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


def _after_line(chunks: Iterable[Chunk], line: int) -> Iterator[str]:
    """The text after line ``line`` (its line break included), chunk by chunk, line breaks as
    ``\\n`` (an old-Mac file's ``\\r`` too)."""
    for chunk in chunks:
        text = chunk.as_str()
        if chunk.cr_only:
            text = text.replace("\r", "\n")
        end = chunk.line + text.count("\n")
        if end < line:
            continue
        if chunk.line <= line:
            cut = -1
            for _ in range(line - chunk.line + 1):
                cut = text.find("\n", cut + 1)
                if cut < 0:
                    break
            if cut < 0:
                continue
            text = text[cut + 1:]
        if text:
            yield text


def missing_columns(qcol, dcol, scol, rcol) -> list[str]:
    """What a table's header lacks (each a phrase), given the columns found (None: absent)."""
    missing = []
    if qcol is None:
        missing.append(f"no question id column (expected one of {', '.join(QID_NAMES)})")
    if dcol is None:
        missing.append(f"no article id column (expected one of {', '.join(DOC_NAMES)})")
    if scol is None and rcol is None:
        missing.append("no score or rank column")
    return missing


def columns_problem(names: list[str], qcol, dcol, scol, rcol) -> tuple[str, str] | None:
    """``(code, message)`` of a table whose header or schema lacks a needed column: a qrels
    table (a ``relevance`` column, no score or rank) or ``missing_columns``; None when complete."""
    shown = quote(", ".join(map(str, names)) or "none", marks=False)
    if qcol is not None and dcol is not None and scol is None and rcol is None \
            and any(str(n).strip().lower() == _RELEVANCE for n in names):
        return "qrels_file", (f"this looks like a qrels table (a {_RELEVANCE} column: the gold labels), not a run; "
                              f"a run has a score or rank column; found columns: {shown}")
    missing = missing_columns(qcol, dcol, scol, rcol)
    return ("missing_columns", f"{'; '.join(missing)}; found columns: {shown}") if missing else None


def _parse_csv(chunks: Iterable[Chunk], header_line: int, delim: str | None, names: list[str],
               problems: ProblemList) -> Parsed:
    shown = quote(", ".join(names), marks=False)

    def col(options: tuple[str, ...]) -> int | None:
        return next((names.index(o) for o in options if o in names), None)

    qcol, dcol = col(QID_NAMES), col(DOC_NAMES)
    scol, rcol, tcol = col(("score",)), col(("rank",)), col(("tag",))
    lacking = columns_problem(names, qcol, dcol, scol, rcol)
    if lacking is not None:
        for _ in chunks:  # read to the end: the decoding problems of every line are reported
            pass
        code, message = lacking
        problems.error(code, message if code == "qrels_file" else f"the header has {message}", line=header_line)
        return Parsed("csv")
    width = len(names)
    cols = Columns()
    rows_stage, score_stage, rank_stage = ProblemList(), ProblemList(), ProblemList()
    tags: dict[str, None] = {}
    batch: dict[str, list] = {"q": [], "d": [], "s": [], "r": [], "line": []}
    body = _after_line(chunks, header_line)
    if delim is None:
        rows = _whitespace_rows(body, header_line + 1)
    else:
        rows = _csv_rows(chain.from_iterable(io.StringIO(text, newline="") for text in body), delim, header_line,
                         rows_stage)
    for lineno, row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != width:
            rows_stage.error("bad_field_count", f"expected {width} fields as in the header ({shown}), found {len(row)}",
                             line=lineno, kind="wrong number of fields")
            continue
        qid, docid = row[qcol].strip(), row[dcol].strip()
        if not qid or not docid:
            what = "question" if not qid else "article"
            rows_stage.error("bad_id", f"empty {what} id", line=lineno, kind=f"empty {what} id")
            continue
        batch["q"].append(qid)
        batch["d"].append(docid)
        batch["line"].append(lineno)
        if scol is not None:
            batch["s"].append(row[scol].strip())
        if rcol is not None:
            batch["r"].append(row[rcol].strip())
        if tcol is not None:
            tags.setdefault(row[tcol].strip())
        if len(batch["q"]) >= _CSV_BATCH:
            _flush_csv(batch, cols, scol is not None, rcol is not None, score_stage, rank_stage)
    _flush_csv(batch, cols, scol is not None, rcol is not None, score_stage, rank_stage)
    for _ in body:  # a CSV syntax error stopped the rows: still decode the rest
        pass
    for stage in (rows_stage, score_stage, rank_stage):
        problems.extend(stage)
    if not len(cols) and not problems.has_errors:
        problems.error("no_run_lines", "the CSV file has a header but no data lines", line=header_line)
    by = "score" if scol is not None else "rank"
    return Parsed("csv", cols, by, scol is not None and rcol is not None, tuple(tags))


def _flush_csv(batch: dict[str, list], cols: Columns, has_score: bool, has_rank: bool,
               score_stage: ProblemList, rank_stage: ProblemList) -> None:
    if not batch["q"]:
        return
    lines = np.array(batch["line"], dtype=np.int64)
    scores = ranks = bad = None
    if has_score:
        scores, bad = floats(batch["s"], lines, score_stage)
    if has_rank:
        ranks, bad_r = ints(batch["r"], lines, rank_stage)
        bad = bad_r if bad is None else bad if bad_r is None else bad | bad_r
    q, d = batch["q"], batch["d"]
    if bad is not None:
        keep = ~bad
        q, d = list(compress(q, keep.tolist())), list(compress(d, keep.tolist()))
        lines = lines[keep]
        scores = None if scores is None else scores[keep]
        ranks = None if ranks is None else ranks[keep]
    if q:
        cols.append(cols.q_codes(q), cols.d_codes(d), score=scores, rank=ranks, line=lines)
    for values in batch.values():
        values.clear()


def _whitespace_rows(body: Iterable[str], first_line: int) -> Iterator[tuple[int, list[str]]]:
    lineno = first_line
    for text in body:
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        for line in lines:
            yield lineno, line.split()
            lineno += 1


def _csv_rows(lines: Iterator[str], delim: str, offset: int, problems: ProblemList):
    """``(line number, fields)`` of a delimited body whose first line is file line ``offset + 1``."""
    reader = csv.reader(lines, delimiter=delim)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            reason = (f"a field is longer than {csv.field_size_limit():,} characters" if "field limit" in str(exc)
                      else quote(exc, marks=False))
            problems.error("csv_syntax_error", f"CSV syntax error: {reason}; the rest of the file was not read",
                           line=offset + reader.line_num)
            return
        yield offset + reader.line_num, row
