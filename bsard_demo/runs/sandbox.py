"""Native decoders read untrusted bytes in a child process, never in the caller's:
:func:`parse_parquet_isolated` runs :func:`~bsard_demo.runs.parquet_format.parse_parquet` in a child forked by a
small fork server (:mod:`.sandbox_child`), capped by :class:`Isolation`, because pyarrow can abort the whole process
on a damaged footer (apache/arrow#45283). Cost and fuzzing: docs/benchmarks.md, "Isolated parquet reads";
docs/reliability.md, "Hostile files in a child". How: docs/design.md, 'bsard_demo/runs/sandbox.py'.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..settings import child_environment
from .columns import Columns, Parsed
from .content import Content, open_content
from .decode import DEFAULT_MAX_BYTES, GZIP_MAGIC, LZ4_MAGIC, PARQUET_MAGIC, Source
from .limits import current, remaining, tick

try:  # imported here, decoded only in a child (or for trusted files: isolation None)
    from . import lz4_format
except ImportError:  # lz4 and cbor2 are optional (requirements.in): an LZ4 file is then one error
    lz4_format = None
from .problems import ProblemList, quote

#: The array fields of :class:`~bsard_demo.runs.columns.Columns` a child sends back (:mod:`.sandbox_child`), and the
#: only dtypes accepted.
ARRAYS = ("q", "d", "score", "rank", "line")
_DTYPES = {"<i4": np.int32, "<i8": np.int64, "<f8": np.float64}
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ZYGOTE = "import sys; from bsard_demo.runs.sandbox_child import zygote; zygote(int(sys.argv[1]), sys.argv[2])"
#: What a child runs, as ``module:function`` (given its job socket).
CHILD = "bsard_demo.runs.sandbox_child:child"


@dataclass(frozen=True)
class Isolation:
    """Limits of the child that reads one file: ``memory_mb`` of address space above its size
    when forked (RLIMIT_AS; the inflated columns of a 256 MB run fit), ``seconds`` of wall time
    (the parent kills it then; its CPU time is capped too, in case the parent is gone)."""

    memory_mb: int = 1536
    seconds: float = 60.0


#: The limits the CLI and the app use.
DEFAULT_ISOLATION = Isolation()
#: Children reading at once in this process (more wait): with the memory cap, what hostile uploads
#: of many visitors can claim together; each child also asks the kernel to pick it first when
#: memory runs out (``oom_score_adj`` 1000), so the server is never the one killed.
CHILDREN_AT_ONCE = 2
_slots = threading.BoundedSemaphore(CHILDREN_AT_ONCE)


# -- the parent side ----------------------------------------------------------------------------
class ForkServer:
    """The zygote process and our end of its control socket; started on first use, again if it
    died. Its children run ``child`` (``module:function``; a test gives a probe, with ``path``
    put first on the zygote's ``PYTHONPATH``)."""

    def __init__(self, child: str = CHILD, path: str = "") -> None:
        self.child, self.path = child, path
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.control: socket.socket | None = None

    def _ensure(self) -> socket.socket:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            # one message a job, never merged with the next (each carries the fd of its job's socket)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                roots = os.pathsep.join(p for p in (self.path, _PACKAGE_ROOT) if p)
                self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE, str(theirs.fileno()), self.child],
                                             pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             env=child_environment(roots), start_new_session=True)
            finally:
                theirs.close()
            self.control = ours
        return self.control

    def fork(self, job_end: socket.socket) -> None:
        """Have the zygote fork a child that serves the job on ``job_end`` (passed over)."""
        with self.lock:
            for attempt in (1, 2):  # a zygote that died since the last read is started again
                control = self._ensure()
                try:
                    socket.send_fds(control, [b"j"], [job_end.fileno()])
                    return
                except OSError:
                    if attempt == 2:
                        raise
                    self.stop()

    def stop(self) -> None:
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.proc = None


_server = ForkServer()
atexit.register(_server.stop)


def keep_warm() -> None:
    """Start the fork server now (the app at start-up, a CLI with a parquet file to read), so the
    first read does not wait for Python, numpy and pyarrow to load (0.5-1 s)."""
    with _server.lock:
        _server._ensure()


def warm(paths=None) -> None:
    """Start the parquet reader's fork server now, so that the first parquet read does not wait for
    it (0.5-1 s): always without ``paths`` (the app at start-up), else only when one of the files
    at ``paths`` starts like a parquet or gzip file (a CLI about to read them: it loads meanwhile)."""
    if paths is None:
        keep_warm()
    else:
        warm_for(paths)


