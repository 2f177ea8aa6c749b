"""ranx's LZ4 files (``Run.save(path, kind="lz4")``, ranxhub's runs) -> the JSON text of their content,
called in a child process by :mod:`bsard_demo.runs.sandbox` (lz4's and cbor2's C decoders never see
untrusted bytes in the server's process, which only imports them). Both packages are optional: without
them :mod:`.sandbox` reports an LZ4 file as one ``lz4_unreadable`` error.

ranx writes ``lz4.frame`` of ``lz4.frame`` of CBOR (``ranx/io.py``, ``save_lz4``): a map ``{qid: {docid:
score}}`` (ranxhub: ``{"metadata": …, "run": {…}}``). Each frame is inflated within the size cap; the
CBOR value becomes JSON text, which the caller reads as any JSON run or qrels (:mod:`.json_formats`).
"""
from __future__ import annotations

import json
import math

import cbor2
import lz4.frame

from .content import Content
from .decode import LZ4_MAGIC, size_text
from .problems import ProblemList, quote


def _inflate(data: bytes, cap: int, problems: ProblemList) -> bytes | None:
    """The content of the LZ4 frame ``data`` (at most ``cap`` bytes), or None and an error."""
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        out = d.decompress(data, max_length=cap + 1)
    except RuntimeError as exc:  # lz4's errors on damaged frames
        problems.error("lz4_unreadable", f"the LZ4 file is damaged ({quote(exc, marks=False)})")
        return None
    if len(out) > cap:
        problems.error("lz4_too_large", f"the LZ4 content is larger than the limit of {size_text(cap)}; "
                                        "inflating was stopped")
        return None
    if not d.eof:
        problems.error("lz4_unreadable", "the LZ4 file is truncated: its frame ends too early")
        return None
    return out


def _plain(value):
    """A CBOR value as JSON can hold it: maps with text keys, lists, numbers, text; anything else
    as a short text (reported by the JSON reader as a bad id or score, never run)."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k) if isinstance(k, (int, float)) else quote(k): _plain(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)) or isinstance(value, float) and math.isfinite(value):
        return value
    return quote(value)


def lz4_json(content: Content, problems: ProblemList) -> str | None:
    """The JSON text of a ranx LZ4 file (``content``), or None with an ``lz4_*`` error in ``problems``."""
    data = b"".join(content.blocks())
    for _ in range(2):  # ranx: a frame of a frame
        if not data.startswith(LZ4_MAGIC):
            break
        data = _inflate(data, content.cap, problems)
        if data is None:
            return None
    if data.lstrip()[:1] in (b"{", b"["):  # JSON compressed as LZ4: read as it is
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    try:
        value = cbor2.loads(data)
    except RecursionError:
        problems.error("lz4_unreadable", "the LZ4 file's content is nested too deeply to be a run")
        return None
    except Exception as exc:  # cbor2 raises its own errors, ValueError, TypeError, ...
        problems.error("lz4_unreadable", "the LZ4 file does not hold ranx's CBOR data "
                                         f"({type(exc).__name__}: {quote(exc, marks=False)})")
        return None
    if isinstance(value, dict) and isinstance(value.get("run"), dict) and "metadata" in value:
        value = value["run"]  # ranxhub's layout
    if not isinstance(value, dict):
        problems.error("lz4_unreadable", "the LZ4 file's content is not a map {question: {article: score}}, as ranx "
                                         "writes a run or qrels")
        return None
    try:
        return json.dumps(_plain(value))
    except (RecursionError, ValueError) as exc:  # a cycle (CBOR shared references) or depth
        problems.error("lz4_unreadable", f"the LZ4 file's content cannot be read as a run ({quote(exc, marks=False)})")
        return None
