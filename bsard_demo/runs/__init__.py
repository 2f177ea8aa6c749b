"""Runs: the :class:`Run` type (:mod:`.run`), reading run files of any common layout with every problem
reported at once, and writing them.

Data flow of :func:`read_run_bytes` / :func:`read_run_path` (:mod:`.read`): bytes -> text
(:mod:`.decode`: gzip, byte-order marks, binary sniffing, the size limit) -> columns
(:mod:`.text_formats` with :mod:`.fields`: TREC, 3-column, CSV; :mod:`.json_formats`: JSON, JSON Lines;
:mod:`.parquet_format`, in a child process by :mod:`.sandbox`) -> :class:`Run` and warnings (:mod:`.validate`).
Problems are :class:`ProblemList` items (:mod:`.problems`). :func:`format_run` (:mod:`.write`) is the one writer.
"""
from .problems import Problem, ProblemList
from .read import DEFAULT_MAX_BYTES, FORMATS, UNKNOWN, RunFile, read_run_bytes, read_run_path
from .run import Entry, Run, order_entries
from .write import format_run, write_text_atomic

__all__ = ["DEFAULT_MAX_BYTES", "FORMATS", "UNKNOWN", "Entry", "Problem", "ProblemList", "Run", "RunFile",
           "format_run", "order_entries", "read_run_bytes", "read_run_path", "write_text_atomic"]
