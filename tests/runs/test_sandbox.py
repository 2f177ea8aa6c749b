"""Parquet decoded in a child (bsard_demo/runs/sandbox.py, issue 21): the same reading as in the
process for good files, and one ``reader_*`` error, never a dead caller, for a child that aborts,
hangs, runs out of memory or answers nonsense."""
from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _fuzz import parquet_bases
from bsard_demo.runs import read_run_bytes, read_run_path, sandbox
from bsard_demo.runs.content import open_content
from bsard_demo.runs.decode import Source
from bsard_demo.runs.problems import ProblemList
from bsard_demo.runs.read import RunFile
from bsard_demo.runs.sandbox import ForkServer, Isolation, parse_parquet_isolated

HOSTILE = Path(__file__).parent / "hostile"
PROBE_LIMITS = Isolation(seconds=20)
ABORTING = sorted(HOSTILE.glob("abort-*.parquet"))
REPO = Path(__file__).resolve().parents[2]


def same(a, b) -> None:
    assert (a.format, a.ok, a.tags, a.compressed) == (b.format, b.ok, b.tags, b.compressed)
    assert [(p.code, p.severity, p.line, p.message) for p in a.problems] == \
        [(p.code, p.severity, p.line, p.message) for p in b.problems]
    if a.ok:
        assert a.run.rankings == b.run.rankings and a.run.scores == b.run.scores


@pytest.mark.parametrize("i", range(len(parquet_bases())))
@pytest.mark.parametrize("compress", [False, True])
def test_a_good_file_reads_as_in_the_process(i, compress):
    data = parquet_bases()[i]
    data = gzip.compress(data, mtime=0) if compress else data
    kw = {"qids": [str(q) for q in range(12)], "corpus_ids": [str(d) for d in range(250)], "k": 10}
    same(read_run_bytes(data, "r.parquet", **kw), read_run_bytes(data, "r.parquet", isolation=None, **kw))


def test_a_path_is_read_by_the_child_itself(tmp_path):
    path = tmp_path / "run.parquet"
    path.write_bytes(parquet_bases()[1])
    same(read_run_path(path), read_run_path(path, isolation=None))


def test_problems_beyond_the_display_cap_keep_their_counts():
    n = 300
    t = pa.table({"qid": ["1"] * n, "docid": [""] * n, "score": [float("nan")] * n})
    out = io.BytesIO()
    pq.write_table(t, out)
    a, b = read_run_bytes(out.getvalue(), "r.parquet"), read_run_bytes(out.getvalue(), "r.parquet", isolation=None)
    same(a, b)
    assert len(a.problems) == len(b.problems) == 2 * n and a.problems.omitted()


@pytest.mark.parametrize("path", ABORTING, ids=lambda p: p.name)
def test_a_file_that_aborts_pyarrow_is_one_error_and_the_reader_lives(path):
    rf = read_run_bytes(path.read_bytes(), path.name)
    assert rf.run is None
    [problem] = list(rf.problems)
    assert problem.code == "reader_crashed" and problem.severity == "error"
    assert path.name in problem.message and "damaged or hostile" in problem.message
    assert "parquet::" not in problem.message and "Traceback" not in problem.message
    assert read_run_bytes(parquet_bases()[0], "after.parquet").ok  # the next file is read as usual


def test_the_aborting_files_really_abort_an_unprotected_reader():
    """The regression files are live: read in the process (isolation=None), each one kills it."""
    for path in ABORTING:
        proc = subprocess.run([sys.executable, "-c", "import sys; from bsard_demo.runs import read_run_path; "
                               "read_run_path(sys.argv[1], isolation=None)", str(path)], cwd=REPO,
                              capture_output=True, timeout=120)
        assert proc.returncode == -6, (path.name, proc.returncode, proc.stderr[-300:])


