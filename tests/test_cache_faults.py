"""Cache faults: damaged BM25 and dense entries are detected, reported and rebuilt; the library
and the CLI never crash on them; concurrent builders leave one valid entry and no temp files."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _fake_encoders import HashEncoder
from bsard_demo import cache
from bsard_demo.dataset import normalize_articles
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.retrievers.dense import DenseRetriever
from bsard_demo.sources import load_dataset

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ["garantie locative bail loyer", "divorce des époux", "préavis de licenciement"]


@pytest.fixture(scope="module")
def sample_articles() -> pd.DataFrame:
    return load_dataset("sample").articles


@pytest.fixture(scope="module")
def bm25_reference(sample_articles):
    """Search results of an index built without the cache: what every rebuild must give."""
    return BM25Retriever.build(sample_articles, use_cache=False).search_many(QUESTIONS, 30)


def same_hits(got, expected) -> bool:
    """Same articles in the same order, same scores up to rounding: an index built by another
    process sums term scores in an order that depends on its PYTHONHASHSEED (last-bit changes)."""
    ids = [[h.article_id for h in hits] for hits in got] == [[h.article_id for h in hits] for hits in expected]
    scores = [h.score for hits in got for h in hits]
    return ids and scores == pytest.approx([h.score for hits in expected for h in hits], rel=1e-12)


def only_entry(root: Path, kind: str) -> Path:
    names = sorted(p.name for p in (root / kind).iterdir())
    assert len(names) == 1 and not names[0].startswith("."), names  # no temp or stale leftovers
    return root / kind / names[0]


def reseal(entry: Path) -> None:
    """Rewrite the manifest so that the (damaged) files pass the checksum: only reading them can
    then reveal the damage."""
    manifest = json.loads((entry / cache.MANIFEST).read_text())
    for name in manifest["files"]:
        p = entry / name
        manifest["files"][name] = {"sha256": cache._sha256(p), "size": p.stat().st_size}
    (entry / cache.MANIFEST).write_text(json.dumps(manifest))


def _truncate(path: Path, keep: int = 40) -> None:
    path.write_bytes(path.read_bytes()[:keep])


# -- BM25 -----------------------------------------------------------------------------------

def _bm25_damage(entry: Path, how: str) -> None:
    data = entry / "bm25s" / "data.csc.index.npy"
    if how == "truncated file":
        _truncate(data)
    elif how == "flipped byte":
        raw = bytearray((entry / "ids.json").read_bytes())
        raw[3] ^= 0x01
        (entry / "ids.json").write_bytes(bytes(raw))
    elif how == "missing file":
        (entry / "bm25s" / "vocab.index.json").unlink()
    elif how == "garbage manifest":
        (entry / cache.MANIFEST).write_bytes(b"\x00\xffnot json")
    elif how == "manifest of the wrong shape":
        (entry / cache.MANIFEST).write_text('{"files": []}')
    elif how == "manifest naming a device":
        (entry / cache.MANIFEST).write_text(json.dumps({"files": {"../../../../dev/zero": {"size": 0, "sha256": ""}}}))
    elif how == "resealed truncated file":
        _truncate(data)
        reseal(entry)
    elif how == "resealed garbage json":
        (entry / "bm25s" / "params.index.json").write_text("{not json")
        reseal(entry)
    elif how == "resealed other corpus":
        (entry / "ids.json").write_text(json.dumps(["1", "2"]))
        reseal(entry)
    elif how == "empty folder":
        shutil.rmtree(entry)
        entry.mkdir()
    elif how == "a file in its place":
        shutil.rmtree(entry)
        entry.write_bytes(b"junk")
    elif how == "a dangling link in its place":
        shutil.rmtree(entry)
        entry.symlink_to(entry.parent / "nowhere")
    else:
        raise AssertionError(how)


DAMAGES = ["truncated file", "flipped byte", "missing file", "garbage manifest", "manifest of the wrong shape",
           "manifest naming a device", "resealed truncated file", "resealed garbage json", "resealed other corpus",
           "empty folder", "a file in its place", "a dangling link in its place"]
SILENT = {"a file in its place", "a dangling link in its place"}  # no entry to speak of: rebuilt without a notice


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_bm25_entry_is_rebuilt_with_a_notice(tmp_path, sample_articles, bm25_reference, how):
    BM25Retriever.build(sample_articles, cache_root=tmp_path)
    entry = only_entry(tmp_path, "bm25s")
    _bm25_damage(entry, how)
    notices: list[str] = []
    steps: list[str] = []
    rebuilt = BM25Retriever.build(sample_articles, cache_root=tmp_path, notice=notices.append,
                                  progress=lambda d, t, m: steps.append(m))
    assert rebuilt.search_many(QUESTIONS, 30) == bm25_reference
    assert "loaded cached BM25 index" not in steps  # really rebuilt
    if how in SILENT:
        assert notices == []
    else:
        assert len(notices) == 1 and "damaged" in notices[0] and "rebuilding" in notices[0], notices
    assert cache.verify(only_entry(tmp_path, "bm25s"))  # whole again, nothing left over
    steps.clear()
    again = BM25Retriever.build(sample_articles, cache_root=tmp_path, notice=notices.append,
                                progress=lambda d, t, m: steps.append(m))
    assert "loaded cached BM25 index" in steps and again.search_many(QUESTIONS, 30) == bm25_reference


def test_unusable_cache_folder_only_costs_a_notice(tmp_path, sample_articles, bm25_reference):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder should be")
    notices: list[str] = []
    r = BM25Retriever.build(sample_articles, cache_root=not_a_folder, notice=notices.append)
    assert r.search_many(QUESTIONS, 30) == bm25_reference
    assert len(notices) == 1 and "could not save the BM25 index" in notices[0]


def test_failed_write_leaves_no_temp_folder(tmp_path, sample_articles, monkeypatch):
    def disk_full(self, folder):
        (folder / "partial").write_bytes(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(BM25Retriever, "_write", disk_full)
    notices: list[str] = []
    BM25Retriever.build(sample_articles, cache_root=tmp_path, notice=notices.append)
    assert len(notices) == 1 and "No space left on device" in notices[0]
    assert list((tmp_path / "bm25s").iterdir()) == []


def test_a_short_write_is_named_a_full_disk(tmp_path, sample_articles, monkeypatch):
    """numpy's short write on a full tmpfs (bench/faults.py full-disk) carries no errno."""
    def short(self, folder):
        raise OSError("2048890 requested and 8176 written")

    monkeypatch.setattr(BM25Retriever, "_write", short)
    notices: list[str] = []
    BM25Retriever.build(sample_articles, cache_root=tmp_path, notice=notices.append)
    assert notices == ["could not save the BM25 index to the cache (2048890 requested and 8176 written: the disk is "
                       "probably full); it will be rebuilt next time"]


