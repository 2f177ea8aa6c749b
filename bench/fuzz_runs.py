"""Fuzz the run reader, long mode: the cases and the child of ``tests/_fuzz.py`` (the suite runs
them in a bounded quick mode, tests/runs/test_fuzz_runs.py)::

    python bench/fuzz_runs.py [--parquet 2000] [--text 2000] [--seed 0] [--save DIR]

It prints cases run and failures with the product's reader (parquet in its own child) and with
parquet decoded in the reading process (``isolation=None``: the aborts the child now contains);
figures in docs/reliability.md, "Hostile files in a child".
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # python bench/fuzz_runs.py (bench/_path.py)
    import _path  # noqa: F401

from _fuzz import dataset_cases, parquet_cases, run_cases, text_cases  # noqa: E402
from bench.common import json_option, load_average, machine_facts, table, write_json  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parquet", type=int, default=2000, help="parquet cases")
    ap.add_argument("--text", type=int, default=2000, help="text-format cases")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", type=Path, help="write each failing case's bytes into this folder")
    json_option(ap, "fuzz_runs")
    args = ap.parse_args(argv)
    print(machine_facts("pyarrow"))
    rows, results = [], {}
    for label, cases, isolate in (
            ("parquet, decoded in the reading process (before)", lambda: parquet_cases(args.parquet, args.seed), False),
            ("parquet, the product's reader (child)", lambda: parquet_cases(args.parquet, args.seed), True),
            ("gzip/JSON/JSON Lines/CSV/TREC/LZ4", lambda: text_cases(args.text, args.seed), True),
            ("dataset CSV (pandas' C parser)", lambda: dataset_cases(args.text, args.seed), "dataset")):
        t0 = time.perf_counter()
        outcomes = run_cases(cases(), isolate=isolate is True, kind="dataset" if isolate == "dataset" else "run")
        seconds = time.perf_counter() - t0
        failed = [o for o in outcomes if o.failure]
        contained = sum(1 for o in outcomes if any(c.startswith("reader_") for c in o.codes))
        rows.append([label, len(outcomes), len(failed), contained, f"{seconds:.0f}"])
        results[label] = {"cases": len(outcomes), "failures": len(failed), "reader_codes": contained,
                          "seconds": round(seconds, 1), "failed": [[o.name, o.failure] for o in failed[:50]]}
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            for o in failed:
                (args.save / o.name).write_bytes(o.data)
        for o in failed[:10]:
            print(f"  FAILED {o.name}: {o.failure}")
    print(table(rows, ["cases", "run", "failed", "reader_* problem", "s"]))
    print(f"load average after: {load_average()}")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
