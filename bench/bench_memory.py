"""Benchmark: peak memory of reading + scoring a large run, against a one-line run.

    .venv/bin/python bench/bench_memory.py [--data DIR] [--depth 5000] [--repeat 3] [--formats trec,gz,...]

The dataset is the synthetic full-scale one of ``bench/synthetic.py`` (``bench/out/synth``,
generated with seed 0 when absent, or ``--data DIR``); the large run is
``make_run(dataset, depth=5000)``: 222 questions × 5,000 articles, 1.11 M TREC lines, ~29 MB.
Each case runs in a **fresh interpreter** (so that peaks never mix) and does what
``bsard_demo evaluate`` does: ``load_dataset(DIR, need_corpus=False)``, then
``read_run_path(path, qids=..., corpus_ids=..., k=500)`` and ``evaluate(qrels, run, (100, 200, 500))``.
Reported per case: the RSS before reading (imports + dataset), the peak RSS while reading and
scoring (the process's peak is reset after the dataset load through ``/proc/self/clear_refs``,
so that the dataset's own peak cannot hide the reader's), their difference ("cost"), the cost
above the one-line run's (the figure of issue 9: at most 150 MB), the process's overall peak
(``ru_maxrss``) and the time of read + evaluate. Then the real CLI (``python -m bsard_demo
evaluate RUN --data DIR --format json``): the peak RSS of the child via ``wait4`` and the wall
time, start-up included; there the dataset load may dominate the peak. A third table ("cold")
reads and scores right after the imports, with nothing freed before that the reader could
reuse (qrels: each question's first 3 articles): the stricter figure. Every case prints a
digest of its figures and problem list (severity, line, message), and the large variants (gzip,
parquet) must give the digest of the plain TREC run.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # python bench/bench_memory.py (bench/_path.py)
    import _path  # noqa: F401

from _cold_read import COLD_WORKER  # noqa: E402
from _synthetic import BSARD_ARTICLES, make_run  # noqa: E402
from bench.common import (  # noqa: E402
    REPO,
    SYNTH as DEFAULT_DATA,  # noqa: E402
    json_option,
    load_average,
    mb,
    synthetic_corpus,
    target,
    write_json,
)

LIMIT_MB = target("read_run_above_tiny_mb")

WORKER = r"""
import hashlib, json, resource, sys, time
from bsard_demo.evaluation import evaluate
from bsard_demo.runs import read_run_path
from bsard_demo.sources import load_dataset
path, data = sys.argv[1], sys.argv[2]
ds = load_dataset(data, need_corpus=False)
qrels = ds.qrels("test")
corpus = ds.article_ids

def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":")) / 1024

peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rss_before = status("VmRSS")
try:  # reset the peak to the current RSS (Linux >= 4.0), so that the dataset's own peak does not hide ours
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    reset = True
except OSError:
    reset = False
t = time.perf_counter()
rf = read_run_path(path, qids=qrels.keys(), corpus_ids=corpus, k=500)
ev = evaluate(qrels, rf.run, (100, 200, 500)) if rf.run is not None else None
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
problems = [p.as_dict() for p in rf.problems]
means = {k: round(v, 12) for k, v in ev.means.items()} if ev else None
digest = hashlib.sha256(json.dumps([means, [[p["severity"], p["line"], p["message"]] for p in problems]],
                                   sort_keys=True).encode()).hexdigest()[:12]
print(json.dumps({"base_mb": peak_before, "rss_before": rss_before, "peak_mb": peak, "reading_peak": status("VmHWM"),
                  "reset": reset, "seconds": seconds, "format": rf.format,
                  "lines": sum(map(len, rf.run.values())) if rf.run else 0, "problems": len(problems),
                  "digest": digest, "recall@100": means and means["recall@100"]}))
"""


def _python_json(code: str, *argv: str, what: str) -> dict:
    """Run ``python -c code argv…`` with the repository importable; its last output line, as JSON."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed on {argv[0]}:\n{proc.stderr}")
    return json.loads(proc.stdout)


def run_cold(path: Path) -> dict:
    return _python_json(COLD_WORKER, str(path), what="cold worker")


def run_worker(path: Path, data: Path) -> dict:
    return _python_json(WORKER, str(path), str(data), what="worker")