def test_a_killed_writers_old_leftovers_are_swept_by_the_next_store(tmp_path, sample_articles):
    """A writer SIGKILLed mid-write leaves its ``.KEY.tmp-*`` folder (bench/faults.py kill-build: up
    to 24 MB each for frlaw-dev's BM25); the next store of that key removes those older than an
    hour and leaves a younger one (a live writer's) and other keys' alone."""
    BM25Retriever.build(sample_articles, cache_root=tmp_path)
    (entry,) = (tmp_path / "bm25s").iterdir()
    key = entry.name
    old, young, other = (tmp_path / "bm25s" / n for n in (f".{key}.tmp-old", f".{key}.tmp-young", ".otherkey.tmp-old"))
    for folder in (old, young, other):
        folder.mkdir()
        (folder / "data.npy").write_bytes(b"x" * 100)
    stale = tmp_path / "bm25s" / f".{key}.stale-old"
    stale.mkdir()
    for folder in (old, other, stale):
        os.utime(folder, (0, 0))
    shutil.rmtree(entry)
    BM25Retriever.build(sample_articles, cache_root=tmp_path)
    assert sorted(p.name for p in (tmp_path / "bm25s").iterdir()) == sorted([key, young.name, other.name])
    assert cache.verify(entry)


# -- dense (a tiny fake encoder: _fake_encoders.HashEncoder) --------------------------------

DENSE_ARTICLES = normalize_articles(pd.DataFrame({
    "id": [str(i) for i in range(1, 9)],
    "article": ["garantie locative bail loyer", "divorce tribunal famille enfants", "contrat travail préavis",
                "bail loyer indexation", "pension alimentaire enfants", "nationalité belge déclaration",
                "licenciement préavis indemnité", "époux divorce consentement"],
}))


