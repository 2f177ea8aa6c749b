"""A run file's bytes checked as a whole before any parsing: :func:`open_content` turns a
:class:`~.decode.Source` into a :class:`Content` (or an error: empty, above the size limit, damaged or doubled
gzip, a known binary file), telling text from parquet and LZ4, whose :meth:`Content.chunks` yields the text.
How: docs/design.md, 'bsard_demo/runs/decode.py' (and content.py).
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Iterator

from .decode import (
    DEFAULT_MAX_BYTES,
    GZIP_MAGIC,
    LZ4_MAGIC,
    PARQUET_MAGIC,
    Chunk,
    SizeMessage,
    Source,
    head_of,
    inflate,
    long_line,
    size_problem,
    utf8_chunks,
)
from .problems import ProblemList

_BOMS_16_32 = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
               (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
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
                        problems.error("line_too_long", long_line(lines[at][:400].encode(), max_line), line=at + 1)
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
