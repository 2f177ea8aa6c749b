"""Plot the RSS samples of ``bench/load_ws.py soak`` (its ``rss.csv``) to a PNG.

    python bench/plot_rss.py WORKDIR/rss.csv [MORE.csv ...] --out docs/soak-rss.png [--left-at S ...]
        [--label TEXT ...] [--title TEXT]

One line per server (the ``rss_mb_server*`` columns) of each file, the load average (1 min) on a
second axis, a dashed mark where the visitors left (``--left-at``, seconds, one per file).
Needs matplotlib, which the project does not install: run it with any interpreter that has it
(docs/benchmarks.md names the one used).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def read(path: Path) -> tuple[list[float], dict[str, list[float]], list[float]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_s"]) / 60 for r in rows]
    servers = {k: [float(r[k]) for r in rows] for k in rows[0] if k.startswith("rss_mb_server")}
    return t, servers, [float(r["load1"]) for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--left-at", type=float, nargs="*", default=[])
    ap.add_argument("--label", nargs="*", default=[])
    ap.add_argument("--title", default="Server RSS during the soak (sampled every 10 s)")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(args.csv), 1, figsize=(9, 3.2 * len(args.csv)), squeeze=False)
    for n, (path, ax) in enumerate(zip(args.csv, axes[:, 0])):
        t, servers, load = read(path)
        for name, values in servers.items():
            ax.plot(t, values, label=name.replace("rss_mb_", "RSS "))
        ax.set_ylabel("RSS (MB)")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("minutes")
        ax.set_title(args.label[n] if n < len(args.label) else path.parent.name, fontsize=10)
        if n < len(args.left_at):
            ax.axvline(args.left_at[n] / 60, linestyle="--", color="grey", label="visitors gone")
        other = ax.twinx()
        other.plot(t, load, color="lightgrey", linewidth=0.8, label="load average (1 min)")
        other.set_ylabel("load average", color="grey")
        lines = ax.get_legend_handles_labels()
        more = other.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], loc="lower right", fontsize=8)
    fig.suptitle(args.title)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=90)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