class Boom:
    """Unpickling this would create ``marker``: proof that a cache file is never unpickled."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _dense_damage(entry: Path, how: str, tmp_path: Path) -> None:
    emb = entry / "embeddings.npy"
    if how == "truncated embeddings":
        _truncate(emb, 100)
    elif how == "resealed truncated embeddings":
        _truncate(emb, 100)
        reseal(entry)
    elif how == "resealed NaN":
        arr = np.load(emb)
        arr[0, 0] = np.nan
        np.save(emb, arr)
        reseal(entry)
    elif how == "resealed float64":
        np.save(emb, np.load(emb).astype(np.float64))
        reseal(entry)
    elif how == "resealed wrong shape":
        np.save(emb, np.load(emb)[:3])
        reseal(entry)
    elif how == "resealed pickled object array":
        arr = np.empty(1, dtype=object)
        arr[0] = Boom(tmp_path / "unpickled")
        np.save(emb, arr, allow_pickle=True)
        reseal(entry)
    elif how == "resealed garbage ids":
        (entry / "ids.json").write_bytes(b"\xff\xfe[")
        reseal(entry)
    elif how == "missing manifest":
        (entry / cache.MANIFEST).unlink()
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated embeddings", "resealed truncated embeddings", "resealed NaN",
                                 "resealed float64", "resealed wrong shape", "resealed pickled object array",
                                 "resealed garbage ids", "missing manifest"])
def test_damaged_dense_entry_is_rebuilt_with_a_notice(tmp_path, how):
    root = tmp_path / "cache"
    first = DenseRetriever.build(DENSE_ARTICLES, encoder=HashEncoder(), cache_root=root)
    expected = first.search_many(QUESTIONS, 5)
    _dense_damage(only_entry(root, "dense"), how, tmp_path)
    enc = HashEncoder()
    notices: list[str] = []
    again = DenseRetriever.build(DENSE_ARTICLES, encoder=enc, cache_root=root, notice=notices.append)
    assert enc.documents == len(DENSE_ARTICLES)  # re-encoded, not read from the damaged entry
    assert len(notices) == 1 and "damaged" in notices[0] and "rebuilding" in notices[0], notices
    np.testing.assert_array_equal(again.embeddings, first.embeddings)
    assert again.search_many(QUESTIONS, 5) == expected
    assert not (tmp_path / "unpickled").exists()
    assert cache.verify(only_entry(root, "dense"))
    third = HashEncoder()
    DenseRetriever.build(DENSE_ARTICLES, encoder=third, cache_root=root, notice=notices.append)
    assert third.documents == 0 and len(notices) == 1  # the rebuilt entry is used as is


# -- the CLI on a damaged cache (in-process: each command reads the cache from disk; the real
# -- interpreter runs `index` in the concurrent-builder tests below) ---------------------------

def _cli(*args: str, cache_dir: Path, monkeypatch, capsys) -> subprocess.CompletedProcess:
    """``python -m bsard_demo ARGS --no-progress`` through :func:`bsard_demo.cli.main.main`, with
    ``BSARD_CACHE=cache_dir``; its exit code and output (an exception fails the test)."""
    from bsard_demo.cli.main import main

    monkeypatch.setenv("BSARD_CACHE", str(cache_dir))
    capsys.readouterr()
    code = main([*args, "--no-progress"])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["bsard_demo", *args], code, out, err)


def test_cli_index_and_run_rebuild_a_damaged_cache(tmp_path, monkeypatch, capsys):
    cache_dir = tmp_path / "cache"
    first = _cli("run", "--data", "sample", "--out", str(tmp_path / "a.trec"), cache_dir=cache_dir,
                 monkeypatch=monkeypatch, capsys=capsys)
    assert first.returncode == 0, first.stderr
    entry = only_entry(cache_dir, "bm25s")

    _truncate(entry / "bm25s" / "data.csc.index.npy")  # checksum mismatch
    proc = _cli("index", "--data", "sample", cache_dir=cache_dir, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and "damaged" in notes[0] and "rebuilding" in notes[0], proc.stderr
    assert cache.verify(only_entry(cache_dir, "bm25s"))

    entry = only_entry(cache_dir, "bm25s")
    (entry / "bm25s" / "params.index.json").write_text("{not json")
    reseal(entry)  # passes the checksum, fails to load
    proc = _cli("run", "--data", "sample", "--out", str(tmp_path / "b.trec"), cache_dir=cache_dir,
                monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "note:" in proc.stderr and "JSONDecodeError" in proc.stderr
    assert _trec(tmp_path / "b.trec") == pytest.approx(_trec(tmp_path / "a.trec"), rel=1e-12)


def _trec(path: Path) -> dict:
    """``{(qid, docid, rank): score}`` of a TREC run. Scores are compared approximately: BM25 term
    scores are summed in an order that depends on PYTHONHASHSEED (last-bit changes across processes)."""
    rows = [line.split() for line in path.read_text().splitlines()]
    assert rows and all(len(r) == 6 for r in rows)
    return {(q, d, int(r)): float(s) for q, _, d, r, s, _ in rows}


def test_cli_with_a_file_as_cache_folder_still_runs(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    proc = _cli("run", "--data", "sample", "--out", str(tmp_path / "r.trec"), "--cache-dir", str(blocker),
                cache_dir=tmp_path / "unused", monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "could not save the BM25 index" in proc.stderr
    assert (tmp_path / "r.trec").stat().st_size > 0


# -- concurrent builders ----------------------------------------------------------------------

# One interpreter imports everything (bm25s too), then, for each race, forks the n workers (one import instead of
# n: ~1 CPU s each; and one for both races of this file: it serves them in turn, a line on stdin a race, its
# exit codes a line on stdout), which wait until all are ready, then each run the real CLI ``index`` command in its
# own process, its stdout and stderr in files of its own, with the race's cache folder in BSARD_CACHE (read at
# call time). Writing the entry is slowed down (the files are written, then 0.3 s pass before cache.store renames
# the folder), so the builders are inside cache.store together.
WORKER = """
import json, os, sys, time
from pathlib import Path
from bsard_demo.cli.main import main
from bsard_demo.retrievers import bm25
import bm25s  # what ``index`` imports on first use (with numba: ~0.3 CPU s a worker)

