"""Runs: the :class:`Run` type (:mod:`.run`), reading run files of any common layout with every problem
reported at once (:func:`read_run_bytes`, :func:`read_run_path`; :func:`read_run` for a run made in-process),
and writing them (:func:`format_run`). This package's public API is what this module exports; other packages
import nothing else from it.

The read path (:mod:`.read`): bytes -> text (:mod:`.decode`: gzip, byte-order marks, binary sniffing, the size
limit) -> a :class:`~bsard_demo.runs.columns.Parsed` (:mod:`.text_formats` with :mod:`.fields`: TREC, 3-column,
CSV; :mod:`.json_formats`: JSON, JSON Lines; :mod:`.parquet_format`, in a child process by :mod:`.sandbox`, which
:func:`warm` starts ahead) -> :class:`Run` and warnings (:mod:`.validate`). Problems are :class:`ProblemList`
items (:mod:`.problems`); a message quotes user data through :func:`quote`. Labels files (qrels) are read by
:mod:`.qrels_read` (:func:`read_qrels_path`, :func:`read_qrels_bytes`) through the same decoding and sandbox.
"""
from .decode import SizeMessage
from .exchange import EXCHANGE_FORMATS, STAMP_KEY, qrels_bytes, run_bytes, run_records, tied_questions
from .problems import CHECK_CODES, CODES, HINTS, QRELS_CODES, Problem, ProblemList, percent, quote
from .qrels_read import QRELS_FORMATS, QrelsFile, read_qrels_bytes, read_qrels_path
from .read import (
                   BUILT_FORMAT,
                   DEFAULT_ISOLATION,
                   DEFAULT_LIMITS,
                   DEFAULT_MAX_BYTES,
                   FORMATS,
                   UNKNOWN,
                   Isolation,
                   ReadLimits,
                   ReadOptions,
                   RunFile,
                   read_run,
                   read_run_bytes,
                   read_run_path,
)
from .run import Entry, Run, order_entries
from .sandbox import lz4_bytes_to_json, warm
from .write import RUN_FORMATS, format_run, write_text_atomic

__all__ = ["BUILT_FORMAT", "CHECK_CODES", "CODES", "DEFAULT_ISOLATION", "DEFAULT_LIMITS", "DEFAULT_MAX_BYTES",
           "EXCHANGE_FORMATS", "FORMATS", "HINTS", "qrels_bytes", "run_bytes", "run_records", "tied_questions",
           "RUN_FORMATS", "UNKNOWN", "Entry", "Isolation", "Problem", "ProblemList", "ReadLimits", "ReadOptions",
           "Run", "RunFile", "SizeMessage", "format_run", "lz4_bytes_to_json", "order_entries", "percent", "quote",
           "read_run", "read_run_bytes", "read_run_path", "warm", "write_text_atomic", "QRELS_CODES", "QRELS_FORMATS",
           "QrelsFile", "read_qrels_bytes", "read_qrels_path", "STAMP_KEY"]
