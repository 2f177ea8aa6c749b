"""Bytes -> text, streamed, for the run reader (:mod:`bsard_demo.runs.read`): sources, gzip (bounded),
a UTF-8 byte-order mark, and the size limit, checked here and only here (:func:`size_problem`).
:func:`utf8_chunks` yields the text as :class:`Chunk` s of whole lines; the whole-file checks that come first
(binary sniffing, UTF-16/32) are :mod:`.content`'s.

How: docs/design.md, 'bsard_demo/runs/decode.py'.
"""
from __future__ import annotations

import codecs
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .limits import tick
from .problems import QUOTE_LIMIT, ProblemList, quote

#: Default cap on a run file's bytes, raw or decompressed.
DEFAULT_MAX_BYTES = 256 * 2**20
#: ``(size, limit) -> message`` for a file above the size limit (e.g. the app's French one).
SizeMessage = Callable[[int, int], str]

BLOCK = 1 << 20  # bytes read, inflated or parsed at a time
GZIP_MAGIC = b"\x1f\x8b"
#: Members of a gzip file read at most (a ``bgzip`` file of 256 MB has ~4,000; a flood of empty members, millions).
MAX_GZIP_MEMBERS = 100_000
_FIRST_STEP, _STEP = 256, 1 << 16  # compressed bytes given at a member's first step, and at most
PARQUET_MAGIC = b"PAR1"
LZ4_MAGIC = b"\x04\x22\x4d\x18"  # an LZ4 frame (ranx's ``kind="lz4"``: runs/lz4_format.py)
# Characters that str.split() treats as whitespace but bytes.split() does not (ASCII range):
# a chunk holding one is parsed as str, so that both give the same fields.
_STR_ONLY_SPACE = (b"\x1c", b"\x1d", b"\x1e", b"\x1f")


def size_text(n: int) -> str:
    """``n`` bytes in words: ``257.0 MB``, ``1.5 KB``, ``12 bytes``."""
    if n >= 2**20:
        return f"{n / 2**20:.1f} MB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KB"
    return f"{n} bytes"


def size_problem(size: int, limit: int, message: SizeMessage | None = None) -> str | None:
    """The error for a file of ``size`` bytes above ``limit`` (``message`` words it, default
    "the file is 257.0 MB, above the limit of 256.0 MB"); None when it is within the limit."""
    if size <= limit:
        return None
    if message is not None:
        return message(size, limit)
    return f"the file is {size_text(size)}, above the limit of {size_text(limit)}"


class Source:
    """The raw bytes of a run file, readable again from the start in blocks: ``data`` in memory,
    or the file at ``path``, of which at most ``limit + 1`` bytes are ever read (``read`` counts
    the bytes of the last pass: a file that grew past the limit after its size was checked)."""

    def __init__(self, data: bytes | None = None, path: str | Path | None = None, limit: int = DEFAULT_MAX_BYTES):
        self.data, self.path, self.limit = data, path, limit
        self.size = len(data) if data is not None else os.stat(path).st_size
        self.read = 0

    def blocks(self, size: int | None = None) -> Iterator[bytes]:
        size = size or BLOCK
        self.read = 0
        if self.data is not None:
            data = self.data
            for i in range(0, len(data), size):
                block = data[i:i + size]
                self.read += len(block)
                yield block
            return
        with open(self.path, "rb") as f:
            while self.read <= self.limit:
                block = f.read(min(size, self.limit + 1 - self.read))
                if not block:
                    return
                self.read += len(block)
                yield block

    def whole(self) -> bytes:
        return self.data if self.data is not None else b"".join(self.blocks())


def head_of(blocks: Iterator[bytes], n: int) -> tuple[bytes, Iterator[bytes]]:
    """The first ``n`` bytes of ``blocks`` (fewer at the end) and an iterator over all of them."""
    taken: list[bytes] = []
    size = 0
    for block in blocks:
        taken.append(block)
        size += len(block)
        if size >= n:
            break
    head = b"".join(taken)

    def again() -> Iterator[bytes]:
        if head:
            yield head
        yield from blocks

    return head[:n], again()


