"""Tables with a header line (CSV, TSV, whitespace), streamed: the column names a run or qrels table may
use, :func:`header_columns` that tells a header line, :func:`columns_problem` for a header that lacks a
column, and :func:`parse_csv` that reads the rows for :mod:`.text_formats`. Formats: docs/run-formats.md.
"""
from __future__ import annotations

import csv
import io
from itertools import chain, compress
from typing import Iterable, Iterator

import numpy as np

from .columns import Columns, Parsed
from .decode import Chunk
from .fields import floats, ints
from .problems import ProblemList, quote

#: Question id column names: ours, ir_measures' (``query_id``) and ranx's (``q_id``), in this order of preference.
QID_NAMES = ("qid", "query_id", "question_id", "q_id")
DOC_NAMES = ("docid", "doc_id", "article_id")
_KNOWN_COLUMNS = frozenset(QID_NAMES + DOC_NAMES + ("rank", "score"))
_RELEVANCE = "relevance"  # a qrels table's label column (ir_measures, ranx)
#: A labels table's relevance column, first found wins (ir_measures' ``relevance``, ranx's ``score``):
#: :mod:`.qrels_read` and the parquet parser's ``labels`` mode.
RELEVANCE_NAMES = ("relevance", "rel", "label", "score")
_CSV_BATCH = 50_000


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


def after_line(chunks: Iterable[Chunk], line: int) -> Iterator[str]:
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


def parse_csv(chunks: Iterable[Chunk], header_line: int, delim: str | None, names: list[str],
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
    body = after_line(chunks, header_line)
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
