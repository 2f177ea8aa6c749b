"""Fuzz the run reader with hostile files, every case in a child process.

Cases: structure-aware mutations of valid parquet runs (the thrift fields of the footer, of page
headers, of statistics and the page index, dictionary pages: :func:`parquet_cases`), byte
mutations of gzip, JSON, JSON Lines, CSV, TREC and ranx LZ4 runs (:func:`text_cases`) and of a dataset
folder's CSV files (:func:`dataset_cases`). :func:`run_cases`
reads each one with :func:`bsard_demo.runs.read_run_bytes` in a child (:data:`_CHILD`), so an abort
or a hang fails that case and never the caller; a case passes when it gives a run or problems with
codes, no ``internal_error``, and ``run is None`` exactly when there are errors. Test support:
the suite runs a bounded quick mode (tests/runs/test_fuzz_runs.py; :func:`parquet_bases` feeds
tests/runs/test_sandbox.py); the long mode is ``python bench/fuzz_runs.py`` (docs/reliability.md,
"Hostile files in a child").
"""
from __future__ import annotations

import gzip
import io
import json
import os
import random
import select
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

REPO = Path(__file__).resolve().parents[1]


# -- thrift compact protocol: where the fields are ------------------------------------------------
@dataclass(frozen=True)
class Site:
    """One thrift value in a file: ``kind`` (``varint``, ``binary``, ``list``, ``type``, ``fixed``)
    at ``start``..``end`` (for ``binary``: its length varint; ``list``: its size header)."""

    kind: str
    start: int
    end: int


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf) or shift > 70:
            raise ValueError("bad varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _encode_varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _value(buf: bytes, i: int, t: int, sites: list[Site], depth: int) -> int:
    if depth > 40:
        raise ValueError("too deep")
    if t in (1, 2):  # a bool held in the type nibble
        return i
    if t == 3:
        sites.append(Site("fixed", i, i + 1))
        return i + 1
    if t in (4, 5, 6):
        _, j = _varint(buf, i)
        sites.append(Site("varint", i, j))
        return j
    if t == 7:
        sites.append(Site("fixed", i, i + 8))
        return i + 8
    if t == 8:
        n, j = _varint(buf, i)
        sites.append(Site("binary", i, j))
        return j + n
    if t in (9, 10):
        head = buf[i]
        size, j = (head >> 4, i + 1) if head >> 4 != 15 else _varint(buf, i + 1)
        sites.append(Site("list", i, j))
        for _ in range(size):
            j = _value(buf, j, head & 0x0F, sites, depth + 1)
        return j
    if t == 11:
        size, j = _varint(buf, i)
        sites.append(Site("list", i, j))
        if size:
            kv = buf[j]
            j += 1
            for _ in range(size):
                j = _value(buf, j, kv >> 4, sites, depth + 1)
                j = _value(buf, j, kv & 0x0F, sites, depth + 1)
        return j
    if t == 12:
        return _struct(buf, i, sites, depth + 1)
    raise ValueError(f"bad type {t}")


def _struct(buf: bytes, i: int, sites: list[Site], depth: int = 0) -> int:
    while True:
        b = buf[i]
        if b == 0:
            return i + 1
        sites.append(Site("type", i, i + 1))
        i += 1
        if b >> 4 == 0:  # a long-form field id
            _, i = _varint(buf, i)
        i = _value(buf, i, b & 0x0F, sites, depth)


def thrift_sites(buf: bytes, start: int) -> list[Site]:
    """The values of the thrift struct at ``start`` (the walk stops quietly where it cannot go on)."""
    sites: list[Site] = []
    try:
        _struct(buf, start, sites)
    except (ValueError, IndexError):
        pass
    return sites


# -- valid parquet runs and the regions of each --------------------------------------------------
def parquet_bases() -> list[bytes]:
    """Valid parquet runs of the layouts users write: plain and dictionary strings, integer ids,
    ranks and tags, several row groups, statistics and page indexes, v1 and v2 pages, codecs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(7)
    rows = [(str(rng.randrange(20)), str(rng.randrange(300)), round(rng.uniform(-5, 30), 3)) for _ in range(120)]
    q, d, s = (list(c) for c in zip(*rows))
    tables = [
        (pa.table({"qid": q, "docid": d, "score": s}), {}),
        (pa.table({"q_id": pa.array(q).dictionary_encode(), "doc_id": d, "score": s, "tag": ["bm25"] * len(q)}),
         {"compression": "zstd", "write_page_index": True}),
        (pa.table({"query_id": [int(x) for x in q], "article_id": [int(x) for x in d],
                   "rank": list(range(1, len(q) + 1))}), {"data_page_version": "2.0", "compression": "none"}),
        (pa.table({"qid": q, "docid": d, "score": s, "rank": list(range(1, len(q) + 1))}),
         {"row_group_size": 40, "use_dictionary": False, "write_statistics": True, "compression": "gzip"}),
    ]
    out = []
    for table, kw in tables:
        buf = io.BytesIO()
        pq.write_table(table, buf, **kw)
        out.append(buf.getvalue())
    return out


def _regions(data: bytes) -> dict[str, list[int]]:
    """Where the thrift structs of a valid parquet file start: the footer, page headers
    (data and dictionary), the page index (column and offset indexes)."""
    import pyarrow.parquet as pq

    footer_len = struct.unpack("<I", data[-8:-4])[0]
    regions: dict[str, list[int]] = {"footer": [len(data) - 8 - footer_len], "page": [], "dictionary": [],
                                      "index": []}
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c).to_dict()
            regions["page"].append(col["data_page_offset"])
            if col.get("dictionary_page_offset"):
                regions["dictionary"].append(col["dictionary_page_offset"])
    for name in ("column_index_offset", "offset_index_offset"):
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                value = getattr(meta.row_group(g).column(c), name, None)
                if value:
                    regions["index"].append(value)
    return regions


def _mutate_site(buf: bytearray, site: Site, rng: random.Random) -> bytearray:
    old = bytes(buf[site.start:site.end])
    if site.kind == "type":
        new = bytes([(old[0] & 0xF0) | rng.randrange(16)])
    elif site.kind == "fixed":
        new = bytes(rng.randrange(256) for _ in old)
    elif site.kind == "list":
        head = old[0]
        size = rng.choice([0, 1, 2, 14, 15, 200, 2**31 - 1])
        if site.end - site.start == 1 and size < 15 and rng.random() < 0.5:
            new = bytes([(size << 4) | (head & 0x0F)])
        else:
            new = bytes([0xF0 | (head & 0x0F)]) + _encode_varint(size) if len(old) and head >> 4 in range(16) \
                else _encode_varint(size)
    else:  # a varint: an i16/i32/i64 (zigzag) or a binary's length
        value, _ = _varint(bytes(buf), site.start)
        choice = rng.choice([rng.randrange(16), rng.randrange(16), rng.randrange(64), value + 1, max(value - 1, 0),
                             value * 2, 2**31 - 1, 2**32 + 5, 2**63 - 1, (1 << 64) - 1, rng.randrange(1 << 20)])
        new = _encode_varint(choice)
    return buf[:site.start] + bytearray(new) + buf[site.end:]


def _fix_footer_length(buf: bytearray, original: bytes) -> bytearray:
    """Keep the 4-byte footer length pointing at the footer's start when a mutation of the footer
    changed its size (so the mutation reaches the thrift decoder, not the length check)."""
    delta = len(buf) - len(original)
    length = struct.unpack("<I", original[-8:-4])[0] + delta
    if 0 <= length < 2**32:
        buf[-8:-4] = struct.pack("<I", length)
    return buf


def parquet_cases(n: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """``n`` mutated parquet runs: 1–3 structure-aware changes to one region of a valid base."""
    rng = random.Random(seed)
    bases = [(b, _regions(b)) for b in parquet_bases()]
    for i in range(n):
        data, regions = rng.choice(bases)
        region = rng.choice([r for r in ("footer", "footer", "footer", "page", "dictionary", "index", "bytes")
                             if r == "bytes" or regions.get(r)])
        buf = bytearray(data)
        if region == "bytes":  # plain byte changes anywhere past the magic
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(4, len(buf))] = rng.randrange(256)
        elif region == "dictionary" and rng.random() < 0.4:  # the dictionary's values, after its header
            start = rng.choice(regions["dictionary"])
            sites = thrift_sites(data, start)
            end = sites[-1].end + 1 if sites else start
            for _ in range(rng.randint(1, 3)):
                j = min(len(buf) - 9, end + rng.randrange(64))
                buf[j] = rng.randrange(256)
        else:
            start = rng.choice(regions[region])
            sites = thrift_sites(data, start)
            if not sites:
                continue
            count = rng.choice([1, 1, 1, 2, 3])
            for site in sorted(rng.sample(sites, min(len(sites), count)), key=lambda s: -s.start):
                buf = _mutate_site(buf, site, rng)
            if region == "footer":
                buf = _fix_footer_length(buf, data)
        yield f"p{seed}-{i}-{region}.parquet", bytes(buf)


# -- text formats: byte mutations -----------------------------------------------------------------
def _text_bases() -> list[tuple[str, bytes]]:
    rng = random.Random(3)
    rows = [(str(rng.randrange(9)), str(rng.randrange(200)), round(rng.uniform(0, 20), 3)) for _ in range(40)]
    trec = "".join(f"{q} Q0 {d} {r} {s} bm25\n" for r, (q, d, s) in enumerate(rows, 1)).encode()
    csv = ("qid,docid,score\n" + "".join(f"{q},{d},{s}\n" for q, d, s in rows)).encode()
    scores: dict = {}
    for q, d, s in rows:
        scores.setdefault(q, {})[d] = s
    js = json.dumps(scores).encode()
    ranked = json.dumps({q: list(v) for q, v in scores.items()}).encode()
    jsonl = "".join(json.dumps({"qid": q, "docid": d, "score": s}) + "\n" for q, d, s in rows).encode()
    import cbor2
    import lz4.frame

    packed = cbor2.dumps(scores)  # ranx's Run.save(kind="lz4"): a frame of a frame of CBOR (and one frame)
    return [("trec", trec), ("csv", csv), ("json", js), ("json-ranked", ranked), ("jsonl", jsonl),
            ("trec.gz", gzip.compress(trec, mtime=0)), ("jsonl.gz", gzip.compress(jsonl, mtime=0)),
            ("lz4", lz4.frame.compress(lz4.frame.compress(packed))), ("lz4-1", lz4.frame.compress(packed))]


_SPECIAL = [b"\x00", b"\xff", b"\xc3", b"\n", b"\r", b"\t", b" ", b",", b"\"", b"{", b"}", b"[", b"]", b":", b"-",
            b"1e999", b"NaN", b"\xef\xbb\xbf", b"\x1f\x8b", b"PAR1", b"9" * 40,
            b"\x04\x22\x4d\x18", b"\xbf", b"\xd8\x1c"]  # an LZ4 frame's magic; CBOR: an open map, tag 28


def text_cases(n: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """``n`` byte mutations of valid TREC, CSV, JSON, JSON Lines, gzip and ranx LZ4 runs: flips,
    inserted specials, deletions, truncations and duplicated spans."""
    rng = random.Random(seed)
    for i, (name, data) in enumerate(_mutations(_text_bases(), n, rng)):
        yield f"t{seed}-{i}-{name}", data


def dataset_cases(n: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """``n`` byte mutations of the sample's CSV files (a dataset folder's ``articles.csv`` and
    ``questions_*.csv``, which pandas' C parser reads in the process: :func:`run_cases` with
    ``kind="dataset"``)."""
    from bsard_demo import sample_data

    folder = Path(sample_data.__file__).parent
    bases = [(p.name, p.read_bytes()[:20000]) for p in sorted(folder.glob("*.csv"))]
    rng = random.Random(seed)
    for i, (name, data) in enumerate(_mutations(bases, n, rng)):
        yield f"d{seed}-{i}-{name}", data


def _mutations(bases: list[tuple[str, bytes]], n: int, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    for _ in range(n):
        name, data = rng.choice(bases)
        buf = bytearray(data)
        for _ in range(rng.randint(1, 5)):
            op = rng.randrange(5)
            j = rng.randrange(len(buf) or 1)
            if op == 0 and buf:
                buf[j] = rng.randrange(256)
            elif op == 1:
                buf[j:j] = rng.choice(_SPECIAL)
            elif op == 2 and buf:
                del buf[j:j + rng.randint(1, 8)]
            elif op == 3:
                buf = buf[:j]
            else:
                k = rng.randint(1, 32)
                buf[j:j] = buf[j:j + k] * rng.randint(1, 4)
        yield name, bytes(buf)


# -- running cases in a child ---------------------------------------------------------------------
#: The child (run in the repository, which ``-c`` puts first on its path): reads cases (a JSON line
#: ``{"name", "size", "isolate", "kind"}`` then the bytes) and answers each with a JSON line; a case
#: that kills or hangs it is reported by the parent.
_CHILD = r"""
import json, sys
from bsard_demo.runs import FORMATS, UNKNOWN, read_run_bytes
from bsard_demo.runs import sandbox
from bsard_demo.dataset import DataError, read_csv_table
sandbox.keep_warm()
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
stdout.write(b'{"ready": true}\n'); stdout.flush()
while True:
    line = stdin.readline()
    if not line:
        break
    job = json.loads(line)
    data = stdin.read(job["size"])
    try:
        if job["kind"] == "dataset":
            try:
                read_csv_table(data, source=job["name"])
                codes = []
            except DataError:
                codes = ["DataError"]
            stdout.write(json.dumps({"codes": codes, "bad": [], "ok": not codes}).encode() + b"\n"); stdout.flush()
            continue
        rf = read_run_bytes(data, job["name"], isolation=sandbox.DEFAULT_ISOLATION if job["isolate"] else None)
        codes = sorted({p.code for p in rf.problems})
        bad = []
        if rf.format not in FORMATS and rf.format != UNKNOWN:
            bad.append(f"format {rf.format!r}")
        if (rf.run is None) != rf.problems.has_errors:
            bad.append("run and errors disagree")
        if "internal_error" in codes:
            bad.append("internal_error: " + next(p.message for p in rf.problems if p.code == "internal_error"))
        answer = {"codes": codes, "bad": bad, "ok": rf.ok}
    except BaseException as exc:
        answer = {"codes": [], "bad": [f"escaped {type(exc).__name__}: {exc}"], "ok": False}
    stdout.write(json.dumps(answer).encode() + b"\n"); stdout.flush()