# --- gzip -------------------------------------------------------------------------------------

def inflate(blocks: Iterator[bytes], cap: int, problems: ProblemList,
            max_members: int = MAX_GZIP_MEMBERS) -> Iterator[bytes]:
    """The inflated pieces (at most 1 MB each) of (possibly multi-member) gzip ``blocks``; stops
    with an error once more than ``cap`` bytes came out or after ``max_members`` members, and reports
    truncation, corruption and bytes after the last member (a warning, unless they are all NUL
    padding). Input is given from a memoryview, a member's first steps small (256 bytes, doubling to
    64 KB): a flood of empty 20-byte members costs ~2 us each, not a copy of the block each (issue 37)."""
    it = iter(blocks)
    buf = memoryview(b"")  # compressed input; buf[pos:] not yet given to the decompressor
    pos = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    total = 0
    members = 1
    step = _FIRST_STEP
    try:
        while True:
            if d.eof:
                pos -= len(d.unused_data)  # what the decompressor was given past the member's end
                if len(buf) - pos < 2:
                    rest = bytes(buf[pos:])
                    while len(rest) < 2 and (more := next(it, None)) is not None:
                        rest += more
                    buf, pos = memoryview(rest), 0
                if buf[pos:pos + 2] == GZIP_MAGIC:  # another member follows
                    members += 1
                    if members > max_members:
                        problems.error("gzip_too_many_members",
                                       f"the gzip file has more than {max_members:,} members (gzip streams one after "
                                       "another); inflating was stopped")
                        return
                    if members % 1024 == 0:
                        tick()
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    step = _FIRST_STEP
                    continue
                rest = buf[pos:]
                size, padding = len(rest), not bytes(rest).strip(b"\x00")
                for more in it:
                    size += len(more)
                    padding = padding and not more.strip(b"\x00")
                if not padding:
                    problems.warning("gzip_trailing_data",
                                     f"{size_text(size)} of data after the end of the gzip stream were ignored")
                return
            if d.unconsumed_tail:
                inp = d.unconsumed_tail
            else:
                if pos >= len(buf):
                    buf, pos = memoryview(next(it, b"")), 0
                inp = buf[pos:pos + step]
                pos += len(inp)
                step = min(step * 2, _STEP)
            piece = d.decompress(inp, min(1 << 20, cap - total + 1))  # bounded output per call
            total += len(piece)
            if total > cap:
                problems.error("gzip_too_large",
                               f"the decompressed content is larger than the limit of {size_text(cap)}; "
                               "decompression was stopped")
                return
            if piece:
                tick()
                yield piece
            if not inp and not piece:
                break
        if not d.eof:
            problems.error("gzip_truncated", "the gzip file is truncated: its compressed data ends too early")
    except zlib.error as exc:
        problems.error("gzip_corrupt", f"the gzip file is corrupt ({exc})")


# --- text ---------------------------------------------------------------------------------------

@dataclass
class Chunk:
    """Whole lines of the text: ``text`` is ``bytes`` when pure ASCII (fields split as bytes,
    the fast path) else ``str``; ``line`` is the number of its first line; ``cr_only`` marks an
    old-Mac file (no ``\\n`` at all: its lines end with ``\\r``), always a single chunk."""

    line: int
    text: bytes | str
    cr_only: bool = False

    @property
    def newline(self):
        nl = "\r" if self.cr_only else "\n"
        return nl if isinstance(self.text, str) else nl.encode()

    @property
    def n_newlines(self) -> int:
        return self.text.count(self.newline)

    def as_str(self) -> str:
        return self.text if isinstance(self.text, str) else self.text.decode("ascii")


