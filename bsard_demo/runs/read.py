"""Read and validate run files of any common layout, reporting every problem at once.

:func:`read_run_bytes` and :func:`read_run_path` never raise: whatever the bytes, they return a
:class:`RunFile` whose ``problems`` list every error and warning. One :class:`ReadOptions` says what
to check against and what the reader may spend. The path: bytes -> text (:mod:`.decode`) -> a ``Parsed``
(:mod:`.text_formats`, :mod:`.json_formats`, a registered :class:`TextFormat`, or :mod:`.parquet_format` in a
child: :mod:`.sandbox`) -> ``Run`` and warnings (:mod:`.validate`), every problem in one list. :func:`read_run`
gives a run made in-process the same warnings. Formats, detection and warnings: docs/run-formats.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from pathlib import Path
from typing import Callable, Collection, Iterator

from .columns import UNKNOWN, Parsed
from .content import Content, open_content
from .decode import DEFAULT_MAX_BYTES, Chunk, SizeMessage, Source, size_problem
from .json_formats import parse_json
from .limits import DEFAULT_LIMITS, ReadLimits, ReadOverrun, bounded, line_limit
from .problems import ProblemList, quote
from .run import Run
from .sandbox import DEFAULT_ISOLATION, Isolation, lz4_json_isolated, parse_parquet_isolated
from .text_formats import parse_table
from .validate import add_warnings, build_run

FORMATS = ("trec", "3col-rank", "3col-score", "csv", "json-scores", "json-ranked", "jsonl", "parquet", "lz4")
#: The format :func:`read_run` gives a run made in-process (the layout :meth:`Run.to_trec` writes).
BUILT_FORMAT = "trec"
_NOT_SPACE = re.compile(r"\S")  # as str.strip()/split() see whitespace
_NOT_SPACE_BYTES = re.compile(rb"\S")  # as bytes.split() does (ASCII chunks hold no other space)
_HTML = ("<!doctype html", "<html", "<head", "<body")
_PATH_LIMIT = 200  # characters of a path a message shows (a path may have 4,096)

__all__ = ["BUILT_FORMAT", "DEFAULT_ISOLATION", "DEFAULT_LIMITS", "DEFAULT_MAX_BYTES", "FORMATS", "UNKNOWN",
           "Isolation", "ReadLimits", "ReadOptions", "RunFile", "TextFormat", "formats", "read_run", "read_run_bytes",
           "read_run_path", "register_format", "unregister_format"]


@dataclass(frozen=True)
class TextFormat:
    """A text run format told by its first non-blank line, read by a parser of its own (docs/extending.md, 'A run
    format'): ``claims(first)`` says whether a file whose first non-blank line (stripped) is ``first`` is of this
    format; ``parse(lines, problems)`` reads ``(line number, line)`` pairs, streamed from that line on (each line
    bounded as a table's), and returns the :class:`~bsard_demo.runs.columns.Parsed` named ``name``."""

    name: str
    claims: Callable[[str], bool]
    parse: Callable[[Iterator[tuple[int, str]], ProblemList], Parsed]


_REGISTERED: dict[str, TextFormat] = {}


def register_format(fmt: TextFormat) -> TextFormat:
    """Add ``fmt``: it is tried on a text file that is not JSON, before the tables (:func:`formats` names it)."""
    if fmt.name in formats():
        raise ValueError(f"run format {fmt.name!r} is registered already")
    _REGISTERED[fmt.name] = fmt
    return fmt


def unregister_format(name: str) -> None:
    """Remove a format :func:`register_format` added (a test's toy)."""
    _REGISTERED.pop(name, None)


def formats() -> tuple[str, ...]:
    """Every format a read can detect: the built-in :data:`FORMATS`, then the registered ones."""
    return (*FORMATS, *_REGISTERED)


def _lines(chunks: Iterator[Chunk]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each line of ``chunks``, without its line end."""
    for chunk in chunks:
        text = chunk.as_str()
        lines = text.split("\r" if chunk.cr_only else "\n")
        if lines and not lines[-1]:
            lines.pop()
        for i, line in enumerate(lines):
            yield chunk.line + i, line.removesuffix("\r")


@dataclass(frozen=True)
class ReadOptions:
    """What a read checks and may spend. ``qids``, ``corpus_ids``: the split's questions and the
    corpus' articles the run is checked against (None: not checked); ``k``: the deepest cutoff
    (shorter rankings are warned about). ``max_bytes`` caps the bytes, raw or inflated from gzip;
    ``size_message`` words the error of a file above it (default: "the file is 2.0 MB, above the
    limit of 1.0 MB"). ``lower_is_better``: the scores are distances, ordered ascending (ties by
    article id descending, as for similarities); ``Run.scores`` keep the values of the file.
    ``isolation``: the limits of the child process that decodes a parquet file (:mod:`.sandbox`);
    None decodes it in this process (trusted files only: a damaged one can abort the process).
    ``limits``: the time, lines and questions a read may spend (:mod:`.limits`; None: unbounded)."""

    qids: Collection[str] | None = None
    corpus_ids: Collection[str] | None = None
    k: int = 100
    max_bytes: int = DEFAULT_MAX_BYTES
    size_message: SizeMessage | None = field(default=None, compare=False)
    lower_is_better: bool = False
    isolation: Isolation | None = DEFAULT_ISOLATION
    limits: ReadLimits | None = DEFAULT_LIMITS


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


def read_run_bytes(data: bytes, name: str, options: ReadOptions | None = None, **settings) -> RunFile:
    """Detect the format of ``data``, parse it and validate it; never raises. ``options`` (or
    its fields as keywords): :class:`ReadOptions`."""
    data = data if isinstance(data, bytes) else bytes(data)
    opts = _options(options, settings)
    return _read_source(lambda: Source(data=data, limit=opts.max_bytes), str(name), opts)


def read_run_path(path: str | Path, options: ReadOptions | None = None, **settings) -> RunFile:
    """Read a run file from disk (see :func:`read_run_bytes`), streaming it: the file is never
    held in memory whole (gzip included). A missing, unreadable or non-regular file is an error
    problem, and a file above the limit is not read."""
    p = Path(path)
    shown = quote(p, _PATH_LIMIT, marks=False)
    opts = _options(options, settings)
    problems = ProblemList()
    try:
        if not p.exists():
            problems.error("file_not_found", f"file not found: {shown}")
        elif p.is_dir():
            problems.error("not_a_file", f"{shown} is a folder, not a run file")
        elif not p.is_file():
            problems.error("not_a_file", f"{shown} is not a regular file")
        elif (too_big := size_problem(p.stat().st_size, opts.max_bytes, opts.size_message)) is not None:
            problems.error("file_too_large", too_big)
        else:
            with open(p, "rb"):  # unreadable: an error now, not inside the reader
                pass
            return _read_source(lambda: Source(path=p, limit=opts.max_bytes), p.name, opts)
    except OSError as exc:
        problems.error("unreadable_file", f"cannot read {shown}: {quote(exc.strerror or exc, marks=False)}")
    except Exception as exc:
        problems.error("unreadable_file", f"cannot read {shown} ({type(exc).__name__}: {quote(exc, marks=False)})")
    return RunFile(name=p.name, format=UNKNOWN, run=None, problems=problems)


def read_run(run: Run, name: str, options: ReadOptions | None = None, **settings) -> RunFile:
    """A run made in-process (a built-in system's) as a :class:`RunFile` of :data:`BUILT_FORMAT`,
    with the warnings a file of it would get against ``options``' dataset."""
    opts = _options(options, settings)
    problems = ProblemList()
    add_warnings(run, problems, tuple(run.tags), opts.qids, opts.corpus_ids, opts.k)
    return RunFile(name=name, format=BUILT_FORMAT, run=run, problems=problems, tags=tuple(run.tags))


def _options(options: ReadOptions | None, settings: dict) -> ReadOptions:
    return replace(options or ReadOptions(), **settings)


def _read_source(make_source: Callable[[], Source], name: str, options: ReadOptions) -> RunFile:
    """The file of ``make_source()`` read, its failures as problems."""
    problems = ProblemList()
    try:
        source = make_source()
        with bounded(options.limits):
            result = _read(source, name, problems, options)
        if source.path is not None and source.read > options.max_bytes:  # the file grew past the limit while read
            problems = ProblemList()
            problems.error("file_too_large", size_problem(source.read, options.max_bytes, options.size_message))
            result = RunFile(name, result.format, None, problems, result.tags, result.compressed)
        return result
    except OSError as exc:
        problems.error("unreadable_file", f"cannot read {quote(name, marks=False)}: {exc.strerror or exc}")
    except ReadOverrun as exc:  # a limit of the read: its one error, and nothing kept of the rest
        problems = ProblemList()
        problems.error(exc.code, exc.message)
    except MemoryError:
        problems = ProblemList()
        problems.error("reader_out_of_memory", f"reading {quote(name, marks=False)} needed more memory than this "
                                               "process has: the file was not read")
    except Exception as exc:  # never let odd bytes escape as a traceback
        problems.error(
            "internal_error",
            f"unexpected failure while reading the file ({type(exc).__name__}: {quote(exc, marks=False)}); please "
            "report it with the file")
    return RunFile(name=name, format=UNKNOWN, run=None, problems=problems)


@dataclass
class _First:
    """The first non-whitespace character of the text: its line, its character offset in the text,
    the text from it (at most 200 characters, lower case) and, through :attr:`text`, its line (stripped;
    made only for a table: a JSON run's one 40 MB line is not copied for nothing)."""

    line: int
    offset: int
    head: str
    chunk: Chunk
    start: int
    end: int

    @property
    def text(self) -> str:
        line = self.chunk.text[self.start:self.end]
        return (line if isinstance(line, str) else line.decode("ascii")).strip()


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
            head = text[i:i + 200]
            return taken, _First(chunk.line + text.count(nl, 0, i), offset + i,
                                 (head if isinstance(head, str) else head.decode("ascii")).lower(),
                                 chunk, i, end if end >= 0 else len(text))
        offset += len(text)
    return taken, None


def _read(source: Source, name: str, problems: ProblemList, options: ReadOptions) -> RunFile:
    """bytes -> text -> :class:`Parsed` -> :class:`RunFile`, every problem in ``problems``."""
    content, compressed = open_content(source, problems, options.max_bytes, options.size_message)
    parsed = Parsed(UNKNOWN) if content is None else _parse(content, name, problems, options.isolation)
    decoded_here = content is not None and not (content.parquet or content.lz4)
    if decoded_here and content.late.has_errors:  # the file changed meanwhile
        late = ProblemList()
        late.extend(content.late)
        return RunFile(name, parsed.format, None, late, (), compressed)
    run = None
    if parsed.columns is not None and not len(parsed.columns):
        if not problems.has_errors:
            problems.error("no_run_lines", "the file has no usable run lines")
    elif parsed.columns is not None:  # also with errors: the warnings of the usable lines are reported too
        run, built = build_run(parsed, problems, name=name, lower_is_better=options.lower_is_better)
        add_warnings(run, problems, parsed.tags, options.qids, options.corpus_ids, options.k, built)
    return RunFile(name, parsed.format, None if problems.has_errors else run, problems, parsed.tags, compressed)


def _parse(content: Content, name: str, problems: ProblemList, isolation: Isolation | None) -> Parsed:
    """The :class:`Parsed` of ``content`` by the parser its first bytes call for."""
    if content.parquet:
        if isolation is not None:  # pyarrow may abort on damaged bytes: never in this process
            return parse_parquet_isolated(content, name, problems, isolation)
        # pyarrow (0.5 s to import) is loaded only to read a parquet file in this process (trusted files)
        from .parquet_format import parse_parquet

        return parse_parquet(content, problems)
    if content.lz4:
        return _parse_lz4(content, name, problems, isolation)
    max_line = None if _json_like(content.head) else line_limit()
    chunks = content.chunks(problems, max_line)
    taken, first = _find_first(chunks)
    if first is None:
        if not problems.has_errors:
            problems.error("whitespace_only", "the file contains only whitespace: no run lines")
        return Parsed(UNKNOWN)
    if first.head.startswith("<"):
        for _ in chunks:  # the decoding problems of every line are reported first
            pass
        if first.head.startswith(_HTML):
            problems.error("html_page", "this is an HTML web page, not a run file "
                                        "(did you save a download page instead of the raw file?)")
        else:
            problems.error("html_page", "this is an XML/HTML document, not a run file")
        return Parsed(UNKNOWN)
    if first.offset < 4096 and first.head[:1] in ("{", "["):
        text = "".join(c.as_str() for c in chain(taken, chunks))
        return parse_json(text, problems)
    claimed = next(  # a table's first line: bounded (a JSON run's may be 40 MB)
        (f for f in _REGISTERED.values() if f.claims(first.text)), None)
    if claimed is not None:
        skipped = first.line - taken[-1].line  # the blank lines before the first, in its chunk
        return claimed.parse(islice(_lines(chain(taken[-1:], chunks)), skipped, None), problems)
    return parse_table(chain(taken, chunks), first.line, first.text, problems,
                       restart=lambda: content.chunks(ProblemList(), max_line))


def _parse_lz4(content: Content, name: str, problems: ProblemList, isolation: Isolation | None) -> Parsed:
    """ranx's LZ4 run: its content as JSON text (lz4 and cbor2 in a child unless ``isolation`` is None),
    read as a JSON run (the same limits and problems) of format ``lz4``."""
    text = lz4_json_isolated(content, name, problems, isolation)
    if text is None:
        return Parsed("lz4")
    return replace(parse_json(text, problems), format="lz4")


def _json_like(head: bytes) -> bool:
    """Whether the first bytes look like JSON, as :func:`_parse` will tell (a ``{`` or ``[`` first,
    within 4,096 characters): its lines may be long (a JSON run is often one line), so it is bounded
    by its values (:mod:`.json_formats`), not by its lines."""
    text = head.decode("utf-8", "ignore").removeprefix("\ufeff")
    found = _NOT_SPACE.search(text)
    return found is not None and found.start() < 4096 and text[found.start()] in "{["