"""


@dataclass
class Outcome:
    """One case: its name, bytes, the problem codes it got, and why it failed (empty: it passed)."""

    name: str
    data: bytes
    codes: list[str] = field(default_factory=list)
    failure: str = ""


class _Child:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD], cwd=REPO, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self.pending = b""
        started = self.line(120.0)
        if isinstance(started, str):
            raise RuntimeError(f"the fuzz child did not start: {started}")

    def line(self, timeout: float) -> bytes | str:
        """The child's next line within ``timeout`` seconds, or why not (it died, or was too slow)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return f"no answer within {timeout:g} s"
            chunk = os.read(fd, 65536)
            if not chunk:
                try:
                    code = self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    code = None
                return f"the reading process died (exit {code})"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def close(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class Reader:
    """A reading child kept from one :func:`run_cases` to the next (a test module's cases share one: each
    start loads pandas and the reader's fork server, ~1 CPU s); a case that kills it or hangs still ends it,
    and the next case gets a new one. :meth:`close` ends the last."""

    def __init__(self) -> None:
        self.child: _Child | None = None

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None


def run_cases(cases: Iterable[tuple[str, bytes]], *, isolate: bool = True, timeout: float = 30.0,
              kind: str = "run", reader: Reader | None = None) -> list[Outcome]:
    """Each case read in a child (see :data:`_CHILD`); a case that kills the child or takes longer
    than ``timeout`` seconds fails, and a new child reads the next one. ``isolate=False`` decodes
    parquet in the child itself (the reader before the sandbox); ``kind="dataset"`` reads each
    case as a dataset CSV (``read_csv_table``: a ``DataError`` is a problem, not a failure).
    ``reader``: the child comes from it and stays in it (the caller closes it); by default one is
    started for these cases and ended after them."""
    outcomes: list[Outcome] = []
    own = reader is None
    reader = reader or Reader()
    try:
        for name, data in cases:
            reader.child = reader.child or _Child()
            child = reader.child
            out = Outcome(name, data)
            try:
                job = {"name": name, "size": len(data), "isolate": isolate, "kind": kind}
                child.proc.stdin.write(json.dumps(job).encode() + b"\n" + data)
                child.proc.stdin.flush()
                line = child.line(timeout)
            except OSError:  # it died before taking the whole case
                line = f"the reading process died (exit {child.proc.poll()})"
            if isinstance(line, str):
                out.failure = line
                reader.close()
            else:
                answer = json.loads(line)
                out.codes, out.failure = answer["codes"], "; ".join(answer["bad"])
            outcomes.append(out)
    finally:
        if own:
            reader.close()
    return outcomes
