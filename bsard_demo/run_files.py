"""Read and validate run files of any common layout, reporting every problem at once.

:func:`read_run_bytes` (and :func:`read_run_path`) never raise: whatever the bytes, they return
a :class:`RunFile` whose ``problems`` list every error (the run cannot be used, ``run`` is
``None``) and warning (the run is scored anyway), each with its 1-based line (``None`` for the
file as a whole).

Formats, detected from the content (never from the file name). A text file without a header
line is a whitespace-separated table whose layout is the field count (6 or 3) of at least half
of its lines; lines with another count are errors.

- ``trec``: 6 fields ``qid Q0 docid rank score tag``. Articles are ordered by score, as
  trec_eval does (ties by article id descending); ranks must be whole numbers (``3.0`` is 3) but
  only serve to warn when their order contradicts the scores.
- ``3col-rank`` / ``3col-score``: 3 fields ``qid docid value``. The value is read as a **rank**
  when more than half of the values are plain whole numbers (digits only) and, for every
  question, those numbers are distinct and start at 1 — unless every question with two lines or
  more lists them in decreasing order, which is how a file of whole-number *scores* (best
  first) looks. Otherwise the value is a **score** (higher is better). Values that do not fit
  the reading chosen are errors (a rank must be a whole number ≥ 1).
- ``csv``: a header line naming the columns, separated by commas, semicolons, tabs or (with at
  least two known names) whitespace. Question id column ``qid``/``query_id``/``question_id``,
  article id column ``docid``/``doc_id``/``article_id``, plus ``score`` and/or ``rank`` (score
  wins when both are present; ranks are then only checked), optional ``tag``. Names are
  case-insensitive; other columns are ignored.
- ``json-scores``: ``{"qid": {"docid": score, ...}, ...}``; ``json-ranked``:
  ``{"qid": ["docid", ...], ...}`` (first = best). Scores must be JSON numbers; article ids
  strings or integers.
- ``jsonl``: one JSON object per line, either ``{"qid": .., "docid": .., "score": ..}`` (same
  key names and rules as the CSV columns; ``rank`` instead of ``score`` also works) or
  ``{"qid": .., "docids": [..]}`` (also ``doc_ids``/``article_ids``; first = best; a second
  record for the same question continues its list). The first valid record fixes which.

Any of these may be gzip-compressed (detected by its magic bytes; ``RunFile.compressed``); it is
inflated in a streaming way and abandoned as soon as it exceeds ``max_decompressed_bytes``
(which also caps uncompressed files). Text is UTF-8, with or without BOM (UTF-16/32 with a BOM
are accepted too), any line ending and any whitespace between fields. Blank lines are skipped.

Problems of JSON object files have no line (``None``); their message names the question and
article. Each repeated problem has a ``kind`` (e.g. ``"score is not a number"``), so a file
with 100,000 bad lines keeps the first few with their lines and counts the rest.

Warnings (the run is still scored): an article listed twice for a question (its best position
is kept), question ids not in ``qids``, article ids not in ``corpus_ids``, rank order that
contradicts the scores, tied scores whose ranks disagree with the trec_eval tie-break, several run
tags in one file, questions with fewer than ``k`` articles.
"""
from __future__ import annotations

import codecs
import csv
import io
import json
import math
import zlib
from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby, islice
from operator import gt, lt
from pathlib import Path
from typing import Collection, Sequence

import numpy as np

from .problems import ProblemList
from .run import Run

FORMATS = ("trec", "3col-rank", "3col-score", "csv", "json-scores", "json-ranked", "jsonl")
UNKNOWN = "unknown"
DEFAULT_MAX_BYTES = 256 * 2**20

QID_NAMES = ("qid", "query_id", "question_id")
DOC_NAMES = ("docid", "doc_id", "article_id")
LIST_NAMES = ("docids", "doc_ids", "article_ids")
TREC_FIELDS = "qid Q0 docid rank score tag"
_KNOWN_COLUMNS = frozenset(QID_NAMES + DOC_NAMES + ("rank", "score"))
_EXAMPLES = 5  # ids listed in a summary warning


