"""The ``stamps`` command: do two result files (``evaluate`` / ``compare`` exports, the Score page's
downloads) come from the same data, split, cut-offs, measures and code? It reads each file's
reproducibility stamp (:func:`bsard_demo.evaluation.stamp.read_stamp`) and prints what differs
(:func:`bsard_demo.evaluation.stamp.stamp_differences`), one line each, before the figures are put
side by side.

Runs are matched by their ranking digest (the same ranking saved as TREC or JSON, or re-spaced, is "the same
run, another file", said and not counted as a difference), then by name.

Exit codes: 0 the stamps agree (the same runs, or runs matched by their ranking), 3 they differ on the
data, split, cut-offs, measures, code or runs, 2 a file cannot be read or has no stamp. A result file is
read whole up to :data:`MAX_BYTES` (a per-question CSV of BSARD's 222 questions and 10 runs is ~0.3 MB).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..evaluation.stamp import read_stamp_bytes, same_runs, stamp_differences
from .common import fail, one_line

MAX_BYTES = 64 * 1024 * 1024
#: The exit code of stamps that differ (1 is the CLI's "a bug", 2 unusable input).
DIFFERENT = 3
#: ``stamps --help``'s description.
DESCRIPTION = ("Read the reproducibility stamp of two result files (evaluate/compare output in JSON, CSV, Markdown or "
               "LaTeX, a Score page download, or a parquet file of export-qrels/export-run) and say what differs: "
               "dataset, its revision and file hashes, split, k values, measures, bsard-demo version, and runs. Runs "
               "are matched by their ranking digest: the same ranking in another file or format is the same run, "
               f"said and not a difference. Exit 0: same provenance; {DIFFERENT}: they differ; 2: a file has no "
               "stamp.")


def add_stamps_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``stamps``: compare the reproducibility stamps of two result files."""
    p = subparsers.add_parser("stamps", help="say what differs between the reproducibility stamps of two result files",
                              description=DESCRIPTION)
    p.add_argument("first", metavar="A", help="a result file")
    p.add_argument("second", metavar="B", help="another result file")
    p.set_defaults(func=cmd_stamps)
    return p


def _stamp_of(path: str) -> dict | str:
    """The stamp of the file at ``path``, or why there is none (a one-line reason)."""
    file = Path(path)
    if not file.is_file():
        return f"{path}: not a readable file"
    size = file.stat().st_size
    if size > MAX_BYTES:
        return f"{path}: {size / 1e6:.0f} MB is larger than a result file may be ({MAX_BYTES // 2**20} MiB)"
    stamp = read_stamp_bytes(file.read_bytes())
    if stamp is None:
        return f"{path}: no reproducibility stamp (not an export of bsard-demo results, or one written before stamps)"
    return stamp


def cmd_stamps(args: argparse.Namespace) -> int:
    stamps = [_stamp_of(args.first), _stamp_of(args.second)]
    reasons = [s for s in stamps if isinstance(s, str)]
    if reasons:
        return fail("stamps", "; ".join(reasons))
    a, b = stamps
    differences = stamp_differences(a, b)
    same = same_runs(a, b)
    runs = sorted(set(a.get("runs") or {}) & set(b.get("runs") or {}))
    if not differences:
        print("same provenance: dataset files and labels, split, k values, measures and bsard-demo version agree"
              + (f"; runs in both: {len(runs)}" if runs and not same else ""))
        for line in same:
            print(one_line(f"  {line}"))
        return 0
    print(f"the stamps differ ({len(differences)}):")
    for line in differences:
        print(one_line(f"  {line}"))
    return DIFFERENT
