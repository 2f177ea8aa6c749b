"""Server CPU of one visit, visit by visit and thread by thread: one visitor opens the first
visitor's deep link (the Search page with its default systems) for ``--visits`` questions, one after
another, on one ``streamlit run app.py`` (docs/benchmarks.md, "Capacity and soak", "CPU per visit").

    python bench/visit_cpu.py --data DIR [--bundle DIR] [--python PY] [--visits 20] [--env NAME=VALUE ...]

For each visit: the page time and the server's CPU seconds (/proc/PID/stat, user + system), split
into the threads alive before and after it (/proc/PID/task: Streamlit's event loop, the native
libraries' pools) and the threads that ended during it (a page's script thread). ``--env`` adds
variables to the server's environment (``OPENBLAS_NUM_THREADS=1``: numpy's BLAS pool left out).
The app is this script's tree: to measure another commit, ``git archive COMMIT | tar -x -C DIR``
and run ``DIR/bench/visit_cpu.py`` with this bench folder copied in. No correctness check (the
ramp of ``load_ws.py`` has them); nothing is timed in the suite.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # python bench/visit_cpu.py (bench/_path.py)
    import _path  # noqa: F401

from _browser import AppServer, app_env  # noqa: E402
from _ws_client import Visitor  # noqa: E402
from bench.common import REPO, cpu_seconds, json_option, load_average, machine_facts, write_json  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def threads_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each live thread of ``pid``."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def questions(data: Path, n: int) -> list[str]:
    import csv

    with open(data / "questions_test.csv", newline="", encoding="utf-8") as f:
        return [row["question"] for _, row in zip(range(n), csv.DictReader(f))]


async def visits(url: str, texts: list[str], pid: int) -> tuple[str, list[dict]]:
    from urllib.parse import parse_qs

    async with Visitor(url, timeout=600) as v:
        first = await v.open("search", {"q": "bonjour"})
    link = {k: val for k, val in parse_qs(first.query_string or "").items() if k != "q"}
    async with Visitor(url, timeout=600) as v:  # loads the indexes: not measured
        await v.open("search", {"q": texts[0], **link})
    await asyncio.sleep(2)
    rows = []
    for text in texts:
        before_t, before_p = threads_cpu(pid), cpu_seconds([pid])
        async with Visitor(url, timeout=600) as v:
            page = await v.open("search", {"q": text, **link})
        await asyncio.sleep(1.0)  # the script thread ends, idle pools settle: their CPU counts for this visit
        after_t, after_p = threads_cpu(pid), cpu_seconds([pid])
        kept = {t: after_t[t] - before_t[t] for t in after_t if t in before_t}
        total = after_p - before_p
        rows.append({"page_s": page.seconds, "cpu_s": total, "hits": sum(len(c.ids) for c in page.columns()),
                     "server_ms": [c.server_ms for c in page.columns()],
                     "ended_threads_s": total - sum(kept.values()) - sum(after_t[t] for t in after_t
                                                                          if t not in before_t),
                     "threads_s": {t: round(d, 2) for t, d in sorted(kept.items(), key=lambda x: -x[1]) if d > 0}})
    return "&".join(f"{k}={','.join(v)}" for k, v in link.items()), rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--bundle", type=Path)
    ap.add_argument("--python", default=sys.executable, help="the server's interpreter")
    ap.add_argument("--visits", type=int, default=20)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE added to the server's environment")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "visit-cpu")
    json_option(ap, "visit_cpu")
    args = ap.parse_args(argv)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    models = workdir / "no-models"
    models.mkdir(exist_ok=True)
    extra = {"BSARD_MODELS": str(models), **dict(e.split("=", 1) for e in args.env)}
    if args.bundle:
        extra["BSARD_INDEX"] = str(args.bundle.resolve())
    cache = workdir / "server-cache"
    env = app_env(str(args.data.resolve()), cache, **extra)
    print(machine_facts("streamlit"))
    print(f"tree {REPO}, interpreter {args.python}, extra env {args.env}; load average {load_average()}", flush=True)
    server = AppServer(env, workdir / "server.log", python=args.python)
    with_load = [load_average()]
    server.start()
    try:
        server.wait_healthy(timeout=300)
        link, rows = asyncio.run(visits(server.url, questions(args.data, args.visits + 1)[1:], server.pid))
        with_load.append(load_average())
        ids = sorted({t for r in rows for t in r["threads_s"]})
        per_thread = {t: sum(r["threads_s"].get(t, 0.0) for r in rows) / len(rows) for t in ids}
    finally:
        server.stop()
    cpu = [r["cpu_s"] for r in rows]
    print(f"link: {link}")
    print(f"{len(rows)} visits: server CPU per visit median {statistics.median(cpu):.2f} s (min {min(cpu):.2f}, "
          f"max {max(cpu):.2f}); page median {statistics.median(r['page_s'] for r in rows):.2f} s; "
          f"ended threads (the page's script) median {statistics.median(r['ended_threads_s'] for r in rows):.2f} s")
    print("threads alive throughout, CPU s per visit (mean): "
          + ", ".join(f"{t}: {s:.3f}" for t, s in sorted(per_thread.items(), key=lambda x: -x[1]) if s >= 0.005))
    print(f"load average {with_load[0]} → {with_load[-1]}")
    write_json(args.json, {"link": link, "rows": rows, "per_thread": per_thread, "load": with_load,
                           "args": {k: str(v) for k, v in vars(args).items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