_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive (or an Excel/Word file)"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"\xfd7zXZ\x00", "an xz archive (only gzip compression is supported)"),
    (b"(\xb5/\xfd", "a zstd archive (only gzip compression is supported)"),
    (b"7z\xbc\xaf'\x1c", "a 7-Zip archive (only gzip compression is supported)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Microsoft Office file"),
    (b"\x93NUMPY", "a NumPy array file"),
    (b"SQLite format 3\x00", "an SQLite database"),
)


@dataclass
class RunFile:
    """A run file as read: its detected format, the run (``None`` when the file has any error)
    and all of its problems."""

    name: str
    format: str
    run: Run | None
    problems: ProblemList
    tags: tuple[str, ...] = ()
    compressed: bool = False

    @property
    def ok(self) -> bool:
        """True when the run can be scored (no errors; warnings allowed)."""
        return self.run is not None


# ---------------------------------------------------------------------------------------------
# public API


def read_run_bytes(
    data: bytes,
    name: str,
    *,
    qids: Collection[str] | None = None,
    corpus_ids: Collection[str] | None = None,
    k: int = 100,
    max_decompressed_bytes: int = DEFAULT_MAX_BYTES,
) -> RunFile:
    """Detect the format of ``data``, parse it and validate it; never raises."""
    result = RunFile(name=str(name), format=UNKNOWN, run=None, problems=ProblemList())
    try:
        _read(bytes(data), result, qids, corpus_ids, k, max_decompressed_bytes)
    except Exception as exc:  # never let odd bytes escape as a traceback
        result.problems.error(
            f"unexpected failure while reading the file ({type(exc).__name__}: {exc}); "
            "please report it with the file"
        )
    if result.problems.has_errors:
        result.run = None
    return result


def read_run_path(
    path: str | Path,
    *,
    qids: Collection[str] | None = None,
    corpus_ids: Collection[str] | None = None,
    k: int = 100,
    max_decompressed_bytes: int = DEFAULT_MAX_BYTES,
) -> RunFile:
    """Read a run file from disk; a missing, unreadable or non-regular file is an error problem."""
    p = Path(path)
    problems = ProblemList()
    try:
        if not p.exists():
            problems.error(f"file not found: {p}")
        elif p.is_dir():
            problems.error(f"{p} is a folder, not a run file")
        elif not p.is_file():
            problems.error(f"{p} is not a regular file")
        elif p.stat().st_size > max_decompressed_bytes:
            problems.error(
                f"the file is {_size(p.stat().st_size)}, above the limit of {_size(max_decompressed_bytes)}"
            )
        else:
            with open(p, "rb") as f:
                data = f.read(max_decompressed_bytes + 1)
            return read_run_bytes(
                data, p.name, qids=qids, corpus_ids=corpus_ids, k=k,
                max_decompressed_bytes=max_decompressed_bytes,
            )
    except OSError as exc:
        problems.error(f"cannot read {p}: {exc.strerror or exc}")
    except Exception as exc:
        problems.error(f"cannot read {p} ({type(exc).__name__}: {exc})")
    return RunFile(name=p.name, format=UNKNOWN, run=None, problems=problems)


# ---------------------------------------------------------------------------------------------
# bytes -> text


def _size(n: int) -> str:
    if n >= 2**20:
        return f"{n / 2**20:.1f} MB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KB"
    return f"{n} bytes"


def _gunzip(data: bytes, cap: int, problems: ProblemList) -> bytes | None:
    """Inflate (possibly multi-member) gzip data, or report a bomb, truncation or corruption and
    return None. A first pass only counts the decompressed bytes (memory: one 64 KB chunk), so a
    bomb is refused without ever holding its content; the second pass keeps it."""
    scratch = ProblemList()
    if _inflate(data, cap, scratch, keep=False) is None:
        problems.extend(scratch)
        return None
    return _inflate(data, cap, problems, keep=True)


