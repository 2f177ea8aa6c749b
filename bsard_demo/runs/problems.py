"""Problems found in user input (run files, dataset folders): every reader gathers *all* problems of a
file into one :class:`ProblemList`; each has a stable ``code`` declared in :data:`CODES` (:data:`CHECK_CODES` for
the BSARD-aware checks of :mod:`bsard_demo.evaluation.checks`), which :func:`codes_markdown` renders as the
README's table (a test compares them).

Conventions: docs/design.md, 'bsard_demo/runs/problems.py'.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Literal, Mapping

#: Characters of user data a message quotes at most (:func:`quote`).
QUOTE_LIMIT = 80


def quote(value: object, limit: int = QUOTE_LIMIT, *, marks: bool = True) -> str:
    """``value`` as a message quotes user data: ``repr`` of its text when it has at most ``limit``
    characters (``'q1'``), else its first ``limit`` characters, an ellipsis and its full length
    (``'AAAA…' (40,000,000 characters)``), so that a 40 MB id costs a message of about 100
    characters, never a 40 MB line. ``marks=False`` gives the text itself, without ``repr``'s
    quotes and escapes (a file name, a list of column names), bounded the same way."""
    text = value if isinstance(value, str) else str(value)
    n = len(text)
    if not marks:
        return text if n <= limit else f"{text[:limit]}… ({n:,} characters)"
    shown = repr(text[:limit + 1])
    if n <= limit and len(shown) <= limit + 2:
        return shown
    body = shown[1:-1][:limit]
    if body.endswith("\\") and not body.endswith("\\\\"):
        body = body[:-1]  # no escape cut in half before the closing mark
    return f"{shown[0]}{body}…{shown[0]} ({n:,} characters)"


def percent(x: float) -> str:
    """A share as the problems word it: ``0.253`` -> ``"25.3 %"``."""
    return f"{100 * x:.1f} %"


Severity = Literal["error", "warning"]

#: code -> (severity, meaning): every problem the run reader reports.
CODES: dict[str, tuple[Severity, str]] = {
    # the file as a whole
    "file_not_found": ("error", "the path does not exist"),
    "not_a_file": ("error", "the path is a folder or a special file, not a regular file"),
    "unreadable_file": ("error", "the file cannot be read (permissions, I/O error)"),
    "empty_file": ("error", "the file, or its gzip content, is 0 bytes"),
    "file_too_large": ("error", "the file is above the size limit; it is not read"),
    "gzip_too_large": ("error", "the gzip content inflates beyond the size limit (a decompression bomb, or too "
                                "large); inflating is stopped there"),
    "gzip_truncated": ("error", "the gzip data ends before the end of its compressed stream"),
    "gzip_corrupt": ("error", "the gzip data is damaged (invalid deflate data or checksum)"),
    "gzip_trailing_data": ("warning", "bytes after the end of the gzip stream were ignored"),
    "gzip_twice": ("error", "the content is gzip-compressed twice"),
    "gzip_too_many_members": ("error", "the gzip file holds more members (gzip streams one after another) than the "
                                       "limit (100,000): a flood of tiny members; inflating is stopped there"),
    "lz4_unreadable": ("error", "an LZ4 file (ranx's `kind=\"lz4\"`) that cannot be read: damaged, or not a ranx "
                                "run or qrels"),
    "lz4_too_large": ("error", "the LZ4 content inflates beyond the size limit; inflating is stopped there"),
    "binary_file": ("error", "a binary file, not text; the message names the kind (image, PDF, ZIP/Excel, "
                             "another archive, NumPy, SQLite, other bytes with NUL)"),
    "not_utf8": ("error", "a line is not valid UTF-8, UTF-16 text has no byte-order mark, or a file with a "
                          "UTF-16/32 byte-order mark is not valid in that encoding"),
    "whitespace_only": ("error", "the file holds only whitespace"),
    "html_page": ("error", "an HTML or XML document (often a saved download page), not a run"),
    "parquet_unreadable": ("error", "a parquet file that cannot be read (truncated or damaged)"),
    "parquet_too_large": ("error", "the parquet columns (or one row group) inflate beyond the size limit"),
    # layout
    "not_a_run": ("error", "the lines do not have a run's layout: most have neither 6 (TREC) nor 3 fields"),
    "qrels_file": ("error", "a qrels file (qid 0 docid relevance: the gold labels), not a run"),
    "csv_without_header": ("error", "comma-separated values without a header line naming the columns"),
    "missing_columns": ("error", "the CSV header or parquet schema has no question id, article id, or score/rank "
                                 "column"),
    "bad_column_type": ("error", "a parquet column whose type cannot hold ids, scores or ranks (nested, binary, "
                                 "date, ...)"),
    "csv_syntax_error": ("error", "a CSV syntax error (e.g. an unclosed quote); the rest is not read"),
    "no_run_lines": ("error", "no usable run line (a header without data, an empty JSON object, every line "
                              "rejected)"),
    "invalid_json": ("error", "the JSON, or one JSON Lines line, does not parse"),
    "json_too_deep": ("error", "the JSON is nested too deeply to be a run"),
    "json_not_a_run": ("error", "the JSON, or a JSON Lines record, does not have a run's shape"),
    "json_mixed_layout": ("error", "a JSON question or record unlike the first (object vs list, score vs rank)"),
    "missing_field": ("error", "a JSON Lines record without question id, article id, or score/rank"),
    # one line
    "line_too_long": ("error", "a line of a table format (TREC, 3 columns, CSV) is longer than the limit (64 KB); "
                               "the rest of the file is not read"),
    "bad_field_count": ("error", "a line has another number of fields than the file's layout"),
    "bad_id": ("error", "an empty question or article id, or a JSON id that is not a string or whole number"),
    "bad_article_list": ("error", "a JSON Lines record's article list is not a list"),
    "bad_score": ("error", "a score that is not a finite number"),
    "bad_rank": ("error", "a rank that is not a whole number (at least 1 when the third column holds ranks)"),
    # warnings: the run is scored
    "duplicate_article": ("warning", "an article listed twice for a question; its better-ranked copy is kept"),
    "rank_score_order": ("warning", "ranks contradict the scores (a better score with a worse rank); articles "
                                    "are ordered by score"),
    "tie_order": ("warning", "the file ranks tied scores otherwise than trec_eval's tie-break (article id "
                             "descending) and its own order would change a figure (by how much is said)"),
    "several_tags": ("warning", "several run tags in one file; all its lines are read as one run"),
    "unknown_questions": ("warning", "question ids that are not questions of the split; they are ignored"),
    "unknown_articles": ("warning", "article ids that are not in the corpus; they can never be relevant"),
    "short_rankings": ("warning", "questions with fewer articles than the deepest cutoff"),
    "scores_ascending": ("warning", "scores grow with rank for most questions: distances? score with "
                                    "--lower-is-better"),
    "scores_descending": ("warning", "read with lower-is-better, yet scores fall with rank for most questions: "
                                     "similarities? score without --lower-is-better"),
    "internal_error": ("error", "an unexpected failure of the reader (a bug: please report it with the file)"),
    # the child process that reads a parquet file (runs/sandbox.py)
    "reader_crashed": ("error", "the reader process died on the file (a native crash: damaged or hostile bytes); "
                                "it was not read"),
    "reader_timeout": ("error", "the reader process overran its time limit on the file and was stopped"),
    "reader_out_of_memory": ("error", "the reader process needed more memory than it is allowed for the file"),
    # every read's own limits (runs/limits.py)
    "too_slow": ("error", "reading the file took longer than the time limit (20 s) and was stopped"),
    "too_large_in_memory": ("error", "the run has more lines (question-article pairs), questions, distinct "
                                     "articles or JSON values than a read may hold (1.2 million, 100,000, 250,000, "
                                     "600,000 in one JSON document); it is not read"),
}

#: The BSARD-aware checks of :mod:`bsard_demo.evaluation.checks` that the CLI and the Score page report
#: after reading (``scores_ascending``, which the reader emits itself, is in :data:`CODES`).
CHECK_CODES: dict[str, tuple[Severity, str]] = {
    "wrong_split": ("warning", "most of the run's questions belong to another split of the dataset"),
    "ids_shifted": ("warning", "the run matches the gold far better with every article id shifted by +1 or -1 "
                               "(0-based row numbers?)"),
    "near_random": ("warning", "the run is no better than a random ranking of the corpus (wrong id space, split "
                               "or dataset?)"),
}


#: What the labels reader (:mod:`bsard_demo.runs.qrels_read`) reports beside the decoding codes of :data:`CODES`.
QRELS_CODES: dict[str, tuple[Severity, str]] = {
    "bad_relevance": ("error", "a label's relevance is not a whole number"),
    "conflicting_label": ("error", "an article judged twice for a question with two different relevances"),
    "duplicate_label": ("warning", "an article listed twice for a question with the same relevance"),
    "json_not_qrels": ("error", "the JSON is not ranx's qrels object {q_id: {doc_id: relevance}}"),
    "no_labels": ("error", "the labels file holds no label"),
}


def codes_markdown(codes: Mapping[str, tuple[str, str]] | None = None) -> str:
    """The README's table ``code | severity | meaning``: :data:`CODES`, :data:`CHECK_CODES`, :data:`QRELS_CODES`."""
    rows = codes if codes is not None else {**CODES, **CHECK_CODES, **QRELS_CODES}
    lines = ["| code | severity | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{code}` | {severity} | {meaning} |" for code, (severity, meaning) in rows.items()]
    return "\n".join(lines) + "\n"