def _line_blocks(blocks: Iterator[bytes], target: int | None = None,
                 max_line: int | None = None) -> Iterator[tuple[bytes, bool, bytes | None]]:
    """``(bytes, cr_only, long)`` of about ``target`` bytes each (default :data:`BLOCK`; more for a
    longer line), cut after a ``\\n``. With ``max_line``, a line (between ``\\n`` or ``\\r``) longer
    than it ends the blocks: the last one's ``long`` holds that line's first bytes (else None)."""
    target = target or BLOCK
    parts: list[bytes] = []
    size = 0
    tail = 0  # bytes of the line not yet ended
    seen_newline = False
    for block in blocks:
        parts.append(block)
        size += len(block)
        if max_line is not None:
            long_at, tail = _long_line_at(block, tail, max_line)
            if long_at is not None:
                buf = b"".join(parts)
                start = len(buf) - len(block) + long_at
                head = buf[:start]
                yield head, not seen_newline and b"\n" not in head and b"\r" in head, buf[start:start + 400]
                return
        if size < target or b"\n" not in block:  # a long line: keep its parts until it ends
            continue
        buf = b"".join(parts) if len(parts) > 1 else parts[0]
        parts = []
        cut = buf.rfind(b"\n")
        seen_newline = True
        yield buf[:cut + 1], False, None
        rest = buf[cut + 1:]
        del buf
        parts, size = ([rest] if rest else []), len(rest)
    buf = b"".join(parts)
    del parts
    if buf:
        yield buf, not seen_newline and b"\n" not in buf and b"\r" in buf, None


def _long_line_at(block: bytes, tail: int, max_line: int) -> tuple[int | None, int]:
    """``(offset in block of the start of its first line longer than max_line, or None; the length of
    its last, unfinished line)``, given the ``tail`` bytes of the line it continues (lines end at
    ``\\n`` or ``\\r``; numpy finds them: ~1 ms a MB)."""
    a = np.frombuffer(block, dtype=np.uint8)
    breaks = np.flatnonzero((a == 10) | (a == 13))
    if not len(breaks):
        tail += len(block)
        return (-(tail - len(block)) if tail > max_line else None), tail
    if tail + int(breaks[0]) > max_line:
        return -tail, len(block) - int(breaks[-1]) - 1
    lengths = np.diff(breaks) - 1
    over = np.flatnonzero(lengths > max_line)
    last = len(block) - int(breaks[-1]) - 1
    if len(over):
        return int(breaks[over[0]]) + 1, last
    return (int(breaks[-1]) + 1 if last > max_line else None), last


def _utf8_errors(data: bytes, first_line: int, newline: bytes, problems: ProblemList) -> None:
    """One error per line of ``data`` that is not valid UTF-8, with its number."""
    for lineno, raw in enumerate(data.split(newline), first_line):
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
            problems.error("not_utf8", f"not valid UTF-8: byte 0x{bad} at character {exc.start + 1}{hint}",
                           line=lineno, kind="line is not valid UTF-8")


def utf8_chunks(blocks: Iterator[bytes], problems: ProblemList, max_line: int | None = None) -> Iterator[Chunk]:
    """The text of UTF-8 ``blocks`` (a leading byte-order mark dropped) in chunks of whole lines.
    Lines that are not valid UTF-8 are reported with their number and decoded with replacement
    characters, so that later checks still run. A line longer than ``max_line`` bytes is an error
    and ends the text (its fields are never split: issue 37)."""
    head, blocks = head_of(blocks, 3)
    if head.startswith(codecs.BOM_UTF8):
        first = next(blocks)
        blocks = _prepend(first[3:], blocks)
    line = 1
    for data, cr_only, long in _line_blocks(blocks, max_line=max_line):
        tick()
        if not data:  # a long first line
            problems.error("line_too_long", long_line(long, max_line), line=line)
            return
        if data.isascii():
            text: bytes | str = data.decode("ascii") if any(c in data for c in _STR_ONLY_SPACE) else data
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                _utf8_errors(data, line, b"\r" if cr_only else b"\n", problems)
                text = data.decode("utf-8", "replace")
        chunk = Chunk(line, text, cr_only)
        line += chunk.n_newlines
        yield chunk
        if long is not None:  # after the problems of the lines before it
            problems.error("line_too_long", long_line(long, max_line), line=line)
            return


def long_line(start: bytes, max_line: int) -> str:
    shown = quote(start.decode("utf-8", "replace")[:QUOTE_LIMIT])
    return (f"a line longer than the limit of {size_text(max_line)} (it starts {shown}…): a run's lines have a "
            "few dozen characters; the rest of the file was not read")


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest
