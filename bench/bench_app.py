"""Benchmark: the Streamlit app's speed in a real browser (docs/benchmarks.md, section "App").

    /work/venv/bin/python bench/bench_app.py [--rounds 3] [--searches 20] [--only sample|full]
        [--synthetic DIR] [--dense-cache ROOT] [--no-dense] [--workdir bench/out/app]

A real ``streamlit run app.py`` on 127.0.0.1 (free port) driven by Debian's Chromium through
Playwright (helpers in ``tests/_browser.py``); nothing leaves the loopback interface. Chromium is
launched once, before the timed rounds; every round starts a new server and a new browser context.

- **sample** (``BSARD_DATA=sample``, a fresh ``BSARD_CACHE`` each round): *first page ready* =
  from the server process start to the Search page's question box visible in the browser
  (target ≤ 5 s). Then the columns BM25 + Hybride are chosen and ``--searches`` + 1 questions are
  searched (the sample's test then train questions): the first search builds the BM25 and dense
  indexes and is reported apart; for the others the page's "recherche : X ms (serveur)" of each
  column is read (target ≤ 300 ms), with the browser's wall time from the click on
  « Rechercher » to the settled results.
- **full** (the BSARD-scale synthetic corpus of ``bench/synthetic.py``, indexes prebuilt once
  into ``<workdir>/cache-full`` with ``python -m bsard_demo index``): per round, one server with
  BM25 alone and, if the dense index is available, one with BM25 + Hybride chosen before the
  first question. *First hits* = from the server process start to all hit cards of the first
  search drawn, the question typed as soon as the box shows (target ≤ 10 s); then ``--searches``
  searches. The server's memory (VmRSS and VmHWM of the streamlit process and its children,
  from /proc) is read at the end of each server's round (target ≤ 1 GB).

``--dense-cache ROOT`` copies ``ROOT/dense/*`` (embeddings computed elsewhere, e.g. by
``bench/bench_retrieval.py``) into the full-scale cache before prebuilding: the cache key is a
fingerprint of the corpus and the encoder, so only the matching entry is used, and it is checked
against its checksums when loaded. Without it the dense prebuild computes the embeddings (~5 min
of 2 CPUs for 22,633 articles with USE); ``--no-dense`` leaves dense and hybrid out.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from _browser import (RESULTS_READY_JS, SERVER_TIMES_JS, STEP_MS, AppServer, app_env,  # noqa: E402
                      browser_missing, choose, chromium_options)

from bsard_demo.sources import load_dataset  # noqa: E402

FIRST_PAGE_TARGET_S = 5.0
SEARCH_TARGET_MS = 300.0
FIRST_HITS_TARGET_S = 10.0
RSS_TARGET_MB = 1024.0
VIEWPORT = {"width": 1440, "height": 1000}
QUESTION_BOX = "Votre question"
SYSTEMS = "Systèmes (côte à côte)"
TOP_K = 10  # the page's default top-k


# --------------------------------------------------------------------------- shared with load_app.py

def machine_facts() -> str:
    from importlib.metadata import version

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    chromium = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()
    return (f"machine: {platform.machine()} {platform.system()}, cpu_count {os.cpu_count()} "
            f"(usable {len(os.sched_getaffinity(0))}), load average {load}\n"
            f"python {platform.python_version()}, streamlit {version('streamlit')}, "
            f"playwright {version('playwright')}, {chromium or 'chromium ?'}")


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def p50_p95(values: Sequence[float]) -> tuple[float, float]:
    """Median and 95th percentile (linear interpolation)."""
    a = np.asarray(values, dtype=float)
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def table(rows: Iterable[Sequence[object]], header: Sequence[str]) -> str:
    """A plain text table, first column left-aligned, the others right-aligned."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]
    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line([str(h) for h in header]), *(line(r) for r in rows)])