#: The fixes a problem may point to (:attr:`Problem.hint`), which each front end words in its
#: own terms (a CLI option, a checkbox of the Score page): read the scores as distances, or as
#: similarities.
HINTS = ("read_as_distances", "read_as_similarities")


@dataclass(frozen=True)
class Problem:
    """One problem of an input; ``line`` is 1-based, ``None`` for the file as a whole; ``code`` is
    its stable kind (a key of :data:`CODES`); ``hint``, when set, the fix it points to (one of
    :data:`HINTS`), which :meth:`text` words after the message with a front end's ``hints``."""

    severity: Severity
    message: str
    line: int | None = None
    code: str = field(default="", kw_only=True)
    hint: str = field(default="", kw_only=True)

    def text(self, hints: Mapping[str, str] | None = None) -> str:
        """The message, then ``"; "`` and the front end's wording of the hint (when it has one)."""
        worded = (hints or {}).get(self.hint) if self.hint else None
        return f"{self.message}; {worded}" if worded else self.message

    def as_dict(self, hints: Mapping[str, str] | None = None) -> dict:
        return {"severity": self.severity, "code": self.code, "line": self.line, "message": self.text(hints)}

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.severity}: {where}{self.message}"


@dataclass
class ProblemList:
    """Problems of one input. Keeps at most ``cap`` problems per message kind but counts them all.

    ``kind`` groups repeated problems (e.g. the same bad field on 100,000 lines): the first
    ``cap`` of each kind are kept with their line numbers, the rest are only counted so that a
    huge bad file cannot exhaust memory, and :meth:`omitted` reports the totals, each with the
    code of its kind. A code must be declared (:data:`CODES`, :data:`CHECK_CODES`) with the
    severity it is reported with, else ``ValueError``.
    """

    cap: int = 50
    items: list[Problem] = field(default_factory=list)
    totals: Counter = field(default_factory=Counter)
    _severity_of: dict = field(default_factory=dict)
    _code_of: dict = field(default_factory=dict)
    _keys: list = field(default_factory=list)  # the kind of each kept item

    def add(self, severity: Severity, code: str, message: str, line: int | None = None,
            kind: str | None = None, hint: str = "") -> None:
        declared = CODES.get(code) or CHECK_CODES.get(code) or QRELS_CODES.get(code)
        if declared is None or declared[0] != severity:
            raise ValueError(f"undeclared problem code {code!r} for a {severity}")
        if hint and hint not in HINTS:
            raise ValueError(f"unknown problem hint {hint!r}")
        key = kind or message
        self.totals[key] += 1
        self._severity_of[key] = severity
        self._code_of[key] = code
        if self.totals[key] <= self.cap:
            self.items.append(Problem(severity, message, line, code=code, hint=hint))
            self._keys.append(key)

    def error(self, code: str, message: str, line: int | None = None, kind: str | None = None) -> None:
        self.add("error", code, message, line, kind)

    def warning(self, code: str, message: str, line: int | None = None, kind: str | None = None,
                hint: str = "") -> None:
        self.add("warning", code, message, line, kind, hint)

    def add_counted(self, severity: Severity, code: str, kind: str, n: int) -> None:
        """Count ``n`` more occurrences of ``kind`` without their messages; only once ``cap`` of
        them are kept (a long run of one problem: the messages would be dropped anyway)."""
        if n <= 0:
            return
        if self.totals[kind] < self.cap:
            raise ValueError("add_counted before the kind reached its cap")
        self.add(severity, code, kind, None, kind)  # declared code check, severity and code of the kind
        self.totals[kind] += n - 1

    def extend(self, other: "ProblemList") -> None:
        """Add ``other``'s problems after these, still keeping at most ``cap`` per kind."""
        for key, p in zip(other._keys, other.items):
            if self.totals[key] < self.cap:
                self.items.append(p)
                self._keys.append(key)
            self.totals[key] += 1
        for key, n in other.totals.items():
            self.totals[key] += n - min(n, other.cap)  # the occurrences ``other`` only counted
            self._severity_of[key] = other._severity_of[key]
            self._code_of[key] = other._code_of[key]

    def state(self) -> dict:
        """Everything this list holds, as JSON-ready data (:meth:`from_state` rebuilds it)."""
        return {"cap": self.cap,
                "kinds": [[k, self._severity_of[k], self._code_of[k], n] for k, n in self.totals.items()],
                "items": [[key, p.severity, p.message, p.line, p.code, p.hint]
                          for key, p in zip(self._keys, self.items)]}

    @classmethod
    def from_state(cls, state: Mapping) -> "ProblemList":
        """The list of :meth:`state`, every code checked as :meth:`add` checks it."""
        out = cls(cap=int(state["cap"]))
        for key, severity, code, n in state["kinds"]:
            declared = CODES.get(code) or CHECK_CODES.get(code) or QRELS_CODES.get(code)
            if declared is None or declared[0] != severity:
                raise ValueError(f"undeclared problem code {code!r} for a {severity}")
            out.totals[str(key)], out._severity_of[str(key)], out._code_of[str(key)] = int(n), severity, code
        for key, severity, message, line, code, hint in state["items"]:
            if out._code_of.get(str(key)) != code or (hint and hint not in HINTS):
                raise ValueError(f"problem {code!r} of an undeclared kind")
            out.items.append(Problem(severity, str(message), None if line is None else int(line), code=code,
                                     hint=hint))
            out._keys.append(str(key))
        return out

    @property
    def has_errors(self) -> bool:
        return any(self._severity_of[k] == "error" for k in self.totals)

    def count(self, severity: Severity) -> int:
        return sum(n for k, n in self.totals.items() if self._severity_of[k] == severity)

    def omitted(self) -> list[Problem]:
        """One summary problem per kind whose occurrences went beyond the display cap."""
        return [
            Problem(self._severity_of[k], f"… and {n - self.cap} more like this ({n} in all): {k}",
                    code=self._code_of[k])
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
