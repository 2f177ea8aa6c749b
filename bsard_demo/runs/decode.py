"""Bytes -> text, streamed, for the run reader (:mod:`bsard_demo.runs.read`): sources, gzip (bounded),
byte-order marks, binary sniffing, and the size limit, checked here and only here (:func:`size_problem`).
:func:`open_content` checks the bytes as a whole and returns a :class:`Content` whose :meth:`Content.chunks`
yields the text as :class:`Chunk` s of whole lines.

How: docs/design.md, 'bsard_demo/runs/decode.py'.
"""
from __future__ import annotations

import codecs
import os
import re
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
_BOMS_16_32 = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
               (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Characters that str.split() treats as whitespace but bytes.split() does not (ASCII range):
# a chunk holding one is parsed as str, so that both give the same fields.
_STR_ONLY_SPACE = (b"\x1c", b"\x1d", b"\x1e", b"\x1f")
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1b]")  # control bytes that are no whitespace

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
            problems.error("line_too_long", _long_line(long, max_line), line=line)
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
            problems.error("line_too_long", _long_line(long, max_line), line=line)
            return


def _long_line(start: bytes, max_line: int) -> str:
    shown = quote(start.decode("utf-8", "replace")[:QUOTE_LIMIT])
    return (f"a line longer than the limit of {size_text(max_line)} (it starts {shown}…): a run's lines have a "
            "few dozen characters; the rest of the file was not read")


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def binary_kind(data: bytes) -> tuple[str, str] | None:
    """``(code, error message)`` when ``data`` (the first 8 KB of a file) is a known binary file
    (or plainly not text), else None."""
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return "binary_file", f"this is {what}, not a run file"
    if data[:3] == b"BZh" and data[4:10] == b"1AY&SY":
        return "binary_file", "this is a bzip2 archive (only gzip compression is supported), not a run file"
    head = data[:8192]
    if b"\x00" in head:
        if len(head) >= 4 and (head[1::2].count(0) > len(head) // 4 or head[0::2].count(0) > len(head) // 4):
            return "not_utf8", "this looks like UTF-16 text without a byte-order mark; save the file as UTF-8"
        return "binary_file", "this is a binary file (it contains NUL bytes), not a run file"
    return None


@dataclass
class Content:
    """A run file's content that passed the whole-file checks: its raw :class:`Source`, whether
    it is gzip-compressed, its first bytes (``head``), whether it is a parquet or LZ4 file (decoded in
    a child: :mod:`.sandbox`) and, through :meth:`chunks`, its text."""

    source: Source
    compressed: bool
    head: bytes
    cap: int
    parquet: bool = False
    lz4: bool = False

    def __post_init__(self):
        #: gzip errors of a later pass (only when the file changed after the first one)
        self.late = ProblemList()

    def blocks(self) -> Iterator[bytes]:
        """The content's bytes, inflated when compressed."""
        blocks = self.source.blocks()
        return inflate(blocks, self.cap, self.late) if self.compressed else blocks

    def chunks(self, problems: ProblemList, max_line: int | None = None) -> Iterator[Chunk]:
        """The text in chunks of whole lines; decoding problems go to ``problems``; a line longer
        than ``max_line`` bytes is an error that ends it. Text with a UTF-16/32 byte-order mark is
        decoded whole (one chunk, or none and an error)."""
        for bom, codec in _BOMS_16_32:
            if self.head.startswith(bom):
                data = b"".join(self.blocks())
                try:
                    text = data.decode(codec)
                except UnicodeDecodeError as exc:
                    name = codec.upper()
                    problems.error("not_utf8", f"the file starts with a {name} byte-order mark but is not valid "
                                               f"{name} ({exc.reason})")
                    return iter(())
                del data
                cr_only = "\n" not in text and "\r" in text
                if max_line is not None:
                    lines = text.split("\r" if cr_only else "\n")
                    at = next((i for i, t in enumerate(lines) if len(t) > max_line // 2), None)
                    if at is not None:  # UTF-16: two bytes a character
                        problems.error("line_too_long", _long_line(lines[at][:400].encode(), max_line), line=at + 1)
                        return iter(())
                return iter([Chunk(1, text, cr_only)])
        return utf8_chunks(self.blocks(), problems, max_line)


def open_content(source: Source, problems: ProblemList, cap: int = DEFAULT_MAX_BYTES,
                 size_message: SizeMessage | None = None) -> tuple[Content | None, bool]:
    """``(content, compressed)`` of a run file; content is None when the bytes cannot be a run
    (empty, above ``cap`` raw or inflated, damaged gzip, a known binary file, ...), with the
    reason added to ``problems``."""
    if source.size == 0:
        problems.error("empty_file", "the file is empty (0 bytes)")
        return None, False
    raw_head, _ = head_of(source.blocks(), 8192)
    compressed = raw_head[:2] == GZIP_MAGIC
    too_big = size_problem(source.size, cap, size_message)
    if too_big is not None:
        problems.error("file_too_large", too_big)
        return None, compressed
    head = raw_head
    if compressed:
        scratch = ProblemList()
        total = 0
        head_parts: list[bytes] = []
        for piece in inflate(source.blocks(), cap, scratch):  # first pass: count, keep only the head
            if total < 8192:
                head_parts.append(piece[:8192 - total])
            total += len(piece)
        problems.extend(scratch)
        if scratch.has_errors:
            return None, True
        if total == 0:
            problems.error("empty_file", "the gzip file is empty: it decompresses to 0 bytes")
            return None, True
        head = b"".join(head_parts)
        if head[:2] == GZIP_MAGIC:
            problems.error("gzip_twice", "the file is gzip-compressed twice; decompress it once")
            return None, True
    # parquet: its magic number, then binary bytes (a text run whose first id is PAR1 has none)
    parquet = head.startswith(PARQUET_MAGIC) and _CONTROL.search(head) is not None
    if head.startswith(LZ4_MAGIC):
        return Content(source, compressed, head, cap, lz4=True), compressed
    if not parquet and not head.startswith(tuple(bom for bom, _ in _BOMS_16_32)):
        what = binary_kind(head)
        if what is not None:
            problems.error(*what)
            return None, compressed
    return Content(source, compressed, head, cap, parquet), compressed