def warm_for(paths) -> None:
    """:func:`keep_warm` when a file of ``paths`` starts like a parquet or gzip file (a gzip may
    hold one), so the fork server loads while the caller loads its dataset."""
    for path in paths:
        try:
            if not os.path.isfile(path):  # a FIFO would block the open: the reader reports it
                continue
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError:
            continue
        if head.startswith((PARQUET_MAGIC, GZIP_MAGIC, LZ4_MAGIC)):
            keep_warm()
            return


def parse_parquet_isolated(content: Content, name: str, problems: ProblemList,
                           isolation: Isolation = DEFAULT_ISOLATION, server: ForkServer | None = None, *,
                           labels: bool = False) -> Parsed:
    """:func:`~bsard_demo.runs.parquet_format.parse_parquet` of ``content`` (the file ``name``) in a
    child within ``isolation`` (forked by ``server``, default the process's own): the same
    :class:`~bsard_demo.runs.columns.Parsed` and problems (added to ``problems``), or one ``reader_*``
    error when the child did not answer (at most :data:`CHILDREN_AT_ONCE` at a time). ``labels``: a qrels
    table (``parse_parquet``'s ``labels`` mode)."""
    shown = quote(name, marks=False)
    with _slots:
        out = _exchange(content, shown, problems, isolation, server or _server, "parquet", labels)
    return Parsed("parquet") if out is None else _answer(out, shown, problems)


def lz4_json_isolated(content: Content, name: str, problems: ProblemList,
                      isolation: Isolation | None = DEFAULT_ISOLATION, server: ForkServer | None = None) -> str | None:
    """The JSON text of ranx's LZ4 file ``content`` (:func:`~bsard_demo.runs.lz4_format.lz4_json`), decoded in a
    child as a parquet file is (same limits and ``reader_*`` errors; ``isolation`` None: in this process, for
    trusted files only); None with the errors in ``problems``."""
    if isolation is None:
        return lz4_json_here(content, problems)
    shown = quote(name, marks=False)
    with _slots:
        out = _exchange(content, shown, problems, isolation, server or _server, "lz4")
    return None if out is None else _json_answer(out, shown, problems)


def lz4_bytes_to_json(data: bytes, name: str, problems: ProblemList, cap: int = DEFAULT_MAX_BYTES,
                      isolation: Isolation = DEFAULT_ISOLATION) -> str | None:
    """The JSON text of the bytes of a ranx LZ4 file (a run or qrels: ``{qid: {docid: value}}``), decoded
    in a child (:func:`lz4_json_isolated`; gzip around it is inflated too), for any reader of such files;
    None with the errors (``lz4_*``, ``reader_*``, size) in ``problems``."""
    content, _ = open_content(Source(data=bytes(data), limit=cap), problems, cap)
    if content is None:
        return None
    if not content.lz4:
        problems.error("lz4_unreadable", "this is not an LZ4 file (no LZ4 frame at its start)")
        return None
    return lz4_json_isolated(content, name, problems, isolation)


def lz4_json_here(content: Content, problems: ProblemList) -> str | None:
    """The JSON text of ranx's LZ4 file ``content``, decoded in this process (a child's job, or a trusted file)."""
    if lz4_format is None:
        problems.error("lz4_unreadable", "this is an LZ4 file (ranx's kind=\"lz4\"); reading it needs the lz4 and "
                                         "cbor2 packages (pip install lz4 cbor2), or save the run as TREC or JSON")
        return None
    return lz4_format.lz4_json(content, problems)


def _exchange(content: Content, name: str, problems: ProblemList, isolation: Isolation, server: ForkServer,
              kind: str, labels: bool = False) -> bytes | None:
    """The answer of a child that read ``content`` as ``kind`` (``parquet``, ``lz4``), or None after a
    ``reader_*`` error. Its time is the isolation's, or what is left of the read's own (:mod:`.limits`)."""
    tick()  # a read already past its deadline is too_slow, not a child's timeout
    source = content.source
    seconds = min(isolation.seconds, remaining())
    limits = current()
    job = {"cap": content.cap, "memory_mb": isolation.memory_mb, "cpu_seconds": int(seconds) + 1, "kind": kind,
           "limits": None if limits is None else asdict(limits),
           "path": None if source.data is not None else str(Path(source.path).resolve()),
           "size": None if source.data is None else len(source.data), "labels": bool(labels)}
    ours, theirs = socket.socketpair()
    pid, answered = None, False
    deadline = time.monotonic() + seconds
    try:
        try:
            server.fork(theirs)
        except OSError as exc:
            problems.error("reader_crashed", f"the reader process for {name} could not be started "
                                             f"({exc.strerror or exc}): the file was not read")
            return None
        finally:
            theirs.close()
        try:
            pid = struct.unpack("<q", _receive(ours, deadline, exactly=8))[0]
            ours.settimeout(max(deadline - time.monotonic(), 0.001))
            ours.sendall(json.dumps(job).encode() + b"\n" + (source.data or b""))
            ours.shutdown(socket.SHUT_WR)
            out = _receive(ours, deadline, limit=8 * content.cap + 2**20)
            answered = True
        except socket.timeout:
            problems.error("reader_timeout", f"reading {name} took longer than {seconds:g} s "
                                             "and was stopped: the file is damaged or hostile and was not read")
            return None
        except (OSError, EOFError, struct.error):  # the child died early, or answered too much
            out = b""
        return out
    finally:
        ours.close()
        if pid is not None and not answered:  # a child that may still run ends now (the zygote reaps it)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _receive(sock: socket.socket, deadline: float, *, exactly: int | None = None, limit: int = 0) -> bytes:
    """``exactly`` bytes, or everything up to the end (at most ``limit``), by ``deadline``
    (``socket.timeout`` after it; ``EOFError`` on an early end or an answer over the limit)."""
    parts, size = [], 0
    while exactly is None or size < exactly:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(min(1 << 20, exactly - size) if exactly is not None else 1 << 20)
        if not chunk:
            if exactly is not None:
                raise EOFError
            break
        size += len(chunk)
        if exactly is None and size > limit:
            raise EOFError
        parts.append(chunk)
    return b"".join(parts)


