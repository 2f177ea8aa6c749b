"""Bytes -> text: gzip (streamed, bounded), byte-order marks, binary sniffing and the size limit.

:func:`to_text` is the first step of :func:`bsard_demo.runs.read.read_run_bytes`; it adds every
problem it finds to a :class:`~bsard_demo.runs.problems.ProblemList` and returns ``None`` when
the bytes cannot be a run file. The size limit is checked here, and only here
(:func:`size_problem`): on the raw bytes (or a file's size on disk, by
:func:`~bsard_demo.runs.read.read_run_path`) and, for gzip, on the inflated content.
"""
from __future__ import annotations

import codecs
import zlib
from typing import Callable

from .problems import ProblemList

#: Default cap on a run file's bytes, raw or decompressed.
DEFAULT_MAX_BYTES = 256 * 2**20
#: ``(size, limit) -> message`` for a file above the size limit (e.g. the app's French one).
SizeMessage = Callable[[int, int], str]

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
                    problems.warning("gzip_trailing_data", f"{size_text(len(rest))} of data after the end of the gzip stream were ignored")
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
                problems.error("gzip_too_large",
                    f"the decompressed content is larger than the limit of {size_text(cap)}; "
                    "decompression was stopped"
                )
                return None
            if keep:
                out.append(piece)
            if not inp and not piece:
                break
        if not d.eof:
            problems.error("gzip_truncated", "the gzip file is truncated: its compressed data ends too early")
            return None
    except zlib.error as exc:
        problems.error("gzip_corrupt", f"the gzip file is corrupt ({exc})")
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
                problems.error("not_utf8", f"the file starts with a {name} byte-order mark but is not valid {name} ({exc.reason})")
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
            problems.error("not_utf8",
                f"not valid UTF-8: byte 0x{bad} at character {exc.start + 1}{hint}",
                line=lineno, kind="line is not valid UTF-8",
            )
    return data.decode("utf-8", "replace")


def _binary_kind(data: bytes) -> tuple[str, str] | None:
    """``(code, error message)`` when ``data`` is a known binary file (or plainly not text), else None."""
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


def size_problem(size: int, limit: int, message: SizeMessage | None = None) -> str | None:
    """The error for a file of ``size`` bytes above ``limit`` (``message`` words it, default
    "the file is 257.0 MB, above the limit of 256.0 MB"); None when it is within the limit."""
    if size <= limit:
        return None
    if message is not None:
        return message(size, limit)
    return f"the file is {size_text(size)}, above the limit of {size_text(limit)}"


def to_text(data: bytes, problems: ProblemList, cap: int = DEFAULT_MAX_BYTES,
            size_message: SizeMessage | None = None) -> tuple[str | None, bool]:
    """``(text, compressed)`` of a run file's bytes; text is None when the bytes cannot be a
    run (empty, above ``cap`` raw or inflated, a known binary or HTML/XML file, ...), with the
    reason added to ``problems``."""
    if not data:
        problems.error("empty_file", "the file is empty (0 bytes)")
        return None, False
    compressed = data[:2] == b"\x1f\x8b"
    too_big = size_problem(len(data), cap, size_message)
    if too_big is not None:
        problems.error("file_too_large", too_big)
        return None, compressed
    if compressed:
        inflated = _gunzip(data, cap, problems)
        if inflated is None:
            return None, True
        if not inflated:
            problems.error("empty_file", "the gzip file is empty: it decompresses to 0 bytes")
            return None, True
        if inflated[:2] == b"\x1f\x8b":
            problems.error("gzip_twice", "the file is gzip-compressed twice; decompress it once")
            return None, True
        data = inflated
    bom_16_32 = data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    what = None if bom_16_32 else _binary_kind(data)
    if what is not None:
        problems.error(*what)
        return None, compressed
    text = _decode(data, problems)
    if text is None:
        return None, compressed
    stripped = text.strip()
    if not stripped:
        problems.error("whitespace_only", "the file contains only whitespace: no run lines")
        return None, compressed
    head = stripped[:200].lower()
    if head.startswith(("<!doctype html", "<html", "<head", "<body")):
        problems.error("html_page", "this is an HTML web page, not a run file "
                       "(did you save a download page instead of the raw file?)")
        return None, compressed
    if head.startswith("<"):
        problems.error("html_page", "this is an XML/HTML document, not a run file")
        return None, compressed
    return text, compressed
