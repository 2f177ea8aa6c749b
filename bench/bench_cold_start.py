"""Benchmark: a cold ``python -m bsard_demo run`` served by an index bundle (issue 9, "Cold start").

    /work/venv/bin/python bench/bench_cold_start.py --data DIR --warm-cache ROOT [--bundle DIR]
        [--retriever hybrid] [--depth 500] [--rounds 3] [--workdir bench/out/cold]

``--warm-cache ROOT`` holds (or will hold: the first call builds them there) the corpus's
indexes for ``--retriever``. The bundle (default ``<workdir>/bundle``) is exported from it once
with ``python -m bsard_demo index --retriever R --export``. Then, each in a new process:

- *warm*: ``run`` with ``BSARD_CACHE=ROOT`` and no bundle (``--index ''``), the reference file;
- *cold, bundle* × ``--rounds``: ``run --index BUNDLE`` with a new, **empty** ``BSARD_CACHE``:
  target ≤ 120 s, its run file byte-identical to the warm one, nothing built (the cache stays
  empty, stderr has no ``note:``) and the bundle unchanged (sha256 of every file, before/after);
- *cold, no bundle, BM25 only*: ``run --retriever bm25`` with an empty cache (its index build),
  for scale; the dense encoding without a bundle is the ``index`` build time (printed when this
  script builds the warm cache, else see docs/benchmarks.md).

Wall time, the child's peak RSS (``ru_maxrss`` from ``wait4``) and the load average are reported.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # python bench/bench_cold_start.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import REPO, app_machine_facts, json_option, load_average, mb, table, target, write_json  # noqa: E402

TARGET_S = target("cli_cold_run_s")


def run_cli(args: list[str], cache: Path, timeout: float = 7200) -> dict:
    """``python -m bsard_demo ARGS`` (offline, ``BSARD_CACHE=cache``, no ``BSARD_INDEX`` from the
    caller): wall seconds, peak RSS (MB), exit code and stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_CACHE": str(cache)}
    env.pop("BSARD_INDEX", None)
    err = cache.parent / f".stderr-{os.getpid()}"
    start = time.perf_counter()
    with open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "bsard_demo", *args], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=e)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    stderr = err.read_text(errors="replace")
    err.unlink()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"bsard_demo {' '.join(args)} failed ({code}): {stderr[-2000:]}")
    return {"s": seconds, "rss_mb": mb(usage.ru_maxrss), "stderr": stderr}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_sha(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(p.relative_to(root).as_posix().encode())
        if p.is_file():
            h.update(sha256(p).encode())
    return h.hexdigest()


def entries(cache: Path) -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for p in cache.glob("*/[!.]*")) if cache.exists() else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--warm-cache", type=Path, required=True)
    ap.add_argument("--bundle", type=Path, default=None)
    ap.add_argument("--retriever", default="hybrid", choices=("bm25", "dense", "hybrid"))
    ap.add_argument("--depth", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "cold")
    json_option(ap, "bench_cold_start")
    args = ap.parse_args(argv)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    data, warm = args.data.resolve(), args.warm_cache.resolve()
    bundle = (args.bundle or workdir / "bundle").resolve()
    print(app_machine_facts())
    print(f"data {data}, retriever {args.retriever}, depth {args.depth}, rounds {args.rounds}; "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    common = ["run", "--retriever", args.retriever, "--data", str(data), "--depth", str(args.depth), "--no-progress"]
    rows, ok = [], True
    if not (bundle / "bundle.json").is_file():
        made = run_cli(["index", "--retriever", args.retriever, "--data", str(data), "--no-progress", "--index", "",
                        "--export", str(bundle)], warm)
        rows.append(["index --export (from the warm cache, or building it)", f"{made['s']:.1f}",
                     f"{made['rss_mb']:.0f}", "", "", ""])
    before = tree_sha(bundle)
    reference = workdir / "warm.trec"
    got = run_cli(common + ["--index", "", "--out", str(reference)], warm)
    rows.append(["warm cache, no bundle", f"{got['s']:.1f}", f"{got['rss_mb']:.0f}", "reference", "", ""])
    cold_s = []
    for n in range(args.rounds):
        empty = workdir / f"empty-cache-{n}"
        shutil.rmtree(empty, ignore_errors=True)
        empty.mkdir()
        out = workdir / f"cold-{n}.trec"
        got = run_cli(common + ["--index", str(bundle), "--out", str(out)], empty)
        same = sha256(out) == sha256(reference)
        built = entries(empty)
        notes = [line for line in got["stderr"].splitlines() if "note:" in line]
        ok &= same and not built and not notes and got["s"] <= TARGET_S
        cold_s.append(got["s"])
        rows.append([f"cold, bundle, empty cache (round {n + 1})", f"{got['s']:.1f}", f"{got['rss_mb']:.0f}",
                     "identical" if same else "DIFFERENT", ", ".join(built) or "nothing", "; ".join(notes) or "none"])
    empty = workdir / "empty-cache-bm25"
    shutil.rmtree(empty, ignore_errors=True)
    empty.mkdir()
    got = run_cli(["run", "--retriever", "bm25", "--data", str(data), "--depth", str(args.depth), "--no-progress",
                   "--index", "", "--out", str(workdir / "cold-bm25.trec")], empty)
    rows.append(["cold, no bundle, BM25 only (builds its index)", f"{got['s']:.1f}", f"{got['rss_mb']:.0f}", "", "",
                 ", ".join(entries(empty))])
    unchanged = tree_sha(bundle) == before
    ok &= unchanged
    print("\n" + table(rows, ["python -m bsard_demo run", "wall s", "peak RSS MB", "run file vs warm",
                              "written to the empty cache", "notes"]))
    from bsard_demo import bundles

    print(f"\nbundle {bundle}: {bundles.open_bundle(bundle).summary()}; unchanged after the runs: {unchanged}")
    print(f"cold runs with the bundle: median {statistics.median(cold_s):.1f} s, max {max(cold_s):.1f} s "
          f"(target ≤ {TARGET_S:g} s)")
    write_json(args.json, {"ok": ok, "rows": rows, "cold_s": cold_s, "bundle_unchanged": unchanged})
    print(f"\n{'PASS' if ok else 'FAIL'}; finished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