def _inflate(data: bytes, cap: int, problems: ProblemList, *, keep: bool) -> bytes | None:
    """Inflate in a streaming way, never holding more than ``cap + 1`` decompressed bytes (none
    unless ``keep``: then ``b""`` is returned on success)."""
    out: list[bytes] = []
    total = 0
    chunk = 1 << 16
    pos = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        while True:
            if d.eof:
                rest = d.unused_data + data[pos:]
                if not rest.strip(b"\x00"):
                    break
                if rest[:2] != b"\x1f\x8b":
                    problems.warning(f"{_size(len(rest))} of data after the end of the gzip stream were ignored")
                    break
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # another gzip member follows
                data, pos = rest, 0
            if d.unconsumed_tail:
                inp = d.unconsumed_tail
            elif pos < len(data):
                inp = data[pos:pos + chunk]
                pos += chunk
            else:
                inp = b""
            piece = d.decompress(inp, min(1 << 20, cap - total + 1))  # bounded output per call
            total += len(piece)
            if total > cap:
                problems.error(
                    f"the decompressed content is larger than the limit of {_size(cap)}; "
                    "decompression was stopped"
                )
                return None
            if keep:
                out.append(piece)
            if not inp and not piece:
                break
        if not d.eof:
            problems.error("the gzip file is truncated: its compressed data ends too early")
            return None
    except zlib.error as exc:
        problems.error(f"the gzip file is corrupt ({exc})")
        return None
    return b"".join(out)


def _split_bytes_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n") if b"\n" in data or b"\r" not in data else data.split(b"\r")


def _decode(data: bytes, problems: ProblemList) -> str | None:
    """Text of ``data`` (UTF-8, BOM dropped). Undecodable lines are reported with their number
    and decoded with replacement characters so that later checks still run."""
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                name = codec.upper()
                problems.error(f"the file starts with a {name} byte-order mark but is not valid {name} ({exc.reason})")
                return None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for lineno, raw in enumerate(_split_bytes_lines(data), 1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start:exc.start + 1].hex().upper()
            hint = ""
            try:
                raw.decode("cp1252")
                hint = " (the file may be Latin-1/Windows-1252: save it as UTF-8)"
            except UnicodeDecodeError:
                pass
            problems.error(
                f"not valid UTF-8: byte 0x{bad} at character {exc.start + 1}{hint}",
                line=lineno, kind="line is not valid UTF-8",
            )
    return data.decode("utf-8", "replace")