PROBES = '''
import json, os, socket, struct, time


def dispatch(conn):
    # the probe to run is the base name of the job's path (the test's empty file)
    conn.sendall(struct.pack("<q", os.getpid()))
    job = json.loads(conn.recv(1 << 16).split(b"\\n")[0])
    globals()[os.path.basename(job["path"])](conn)


def abort(conn):
    os.abort()


def hang(conn):
    time.sleep(120)


def silent(conn):
    conn.close()


def nonsense(conn):
    conn.sendall(b'{"outcome": "ok", "problems": {"cap": 50, "kinds": [], "items": []}, "parsed": {"n": 5}}\\n')


def forged_code(conn):
    conn.sendall(b'{"outcome": "ok", "problems": {"cap": 50, "kinds": [["x", "error", "not_a_code", 1]], '
                 b'"items": []}, "parsed": null}\\n')


def expendable(conn):
    with open("/proc/self/oom_score_adj") as f:
        first = f.read().strip() == "1000"
    conn.sendall(b'{"outcome": "out_of_memory"}\\n' if first else b"{}\\n")


def hog(conn):
    from bsard_demo.runs.sandbox_child import _limit
    _limit(256, 30)
    try:
        keep = []
        while True:
            keep.append(bytearray(1 << 24))
    except MemoryError:
        del keep
        conn.sendall(b'{"outcome": "out_of_memory"}\\n')
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """``probe(name, isolation)``: a read whose child runs the probe ``name`` (one fork server)."""
    folder = tmp_path_factory.mktemp("probes")
    (folder / "sandbox_probes.py").write_text(PROBES)
    server = ForkServer("sandbox_probes:dispatch", str(folder))

    def read(name: str, isolation: Isolation = PROBE_LIMITS) -> RunFile:
        (folder / name).write_bytes(b"PAR1")
        problems = ProblemList()
        content, _ = open_content(Source(data=parquet_bases()[0]), ProblemList())
        content.source = Source(path=folder / name)
        parsed = parse_parquet_isolated(content, "probe.parquet", problems, isolation, server)
        assert parsed.columns is None and parsed.format == "parquet"
        return RunFile(name="probe.parquet", format=parsed.format, run=None, problems=problems)

    yield read
    server.stop()


@pytest.mark.parametrize("name, code", [("abort", "reader_crashed"), ("silent", "reader_crashed"),
                                        ("nonsense", "reader_crashed"), ("forged_code", "reader_crashed"),
                                        ("hog", "reader_out_of_memory")])
def test_a_child_that_dies_or_lies_is_one_error(probe, name, code):
    result = probe(name)
    assert [p.code for p in result.problems] == [code]
    assert "probe.parquet" in next(iter(result.problems)).message


def test_a_child_that_hangs_is_stopped_at_the_time_limit(probe):
    result = probe("hang", Isolation(seconds=1.0))
    [problem] = list(result.problems)
    assert problem.code == "reader_timeout" and "1 s" in problem.message


def test_a_dead_fork_server_is_started_again():
    server = ForkServer()
    try:
        content, _ = open_content(Source(data=parquet_bases()[0]), ProblemList())
        assert parse_parquet_isolated(content, "a", ProblemList(), Isolation(), server).columns is not None
        server.proc.kill()
        server.proc.wait()
        again = ProblemList()
        assert parse_parquet_isolated(content, "b", again, Isolation(), server).columns is not None and not again
    finally:
        server.stop()


def test_the_fork_server_ends_with_its_parent():
    code = ("import sys, time; from bsard_demo.runs import sandbox; sandbox.keep_warm(); "
            "print(sandbox._server.proc.pid, flush=True); time.sleep(0.5)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    pid = int(proc.stdout.split()[0])
    for _ in range(100):  # atexit stops it; were the parent killed, EOF on its socket would
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"fork server {pid} outlived its parent")


def test_keep_warm_is_idempotent():
    sandbox.keep_warm()
    pid = sandbox._server.proc.pid
    sandbox.keep_warm()
    assert sandbox._server.proc.pid == pid


def test_warm_for_starts_the_server_for_parquet_or_gzip_only_and_never_opens_a_fifo(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sandbox, "keep_warm", lambda: calls.append(1))
    (tmp_path / "run.trec").write_text("1 Q0 a 1 2.0 t\n")
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    sandbox.warm_for([tmp_path / "run.trec", fifo, tmp_path / "missing.parquet", tmp_path])
    assert calls == []
    (tmp_path / "run.parquet").write_bytes(parquet_bases()[0])
    (tmp_path / "run.trec.gz").write_bytes(gzip.compress(b"1 Q0 a 1 2.0 t\n"))
    for name in ("run.parquet", "run.trec.gz"):
        sandbox.warm_for([fifo, tmp_path / name])
    assert calls == [1, 1]


def test_at_most_two_children_read_at_once_and_each_is_the_first_oom_victim(probe, monkeypatch):
    import threading

    assert sandbox.CHILDREN_AT_ONCE == 2
    data = parquet_bases()[0]
    running, most = [0], [0]
    lock = threading.Lock()
    real = sandbox._exchange

    def counted(*args):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(sandbox, "_exchange", counted)
    results = []
    threads = [threading.Thread(target=lambda: results.append(read_run_bytes(data, "r.parquet").ok)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [True] * 6 and most[0] <= 2
    # the probe answers "out of memory" only when the kernel would kill it first (oom_score_adj 1000)
    assert [p.code for p in probe("expendable").problems] == ["reader_out_of_memory"]