def _header(out: bytes, name: str, problems: ProblemList, what: str) -> tuple[dict, int] | None:
    """The child's answer's header and where its payload starts, or None and the error that says why not."""
    try:
        header_end = out.index(b"\n")
        header = json.loads(out[:header_end])
        outcome = header["outcome"]
    except (ValueError, KeyError, TypeError):
        outcome = None
    if outcome == "out_of_memory":
        problems.error("reader_out_of_memory", f"reading {name} needed more memory than the reader is "
                                               "allowed: the file is damaged, hostile or too large and was not read")
        return None
    if outcome != "ok":
        problems.error("reader_crashed", f"the {what} reader crashed on {name}: the file is damaged or "
                                         "hostile and was not read")
        return None
    return header, header_end + 1


def _json_answer(out: bytes, name: str, problems: ProblemList) -> str | None:
    """The JSON text of the child's answer to an LZ4 job (its problems added), or None."""
    found = _header(out, name, problems, "LZ4")
    if found is None:
        return None
    header, start = found
    try:
        problems.extend(ProblemList.from_state(header["problems"]))
        return out[start:].decode("utf-8") if header.get("json") else None
    except (ValueError, KeyError, TypeError):
        problems.error("reader_crashed", f"the LZ4 reader answered nonsense on {name}: the file is "
                                         "damaged or hostile and was not read")
        return None


def _answer(out: bytes, name: str, problems: ProblemList) -> Parsed:
    """The child's answer: its :class:`Parsed` and problems, or the one error that says why not."""
    failed = Parsed("parquet")
    found = _header(out, name, problems, "parquet")
    if found is None:
        return failed
    header, start = found
    try:
        found = ProblemList.from_state(header["problems"])
        parsed = _parsed(header.get("parsed"), memoryview(out)[start:])
    except (ValueError, KeyError, TypeError, IndexError):
        problems.error("reader_crashed", f"the parquet reader answered nonsense on {name}: the file is "
                                         "damaged or hostile and was not read")
        return failed
    problems.extend(found)
    return parsed


def _parsed(parsed, payload: memoryview) -> Parsed:
    """The :class:`Parsed` of the child's description and raw arrays."""
    if parsed is None:
        return Parsed("parquet")
    arrays, offset, n = {}, 0, int(parsed["n"])
    for name, dtype, count in parsed["arrays"]:
        if name not in ARRAYS or dtype not in _DTYPES or int(count) != n:
            raise ValueError("unexpected array")
        size = np.dtype(_DTYPES[dtype]).itemsize * n
        if offset + size > len(payload):
            raise ValueError("truncated arrays")
        arrays[name] = np.frombuffer(payload[offset:offset + size], dtype=_DTYPES[dtype]).copy()
        offset += size
    qnames, dnames = [str(x) for x in parsed["qnames"]], [str(x) for x in parsed["dnames"]]
    for name, names in (("q", qnames), ("d", dnames)):
        codes = arrays.get(name)
        if codes is None or (n and (int(codes.min()) < 0 or int(codes.max()) >= len(names))):
            raise ValueError("codes out of range")
    if parsed["by"] not in ("score", "rank") or (n and parsed["by"] not in arrays):
        raise ValueError("no ordering column")
    cols = Columns.of_arrays(qnames, dnames, **arrays)
    return Parsed("parquet", cols, parsed["by"], bool(parsed["check_ranks"]), tuple(str(t) for t in parsed["tags"]))
