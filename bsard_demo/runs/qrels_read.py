"""Read a labels file (qrels) of any common layout, every problem at once: TREC qrels (``qid 0 docid rel``),
ranx's qrels JSON (``{q_id: {doc_id: rel}}``) and a table (CSV, TSV or parquet) with a question id
(``q_id``, ``query_id``, ...), an article id (``doc_id``, ...) and ``relevance`` (or ranx's ``score``): what
``export-qrels`` writes and ir_measures and ranx read. :func:`read_qrels_path` / :func:`read_qrels_bytes`
never raise; a :class:`QrelsFile` keeps the graded labels, and :meth:`QrelsFile.relevant` the binary view
trec_eval's measures use (relevance > 0).

The bytes go through the run reader's decoding (:mod:`.decode`: gzip, byte-order marks, binary sniffing, the
size limit) and a parquet file through :mod:`.sandbox`'s child: no native code reads untrusted bytes in this
process. An LZ4 file (ranx's ``kind="lz4"``) is decoded in that same child
(:func:`~bsard_demo.runs.sandbox.lz4_bytes_to_json`) and read as ranx's qrels JSON.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .columns import UNKNOWN
from .content import Content, open_content
from .csv_format import DOC_NAMES, QID_NAMES, RELEVANCE_NAMES
from .decode import LZ4_MAGIC, Source, size_problem
from .problems import ProblemList, quote
from .sandbox import DEFAULT_ISOLATION, Isolation, lz4_bytes_to_json, parse_parquet_isolated

#: The layouts :func:`read_qrels_bytes` tells apart.
QRELS_FORMATS = ("trec-qrels", "ranx-json", "csv", "tsv", "parquet", "lz4")
#: The default cap on a labels file's bytes, raw or inflated: a labels file is read whole (text, then a dict
#: per question), so less than a run's; MS MARCO's dev qrels are under 1 MB, BSARD's test labels 18 KB.
QRELS_MAX_BYTES = 64 * 2**20
_PATH_LIMIT = 200

Labels = dict[str, dict[str, int]]


@dataclass
class QrelsFile:
    """A labels file as read: its ``format``, the graded labels ``{qid: {docid: relevance}}`` in file order
    (``None`` when the file has any error) and all of its problems."""

    name: str
    format: str
    labels: Labels | None
    problems: ProblemList
    compressed: bool = False

    @property
    def ok(self) -> bool:
        return self.labels is not None

    def relevant(self) -> dict[str, frozenset[str]]:
        """Per question, the articles with relevance > 0 (trec_eval's rule for its binary measures); a
        question whose labels are all 0 or below has none (it is left out of the averages)."""
        return {q: frozenset(d for d, r in docs.items() if r > 0) for q, docs in (self.labels or {}).items()}

    @property
    def graded(self) -> bool:
        """True when some relevance is neither 0 nor 1 (nDCG then uses the grades as gains)."""
        return any(r not in (0, 1) for docs in (self.labels or {}).values() for r in docs.values())


def read_qrels_path(path: str | Path, *, max_bytes: int = QRELS_MAX_BYTES,
                    isolation: Isolation | None = DEFAULT_ISOLATION) -> QrelsFile:
    """Read a labels file from disk (see :func:`read_qrels_bytes`: a labels file is read whole, they are
    small: BSARD's test labels are 18 KB as TREC qrels); a missing, unreadable or non-regular
    file, or one above ``max_bytes``, is an error problem."""
    p = Path(path)
    shown = quote(p, _PATH_LIMIT, marks=False)
    problems = ProblemList()
    try:
        if not p.exists():
            problems.error("file_not_found", f"file not found: {shown}")
        elif not p.is_file():
            problems.error("not_a_file", f"{shown} is a folder or a special file, not a labels file")
        elif (too_big := size_problem(p.stat().st_size, max_bytes)) is not None:
            problems.error("file_too_large", too_big)
        else:
            with open(p, "rb") as f:
                data = f.read(max_bytes + 1)
            return read_qrels_bytes(data, p.name, max_bytes=max_bytes, isolation=isolation)
    except OSError as exc:
        problems.error("unreadable_file", f"cannot read {shown}: {quote(exc.strerror or exc, marks=False)}")
    return QrelsFile(p.name, UNKNOWN, None, problems)


def read_qrels_bytes(data: bytes, name: str, *, max_bytes: int = QRELS_MAX_BYTES,
                     isolation: Isolation | None = DEFAULT_ISOLATION) -> QrelsFile:
    """Detect the layout of ``data`` (an upload's bytes, the file ``name``), parse it and check it; never
    raises. The Score page calls this with an uploaded file's bytes."""
    problems = ProblemList()
    name = str(name)
    try:
        data = bytes(data)
        if data.startswith(LZ4_MAGIC):  # ranx's kind="lz4": decoded in the child, then read as ranx's JSON
            text = lz4_bytes_to_json(data, name, problems, cap=max_bytes, isolation=isolation)
            labels = _json(text, problems) if text is not None and not problems.has_errors else None
            if labels is not None and not labels and not problems.has_errors:
                problems.error("no_labels", "the file has no labels (no question with a judged article)")
            return QrelsFile(name, "lz4", None if problems.has_errors else labels, problems)
        content, compressed = open_content(Source(data=data, limit=max_bytes), problems, max_bytes)
        labels, fmt = (None, UNKNOWN) if content is None else _parse(content, name, problems, isolation)
        if labels is not None and not labels and not problems.has_errors:
            problems.error("no_labels", "the file has no labels (no question with a judged article)")
        return QrelsFile(name, fmt, None if problems.has_errors else labels, problems,
                         compressed if content is not None else False)
    except MemoryError:
        problems = ProblemList()
        problems.error("reader_out_of_memory", f"reading {quote(name, marks=False)} needed more memory than this "
                                               "process has: the file was not read")
    except Exception as exc:  # never let odd bytes escape as a traceback
        problems.error("internal_error", f"unexpected failure while reading the file ({type(exc).__name__}: "
                                         f"{quote(exc, marks=False)}); please report it with the file")
    return QrelsFile(name, UNKNOWN, None, problems)


def _parse(content: Content, name: str, problems: ProblemList, isolation: Isolation | None) -> tuple[Labels, str]:
    """``(labels, format)`` of the decoded ``content``."""
    if content.parquet:
        return _parquet(content, name, problems, isolation), "parquet"
    text = "".join(chunk.as_str() for chunk in content.chunks(problems))
    if problems.has_errors:
        return {}, UNKNOWN
    stripped = text.lstrip()
    if not stripped:
        problems.error("whitespace_only", "the file contains only whitespace: no labels")
        return {}, UNKNOWN
    if stripped[0] in "{[":
        return _json(text, problems), "ranx-json"
    lines = text.splitlines()
    first_no, first = next((i, line) for i, line in enumerate(lines, 1) if line.strip())
    delim = "\t" if "\t" in first else "," if "," in first else None
    names = [c.strip().lower() for c in (first.split(delim) if delim else first.split())]
    if any(n in QID_NAMES for n in names) and any(n in DOC_NAMES for n in names):
        return _table(lines, first_no, names, delim, problems), ("tsv" if delim == "\t" else "csv")
    return _trec(lines, problems), "trec-qrels"


def _relevance(token: object) -> int | None:
    """A relevance as trec_eval reads it: a whole number (``2``, ``-1``, ``1.0``); None otherwise."""
    if isinstance(token, bool):
        return None
    if isinstance(token, int):
        return token
    if isinstance(token, float):
        return int(token) if math.isfinite(token) and token.is_integer() else None
    text = str(token).strip()
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if math.isfinite(value) and value.is_integer() else None


def _add(labels: Labels, qid: str, doc: str, rel: int, line: int | None, problems: ProblemList) -> None:
    """One label; an article judged twice for a question keeps its first relevance (a warning, an error when
    the two differ: which one counts is a tool's choice, not the labels')."""
    docs = labels.setdefault(qid, {})
    if doc in docs:
        if docs[doc] != rel:
            problems.error("conflicting_label", f"article {quote(doc)} of question {quote(qid)} is judged twice, "
                                                f"{docs[doc]} and {rel}", line=line, kind="conflicting_label")
        else:
            problems.warning("duplicate_label", f"article {quote(doc)} of question {quote(qid)} is listed twice",
                             line=line, kind="duplicate_label")
        return
    docs[doc] = rel


def _trec(lines: list[str], problems: ProblemList) -> Labels:
    """``qid iteration docid relevance`` lines (trec_eval's qrels)."""
    labels: Labels = {}
    for no, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            problems.error("bad_field_count", f"{len(fields)} fields where TREC qrels have 4 (qid 0 docid "
                                              f"relevance): {quote(line)}", line=no, kind="bad_field_count")
            continue
        qid, _, doc, token = fields
        rel = _relevance(token)
        if rel is None:
            problems.error("bad_relevance", f"the relevance {quote(token)} is not a whole number", line=no,
                           kind="bad_relevance")
            continue
        _add(labels, qid, doc, rel, no, problems)
    return labels


def _table(lines: list[str], header_no: int, names: list[str], delim: str | None, problems: ProblemList) -> Labels:
    """A CSV/TSV (or blank-separated) table with a header naming the question, article and relevance columns."""
    q = next(names.index(n) for n in QID_NAMES if n in names)
    d = next(names.index(n) for n in DOC_NAMES if n in names)
    r = next((names.index(n) for n in RELEVANCE_NAMES if n in names), None)
    if r is None:
        problems.error("missing_columns", f"no relevance column (expected one of {', '.join(RELEVANCE_NAMES)}); "
                                          f"found columns: {quote(', '.join(names), marks=False)}", line=header_no)
        return {}
    labels: Labels = {}
    body = lines[header_no:]
    rows: Iterator[list[str]] = (csv.reader(body, delimiter=delim, strict=True) if delim
                                 else (line.split() for line in body))
    no = header_no
    try:
        for no, row in enumerate(rows, header_no + 1):
            if not row or not any(c.strip() for c in row):
                continue
            if len(row) != len(names):
                problems.error("bad_field_count", f"{len(row)} fields where the header has {len(names)}", line=no,
                               kind="bad_field_count")
                continue
            qid, doc = row[q].strip(), row[d].strip()
            if not qid or not doc:
                problems.error("bad_id", "an empty question or article id", line=no, kind="bad_id")
                continue
            rel = _relevance(row[r])
            if rel is None:
                problems.error("bad_relevance", f"the relevance {quote(row[r])} is not a whole number", line=no,
                               kind="bad_relevance")
                continue
            _add(labels, qid, doc, rel, no, problems)
    except csv.Error as exc:
        problems.error("csv_syntax_error", f"CSV syntax error ({quote(exc, marks=False)}); the rest is not read",
                       line=no + 1)
    return labels


def _json(text: str, problems: ProblemList) -> Labels:
    """ranx's ``{q_id: {doc_id: relevance}}``."""
    try:
        value = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except RecursionError:
        problems.error("json_too_deep", "the JSON is nested too deeply to be labels")
        return {}
    except ValueError as exc:
        where = {"line": exc.lineno} if isinstance(exc, json.JSONDecodeError) else {}
        problems.error("invalid_json", f"invalid JSON: {quote(getattr(exc, 'msg', exc), marks=False)}", **where)
        return {}
    if not isinstance(value, list) or (value and not isinstance(value[0], tuple)):
        problems.error("json_not_qrels", "the JSON is not an object {q_id: {doc_id: relevance}}")
        return {}
    labels: Labels = {}
    for qid, docs in value:
        if not isinstance(docs, list) or (docs and not isinstance(docs[0], tuple)):
            problems.error("json_not_qrels", f"question {quote(qid)}: its labels are not an object "
                                             "{doc_id: relevance}", kind="json_not_qrels")
            continue
        labels.setdefault(qid, {})
        for doc, token in docs:
            rel = _relevance(token) if isinstance(token, (int, float, str)) else None
            if rel is None:
                problems.error("bad_relevance", f"question {quote(qid)}, article {quote(doc)}: the relevance "
                                                f"{quote(json.dumps(token) if not isinstance(token, str) else token)} "
                                                "is not a whole number", kind="bad_relevance")
                continue
            _add(labels, qid, doc, rel, None, problems)
    return labels


def _parquet(content: Content, name: str, problems: ProblemList, isolation: Isolation | None) -> Labels:
    """A parquet table read by the run reader's parquet parser in its child (``labels=True``: the relevance
    column in the place of a score), always: ``isolation`` None gets the default limits, never this process."""
    parsed = parse_parquet_isolated(content, name, problems, isolation or DEFAULT_ISOLATION, labels=True)
    cols = parsed.columns
    if cols is None:
        return {}
    cols.finish()
    labels: Labels = {}
    rows = cols.line if cols.line is not None else range(1, len(cols.q) + 1)
    for qc, dc, score, row in zip(cols.q.tolist(), cols.d.tolist(), cols.score.tolist(), list(rows)):
        qid, doc = cols.qnames[qc], cols.dnames[dc]
        rel = _relevance(score)
        if rel is None:
            problems.error("bad_relevance", f"row {row}: the relevance {score!r} is not a whole number",
                           kind="bad_relevance")
            continue
        _add(labels, qid, doc, rel, None, problems)
    return labels