def run_cli_peak(path: Path, data: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen([sys.executable, "-m", "bsard_demo", "evaluate", str(path), "--data", str(data),
                                 "--format", "json"], cwd=REPO, env=env, stdout=null, stderr=null)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": time.perf_counter() - t, "peak_mb": mb(usage.ru_maxrss), "returncode": proc.returncode}


def make_files(data: Path, out: Path, depth: int, formats: Sequence[str]) -> dict[str, Path]:
    from bsard_demo.sources import load_dataset

    ds = load_dataset(data, need_corpus=False)
    qrels = ds.qrels("test")
    first_q = next(iter(qrels))
    files = {"tiny (1 line)": out / "tiny.trec"}
    files["tiny (1 line)"].write_text(f"{first_q} Q0 1 1 1.0 tiny\n", encoding="utf-8")
    big = out / f"run{depth}.trec"
    make_run(qrels, big, depth=depth, seed=0, n_articles=len(ds.article_ids) or BSARD_ARTICLES)
    files[f"{depth}-deep TREC"] = big
    if "gz" in formats:
        gz = out / f"run{depth}.trec.gz"
        with open(big, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
            dst.write(src.read())
        files[f"{depth}-deep TREC gzip"] = gz
    if "parquet" in formats:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            print("pyarrow not installed: no parquet case", file=sys.stderr)
        else:
            cols: dict[str, list] = {"qid": [], "docid": [], "rank": [], "score": []}
            with open(big, encoding="utf-8") as f:
                for line in f:
                    q, _, d, r, s, _ = line.split()
                    cols["qid"].append(q)
                    cols["docid"].append(d)
                    cols["rank"].append(int(r))
                    cols["score"].append(float(s))
            pq_path = out / f"run{depth}.parquet"
            pq.write_table(pa.table(cols), pq_path)
            files[f"{depth}-deep parquet"] = pq_path
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="dataset folder (default: bench/out/synth)")
    parser.add_argument("--depth", type=int, default=5000, help="articles per question of the large run")
    parser.add_argument("--repeat", type=int, default=3, help="fresh interpreters per case (median reported)")
    parser.add_argument("--formats", default="gz,parquet", help="large-run variants besides plain TREC")
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI measurement")
    json_option(parser, "bench_memory")
    args = parser.parse_args(argv)
    synthetic_corpus(args.data)
    formats = [f for f in args.formats.split(",") if f]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        files = make_files(args.data, Path(tmp), args.depth, formats)
        print(f"dataset: {args.data}; python {sys.version.split()[0]}; load average "
              + load_average())
        for name, path in files.items():
            print(f"  {name}: {path.name}, {path.stat().st_size / 2**20:.1f} MB")
        results = {}
        for name, path in files.items():
            rs = [run_worker(path, args.data) for _ in range(args.repeat)]
            med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731, B023 -- called in this iteration only
            results[name] = {"before": med("rss_before"), "reading_peak": med("reading_peak"),
                             "process_peak": med("peak_mb"), "seconds": med("seconds"),
                             "digest": {r["digest"] for r in rs}, "first": rs[0]}
            results[name]["cost"] = results[name]["reading_peak"] - results[name]["before"]
        if not all(r["first"]["reset"] for r in results.values()):
            print("note: /proc/self/clear_refs unavailable: the reading peak includes the dataset's own peak")
        tiny = results["tiny (1 line)"]["cost"]
        print()
        print(f"library: load_dataset, then read_run_path + evaluate in a fresh interpreter per case, median of "
              f"{args.repeat}; MB of RSS: before reading, peak while reading + scoring (peak reset after the "
              "dataset load), that peak minus the RSS before, the same above the one-line run; process peak")
        print(f"{'case':<22} {'before':>7} {'peak':>7} {'cost':>6} {'above tiny':>11} {'process':>8} "
              f"{'read+eval s':>12}  {'format':<7} {'problems':>8}  digest")
        for name, r in results.items():
            print(f"{name:<22} {r['before']:>7.0f} {r['reading_peak']:>7.0f} {r['cost']:>6.0f} "
                  f"{r['cost'] - tiny:>11.0f} {r['process_peak']:>8.0f} {r['seconds']:>12.2f}  "
                  f"{r['first']['format']:<7} {r['first']['problems']:>8}  {','.join(sorted(r['digest']))}")
        big = [n for n in results if n != "tiny (1 line)"]
        same = len({d for n in big for d in results[n]["digest"]}) == 1
        print(f"same figures and problem lists for every large variant: {'yes' if same else 'NO'}")
        worst = max(results[n]["cost"] - tiny for n in big)
        print(f"target: reading + scoring at most {LIMIT_MB:g} MB above the one-line run: "
              f"{'met' if worst <= LIMIT_MB else 'NOT met'} (worst {worst:.0f} MB)")
        print()
        print("cold: the same read + evaluate right after the imports (no dataset load before it), "
              f"median of {args.repeat}:")
        print(f"{'case':<22} {'before':>7} {'cost':>6} {'above tiny':>11} {'read+eval s':>12}")
        cold = {n: [run_cold(p) for _ in range(args.repeat)] for n, p in files.items()}
        tiny_cold = statistics.median(r["cost"] for r in cold["tiny (1 line)"])
        for name, rs in cold.items():
            cost = statistics.median(r["cost"] for r in rs)
            print(f"{name:<22} {statistics.median(r['before'] for r in rs):>7.0f} {cost:>6.0f} "
                  f"{cost - tiny_cold:>11.0f} {statistics.median(r['seconds'] for r in rs):>12.2f}")
        worst_cold = max(statistics.median(r["cost"] for r in cold[n]) - tiny_cold for n in big)
        print(f"target, cold: at most {LIMIT_MB:g} MB above the one-line run: "
              f"{'met' if worst_cold <= LIMIT_MB else 'NOT met'} (worst {worst_cold:.0f} MB)")
        worst = max(worst, worst_cold)
        if not args.no_cli:
            print()
            print("CLI (python -m bsard_demo evaluate RUN --data DIR --format json), peak RSS of the child:")
            print(f"{'case':<24} {'peak MB':>8} {'above tiny':>11} {'wall s':>8}")
            cli = {n: [run_cli_peak(p, args.data) for _ in range(args.repeat)] for n, p in files.items()}
            tiny_cli = statistics.median(r["peak_mb"] for r in cli["tiny (1 line)"])
            for name, rs in cli.items():
                peak = statistics.median(r["peak_mb"] for r in rs)
                print(f"{name:<24} {peak:>8.0f} {peak - tiny_cli:>11.0f} "
                      f"{statistics.median(r['seconds'] for r in rs):>8.2f}")
        write_json(args.json, {"warm": results, "cold": cold, "cli": None if args.no_cli else cli,
                               "same_figures": same, "worst_above_tiny_mb": worst})
    return 0 if same and worst <= LIMIT_MB else 1


if __name__ == "__main__":
    sys.exit(main())
