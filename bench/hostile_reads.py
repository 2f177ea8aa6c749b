"""What each hostile run-file class of issue 37 costs ``evaluate`` (time, peak RSS of the whole
process tree, exit code), made fresh at ``--mb`` MB by ``tests/_hostile_runs.py``::

    python bench/hostile_reads.py [--mb 20] [--data ../shared/data/bsard] [--only NAME] [--json FILE]

The tree's RSS is the sum of VmRSS over the CLI and its children (the reader's fork server and
child), sampled every 20 ms; the issue asks for exit 0 or 2 within 30 s and at most 512 MB.
"""
from __future__ import annotations

if __package__ in (None, ""):
    import _path  # noqa: F401

import argparse
import sys
import tempfile
from pathlib import Path

from _hostile_runs import CLASSES, evaluate_cost, write_class
from bench.common import REPO, load_average, table, write_json


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "bsard"))
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", action="append", help="class name (repeatable); default all")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows, out, header = [], {}, ["class", "MB", "exit", "s", "tree MB", "stderr"]
    print(f"load average {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(CLASSES):
            path = write_class(name, Path(tmp), args.mb)
            r = out[name] = {"mb": path.stat().st_size / 2**20, **evaluate_cost(path, args.data, args.timeout)}
            path.unlink()
            rows.append([name, f"{r['mb']:.1f}", r["exit"], f"{r['seconds']:.1f}", f"{r['peak_mb']:.0f}", r["message"]])
            print(table(rows[-1:], header), flush=True)
    print(f"\n{table(rows, header)}\nload average {load_average()}")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
