"""What one visitor can do to the others, measured from outside (docs/reliability.md, "12. What one visitor can
do to the others"): a server on DIR, browserless visitors (``tests/_ws_client.py``).

    python bench/visitor_faults.py clear --data DIR [--python PY] [--tree DIR] [--cycles 10] [--workdir W]
    python bench/visitor_faults.py uploads --data DIR [--python PY] [--tree DIR] [--files 20] [--mb 48]

``clear``: a warm BM25 deep link (three visits, the median), then ``--cycles`` sessions that each search a
question of their own and send Streamlit's ``clear_cache`` back-message (any client can); then a fresh
visitor's search. Reports the warm and the after times, the server's RSS (its process tree) before and after,
and how many index builds the server logged. ``uploads``: one session drops ``--files`` files of ``--mb`` MB
one after another on the Score page's uploader; reports how many the server stored and refused, and the RSS
before, at the peak and 130 s after the session left (Streamlit keeps a disconnected session 120 s).
Bounded: fixed visits, a per-run timeout; the server is always stopped. ``--tree``: another checkout's app
(the before figures), with this client.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import urllib.error
from pathlib import Path

if __package__ in (None, ""):  # python bench/visitor_faults.py (bench/_path.py)
    import _path  # noqa: F401

from _browser import AppServer, app_env  # noqa: E402
from _ws_client import Visitor  # noqa: E402
from bench.common import REPO, load_average, mb, tree_memory_kb  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402


def _rss(server: AppServer) -> float:
    return mb(tree_memory_kb(server.pid)["rss"])


async def _search(url: str, question: str) -> float:
    async with Visitor(url) as v:
        start = time.perf_counter()
        page = await v.open("search", {"q": question, "systems": "bm25", "k": "10"})
        if not page.columns():
            raise RuntimeError("no hits")
        return time.perf_counter() - start


async def clear(url: str, server: AppServer, questions: list[str], cycles: int) -> dict:
    await _search(url, questions[0])  # the first build
    warm = statistics.median([await _search(url, questions[0]) for _ in range(3)])
    rss0, builds0 = _rss(server), server.log_text().count(" building ")
    for i in range(cycles):
        async with Visitor(url) as v:
            await v.open("search", {"q": questions[1 + i], "systems": "bm25", "k": "10"})
            await v.clear_cache()
            await asyncio.sleep(0.2)
    after = await _search(url, questions[0])
    return {"warm_s": round(warm, 3), "after_s": round(after, 3), "ratio": round(after / warm, 2),
            "rss_before_mb": round(rss0), "rss_after_mb": round(_rss(server)),
            "rss_growth_mb": round(_rss(server) - rss0),
            "builds_during": server.log_text().count(" building ") - builds0}


async def uploads(url: str, server: AppServer, files: int, size_mb: float) -> dict:
    rss0, peak, stored, refused = _rss(server), 0.0, 0, 0
    async with Visitor(url) as v:
        page = await v.open("score")
        for i in range(files):
            try:
                await v.upload(page, [(f"f{i}.trec", bytes([48 + i % 10]) * int(size_mb * 2**20))])
                stored += 1
            except urllib.error.HTTPError as exc:
                refused += exc.code == 413
            peak = max(peak, _rss(server))
    left = time.monotonic()
    while time.monotonic() - left < 130:
        await asyncio.sleep(10)
        peak = max(peak, _rss(server))
    return {"stored": stored, "refused": refused, "rss_before_mb": round(rss0), "rss_peak_mb": round(peak),
            "rss_130s_after_mb": round(_rss(server))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("clear", "uploads"))
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable, help="the server's interpreter (the hosted venv's)")
    ap.add_argument("--tree", type=Path, default=REPO)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--mb", type=float, default=48)
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "visitor-faults")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    env = app_env(str(args.data.resolve()), args.workdir / "cache", BSARD_MODELS=str(args.workdir / "no-models"),
                  STREAMLIT_SERVER_MAX_UPLOAD_SIZE="50")
    server = AppServer(env, args.workdir / f"server-{args.mode}.log", python=args.python, cwd=args.tree)
    load = load_average()
    with server:
        server.wait_healthy(timeout=300)
        if args.mode == "clear":
            ds = load_dataset(str(args.data), need_corpus=False)
            questions = list(ds.questions("test")["question"]) + list(ds.questions("train")["question"])
            out = asyncio.run(clear(server.url, server, questions, args.cycles))
        else:
            out = asyncio.run(uploads(server.url, server, args.files, args.mb))
    print({"mode": args.mode, "tree": str(args.tree), **out, "load_before": load, "load_after": load_average()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