original = bm25.BM25Retriever._write
def slow_write(self, folder):
    original(self, folder)
    print("built", flush=True)
    time.sleep(0.3)
bm25.BM25Retriever._write = slow_write
for request in sys.stdin:  # a race: its barrier folder, its number of workers, its cache folder
    barrier, n, os.environ["BSARD_CACHE"] = json.loads(request)
    barrier = Path(barrier)
    pids = []
    for i in range(n):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # a worker: its own output files, then the barrier, then the command (an exception: exit 1)
            for fd, name in ((1, "out"), (2, "err")):
                os.dup2(os.open(barrier / f"{name}-{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            (barrier / f"ready-{os.getpid()}").touch()
            end = time.monotonic() + 60
            while len(list(barrier.glob("ready-*"))) < n and time.monotonic() < end:
                time.sleep(0.005)
            sys.exit(main(["index", "--data", "sample", "--no-progress"]))
        pids.append(pid)
    print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]), flush=True)
"""


@pytest.fixture(scope="module")
def racer(tmp_path_factory):
    """The :data:`WORKER` interpreter of this file's races (its stderr in a file, checked after each race)."""
    err = tmp_path_factory.mktemp("racer") / "stderr"
    with open(err, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, text=True)
    try:
        yield proc, err
    finally:
        proc.stdin.close()  # its loop ends: it exits
        assert proc.wait(timeout=60) == 0 and "Traceback" not in err.read_text(), err.read_text()


def _race(racer, tmp_path: Path, cache_dir: Path, n: int = 4) -> list[subprocess.CompletedProcess]:
    proc, err = racer
    barrier = tmp_path / f"barrier-{len(list(tmp_path.glob('barrier-*')))}"
    barrier.mkdir()
    proc.stdin.write(json.dumps([str(barrier), n, str(cache_dir)]) + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    assert answer and "Traceback" not in err.read_text(), err.read_text()
    codes = json.loads(answer)
    assert len(codes) == n
    return [subprocess.CompletedProcess(["index", i], code, (barrier / f"out-{i}").read_text(),
                                        (barrier / f"err-{i}").read_text()) for i, code in enumerate(codes)]


def _assert_clean(cache_dir: Path) -> Path:
    leftovers = [p for p in cache_dir.rglob("*") if ".tmp-" in p.name or ".stale-" in p.name]
    assert leftovers == []
    entry = only_entry(cache_dir, "bm25s")
    assert cache.verify(entry)
    return entry


def test_concurrent_builders_leave_one_valid_entry(racer, tmp_path, sample_articles, bm25_reference):
    cache_dir = tmp_path / "cache"
    results = _race(racer, tmp_path, cache_dir)
    for r in results:
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    builders = sum(r.stdout.count("built") for r in results)
    assert builders >= 2, "the builders did not overlap: the race was not exercised"
    _assert_clean(cache_dir)
    steps: list[str] = []
    notices: list[str] = []
    loaded = BM25Retriever.build(sample_articles, cache_root=cache_dir, notice=notices.append,
                                 progress=lambda d, t, m: steps.append(m))
    assert "loaded cached BM25 index" in steps and notices == []
    assert same_hits(loaded.search_many(QUESTIONS, 30), bm25_reference)


def test_concurrent_builders_over_a_damaged_entry(racer, tmp_path, sample_articles, bm25_reference):
    cache_dir = tmp_path / "cache"
    BM25Retriever.build(sample_articles, cache_root=cache_dir)
    _truncate(only_entry(cache_dir, "bm25s") / "bm25s" / "data.csc.index.npy")
    results = _race(racer, tmp_path, cache_dir)
    for r in results:
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert any("damaged" in r.stderr for r in results)
    _assert_clean(cache_dir)
    steps: list[str] = []
    loaded = BM25Retriever.build(sample_articles, cache_root=cache_dir, progress=lambda d, t, m: steps.append(m))
    assert "loaded cached BM25 index" in steps and same_hits(loaded.search_many(QUESTIONS, 30), bm25_reference)
