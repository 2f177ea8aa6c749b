"""Text -> columns for the whitespace tables (TREC, 3-column) and CSV with a header line.

:func:`parse_table` fills :class:`~bsard_demo.runs.validate.Columns` from a text run and
reports every bad line; the formats and the 3-column rank/score rule are described in
:mod:`bsard_demo.runs.read`. ``result`` is the :class:`~bsard_demo.runs.read.RunFile` being
read: parsers set its ``format`` and add to its ``problems``.

Parsers fill parallel columns (one list per field) rather than one object per line: a run of
100k lines then costs a handful of lists, not 100k tuples for the garbage collector to scan.
"""
from __future__ import annotations

import csv
import io
import math
from collections import Counter
from typing import Sequence

from .problems import ProblemList
from .validate import Columns

QID_NAMES = ("qid", "query_id", "question_id")
DOC_NAMES = ("docid", "doc_id", "article_id")
TREC_FIELDS = "qid Q0 docid rank score tag"
_KNOWN_COLUMNS = frozenset(QID_NAMES + DOC_NAMES + ("rank", "score"))


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\\n`` (or at ``\\r`` in an old-Mac file)."""
    return text.split("\n") if "\n" in text or "\r" not in text else text.split("\r")


def _header_columns(first: str) -> tuple[str | None, list[str]] | None:
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


def parse_table(text: str, lines: list[str], result):
    problems = result.problems
    first_i = next(i for i, line in enumerate(lines) if line.strip())
    first = lines[first_i].strip()
    header = _header_columns(first)
    if header is not None:
        return _parse_csv(lines, first_i, header[0], header[1], result)
    widths = list(map(len, map(str.split, lines)))  # fields per line (0 = blank)
    distinct = set(widths) - {0}
    counts = {distinct.pop(): len(widths) - widths.count(0)} if len(distinct) == 1 else Counter(widths)
    counts.pop(0, None)
    n6, n3, total = counts.get(6, 0), counts.get(3, 0), sum(counts.values())
    fields = first.split()
    if max(n6, n3) * 2 < total:
        if len(fields) == 4 and fields[1] in ("0", "Q0"):
            problems.error("qrels_file", "this looks like a qrels file (qid 0 docid relevance: the gold labels), not a run",
                           line=first_i + 1)
        elif "," in first and len(fields) in (1, 2):
            problems.error("csv_without_header", "comma-separated values without a header line; add a header such as "
                           "qid,docid,score (or qid,docid,rank)", line=first_i + 1)
        else:
            common = max(counts, key=counts.get)
            problems.error("not_a_run",
                f"this does not look like a run file: most lines have {common} fields, expected 6 "
                f"({TREC_FIELDS}) or 3 (qid docid rank|score), or a CSV/JSON run", line=first_i + 1)
        return None
    width = 6 if n6 >= n3 else 3
    cols, values = _split_columns(text, lines, widths, width, len(counts) > 1, problems)
    if width == 6:
        result.format = "trec"
        rank_s, score_s, tag_s = values
        cols.scores, bad = _floats(score_s, cols.lines, problems)
        cols.ranks, bad_r = _ints(rank_s, cols.lines, problems)
        # one tag in nearly every file: list.count compares in C, far cheaper than hashing all
        tags = dict.fromkeys(tag_s[:1] if tag_s and tag_s.count(tag_s[0]) == len(tag_s) else tag_s)
        cols.drop(bad | bad_r)
        return cols, "score", True, tags
    (value_s,) = values
    by = "rank" if _looks_like_ranks(cols.qids, value_s) else "score"
    result.format = "3col-" + by
    if by == "rank":
        cols.ranks, bad = _ints(value_s, cols.lines, problems, " (the third column holds ranks in this file)", True)
    else:
        cols.scores, bad = _floats(value_s, cols.lines, problems)
    cols.drop(bad)
    return cols, by, False, {}


def _split_columns(text: str, lines: list[str], widths: list[int], width: int, mixed: bool,
                   problems: ProblemList) -> tuple[Columns, list[list[str]]]:
    """Columns of the lines with ``width`` whitespace-separated fields; the others (only when
    ``mixed``) are errors. Returns the id columns in a :class:`Columns` and the others as strings."""
    expected = f"{width} fields ({TREC_FIELDS})" if width == 6 else "3 fields (qid docid rank|score)"
    bad_lines = [i for i, n in enumerate(widths) if n != width and n] if mixed else []
    if bad_lines:
        for i in bad_lines:
            problems.error("bad_field_count", f"expected {expected}, found {widths[i]}", line=i + 1, kind="wrong number of fields")
        skip = set(bad_lines)
        text = "\n".join(line for i, line in enumerate(lines) if i not in skip)
    tokens = text.split()  # all fields at once; every kept line has exactly ``width`` of them
    n_rows = len(tokens) // width
    last = len(widths)
    while last and not widths[last - 1]:
        last -= 1
    if not bad_lines and widths[:last].count(0) == 0:
        numbers: Sequence[int] = range(1, n_rows + 1)
    else:
        numbers = [i for i, n in enumerate(widths, 1) if n == width]
    columns = [tokens[j::width] for j in range(width)]
    if width == 6:
        cols = Columns(qids=columns[0], docs=columns[2], lines=numbers)
        return cols, [columns[3], columns[4], columns[5]]
    return Columns(qids=columns[0], docs=columns[1], lines=numbers), [columns[2]]


def _number_problem(what: str, token: str) -> str:
    hint = ""
    if "," in token:
        try:
            float(token.replace(",", "."))
            hint = " (decimal comma? use a point)"
        except ValueError:
            pass
    return f"{what} {token!r} is not a number{hint}"


def _floats(values: list[str], lines: Sequence[int], problems: ProblemList) -> tuple[list[float], set[int]]:
    """Scores parsed from ``values``, and the indices of those that are not finite numbers."""
    try:
        out = list(map(float, values))
        if all(map(math.isfinite, out)):
            return out, set()
    except ValueError:
        pass
    out, bad = [], set()
    for i, v in enumerate(values):
        try:
            x = float(v)
        except ValueError:
            problems.error("bad_score", _number_problem("score", v), line=lines[i], kind="score is not a number")
            x = 0.0
            bad.add(i)
        else:
            if not math.isfinite(x):
                problems.error("bad_score", f"score {v!r} is not a finite number", line=lines[i], kind="score is NaN or infinite")
                bad.add(i)
        out.append(x)
    return out, bad


def _ints(values: list[str], lines: Sequence[int], problems: ProblemList, note: str = "",
          positive: bool = False) -> tuple[list[int], set[int]]:
    """Ranks parsed from ``values`` (``"3.0"`` counts as 3; at least 1 when ``positive``), and
    the indices of the bad ones."""
    try:
        out = list(map(int, values))
        if not positive or min(out, default=1) >= 1:
            return out, set()
    except ValueError:
        pass
    out, bad = [], set()
    what = "a whole number ≥ 1" if positive else "a whole number"
    for i, v in enumerate(values):
        try:
            r = int(v)
        except ValueError:
            r = whole(v)
        if r is None or positive and r < 1:
            problems.error("bad_rank", f"rank {v!r} is not {what}{note}", line=lines[i], kind="rank is not a whole number")
            r = 0
            bad.add(i)
        out.append(r)
    return out, bad


def whole(token: str) -> int | None:
    """``token`` as a whole number, also written as a float (``"3.0"``); else None."""
    try:
        x = float(token)
    except ValueError:
        return None
    return int(x) if math.isfinite(x) and x.is_integer() else None


def _looks_like_ranks(qids: list[str], values: list[str]) -> bool:
    """The 3-column rule of the module docstring."""
    per_q: dict[str, list[int]] = {}
    n_int = 0
    for qid, value in zip(qids, values):
        if value.isascii() and value.isdigit():
            n_int += 1
            q = per_q.get(qid)
            if q is None:
                q = per_q[qid] = []
            q.append(int(value))
    if not values or n_int * 2 <= len(values):
        return False
    multi = decreasing = 0
    for v in per_q.values():
        if min(v) != 1 or len(set(v)) != len(v):
            return False
        if len(v) > 1:
            multi += 1
            decreasing += v == sorted(v, reverse=True)
    return not (multi and decreasing == multi)


def _parse_csv(lines: list[str], header_i: int, delim: str | None, names: list[str], result):
    problems = result.problems
    result.format = "csv"
    shown = ", ".join(names)

    def col(options: tuple[str, ...]) -> int | None:
        return next((names.index(o) for o in options if o in names), None)

    qcol, dcol = col(QID_NAMES), col(DOC_NAMES)
    scol, rcol, tcol = col(("score",)), col(("rank",)), col(("tag",))
    missing = []
    if qcol is None:
        missing.append(f"no question id column (expected one of {', '.join(QID_NAMES)})")
    if dcol is None:
        missing.append(f"no article id column (expected one of {', '.join(DOC_NAMES)})")
    if scol is None and rcol is None:
        missing.append("no score or rank column")
    if missing:
        problems.error("missing_columns", f"the header has {'; '.join(missing)}; found columns: {shown}", line=header_i + 1)
        return None
    width = len(names)
    cols = Columns(lines=[])
    score_s: list[str] = []
    rank_s: list[str] = []
    tags: dict[str, None] = {}
    if delim is None:
        rows = ((i, line.split()) for i, line in enumerate(lines[header_i + 1:], header_i + 2))
    else:
        rows = _csv_rows("\n".join(lines[header_i + 1:]), delim, header_i + 1, problems)
    for lineno, row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != width:
            problems.error("bad_field_count", f"expected {width} fields as in the header ({shown}), found {len(row)}",
                           line=lineno, kind="wrong number of fields")
            continue
        qid, docid = row[qcol].strip(), row[dcol].strip()
        if not qid or not docid:
            what = "question" if not qid else "article"
            problems.error("bad_id", f"empty {what} id", line=lineno, kind=f"empty {what} id")
            continue
        cols.qids.append(qid)
        cols.docs.append(docid)
        cols.lines.append(lineno)
        if scol is not None:
            score_s.append(row[scol].strip())
        if rcol is not None:
            rank_s.append(row[rcol].strip())
        if tcol is not None:
            tags.setdefault(row[tcol].strip())
    bad: set[int] = set()
    if scol is not None:
        cols.scores, bad = _floats(score_s, cols.lines, problems)
    if rcol is not None:
        cols.ranks, bad_r = _ints(rank_s, cols.lines, problems)
        bad |= bad_r
    cols.drop(bad)
    if not cols.qids and not problems.has_errors:
        problems.error("no_run_lines", "the CSV file has a header but no data lines", line=header_i + 1)
    by = "score" if scol is not None else "rank"
    return cols, by, scol is not None and rcol is not None, tags


def _csv_rows(body: str, delim: str, offset: int, problems: ProblemList):
    """``(line number, fields)`` of a delimited body whose first line is file line ``offset + 1``."""
    reader = csv.reader(io.StringIO(body, newline=""), delimiter=delim)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.error("csv_syntax_error", f"CSV syntax error: {exc}; the rest of the file was not read", line=offset + reader.line_num)
            return
        yield offset + reader.line_num, row
