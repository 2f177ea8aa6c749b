"""The child side of :mod:`.sandbox`: the fork server (:func:`zygote`), started by the parent's
:class:`~.sandbox.ForkServer`, forks one capped child per job (:func:`child`: memory, CPU, first to go when
memory runs out) that reads one untrusted parquet or LZ4 file and answers with its columns and problems.
The parent never imports this module. How: docs/design.md, 'bsard_demo/runs/sandbox.py'.
"""
from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import socket
import struct

import numpy as np

from .columns import Parsed
from .content import open_content
from .decode import Source
from .limits import ReadLimits, ReadOverrun, bounded
from .problems import ProblemList, quote
from .sandbox import ARRAYS, CHILD, lz4_json_here


def _limit(memory_mb: int, cpu_seconds: int) -> None:
    """Cap this process: address space at its size now plus ``memory_mb``, and CPU seconds."""
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    cap = now + memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def zygote(control_fd: int, child: str = CHILD) -> None:
    """The fork server: load pyarrow, then fork one child per job socket received on
    ``control_fd``, which runs ``child`` (``module:function``); ends when the parent closes it.
    It never reads a file itself."""
    # loaded here, in the zygote, once for all children: pyarrow (0.5 s) and pandas, which pyarrow imports on a
    # first parquet read; the server's process never loads them for a run
    import pandas  # noqa: F401
    import pyarrow.compute  # noqa: F401

    from . import parquet_format  # noqa: F401

    module, _, name = child.partition(":")
    serve = getattr(importlib.import_module(module), name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not msg:
            return
        for fd in fds:
            if os.fork() == 0:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _become_expendable()
                code = 1
                try:
                    serve(socket.socket(fileno=fd))
                    code = 0
                finally:
                    os._exit(code)
            os.close(fd)


def _become_expendable() -> None:
    """A child's text (a native crash's C++ message) never reaches the parent's terminal or log,
    and when memory runs out the kernel kills the child first, never the server."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def child(conn: socket.socket) -> None:
    """One job: our pid, then the job (a JSON line, then the file's bytes unless it names a
    path) and one answer: a JSON line, then the raw arrays it lists."""
    from .parquet_format import parse_parquet  # pyarrow, loaded by the zygote: the parent never imports it

    conn.sendall(struct.pack("<q", os.getpid()))
    header = b""
    while b"\n" not in header:
        chunk = conn.recv(4096)
        if not chunk:
            return
        header += chunk
    line, _, data = header.partition(b"\n")
    job = json.loads(line)
    if job["size"] is not None:
        data = bytearray(data)
        while len(data) < job["size"]:
            chunk = conn.recv(min(1 << 20, job["size"] - len(data)))
            if not chunk:
                return
            data += chunk
        data = bytes(data)
    else:
        data = None
    _limit(int(job["memory_mb"]), int(job["cpu_seconds"]))
    problems = ProblemList()
    limits = ReadLimits(**job["limits"]) if job.get("limits") else None
    try:
        try:
            with bounded(limits):  # the read's own limits (rows, ids), as in the parent
                content, _ = open_content(Source(data=data, path=job["path"], limit=job["cap"]), ProblemList(),
                                          job["cap"])
                if job.get("kind") == "lz4":
                    text = lz4_json_here(content, problems) if content is not None and content.lz4 else None
                    answer = _json_message(problems, text)
                else:
                    parsed = (parse_parquet(content, problems, labels=bool(job.get("labels")))
                              if content is not None and content.parquet else None)
                    answer = _message(problems, parsed)
        except ReadOverrun as exc:
            problems = ProblemList()
            problems.error(exc.code, exc.message)
            answer = _json_message(problems, None) if job.get("kind") == "lz4" else _message(problems, None)
    except MemoryError:
        answer = json.dumps({"outcome": "out_of_memory"}).encode() + b"\n"
    except Exception as exc:  # as the in-process reader words an unexpected failure
        problems.error("internal_error", f"unexpected failure while reading the file ({type(exc).__name__}: "
                                         f"{quote(exc, marks=False)}); please report it with the file")
        answer = _message(problems, None)
    conn.sendall(answer)
    conn.close()


def _json_message(problems: ProblemList, text: str | None) -> bytes:
    header = {"outcome": "ok", "problems": problems.state(), "json": text is not None}
    return json.dumps(header).encode() + b"\n" + (text.encode() if text is not None else b"")


def _message(problems: ProblemList, parsed: Parsed | None) -> bytes:
    header = {"outcome": "ok", "problems": problems.state(), "parsed": None}
    arrays = []
    if parsed is not None and parsed.columns is not None:
        cols, by, check_ranks, tags = parsed.columns, parsed.by, parsed.check_ranks, parsed.tags
        cols.finish()
        for name in ARRAYS:
            value = getattr(cols, name)
            if value is not None:
                arrays.append((name, np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))))
        header["parsed"] = {"by": by, "check_ranks": bool(check_ranks), "tags": list(tags), "n": len(cols.q),
                            "qnames": cols.qnames, "dnames": cols.dnames,
                            "arrays": [(name, value.dtype.str, len(value)) for name, value in arrays]}
    return b"".join([json.dumps(header).encode(), b"\n", *(value.tobytes() for _, value in arrays)])
