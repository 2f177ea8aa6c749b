"""What decoding parquet in a child costs (issue 21): an upload's scoring and a CLI ``evaluate``.

    python bench/bench_isolation.py [--repeat 15] [--baseline REV] [--json FILE]

Two parquet runs: the sample's test split (27 questions x 100 articles, the issue's target: at
most 0.5 s more) and a BSARD-size one (222 x 500 = 111,000 rows). Rows, each a median of
``--repeat`` runs:
- the Score page's scoring (``score_page.score_files``) with the parquet decoded in this process
  (``isolation=None``, the reader before the sandbox) and in a child (warm fork server), in
  one process, interleaved;
- the first read of a fresh process, which starts the fork server (a subprocess each time);
- ``python -m bsard_demo evaluate RUN.parquet --data sample`` at this tree and at ``--baseline``
  (default 2f3dac7, the last commit before the sandbox; checked out in a temporary worktree),
  interleaved.
"""
from __future__ import annotations

if __package__ in (None, ""):
    import _path  # noqa: F401

import argparse
import io
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, load_average, machine_facts, table, write_json


def parquet_run(qids, depth: int, seed: int = 0) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    q, d, s = [], [], []
    for qid in qids:
        for r, doc in enumerate(rng.sample(range(1, 22634), depth)):
            q.append(str(qid))
            d.append(str(doc))
            s.append(100.0 - r * 0.1)
    out = io.BytesIO()
    pq.write_table(pa.table({"qid": q, "docid": d, "score": s}), out)
    return out.getvalue()


def median_ms(values) -> str:
    return f"{1000 * statistics.median(values):.0f}"


def main(argv=None) -> int:
    from bsard_demo.app.score_uploads import score_files
    from bsard_demo.evaluation import scoring
    from bsard_demo.runs import sandbox
    from bsard_demo.sources import load_sample

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--baseline", default="2f3dac7")
    ap.add_argument("--json", default=str(REPO / "bench" / "out" / "bench_isolation.json"))
    args = ap.parse_args(argv)
    print(machine_facts("pyarrow"))
    ds = load_sample()
    qids = list(ds.qrels("test"))
    files = {"sample (27 x 100)": parquet_run(qids, 100), "BSARD size (222 x 500)": parquet_run(range(1, 223), 500)}
    sandbox.keep_warm()
    score_files([("warm.parquet", files["sample (27 x 100)"])], ds)
    rows, out = [], {}
    for label, data in files.items():
        here, child = [], []
        for _ in range(args.repeat):
            for isolation, sink in ((None, here), (sandbox.DEFAULT_ISOLATION, child)):
                limits = scoring.Limits(isolation=isolation)
                t0 = time.perf_counter()
                board = scoring.score_runs(ds, "test", [scoring.RunSource.upload("r.parquet", data)], limits=limits)
                sink.append(time.perf_counter() - t0)
                assert board.runs[0].usable
        extra = statistics.median(child) - statistics.median(here)
        rows.append([f"score an upload, {label}", median_ms(here), median_ms(child), f"{1000 * extra:+.0f}"])
        out[label] = {"in_process_s": here, "child_s": child}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.parquet"
        run.write_bytes(files["sample (27 x 100)"])
        code = ("import sys, time; t0 = time.perf_counter(); from bsard_demo.runs import read_run_path; "
                "rf = read_run_path(sys.argv[1]); assert rf.ok; print(time.perf_counter() - t0)")
        cold = [float(subprocess.run([sys.executable, "-c", code, str(run)], cwd=REPO, capture_output=True, text=True,
                                     check=True).stdout) for _ in range(max(3, args.repeat // 3))]
        rows.append(["first read of a fresh process (starts the fork server)", "", median_ms(cold), ""])
        out["cold_first_read_s"] = cold
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.baseline], cwd=REPO, check=True,
                       capture_output=True)
        try:
            now, before = [], []
            for _ in range(args.repeat):
                for tree, sink in ((base, before), (REPO, now)):
                    t0 = time.perf_counter()
                    proc = subprocess.run([sys.executable, "-m", "bsard_demo", "evaluate", str(run), "--data",
                                           "sample"], cwd=tree, capture_output=True, text=True)
                    sink.append(time.perf_counter() - t0)
                    assert proc.returncode == 0, proc.stderr
            extra = statistics.median(now) - statistics.median(before)
            rows.append([f"CLI evaluate, sample parquet ({args.baseline} vs this tree)", median_ms(before),
                         median_ms(now), f"{1000 * extra:+.0f}"])
            out["cli_baseline_s"], out["cli_now_s"] = before, now
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO, capture_output=True)
    print(table(rows, ["median ms", "in process / before", "child / now", "extra"]))
    print(f"load average after: {load_average()}")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