def _binary_kind(data: bytes) -> str | None:
    """An error message when ``data`` is a known binary file (or plainly not text), else None."""
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return f"this is {what}, not a run file"
    if data[:3] == b"BZh" and data[4:10] == b"1AY&SY":
        return "this is a bzip2 archive (only gzip compression is supported), not a run file"
    head = data[:8192]
    if b"\x00" in head:
        if len(head) >= 4 and (head[1::2].count(0) > len(head) // 4 or head[0::2].count(0) > len(head) // 4):
            return "this looks like UTF-16 text without a byte-order mark; save the file as UTF-8"
        return "this is a binary file (it contains NUL bytes), not a run file"
    return None


def _read(data: bytes, result: RunFile, qids, corpus_ids, k: int, cap: int) -> None:
    problems = result.problems
    if not data:
        problems.error("the file is empty (0 bytes)")
        return
    if data[:2] == b"\x1f\x8b":
        result.compressed = True
        inflated = _gunzip(data, cap, problems)
        if inflated is None:
            return
        if not inflated:
            problems.error("the gzip file is empty: it decompresses to 0 bytes")
            return
        if inflated[:2] == b"\x1f\x8b":
            problems.error("the file is gzip-compressed twice; decompress it once")
            return
        data = inflated
    elif len(data) > cap:
        problems.error(f"the file is {_size(len(data))}, above the limit of {_size(cap)}")
        return
    bom_16_32 = data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    what = None if bom_16_32 else _binary_kind(data)
    if what is not None:
        problems.error(what)
        return
    text = _decode(data, problems)
    if text is None:
        return
    stripped = text.strip()
    if not stripped:
        problems.error("the file contains only whitespace: no run lines")
        return
    head = stripped[:200].lower()
    if head.startswith(("<!doctype html", "<html", "<head", "<body")):
        problems.error("this is an HTML web page, not a run file "
                       "(did you save a download page instead of the raw file?)")
        return
    if head.startswith("<"):
        problems.error("this is an XML/HTML document, not a run file")
        return
    _parse_text(text, result, qids, corpus_ids, k)


# ---------------------------------------------------------------------------------------------
# text -> columns
#
# Parsers fill parallel columns (one list per field) rather than one object per line: a run of
# 100k lines then costs a handful of lists, not 100k tuples for the garbage collector to scan.


@dataclass
class _Cols:
    """Usable run lines as parallel columns; ``lines`` None when the format has no lines."""

    qids: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    scores: list[float] | None = None
    ranks: list[int] | None = None
    lines: Sequence[int] | None = None

    def line(self, i: int) -> int | None:
        return self.lines[i] if self.lines is not None else None

    def drop(self, bad: set[int]) -> None:
        """Remove the rows of index ``bad``."""
        if not bad:
            return
        keep = [i for i in range(len(self.qids)) if i not in bad]
        for name in ("qids", "docs", "scores", "ranks", "lines"):
            col = getattr(self, name)
            if col is not None:
                setattr(self, name, [col[i] for i in keep])


def _lines(text: str) -> list[str]:
    return text.split("\n") if "\n" in text or "\r" not in text else text.split("\r")


def _parse_text(text: str, result: RunFile, qids, corpus_ids, k: int) -> None:
    problems = result.problems
    if text[:4096].lstrip()[:1] in ("{", "["):
        parsed = _parse_json_any(text, result)
    else:
        parsed = _parse_table(text, _lines(text), result)
    if parsed is None:
        return
    cols, by, check_ranks, tags = parsed
    result.tags = tuple(tags)
    if not cols.qids:
        if not problems.has_errors:
            problems.error("the file has no usable run lines")
        return
    run = _build(cols, by, problems, name=result.name, tags=result.tags, check_ranks=check_ranks)
    _warn(run, result, qids, corpus_ids, k)
    result.run = run


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


def _parse_table(text: str, lines: list[str], result: RunFile):
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
            problems.error("this looks like a qrels file (qid 0 docid relevance: the gold labels), not a run",
                           line=first_i + 1)
        elif "," in first and len(fields) in (1, 2):
            problems.error("comma-separated values without a header line; add a header such as "
                           "qid,docid,score (or qid,docid,rank)", line=first_i + 1)
        else:
            common = max(counts, key=counts.get)
            problems.error(
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
                   problems: ProblemList) -> tuple[_Cols, list[list[str]]]:
    """Columns of the lines with ``width`` whitespace-separated fields; the others (only when
    ``mixed``) are errors. Returns the id columns in a :class:`_Cols` and the others as strings."""
    expected = f"{width} fields ({TREC_FIELDS})" if width == 6 else "3 fields (qid docid rank|score)"
    bad_lines = [i for i, n in enumerate(widths) if n != width and n] if mixed else []
    if bad_lines:
        for i in bad_lines:
            problems.error(f"expected {expected}, found {widths[i]}", line=i + 1, kind="wrong number of fields")
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
        cols = _Cols(qids=columns[0], docs=columns[2], lines=numbers)
        return cols, [columns[3], columns[4], columns[5]]
    return _Cols(qids=columns[0], docs=columns[1], lines=numbers), [columns[2]]


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
            problems.error(_number_problem("score", v), line=lines[i], kind="score is not a number")
            x = 0.0
            bad.add(i)
        else:
            if not math.isfinite(x):
                problems.error(f"score {v!r} is not a finite number", line=lines[i], kind="score is NaN or infinite")
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
            r = _whole(v)
        if r is None or positive and r < 1:
            problems.error(f"rank {v!r} is not {what}{note}", line=lines[i], kind="rank is not a whole number")
            r = 0
            bad.add(i)
        out.append(r)
    return out, bad


def _whole(token: str) -> int | None:
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


def _parse_csv(lines: list[str], header_i: int, delim: str | None, names: list[str], result: RunFile):
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
        problems.error(f"the header has {'; '.join(missing)}; found columns: {shown}", line=header_i + 1)
        return None
    width = len(names)
    cols = _Cols(lines=[])
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
            problems.error(f"expected {width} fields as in the header ({shown}), found {len(row)}",
                           line=lineno, kind="wrong number of fields")
            continue
        qid, docid = row[qcol].strip(), row[dcol].strip()
        if not qid or not docid:
            what = "question" if not qid else "article"
            problems.error(f"empty {what} id", line=lineno, kind=f"empty {what} id")
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
        problems.error("the CSV file has a header but no data lines", line=header_i + 1)
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
            problems.error(f"CSV syntax error: {exc}; the rest of the file was not read", line=offset + reader.line_num)
            return
        yield offset + reader.line_num, row


# ---------------------------------------------------------------------------------------------
# JSON


class _Obj(list):
    """A JSON object kept as its ``(key, value)`` pairs, so repeated keys are not lost."""


def _id(value) -> str | None:
    """A JSON question/article id as a string: strings (non-empty) and whole numbers only."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _json_type(value) -> str:
    if isinstance(value, _Obj):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _shown(value) -> str:
    try:
        text = json.dumps(dict(value) if isinstance(value, _Obj) else value)
    except (TypeError, ValueError, RecursionError):
        text = "..."
    return text if len(text) <= 40 else text[:37] + "..."


def _json_score(value) -> tuple[float | None, str | None]:
    """``(score, None)`` or ``(None, reason)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"score {_shown(value)} is {_json_type(value)}, not a number"
    try:
        x = float(value)
    except OverflowError:
        return None, f"score {_shown(value)} is too large"
    if not math.isfinite(x):
        return None, f"score {value} is not a finite number"
    return x, None


def _loads(text: str):
    return json.loads(text, object_pairs_hook=_Obj)


def _parse_json_any(text: str, result: RunFile):
    problems = result.problems
    try:
        value = _loads(text)
    except RecursionError:
        problems.error("the JSON is nested too deeply to be a run")
        return None
    except json.JSONDecodeError as exc:
        first = text.lstrip().split("\n", 1)[0]
        try:
            first_value = _loads(first)
        except (json.JSONDecodeError, RecursionError):
            first_value = None
        if isinstance(first_value, _Obj):
            return _parse_jsonl(_lines(text), result)
        problems.error(f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno)
        return None
    if isinstance(value, _Obj) and any(k in QID_NAMES for k, _ in value) and not any(
        isinstance(v, (_Obj, list)) and k not in LIST_NAMES for k, v in value
    ):
        return _parse_jsonl(_lines(text), result)  # a JSON Lines file of one record
    if not isinstance(value, _Obj):
        problems.error(
            f"the JSON top level is {_json_type(value)}; expected an object "
            '{"qid": {"docid": score}} or {"qid": ["docid", ...]} (for one record per line, use JSON Lines)'
        )
        return None
    return _parse_json_dict(value, result)


def _parse_json_dict(obj: _Obj, result: RunFile):
    problems = result.problems
    if not obj:
        problems.error("the JSON object is empty: no questions")
        return None
    first_kind = next((type(v) for _, v in obj if isinstance(v, (_Obj, list))), None)
    if first_kind is None:
        problems.error(
            f"the JSON values are {_json_type(obj[0][1])}; expected for each question an object "
            '{"docid": score} or a list ["docid", ...]'
        )
        return None
    by = "score" if first_kind is _Obj else "rank"
    result.format = "json-scores" if by == "score" else "json-ranked"
    expected = "an object {docid: score}" if by == "score" else "a list [docid, ...]"
    cols = _Cols(scores=[] if by == "score" else None, ranks=[] if by == "rank" else None)
    next_rank: dict[str, int] = {}
    for key, value in obj:
        qid = key.strip()
        if not qid:
            problems.error("empty question id", kind="empty question id")
            continue
        if type(value) is not first_kind:
            problems.error(f"question {qid!r}: expected {expected} like the first question, found {_json_type(value)}",
                           kind="question of the wrong JSON type")
            continue
        if by == "score":
            for doc_key, raw in value:
                docid = doc_key.strip()
                if not docid:
                    problems.error(f"question {qid!r}: empty article id", kind="empty article id")
                    continue
                score, why = _json_score(raw)
                if why:
                    problems.error(f"question {qid!r}, article {docid!r}: {why}", kind="score is not a finite number")
                    continue
                cols.qids.append(qid)
                cols.docs.append(docid)
                cols.scores.append(score)
        else:
            start = next_rank.get(qid, 0)
            for pos, raw in enumerate(value, 1):
                docid = _id(raw)
                if docid is None:
                    problems.error(f"question {qid!r}, position {pos}: article id {_shown(raw)} "
                                   "is not a string or whole number", kind="bad article id")
                    continue
                cols.qids.append(qid)
                cols.docs.append(docid)
                cols.ranks.append(start + pos)
            next_rank[qid] = start + len(value)
    return cols, by, False, {}


def _parse_jsonl(lines: list[str], result: RunFile):
    problems = result.problems
    result.format = "jsonl"
    cols = _Cols(scores=[], ranks=[], lines=[])
    mode = None  # "score", "rank" or "lists", fixed by the first valid record
    mode_line = 0
    next_rank: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = _loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            problems.error(f"not valid JSON ({reason})", line=lineno, kind="line is not valid JSON")
            continue
        if not isinstance(value, _Obj):
            problems.error(f"expected a JSON object, found {_json_type(value)}", line=lineno,
                           kind="line is not a JSON object")
            continue
        rec = dict(value)
        qkey = next((k for k in QID_NAMES if k in rec), None)
        if qkey is None:
            problems.error(f"no question id (expected a key {', '.join(QID_NAMES)})", line=lineno,
                           kind="record without question id")
            continue
        qid = _id(rec[qkey])
        if qid is None:
            problems.error(f"question id {_shown(rec[qkey])} is not a string or whole number", line=lineno,
                           kind="bad question id")
            continue
        lkey = next((k for k in LIST_NAMES if k in rec), None)
        dkey = next((k for k in DOC_NAMES if k in rec), None)
        if dkey is None and lkey is None:
            problems.error(f"no article id (expected a key {', '.join(DOC_NAMES)}, or a list under "
                           f"{', '.join(LIST_NAMES)})", line=lineno, kind="record without article id")
            continue
        kind = "lists" if lkey is not None else "score" if "score" in rec else "rank" if "rank" in rec else None
        if kind is None:
            problems.error("no score or rank", line=lineno, kind="record without score or rank")
            continue
        if mode is None:
            mode, mode_line = kind, lineno
        if (mode == "lists") != (kind == "lists") or (mode == "score" and kind != "score"):
            want = {"lists": f"a list of article ids ({', '.join(LIST_NAMES)})", "score": "a score",
                    "rank": "a rank"}[mode]
            problems.error(f"expected {want}, like the first record (line {mode_line})", line=lineno,
                           kind="record unlike the first")
            continue
        if mode == "lists":
            docs = rec[lkey]
            if not isinstance(docs, list):
                problems.error(f"{lkey} is {_json_type(docs)}, not a list", line=lineno, kind="bad article list")
                continue
            start = next_rank.get(qid, 0)
            for pos, raw in enumerate(docs, 1):
                docid = _id(raw)
                if docid is None:
                    problems.error(f"article id {_shown(raw)} at position {pos} is not a string or whole number",
                                   line=lineno, kind="bad article id")
                    continue
                cols.qids.append(qid)
                cols.docs.append(docid)
                cols.ranks.append(start + pos)
                cols.lines.append(lineno)
            next_rank[qid] = start + len(docs)
            continue
        docid = _id(rec[dkey])
        if docid is None:
            problems.error(f"article id {_shown(rec[dkey])} is not a string or whole number", line=lineno,
                           kind="bad article id")
            continue
        if mode == "score":
            score, why = _json_score(rec["score"])
            if why:
                problems.error(why, line=lineno, kind="score is not a finite number")
                continue
            cols.scores.append(score)
        else:
            raw = rec["rank"]
            rank = None if isinstance(raw, bool) or not isinstance(raw, (int, float)) else _whole(str(raw))
            if rank is None:
                problems.error(f"rank {_shown(raw)} is not a whole number", line=lineno,
                               kind="rank is not a whole number")
                continue
            cols.ranks.append(rank)
        cols.qids.append(qid)
        cols.docs.append(docid)
        cols.lines.append(lineno)
    by = "score" if mode == "score" else "rank"
    if by == "score":
        cols.ranks = None
    else:
        cols.scores = None
    return cols, by, False, {}


# ---------------------------------------------------------------------------------------------
# columns -> Run, and warnings


def _build(cols: _Cols, by: str, problems: ProblemList, *, name: str, tags: tuple[str, ...],
           check_ranks: bool) -> Run:
    """The :class:`Run` of ``cols`` (in file order), ordered exactly as
    :func:`bsard_demo.run.order_entries` orders entries; warns about repeats and rank order."""
    blocks: dict[str, list[range]] = {}
    pos = 0
    for qid, block in groupby(cols.qids):  # questions usually come in blocks of lines
        n = len(list(block))
        spans = blocks.get(qid)
        if spans is None:
            blocks[qid] = [range(pos, pos + n)]
        else:
            spans.append(range(pos, pos + n))
        pos += n
    descending = by == "score"
    strictly = gt if descending else lt
    key_col = cols.scores if by == "score" else cols.ranks
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] | None = {} if by == "score" else None
    repeats: list[tuple] = []
    contradictions: list[tuple] = []
    tie_questions: list[str] = []

    for qid, spans in blocks.items():
        if len(spans) == 1:
            idx: Sequence[int] = spans[0]

            def take(col, r=spans[0]):
                return col[r.start:r.stop]
        else:
            idx = [i for r in spans for i in r]

            def take(col, idx=idx):
                return list(map(col.__getitem__, idx))
        docs, keys = take(cols.docs), take(key_col)
        n = len(docs)
        if all(map(strictly, keys, islice(keys, 1, None))):  # already in order, no ties
            order: list[int] | range = range(n)
        elif len(set(keys)) == n:
            order = sorted(range(n), key=keys.__getitem__, reverse=descending)
        else:  # ties: article id descending first (stable sorts, as order_entries)
            order = sorted(range(n), key=docs.__getitem__, reverse=True)
            order.sort(key=keys.__getitem__, reverse=descending)
        if check_ranks:
            _check_rank_order(qid, order, keys, take(cols.ranks), idx, cols, contradictions, tie_questions)
        ranked = docs if isinstance(order, range) else list(map(docs.__getitem__, order))
        if len(set(ranked)) != n:
            seen: dict[str, int] = {}
            kept = []
            for j in order:
                first = seen.get(docs[j])
                if first is None:
                    seen[docs[j]] = j
                    kept.append(j)
                else:
                    repeats.append((cols.line(idx[j]), qid, docs[j], cols.line(idx[first])))
            order = kept
            ranked = list(map(docs.__getitem__, order))
        rankings[qid] = tuple(ranked)
        if scores is not None:
            scores[qid] = tuple(keys) if isinstance(order, range) else tuple(map(keys.__getitem__, order))

    repeats.sort(key=lambda r: (r[0] is not None, r[0] or 0))
    for line, qid, docid, first_line in repeats:
        copy = f"line {first_line}" if first_line is not None else "the first"
        problems.warning(f"article {docid!r} is listed again for question {qid!r}; its better-ranked copy "
                         f"({copy}) is kept", line=line, kind="article listed twice for a question")
    contradictions.sort(key=lambda c: c[0])
    for line, message in contradictions:
        problems.warning(message, line=line, kind="rank order contradicts score order")
    if tie_questions:
        problems.warning(
            f"{len(tie_questions)} question(s) have tied scores whose ranks are in another order than "
            f"trec_eval's tie-break (article id descending), e.g. {_examples(tie_questions)}; "
            "tied articles are ordered by article id, as trec_eval does")
    return Run(rankings, scores, name=name, tags=tags)


