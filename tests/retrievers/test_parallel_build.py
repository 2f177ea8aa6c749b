"""Dense builds on every core (bsard_demo/retrievers/parallel.py): shards embedded in worker
processes give the same bytes as a one-process build, checkpoint and resume the same way, and
the pool is only used where it can pay (an encoder that can be rebuilt in a child, enough shards).
The real ``use`` encoder's equality on a full corpus was measured by bench/bench_parallel_build.py (at f0b611a)."""
from __future__ import annotations

import hashlib
import os

import numpy as np

from bsard_demo.retrievers import dense_shards as S
from bsard_demo.retrievers.encoders import normalize_rows


class BatchSensitiveEncoder:
    """Vectors from each text's sha256, nudged by the size of the batch it came in, so that any
    change in which texts share a call shows in the last bits; records the process it ran in."""

    name = "batchy"
    dim = 8
    normalized = True
    version = "1"
    max_tokens = None

    def encode_documents(self, texts, batch_size=64, progress=None):
        texts = list(texts)
        out = []
        for start in range(0, len(texts), batch_size):
            batch = texts[start:start + batch_size]
            for t in batch:
                seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
                v = np.random.default_rng(seed).standard_normal(self.dim) + 1e-4 * len(batch)
                if t == "PID":  # says which process embedded it: its whole pid, three digits a component (a pid
                    # modulo 1000 alone made a worker look like the parent once in ~500 runs; CI-mode run, seed 18795)
                    pid = os.getpid()
                    v = np.array([1.0, pid % 1000 + 1.0, pid // 1000 % 1000 + 1.0, pid // 1_000_000 + 1.0]
                                 + [0.0] * (self.dim - 4))
                out.append(v)
        return normalize_rows(np.array(out, dtype=np.float32).reshape(len(texts), self.dim))

    def encode_queries(self, texts, batch_size=64, progress=None):
        return self.encode_documents(texts, batch_size=1)

    def count_tokens(self, texts):
        return [len(str(t).split()) + 2 for t in texts]


def make_encoder() -> BatchSensitiveEncoder:
    return BatchSensitiveEncoder()


class Parallel(BatchSensitiveEncoder):
    worker_factory = staticmethod(make_encoder)


TEXTS = [f"article {i} " + "mot " * (i % 7) for i in range(45)]


def test_the_pool_is_used_only_where_it_pays(monkeypatch):
    monkeypatch.setattr(S, "PARALLEL_MIN_SHARDS", 4)
    assert S.shard_workers(BatchSensitiveEncoder(), 100, 2) == 1  # no worker_factory
    assert S.shard_workers(Parallel(), 3, 2) == 1  # too few shards
    assert S.shard_workers(Parallel(), 4, 2) == 2
    assert S.shard_workers(Parallel(), 5, 8) == 5  # at most one worker per shard
    assert S.shard_workers(Parallel(), 50, None) == max(1, min(50, len(os.sched_getaffinity(0))))


def test_workers_give_the_same_bytes_checkpoint_the_same_shards_and_resume(tmp_path, monkeypatch):
    """One pool (starting workers costs seconds): a parallel build over a half-built folder reads its
    shards, embeds the others in worker processes and ends with the bytes and shard files of a
    one-process build; the last shard ("PID" texts) proves it ran in other processes."""
    monkeypatch.setattr(S, "PARALLEL_MIN_SHARDS", 2)
    texts = TEXTS[:44] + ["PID"] * 4
    one = S.embed_resumable(Parallel(), texts, tmp_path / "one", shard_docs=4, batch_size=3, workers=1)
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert len(names) == 12
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name in names[:5]:
        (resumed / name).write_bytes((tmp_path / "one" / name).read_bytes())
    progress = []
    two = S.embed_resumable(Parallel(), texts, resumed, shard_docs=4, batch_size=3, workers=2,
                            progress=lambda d, t, m: progress.append(d))
    assert two[:44].tobytes() == one[:44].tobytes()
    assert not any(np.array_equal(row, one[-1]) for row in two[44:])  # embedded in another process
    assert sorted(p.name for p in resumed.iterdir())[:11] == names[:11]
    assert progress[0] == 20 and progress[-1] == 48 and progress == sorted(progress)


def test_the_workers_of_a_killed_build_end_with_it(tmp_path):
    """A build killed from outside (SIGKILL: no cleanup runs) leaves no worker embedding on, parentless."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from bsard_demo.retrievers.parallel import PARENT_CHECK_S

    pids = tmp_path / "pids"
    pids.mkdir()
    tests = Path(__file__).resolve().parents[1]
    script = ("from _sleepy_encoder import SleepyFactory\n"
              "from bsard_demo.retrievers.parallel import embed_shards\n"
              f"embed_shards(SleepyFactory({str(pids)!r}, 120), {{0: ['a'], 1: ['b']}}, lambda n, v: None,\n"
              "             workers=2, pooling='mean', window=None, batch_size=8)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])}
    build = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 2:
            assert build.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        workers = [int(p.name) for p in pids.iterdir()]
        build.send_signal(signal.SIGKILL)
        build.wait()
        deadline = time.monotonic() + 10 * PARENT_CHECK_S + 5
        alive = workers
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in workers if _alive(p)]
        assert not alive, f"workers {alive} outlived their build"
    finally:
        build.kill()
        for p in pids.iterdir():
            if _alive(int(p.name)):
                os.kill(int(p.name), signal.SIGKILL)


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, which the test's reaper has not collected, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_workers_run_no_page_script_installed_as_main(tmp_path, monkeypatch):
    """Under ``streamlit run`` each page run installs its script as ``sys.modules["__main__"]`` (its file
    included), and ``spawn`` ran that file again in every worker, as ``__mp_main__``: the whole app, outside
    Streamlit, once a worker. A build started from a page runs no page in its workers and leaves the page's
    ``__main__`` as it was."""
    import sys
    import types

    from bsard_demo.retrievers.parallel import embed_shards

    page = tmp_path / "page.py"
    page.write_text(f"import os\nopen({str(tmp_path / 'ran-')!r} + str(os.getpid()), 'w').close()\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    monkeypatch.setitem(sys.modules, "__main__", main)
    done = {}
    embed_shards(make_encoder, {0: TEXTS[:3], 1: TEXTS[3:6]}, done.__setitem__, workers=2, pooling="mean",
                 window=None, batch_size=8)
    assert sorted(done) == [0, 1]
    assert not list(tmp_path.glob("ran-*")), "a worker ran the page script"
    assert sys.modules["__main__"] is main
