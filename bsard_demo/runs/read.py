"""Read and validate run files of any common layout, reporting every problem at once.

:func:`read_run_bytes` (and :func:`read_run_path`) never raise: whatever the bytes, they return
a :class:`RunFile` whose ``problems`` list every error and warning. The formats, what is
detected how, and every warning: docs/run-formats.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Collection, Iterator

from .decode import DEFAULT_MAX_BYTES, Chunk, SizeMessage, Source, open_content, size_problem
from .json_formats import parse_json
from .problems import ProblemList
from .run import Run
from .sandbox import DEFAULT_ISOLATION, Isolation, parse_parquet_isolated
from .text_formats import parse_table
from .validate import add_warnings, build_run

FORMATS = ("trec", "3col-rank", "3col-score", "csv", "json-scores", "json-ranked", "jsonl", "parquet")
UNKNOWN = "unknown"
_NOT_SPACE = re.compile(r"\S")  # as str.strip()/split() see whitespace
_NOT_SPACE_BYTES = re.compile(rb"\S")  # as bytes.split() does (ASCII chunks hold no other space)

__all__ = ["DEFAULT_ISOLATION", "DEFAULT_MAX_BYTES", "FORMATS", "UNKNOWN", "Isolation", "RunFile", "read_run_bytes",
           "read_run_path"]


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


def read_run_bytes(
    data: bytes,
    name: str,
    *,
    qids: Collection[str] | None = None,
    corpus_ids: Collection[str] | None = None,
    k: int = 100,
    max_decompressed_bytes: int = DEFAULT_MAX_BYTES,
    size_message: SizeMessage | None = None,
    lower_is_better: bool = False,
    isolation: Isolation | None = DEFAULT_ISOLATION,
) -> RunFile:
    """Detect the format of ``data``, parse it and validate it; never raises.

    ``max_decompressed_bytes`` caps the bytes, raw or inflated from gzip; ``size_message``
    words the error of a file above it (default: "the file is 2.0 MB, above the limit of
    1.0 MB"). ``lower_is_better``: the scores are distances, ordered ascending (ties by article
    id descending, as for similarities); ``Run.scores`` keep the values of the file.
    ``isolation``: the limits of the child process that decodes a parquet file
    (:mod:`.sandbox`); ``None`` decodes it in this process (trusted files only: a damaged one
    can abort the process)."""
    data = data if isinstance(data, bytes) else bytes(data)
    return _read_source(lambda: Source(data=data, limit=max_decompressed_bytes), str(name), qids, corpus_ids, k,
                        max_decompressed_bytes, size_message, lower_is_better, isolation)


def read_run_path(
    path: str | Path,
    *,
    qids: Collection[str] | None = None,
    corpus_ids: Collection[str] | None = None,
    k: int = 100,
    max_decompressed_bytes: int = DEFAULT_MAX_BYTES,
    size_message: SizeMessage | None = None,
    lower_is_better: bool = False,
    isolation: Isolation | None = DEFAULT_ISOLATION,
) -> RunFile:
    """Read a run file from disk (see :func:`read_run_bytes`), streaming it: the file is never
    held in memory whole (gzip included). A missing, unreadable or non-regular file is an error
    problem, and a file above the limit is not read."""
    p = Path(path)
    problems = ProblemList()
    try:
        if not p.exists():
            problems.error("file_not_found", f"file not found: {p}")
        elif p.is_dir():
            problems.error("not_a_file", f"{p} is a folder, not a run file")
        elif not p.is_file():
            problems.error("not_a_file", f"{p} is not a regular file")
        elif (too_big := size_problem(p.stat().st_size, max_decompressed_bytes, size_message)) is not None:
            problems.error("file_too_large", too_big)
        else:
            with open(p, "rb"):  # unreadable: an error now, not inside the reader
                pass
            return _read_source(lambda: Source(path=p, limit=max_decompressed_bytes), p.name, qids, corpus_ids, k,
                                max_decompressed_bytes, size_message, lower_is_better, isolation)
    except OSError as exc:
        problems.error("unreadable_file", f"cannot read {p}: {exc.strerror or exc}")
    except Exception as exc:
        problems.error("unreadable_file", f"cannot read {p} ({type(exc).__name__}: {exc})")
    return RunFile(name=p.name, format=UNKNOWN, run=None, problems=problems)


def _read_source(make_source, name: str, qids, corpus_ids, k: int, cap: int, size_message: SizeMessage | None,
                 lower_is_better: bool, isolation: Isolation | None) -> RunFile:
    result = RunFile(name=name, format=UNKNOWN, run=None, problems=ProblemList())
    try:
        source = make_source()
        _read(source, result, qids, corpus_ids, k, cap, size_message, lower_is_better, isolation)
        if source.path is not None and source.read > cap:  # the file grew past the limit while read
            result.problems = ProblemList()
            result.problems.error("file_too_large", size_problem(source.read, cap, size_message))
    except OSError as exc:
        result.problems.error("unreadable_file", f"cannot read {name}: {exc.strerror or exc}")
    except MemoryError:
        result.problems = ProblemList()
        result.problems.error("reader_out_of_memory", f"reading {name} needed more memory than this process has: "
                                                      "the file was not read")
    except Exception as exc:  # never let odd bytes escape as a traceback
        result.problems.error(
            "internal_error",
            f"unexpected failure while reading the file ({type(exc).__name__}: {exc}); please report it with the file"
        )
    if result.problems.has_errors:
        result.run = None
    return result


@dataclass
class _First:
    """The first non-whitespace character of the text: its line, that line (stripped), its
    character offset in the text and the text from it (at most 200 characters, lower case)."""

    line: int
    text: str
    offset: int
    head: str


def _find_first(chunks: Iterator[Chunk]) -> tuple[list[Chunk], _First | None]:
    """The chunks up to the one holding the first non-whitespace character, and where it is."""
    taken: list[Chunk] = []
    offset = 0
    for chunk in chunks:
        taken.append(chunk)
        text = chunk.text
        found = (_NOT_SPACE if isinstance(text, str) else _NOT_SPACE_BYTES).search(text)
        if found:
            i = found.start()
            nl = chunk.newline
            end = text.find(nl, i)
            line_text = text[i:end if end >= 0 else len(text)]
            head = text[i:i + 200]
            as_str = (lambda t: t) if isinstance(text, str) else (lambda t: t.decode("ascii"))
            return taken, _First(chunk.line + text.count(nl, 0, i), as_str(line_text).strip(), offset + i,
                                 as_str(head).lower())
        offset += len(text)
    return taken, None


def _read(source: Source, result: RunFile, qids, corpus_ids, k: int, cap: int, size_message: SizeMessage | None,
          lower_is_better: bool, isolation: Isolation | None) -> None:
    """bytes -> text (:mod:`.decode`) -> columns (:mod:`.text_formats`, :mod:`.json_formats`,
    :mod:`.parquet_format`) -> Run and warnings (:mod:`.validate`), filling ``result``."""
    problems = result.problems
    content, result.compressed = open_content(source, problems, cap, size_message)
    if content is None:
        return
    if content.parquet:
        if isolation is not None:  # pyarrow may abort on damaged bytes: never in this process
            parsed = parse_parquet_isolated(content, result, isolation)
        else:
            from .parquet_format import parse_parquet  # pyarrow is imported only for a parquet file

            parsed = parse_parquet(content, result)
        _finish(parsed, result, qids, corpus_ids, k, lower_is_better)
        return
    decoding = ProblemList()
    chunks = content.chunks(decoding)
    taken, first = _find_first(chunks)
    if first is None:
        problems.extend(decoding)
        if not decoding.has_errors:
            problems.error("whitespace_only", "the file contains only whitespace: no run lines")
        return
    if first.head.startswith(("<!doctype html", "<html", "<head", "<body")) or first.head.startswith("<"):
        for _ in chunks:  # the decoding problems of every line are reported first
            pass
        problems.extend(decoding)
        if first.head.startswith(("<!doctype html", "<html", "<head", "<body")):
            problems.error("html_page", "this is an HTML web page, not a run file "
                                        "(did you save a download page instead of the raw file?)")
        else:
            problems.error("html_page", "this is an XML/HTML document, not a run file")
        return
    if first.offset < 4096 and first.head[:1] in ("{", "["):
        text = "".join(c.as_str() for c in chain(taken, chunks))
        problems.extend(decoding)
        parsed = parse_json(text, result)
        del text
    else:
        found = ProblemList()
        parsed = parse_table(chain(taken, chunks), first.line, first.text, result, found, decoding,
                             restart=lambda: content.chunks(ProblemList()))
        problems.extend(decoding)
        problems.extend(found)
    if content.late.has_errors:  # the file changed between two readings
        result.problems = ProblemList()
        result.problems.extend(content.late)
        return
    _finish(parsed, result, qids, corpus_ids, k, lower_is_better)


def _finish(parsed, result: RunFile, qids, corpus_ids, k: int, lower_is_better: bool) -> None:
    """Columns -> Run and warnings (:mod:`.validate`)."""
    problems = result.problems
    if parsed is None:
        return
    cols, by, check_ranks, tags = parsed
    result.tags = tuple(tags)
    if not len(cols):
        if not problems.has_errors:
            problems.error("no_run_lines", "the file has no usable run lines")
        return
    run, built = build_run(cols, by, problems, name=result.name, tags=result.tags, check_ranks=check_ranks,
                           lower_is_better=lower_is_better)
    add_warnings(run, result, qids, corpus_ids, k, built)
    result.run = run