def _check_rank_order(qid: str, order: list[int], scores: list[float], ranks: list[int], idx: Sequence[int],
                      cols: _Cols, contradictions: list, tie_questions: list) -> None:
    """Warn when ranks disagree with the score order ``order`` of one question: strictly (a
    higher score with a worse rank) or only among tied scores."""
    r_sorted = list(map(ranks.__getitem__, order))
    if r_sorted == sorted(r_sorted):
        return
    o = np.asarray(order)
    s = np.asarray(scores, dtype=float)[o]
    r = np.asarray(ranks)[o]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))  # blocks of tied scores, best first
    block_min = np.minimum.reduceat(r, starts)
    block_max = np.maximum.reduceat(r, starts)
    before_max = np.maximum.accumulate(block_max)  # largest rank among strictly higher scores
    bad = np.flatnonzero(block_min[1:] < before_max[:-1])
    found = None
    if bad.size:
        b = bad[0] + 1
        stop = starts[b + 1] if b + 1 < len(starts) else len(o)
        low = int(o[starts[b] + int(np.argmin(r[starts[b]:stop]))])
        high_block = int(np.argmax(block_max[:b] == before_max[b - 1]))  # first block holding that rank
        stop_h = starts[high_block + 1]
        high = int(o[starts[high_block] + int(np.argmax(r[starts[high_block]:stop_h]))])
        found = (low, high)
    same = s[1:] == s[:-1]
    tie_bad = bool(np.any(same & (r[:-1] > r[1:])))
    if found is not None:
        low, high = found
        l_low, l_high = cols.line(idx[low]), cols.line(idx[high])
        contradictions.append((
            max(l_low or 0, l_high or 0) or None,
            f"question {qid!r}: rank {ranks[low]} (line {l_low}, score {scores[low]:g}) has a lower score than "
            f"rank {ranks[high]} (line {l_high}, score {scores[high]:g}); articles are ordered by score, "
            "as trec_eval does",
        ))
    if tie_bad:
        tie_questions.append(qid)