def cli(args: Sequence[str], cache: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    """``python -m bsard_demo ARGS`` with ``BSARD_CACHE=cache``, offline; raises on failure."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "bsard_demo", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"bsard_demo {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def mb(kb: int) -> float:
    return kb / 1024


# --------------------------------------------------------------------------- browser steps

def open_search_page(page, server: AppServer) -> float:
    """Go to the app and wait for the question box; seconds since the server process started."""
    page.goto(server.url, wait_until="commit", timeout=STEP_MS)
    page.get_by_label(QUESTION_BOX).wait_for(state="visible", timeout=STEP_MS)
    return time.perf_counter() - server.started


def search(page, question: str, columns: int) -> tuple[float, list[float]]:
    """Type ``question``, click « Rechercher », wait for the settled results of ``columns`` columns.
    Returns (browser wall ms from the click, the server ms shown by each column)."""
    page.get_by_label(QUESTION_BOX).fill(question)
    start = time.perf_counter()
    page.get_by_role("button", name="Rechercher").click()
    page.wait_for_function(RESULTS_READY_JS, arg=[question, columns, columns * TOP_K], timeout=STEP_MS, polling=50)
    wall = (time.perf_counter() - start) * 1000
    shown = page.evaluate(SERVER_TIMES_JS)
    if len(shown) != columns:
        raise RuntimeError(f"expected {columns} server times on the page, found {shown}")
    return wall, shown


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


# --------------------------------------------------------------------------- the two scenarios

def sample_round(browser, workdir: Path, n: int, searches: int, questions: list[str]) -> dict:
    cache = fresh_dir(workdir / f"cache-sample-{n}")
    server = AppServer(app_env("sample", cache), workdir / f"sample-{n}.log").start()
    context = browser.new_context(viewport=VIEWPORT, locale="fr-BE")
    try:
        health = server.wait_healthy()
        page = context.new_page()
        first_page = open_search_page(page, server)
        choose(page, SYSTEMS, "Hybride")  # BM25 (default) + Hybride, no question yet: nothing is built
        first_wall, _ = search(page, questions[0], 2)
        walls, bm25, hybrid = [], [], []
        for q in questions[1:searches + 1]:
            wall, (t_bm25, t_hybrid) = search(page, q, 2)
            walls.append(wall)
            bm25.append(t_bm25)
            hybrid.append(t_hybrid)
        return {"health_s": health, "first_page_s": first_page, "first_search_wall_ms": first_wall, "wall_ms": walls, "bm25_ms": bm25, "hybrid_ms": hybrid,
                "memory": server.memory_kb(), "builds": server.log_text().count(": building ")}
    finally:
        context.close()
        server.stop()


def prebuild_full(data: Path, cache: Path, dense_from: Path | None, dense: bool) -> dict:
    """Prebuild the full-scale indexes with the CLI; returns what was built and how long it took."""
    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    start = time.perf_counter()
    cli(["index", "--retriever", "bm25", "--data", str(data), "--no-progress"], cache)
    out["bm25_index_s"] = time.perf_counter() - start
    if dense:
        if dense_from is not None:
            for entry in (dense_from / "dense").glob("[!.]*"):
                if entry.is_dir() and not (cache / "dense" / entry.name).exists():
                    shutil.copytree(entry, cache / "dense" / entry.name)
        before = {e.name for e in (cache / "dense").glob("[!.]*")}
        start = time.perf_counter()
        cli(["index", "--retriever", "dense", "--data", str(data), "--no-progress"], cache, timeout=3600)
        out["dense_index_s"] = time.perf_counter() - start
        out["dense_from_cache"] = {e.name for e in (cache / "dense").glob("[!.]*")} == before
    return out


def full_round(browser, workdir: Path, n: int, data: Path, cache: Path, searches: int, questions: list[str],
               hybrid: bool) -> dict:
    """One server on the full-scale corpus: BM25 alone, or (``hybrid``) BM25 + Hybride chosen
    before the first question, so that its first search loads both from the cache."""
    columns = 2 if hybrid else 1
    server = AppServer(app_env(str(data), cache), workdir / f"full-{'hybrid' if hybrid else 'bm25'}-{n}.log").start()
    context = browser.new_context(viewport=VIEWPORT, locale="fr-BE")
    try:
        server.wait_healthy()
        page = context.new_page()
        first_page = open_search_page(page, server)
        if hybrid:
            choose(page, SYSTEMS, "Hybride")  # no question yet: nothing is loaded
        page.get_by_label(QUESTION_BOX).fill(questions[0])
        page.get_by_role("button", name="Rechercher").click()
        page.wait_for_function(RESULTS_READY_JS, arg=[questions[0], columns, columns * TOP_K], timeout=10 * STEP_MS,
                               polling=50)
        first_hits = time.perf_counter() - server.started
        shown = [search(page, q, columns)[1] for q in questions[1:searches + 1]]
        return {"first_page_s": first_page, "first_hits_s": first_hits, "bm25_ms": [t[0] for t in shown],
                "hybrid_ms": [t[1] for t in shown] if hybrid else [], "memory": server.memory_kb(),
                "builds": server.log_text().count(": building ")}
    finally:
        context.close()
        server.stop()


# --------------------------------------------------------------------------- report

def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


def report_sample(rounds: list[dict]) -> str:
    rows = []
    first = [r["first_page_s"] for r in rounds]
    rows.append(["first page ready (s)", f"≤ {FIRST_PAGE_TARGET_S:g}", *(f"{v:.2f}" for v in first),
                 f"{statistics.median(first):.2f}", verdict(statistics.median(first), FIRST_PAGE_TARGET_S)])
    health = [r["health_s"] for r in rounds]
    rows.append(["  of which server health (s)", "", *(f"{v:.2f}" for v in health), f"{statistics.median(health):.2f}", ""])
    fs = [r["first_search_wall_ms"] / 1000 for r in rounds]
    rows.append(["first search, builds BM25+dense (s)", "", *(f"{v:.2f}" for v in fs), f"{statistics.median(fs):.2f}", ""])
    rss = [mb(r["memory"]["rss"]) for r in rounds]
    rows.append(["server RSS at end (MB)", "", *(f"{v:.0f}" for v in rss), f"{statistics.median(rss):.0f}", ""])
    builds = [r["builds"] for r in rounds]
    rows.append(["index builds logged", "", *map(str, builds), f"{statistics.median(builds):g}", ""])
    header = ["sample", "target", *(f"round {i + 1}" for i in range(len(rounds))), "median", ""]
    out = [table(rows, header), ""]
    rows = []
    for label, key in (("BM25, server ms", "bm25_ms"), ("Hybride, server ms", "hybrid_ms"),
                       ("click → results, browser ms", "wall_ms")):
        values = [v for r in rounds for v in r[key]]
        p50, p95 = p50_p95(values)
        rows.append([label, len(values), f"{p50:.1f}", f"{p95:.1f}", f"{max(values):.1f}",
                     verdict(p95, SEARCH_TARGET_MS) if "server" in label else ""])
    out.append(table(rows, ["sample searches (cached indexes)", "n", "median", "p95", "max", "≤ 300 ms"]))
    return "\n".join(out)


def report_full(bm25: list[dict], both: list[dict], prebuilt: dict) -> str:
    def row(label, values, fmt, target=None):
        med = statistics.median(values)
        return [label, "" if target is None else f"≤ {target:g}", *(fmt.format(v) for v in values), fmt.format(med),
                "" if target is None else verdict(med, target)]

    out = []
    for title, rounds in (("BM25 alone", bm25), ("BM25 + Hybride", both)):
        if not rounds:
            continue
        rows = [row("first page ready (s)", [r["first_page_s"] for r in rounds], "{:.2f}"),
                row("start → first hits (s)", [r["first_hits_s"] for r in rounds], "{:.2f}", FIRST_HITS_TARGET_S),
                row("server VmRSS at end (MB)", [mb(r["memory"]["rss"]) for r in rounds], "{:.0f}", RSS_TARGET_MB),
                row("server VmHWM, peak (MB)", [mb(r["memory"]["hwm"]) for r in rounds], "{:.0f}", RSS_TARGET_MB),
                row("server processes", [r["memory"]["processes"] for r in rounds], "{:d}"),
                row("index builds logged", [r["builds"] for r in rounds], "{:d}")]
        header = [f"full scale, {title}", "target", *(f"round {i + 1}" for i in range(len(rounds))), "median", ""]
        out += [table(rows, header), ""]
    rows = []
    for label, values in (("BM25 alone, server ms", [v for r in bm25 for v in r["bm25_ms"]]),
                          ("BM25 beside Hybride, server ms", [v for r in both for v in r["bm25_ms"]]),
                          ("Hybride, server ms", [v for r in both for v in r["hybrid_ms"]])):
        if values:
            p50, p95 = p50_p95(values)
            rows.append([label, len(values), f"{p50:.1f}", f"{p95:.1f}", f"{max(values):.1f}"])
    out.append(table(rows, ["full-scale searches (cached indexes)", "n", "median", "p95", "max"]))
    pre = f"prebuild (python -m bsard_demo index): bm25 {prebuilt['bm25_index_s']:.1f} s"
    if "dense_index_s" in prebuilt:
        pre += (f", dense {prebuilt['dense_index_s']:.1f} s "
                f"({'embeddings found in the cache' if prebuilt['dense_from_cache'] else 'embeddings computed'})")
    return pre + "\n" + "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--searches", type=int, default=20, help="timed searches per round and setting")
    ap.add_argument("--only", choices=["sample", "full"])
    ap.add_argument("--synthetic", type=Path, default=None, help="full-scale dataset folder (default: generated "
                    "into <workdir>/synth with bench/synthetic.py)")
    ap.add_argument("--dense-cache", type=Path, help="a cache root whose dense/ entries are copied first")
    ap.add_argument("--no-dense", action="store_true", help="full scale: BM25 only")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "app")
    args = ap.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(machine_facts())
    print(f"rounds {args.rounds}, {args.searches} timed searches per round and setting; "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S')}")
    sample_out = full_out = None
    with sync_playwright() as p:
        browser = p.chromium.launch(**chromium_options())
        try:
            if args.only in (None, "sample"):
                ds = load_dataset("sample")
                questions = list(ds.questions("test")["question"]) + list(ds.questions("train")["question"])
                rounds = []
                for n in range(args.rounds):
                    rounds.append(sample_round(browser, workdir, n, args.searches, questions))
                    print(f"  sample round {n + 1}: load average {load_average()}", flush=True)
                sample_out = report_sample(rounds)
                print("\n" + sample_out, flush=True)
            if args.only in (None, "full"):
                data = (args.synthetic or workdir / "synth").resolve()
                if not (data / "articles.csv").is_file():
                    subprocess.run([sys.executable, str(REPO / "bench" / "synthetic.py"), "--out", str(data)],
                                   check=True, timeout=600)
                cache = workdir / "cache-full"
                dense = not args.no_dense
                prebuilt = prebuild_full(data, cache, args.dense_cache, dense)
                ds = load_dataset(data)
                questions = list(ds.questions("test")["question"])
                bm25, both = [], []
                for n in range(args.rounds):
                    bm25.append(full_round(browser, workdir, n, data, cache, args.searches, questions, False))
                    if dense:
                        both.append(full_round(browser, workdir, n, data, cache, args.searches, questions, True))
                    print(f"  full round {n + 1}: load average {load_average()}", flush=True)
                full_out = report_full(bm25, both, prebuilt)
                print("\n" + full_out, flush=True)
        finally:
            browser.close()
    print(f"\nfinished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
