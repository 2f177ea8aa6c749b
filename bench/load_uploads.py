"""Load test: simultaneous large uploads on ONE app server with every retriever loaded (issue 9,
"Bounded memory"); run through ``bench/load_app.py --scenario uploads``.

    /work/venv/bin/python bench/load_app.py --scenario uploads --data DIR --bundle DIR
        [--sessions 10] [--depth 5000] [--slots 1] [--timeout 900] [--workdir bench/out/app-load]

One ``streamlit run app.py`` on ``--data`` (a synthetic corpus of ``bench/synthetic.py``) with
``BSARD_INDEX=--bundle`` (BM25 + dense ``use``, exported with ``python -m bsard_demo index
--retriever hybrid --export``) and an empty ``BSARD_CACHE``; ``BSARD_LARGE_UPLOADS=--slots``
(the app's large-upload slots; 1 is the default).

1. *warm-up*: one session opens ``/?q=…&systems=bm25&systems=dense&systems=hybrid``, which loads
   every retriever (BM25, dense, hybrid); the server's RSS is read then ("retrievers loaded");
2. *uploads*: ``--sessions`` sessions, all at once, open the Score page and upload their own run
   (``make_run`` of ``bench/synthetic.py``: the test split × ``--depth`` articles, seed 100 + i,
   so no two files are alike and none is served from another's scoring), then wait for the
   metrics table; each records whether it saw the waiting notice of the large-upload slot. The
   R@100 shown must equal ``python -m bsard_demo evaluate --format json`` on that file.

The server's VmRSS (process tree, /proc) is sampled every 0.2 s during the uploads; reported:
before, the maximum sampled, after, and VmHWM. Target: the maximum ≤ 1.5 GB. Exit status 0 only
when every session passed and the target holds.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import threading
import time
import urllib.parse
from pathlib import Path

from _browser import (
    ERRORS_JS,
    QUESTION_BOX,
    RESULTS_READY_JS,
    RUNS_INPUT,
    STEP_MS,
    TABLE_JS,
    TOP_K,
    VIEWPORT,
    AppServer,
    app_env,
    chromium_options,
    first_row_cell,
)
from bench.common import cli, load_average, mb, p50_p95, table, target, tree_memory_kb, write_json

RSS_TARGET_MB = target("uploads_rss_mb")
WAIT_NOTICE = "Un autre fichier volumineux est en cours d'évaluation"
STATE_JS = """() => {
  const table = [...document.querySelectorAll("[data-testid='stDataFrame']")].find(e =>
    [...e.querySelectorAll("th, [role='columnheader']")].some(c => c.textContent.trim() === 'R@100'));
  const idle = !document.querySelector("[data-testid='stStatusWidget']")
    && !document.querySelector("[data-stale='true']");
  const waiting = [...document.querySelectorAll("[data-testid='stAlertContentInfo']")]
    .some(e => e.innerText.includes(%s));
  return {scored: idle && !!table, waiting};
}""" % json.dumps(WAIT_NOTICE)


def prepare(workdir: Path, data: Path, sessions: int, depth: int) -> list[dict]:
    """One run file per session and the R@100 the CLI computes on it (memoised by file digest)."""
    from _synthetic import make_run
    from bsard_demo.sources import load_dataset

    ds = load_dataset(data)
    runs = workdir / f"runs-{depth}"
    runs.mkdir(parents=True, exist_ok=True)
    memo_path = runs / "expected.json"
    memo = json.loads(memo_path.read_text()) if memo_path.is_file() else {}
    tasks = []
    for i in range(sessions):
        path = runs / f"session{i}_depth{depth}.trec"
        if not path.is_file():
            make_run(ds, path, depth=depth, seed=100 + i, tag=f"session{i}")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in memo:
            out = cli(["evaluate", "--data", str(data), "--format", "json", str(path)], workdir / "cli-cache",
                      timeout=1800)
            memo[digest] = json.loads(out.stdout)["runs"][path.name]["recall@100"]
            memo_path.write_text(json.dumps(memo))
        tasks.append({"number": i, "path": path, "size": path.stat().st_size, "expected": f"{100 * memo[digest]:.2f}"})
    return tasks


class RssSampler:
    def __init__(self, server: AppServer, every: float = 0.2) -> None:
        self.server, self.every = server, every
        self.samples: list[int] = []
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append(tree_memory_kb(self.server.pid)["rss"])
            self.times.append(time.perf_counter() - start)
            self._stop.wait(self.every)

    def timeline(self, step: float = 15.0) -> str:
        """The maximum RSS (MB) of each ``step`` seconds since the uploads started."""
        cells: dict[int, int] = {}
        for t, kb in zip(self.times, self.samples):
            cells[int(t // step)] = max(cells.get(int(t // step), 0), kb)
        return ", ".join(f"{int(i * step)}-{int((i + 1) * step)} s: {mb(kb):.0f}" for i, kb in sorted(cells.items()))

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


async def warm_up(browser, url: str, question: str) -> float:
    context = await browser.new_context(viewport=VIEWPORT, locale="fr-BE")
    page = await context.new_page()
    start = time.perf_counter()
    query = urllib.parse.urlencode([("q", question), ("systems", "bm25"), ("systems", "dense"), ("systems", "hybrid")])
    await page.goto(f"{url}/?{query}", wait_until="commit")
    await page.get_by_label(QUESTION_BOX).wait_for(state="visible", timeout=10 * STEP_MS)
    await page.wait_for_function(RESULTS_READY_JS, arg=[question, 3, 3 * TOP_K], polling=100, timeout=30 * STEP_MS)
    seconds = time.perf_counter() - start
    await context.close()
    return seconds


async def upload(browser, url: str, task: dict, go: asyncio.Event, timeout_s: float) -> dict:
    out = {"number": task["number"], "failures": [], "waited": False, "seconds": None, "shown": None}
    context = await browser.new_context(viewport=VIEWPORT, locale="fr-BE")
    page = await context.new_page()
    page.set_default_timeout(STEP_MS)
    try:
        await page.goto(f"{url}/score", wait_until="commit")
        await page.locator(RUNS_INPUT).wait_for(state="attached",
                                                                                   timeout=5 * STEP_MS)
        await go.wait()
        start = time.perf_counter()
        await page.locator(RUNS_INPUT).set_input_files(str(task["path"]))
        while True:
            state = await page.evaluate(STATE_JS)
            out["waited"] |= state["waiting"]
            if state["scored"]:
                break
            if time.perf_counter() - start > timeout_s:
                raise TimeoutError(f"not scored within {timeout_s:.0f} s")
            await asyncio.sleep(0.2)
        out["seconds"] = time.perf_counter() - start
        header, cells = await page.evaluate(TABLE_JS)
        out["shown"] = first_row_cell(header, cells, "R@100")
        if not same_figure(out["shown"], task["expected"]):
            out["failures"].append(f"R@100 shown {out['shown']} != CLI {task['expected']}")
        errors = await page.evaluate(ERRORS_JS)
        if errors:
            out["failures"].append(f"error elements: {errors}")
    except Exception as exc:  # noqa: BLE001 - a failed session is reported, the others go on
        out["failures"].append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    finally:
        await context.close()
    return out


def same_figure(shown: str | None, expected: str) -> bool:
    """The table's cell (``%.2f``; its text mirror may drop a trailing zero) equals the CLI's figure."""
    try:
        return shown is not None and abs(float(shown.replace(",", ".")) - float(expected)) < 0.005
    except ValueError:
        return False


async def load(server: AppServer, tasks: list[dict], question: str, timeout_s: float) -> dict:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(**chromium_options())
        try:
            warm_s = await warm_up(browser, server.url, question)
            loaded = tree_memory_kb(server.pid)
            go = asyncio.Event()
            running = [asyncio.create_task(upload(browser, server.url, t, go, timeout_s)) for t in tasks]
            await asyncio.sleep(3.0)  # every session is on the Score page: upload together
            with RssSampler(server) as sampler:
                start = time.perf_counter()
                go.set()
                outcomes = await asyncio.gather(*running)
                wall = time.perf_counter() - start
            done = sorted(o["seconds"] for o in outcomes if o["seconds"] is not None)
            return {"warm_s": warm_s, "loaded": loaded, "outcomes": outcomes, "wall": wall,
                    "samples": sampler.samples, "after": tree_memory_kb(server.pid), "timeline": sampler.timeline(),
                    "done_at": done}
        finally:
            await browser.close()


def run(args, workdir: Path) -> int:
    from bsard_demo import bundles
    from bsard_demo.sources import load_dataset

    data = args.data.resolve()
    bundle = bundles.open_bundle(args.bundle.resolve())
    tasks = prepare(workdir, data, args.sessions, args.depth)
    question = str(load_dataset(data).questions("test")["question"].iloc[0])
    cache = workdir / "uploads-cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    env = app_env(str(data), cache, BSARD_INDEX=str(bundle.root), BSARD_LARGE_UPLOADS=str(args.slots))
    print(f"{args.sessions} sessions upload {tasks[0]['size'] / 1e6:.1f} MB runs ({args.depth} articles per question) "
          f"at once; bundle {bundle.summary()}; {args.slots} large-upload slot(s)", flush=True)
    with AppServer(env, workdir / "uploads-server.log") as server:
        before = tree_memory_kb(server.pid)
        got = asyncio.run(load(server, tasks, question, args.timeout))
        log = server.log_text()
    outcomes = got["outcomes"]
    failed = [o for o in outcomes if o["failures"]]
    peak = max(got["samples"]) if got["samples"] else 0
    times = [o["seconds"] for o in outcomes if o["seconds"] is not None]
    rows = [["server started (health)", f"{mb(before['rss']):.0f}", ""],
            [f"every retriever loaded (warm-up link, {got['warm_s']:.1f} s)", f"{mb(got['loaded']['rss']):.0f}", ""],
            [f"uploads: maximum of {len(got['samples'])} samples (0.2 s)", f"{mb(peak):.0f}",
             "ok" if mb(peak) <= RSS_TARGET_MB else "MISSED"],
            ["after the uploads", f"{mb(got['after']['rss']):.0f}", ""],
            ["VmHWM (process peak, whole life)", f"{mb(got['after']['hwm']):.0f}", ""]]
    print("\n" + table(rows, ["server VmRSS", "MB", f"≤ {RSS_TARGET_MB:g} MB"]))
    p50, p95 = p50_p95(times) if times else (float("nan"), float("nan"))
    rows = [[f"{len(outcomes) - len(failed)}/{len(outcomes)}",
             f"{sum(1 for o, t in zip(outcomes, tasks) if same_figure(o['shown'], t['expected']))}/{len(outcomes)}",
             f"{sum(o['waited'] for o in outcomes)}/{len(outcomes)}", f"{p50:.1f}", f"{p95:.1f}",
             f"{max(times) if times else float('nan'):.1f}", f"{got['wall']:.1f}"]]
    print("\n" + table(rows, ["sessions ok", "R@100 = CLI", "saw the waiting notice", "upload → table p50 s",
                              "p95 s", "max s", "wall s"]))
    print(f"server VmRSS, maximum per 15 s since the uploads started (MB): {got['timeline']}")
    print("sessions' tables drawn at (s): " + ", ".join(f"{t:.0f}" for t in got["done_at"]))
    print(f"index builds logged: {[line.split(': ', 1)[-1] for line in log.splitlines() if ': building ' in line]}")
    print("written to the empty cache: "
          f"{sorted(p.parent.name + '/' + p.name for p in cache.glob('*/[!.]*')) or 'nothing'}")
    for o in failed:
        print(f"session {o['number']} FAILED: {'; '.join(o['failures'])}")
    ok = not failed and mb(peak) <= RSS_TARGET_MB
    write_json(getattr(args, "json", None), {"scenario": "uploads", "ok": ok, "rss_before_kb": before, "tasks": tasks,
                                            **{k: v for k, v in got.items()}})
    print(f"\n{'PASS' if ok else 'FAIL'}; finished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    return 0 if ok else 1