def _examples(ids) -> str:
    ids = list(ids)
    shown = ", ".join(repr(i) for i in ids[:_EXAMPLES])
    return shown + (", ..." if len(ids) > _EXAMPLES else "")


def _as_set(ids: Collection) -> set[str] | frozenset[str]:
    if isinstance(ids, (set, frozenset)) and all(isinstance(i, str) for i in islice(ids, 100)):
        return ids
    return {str(i) for i in ids}


def _warn(run: Run, result: RunFile, qids, corpus_ids, k: int) -> None:
    problems = result.problems
    if len(result.tags) > 1:
        problems.warning(f"the file has {len(result.tags)} run tags ({_examples(result.tags)}); "
                         "all its lines are read as one run")
    if qids is not None:
        known = _as_set(qids)
        unknown = [q for q in run if q not in known]
        if unknown and len(unknown) == len(run):
            problems.warning(f"none of the run's {len(run)} question ids is a question of the dataset "
                             f"(e.g. {_examples(unknown)}); is this a run for these questions?")
        elif unknown:
            problems.warning(f"{len(unknown)} of the run's {len(run)} question ids are not questions of the "
                             f"dataset (e.g. {_examples(unknown)}); they are ignored when scoring")
    if corpus_ids is not None:
        corpus = _as_set(corpus_ids)
        outside: dict[str, None] = {}
        n_entries = 0
        for docs in run.rankings.values():
            if corpus.issuperset(docs):
                continue
            missing = [d for d in docs if d not in corpus]
            if missing:
                n_entries += len(missing)
                outside.update(dict.fromkeys(missing))
        if outside:
            problems.warning(f"{len(outside)} article id(s) ({n_entries} entries) are not in the corpus "
                             f"(e.g. {_examples(outside)}); they can never be relevant")
    if corpus_ids is not None and k:
        k = min(k, len(corpus))  # a complete ranking of a small corpus is not short
    if k and k > 0:
        short = [(len(docs), q) for q, docs in run.rankings.items() if len(docs) < k]
        if short:
            fewest, fewest_q = min(short)
            problems.warning(f"{len(short)} of {len(run)} questions have fewer than {k} articles "
                             f"(fewest: {fewest}, question {fewest_q!r}); metrics at {k} count the missing "
                             "ones as not found")
