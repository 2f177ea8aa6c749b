"""Load test: simultaneous browser sessions on ONE app server (docs/reliability.md, "## 7. Load").

    /work/venv/bin/python bench/load_app.py [--sessions 10] [--searches 2] [--rounds 1]
        [--timeout 600] [--workdir bench/out/app-load]
    /work/venv/bin/python bench/load_app.py --scenario uploads --data DIR --bundle DIR [--sessions 10]
        [--depth 5000] [--slots 1]      (large uploads at once: bench/load_uploads.py)

One ``streamlit run app.py`` with the bundled sample (``BSARD_DATA=sample``) and a fresh,
empty ``BSARD_CACHE`` on 127.0.0.1 (free port); one headless Debian Chromium with one browser
context (own cookies, own Streamlit session) per simulated visitor; all sessions are driven at
the same time by asyncio (Playwright's async API). Helpers: ``bench/browser.py``.

Each session ``i``, all starting together (so their first searches race to build the BM25
index):
1. *open*: loads the app until the question box shows;
2. *search* × ``--searches``: types its own questions of the sample's test split (numbers
   ``i``, ``i + sessions``, … modulo the split) and clicks « Rechercher »; the article ids of
   the 10 hit cards must equal the top 10 of ``build_retriever(RetrieverSpec("bm25"),
   sample).search(question, 10)`` computed here (the first hit at least);
3. *score page*: follows the sidebar link « Évaluer des runs »;
4. *score*: even sessions upload their own run file made by ``python -m bsard_demo run --data
   sample --tag session<i>`` (distinct bytes, so no session reuses another's scoring), odd
   sessions click « Évaluer ce système intégré » (BM25, the menu's first entry); the R@100 cell of the metrics table
   must equal ``python -m bsard_demo evaluate --format json`` on that file (for the built-in
   run: on the CLI's default ``run`` file), to the 2 decimals shown.

Reported: p50/p95/max latency per action, the server's VmRSS before and after and its VmHWM
(/proc, process and children), and how many times the server log says ``building …`` (the
registry logs each index build; the BM25 index must be built once for all sessions).
Bounded: fixed numbers of sessions and actions, a per-step timeout (60 s) and an overall one
(``--timeout``); the server is always stopped. Exit status 0 only when every check passed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # python bench/load_app.py (bench/_path.py)
    import _path  # noqa: F401

# Wrapped by hand (isort skips it): one name a line would repeat bench_app.py's and load_uploads.py's imports.
from _browser import (ERRORS_JS, HIT_IDS_JS, QUESTION_BOX, RESULTS_READY_JS, RUNS_INPUT, SCORED_JS,  # noqa: E402  # isort: skip
                      SERVER_TIMES_JS, SETTLED_JS, STEP_MS, TABLE_JS, TOP_K, VIEWPORT, AppServer, app_env,
                      browser_missing, chromium_options, first_row_cell)
from bench.common import (REPO, app_machine_facts, cli, cpu_seconds, json_option, load_average, mb,  # noqa: E402  # isort: skip
                          p50_p95, process_tree, table, tree_memory_kb, write_json)
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402

ACTIONS = ("open", "search", "score page", "score")


@dataclass
class Task:
    """What session ``number`` does and what it must see."""

    number: int
    questions: list[str]
    expected_hits: list[list[str]]
    run_file: Path | None          # None: the built-in BM25 button
    expected_r100: str             # "%.2f" of 100 × recall@100


@dataclass
class Outcome:
    number: int
    times: dict[str, list[float]] = field(default_factory=lambda: {a: [] for a in ACTIONS})
    failures: list[str] = field(default_factory=list)
    first_hits_ok: int = 0
    top10_ok: int = 0
    r100_shown: str | None = None
    top10_diffs: list[str] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)


class CpuMeter:
    """CPU seconds used by the server's process tree and by the rest of this script's descendants
    (Chromium and the Playwright driver), from /proc; call :meth:`sample` now and then, since a
    process's time is lost from /proc when it exits."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.seen: dict[int, tuple[str, float]] = {}

    def sample(self) -> None:
        server = set(process_tree(self.server_pid))
        for pid in process_tree(os.getpid()):
            if pid == os.getpid():
                continue
            used = cpu_seconds([pid])
            who = "server" if pid in server else "browser"
            if used >= self.seen.get(pid, (who, 0.0))[1]:
                self.seen[pid] = (who, used)

    def totals(self, baseline: dict[str, float] | None = None) -> dict[str, float]:
        out = {"server": 0.0, "browser": 0.0}
        for who, used in self.seen.values():
            out[who] += used
        if baseline:
            out = {k: v - baseline.get(k, 0.0) for k, v in out.items()}
        return out


def prepare(workdir: Path, sessions: int, searches: int) -> list[Task]:
    """Questions, expected hits (library) and run files with their expected R@100 (CLI)."""
    cli_cache = workdir / "cli-cache"  # not the server's: the server builds its own index
    ds = load_dataset("sample")
    test = list(ds.questions("test")["question"])
    bm25 = build_retriever(RetrieverSpec("bm25"), ds, cache_root=cli_cache)
    runs = workdir / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    files = {}
    for i in range(0, sessions, 2):
        path = runs / f"bm25_session{i}.trec"
        cli(["run", "--data", "sample", "--no-progress", "--tag", f"session{i}", "--out", str(path)], cli_cache)
        files[i] = path
    default = runs / "bm25.trec"
    cli(["run", "--data", "sample", "--no-progress", "--out", str(default)], cli_cache)
    report = json.loads(cli(["evaluate", "--data", "sample", "--format", "json", str(default),
                             *map(str, files.values())], cli_cache).stdout)["runs"]
    tasks = []
    for i in range(sessions):
        qs = [test[(i + j * sessions) % len(test)] for j in range(searches)]
        hits = [[h.article_id for h in bm25.search(q, 10)] for q in qs]
        run_file = files.get(i)
        r100 = report[(run_file or default).name]["recall@100"]
        tasks.append(Task(i, qs, hits, run_file, f"{100 * r100:.2f}"))
    return tasks


async def _timed(outcome: Outcome, action: str, coro) -> None:
    start = time.perf_counter()
    await coro
    outcome.times[action].append(time.perf_counter() - start)


async def session(browser, url: str, task: Task, go: asyncio.Event) -> Outcome:
    out = Outcome(task.number)
    context = await browser.new_context(viewport=VIEWPORT, locale="fr-BE")
    page = await context.new_page()
    page.set_default_timeout(STEP_MS)
    try:
        await go.wait()

        async def open_app():
            await page.goto(url, wait_until="commit")
            await page.get_by_label(QUESTION_BOX).wait_for(state="visible")
        await _timed(out, "open", open_app())

        for question, expected in zip(task.questions, task.expected_hits):
            await page.get_by_label(QUESTION_BOX).fill(question)

            async def search():
                await page.get_by_role("button", name="Rechercher").click()
                await page.wait_for_function(RESULTS_READY_JS, arg=[question, 1, TOP_K], polling=50)  # noqa: B023 -- awaited in this iteration
            await _timed(out, "search", search())
            out.server_ms += await page.evaluate(SERVER_TIMES_JS)
            shown = await page.evaluate(HIT_IDS_JS)
            if shown[:1] == expected[:1]:
                out.first_hits_ok += 1
            else:
                out.failures.append(f"first hit {shown[:1]} != library {expected[:1]} for {question!r}")
            if shown == expected:
                out.top10_ok += 1
            else:
                out.top10_diffs.append(f"{question[:60]!r}: page {shown} vs library {expected}")

        async def score_page():
            await page.locator("[data-testid='stSidebarNavLink']").filter(has_text="Évaluer des runs").click()
            await page.locator(RUNS_INPUT).wait_for(state="attached")
            await page.wait_for_function(SETTLED_JS, polling=50)
        await _timed(out, "score page", score_page())

        async def score():
            if task.run_file is not None:
                await page.locator(RUNS_INPUT).set_input_files(str(task.run_file))
            else:
                # the built-in system's menu opens on BM25, its first entry
                await page.get_by_role("button", name="Évaluer ce système intégré").click()
            await page.wait_for_function(SCORED_JS, polling=50)
        await _timed(out, "score", score())
        header, cells = await page.evaluate(TABLE_JS)
        out.r100_shown = first_row_cell(header, cells, "R@100")
        if out.r100_shown != task.expected_r100:
            out.failures.append(f"R@100 shown {out.r100_shown} != CLI {task.expected_r100} (table {header} {cells})")
        errors = await page.evaluate(ERRORS_JS)
        if errors:
            out.failures.append(f"error elements on the page: {errors}")
    except Exception as exc:  # noqa: BLE001 - a failed session is reported, the others go on
        out.failures.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    return out


async def load_round(tasks: list[Task], server: AppServer, overall_s: float) -> tuple[list[Outcome], dict]:
    """Run every session at once; returns the outcomes and the CPU seconds used meanwhile."""
    from playwright.async_api import async_playwright

    meter = CpuMeter(server.pid)
    async with async_playwright() as p:
        browser = await p.chromium.launch(**chromium_options())
        try:
            go = asyncio.Event()
            running = [asyncio.create_task(session(browser, server.url, t, go)) for t in tasks]
            await asyncio.sleep(1.0)  # every context is open: start them together
            meter.sample()
            baseline = meter.totals()

            async def sampler():
                while True:
                    await asyncio.sleep(1.0)
                    meter.sample()
            sampling = asyncio.create_task(sampler())
            go.set()
            done, pending = await asyncio.wait(running, timeout=overall_s)
            sampling.cancel()
            meter.sample()
            cpu = meter.totals(baseline)
            for t in pending:
                t.cancel()
            outcomes = [t.result() for t in done]
            for task, t in zip(tasks, running):
                if t in pending:
                    outcomes.append(Outcome(task.number, failures=[f"not finished within {overall_s:.0f} s"]))
            return sorted(outcomes, key=lambda o: o.number), cpu
        finally:
            await browser.close()


def report(rounds: list[dict], sessions: int) -> tuple[str, bool]:
    rows = []
    for action in ACTIONS:
        values = [v for r in rounds for o in r["outcomes"] for v in o.times[action]]
        if values:
            p50, p95 = p50_p95(values)
            rows.append([action, len(values), f"{p50:.2f}", f"{p95:.2f}", f"{max(values):.2f}"])
    values = [v / 1000 for r in rounds for o in r["outcomes"] for v in o.server_ms]
    if values:
        p50, p95 = p50_p95(values)
        rows.append(["  search, server time shown", len(values), f"{p50:.3f}", f"{p95:.3f}", f"{max(values):.3f}"])
    lines = [table(rows, [f"action ({sessions} sessions at once)", "n", "p50 s", "p95 s", "max s"]), ""]
    rows, ok = [], True
    for n, r in enumerate(rounds, 1):
        outcomes = r["outcomes"]
        failed = [o for o in outcomes if o.failures]
        searches = sum(len(o.times["search"]) for o in outcomes)
        ok &= not failed and r["bm25_builds"] == 1
        rows.append([f"round {n}", f"{len(outcomes) - len(failed)}/{len(outcomes)}",
                     f"{sum(o.first_hits_ok for o in outcomes)}/{searches}",
                     f"{sum(o.top10_ok for o in outcomes)}/{searches}",
                     f"{sum(1 for o, t in zip(outcomes, r['tasks']) if o.r100_shown == t.expected_r100)}"
                     f"/{len(outcomes)}",
                     r["bm25_builds"], f"{mb(r['before']['rss']):.0f}", f"{mb(r['after']['rss']):.0f}",
                     f"{mb(r['after']['hwm']):.0f}", f"{r['seconds']:.1f}"])
    lines.append(table(rows, ["", "sessions ok", "1st hit = lib", "top 10 = lib", "R@100 = CLI", "BM25 builds",
                              "RSS before MB", "RSS after MB", "HWM MB", "wall s"]))
    for n, r in enumerate(rounds, 1):
        lines.append(f"round {n}: server log, index builds: {r['building'] or ['none']}")
        shown = sorted({(o.r100_shown, t.expected_r100, "upload" if t.run_file else "built-in")
                        for o, t in zip(r["outcomes"], r["tasks"])}, key=str)
        lines.append(f"round {n}: R@100 shown on the page vs CLI, by kind of run: "
                     + "; ".join(f"{kind} {page} vs {cli_value}" for page, cli_value, kind in shown))
        lines.append(f"round {n}: CPU seconds during the load: server {r['cpu']['server']:.1f}, "
                     f"Chromium + Playwright driver {r['cpu']['browser']:.1f} (wall {r['seconds']:.1f} s, 2 cores)")
        for o in r["outcomes"]:
            for d in o.top10_diffs:
                lines.append(f"round {n}: session {o.number}: top 10 differs (first hit equal): {d}")
            for f in o.failures:
                lines.append(f"round {n}: session {o.number} FAILED: {f}")
    return "\n".join(lines), ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--searches", type=int, default=2, help="searches per session")
    ap.add_argument("--rounds", type=int, default=1, help="rounds, each on a new server with an empty cache")
    ap.add_argument("--timeout", type=float, default=600, help="overall seconds per round")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "app-load")
    json_option(ap, "load_app")
    ap.add_argument("--scenario", choices=("visits", "uploads"), default="visits",
                    help="visits: the sample, searches and scoring (default); uploads: large uploads at once "
                         "(bench/load_uploads.py)")
    ap.add_argument("--data", type=Path, help="uploads: the synthetic corpus folder")
    ap.add_argument("--bundle", type=Path, help="uploads: its hybrid index bundle (index --export)")
    ap.add_argument("--depth", type=int, default=5000, help="uploads: articles per question of each run (default 5000)")
    ap.add_argument("--slots", type=int, default=1, help="uploads: BSARD_LARGE_UPLOADS of the server (default 1)")
    args = ap.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    if args.scenario == "uploads":
        if args.data is None or args.bundle is None:
            ap.error("--scenario uploads needs --data and --bundle")
        from bench import load_uploads

        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        print(app_machine_facts())
        return load_uploads.run(args, workdir)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(app_machine_facts())
    print(f"{args.sessions} sessions × ({args.searches} searches + 1 scoring), {args.rounds} round(s); "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    tasks = prepare(workdir, args.sessions, args.searches)
    rounds = []
    for n in range(args.rounds):
        cache = workdir / f"server-cache-{n}"
        shutil.rmtree(cache, ignore_errors=True)
        with AppServer(app_env("sample", cache), workdir / f"server-{n}.log") as server:
            before = tree_memory_kb(server.pid)
            start = time.perf_counter()
            outcomes, cpu = asyncio.run(load_round(tasks, server, args.timeout))
            seconds = time.perf_counter() - start
            after = tree_memory_kb(server.pid)
            log = server.log_text()
        building = [line.split(": ", 1)[-1] for line in log.splitlines() if ": building " in line]
        rounds.append({"tasks": tasks, "outcomes": outcomes, "cpu": cpu, "before": before, "after": after,
                       "seconds": seconds, "building": building,
                       "bm25_builds": sum(b.startswith("building bm25 index") for b in building)})
        print(f"  round {n + 1} done in {seconds:.1f} s, load average {load_average()}", flush=True)
    text, ok = report(rounds, args.sessions)
    print("\n" + text)
    write_json(args.json, {"scenario": "visits", "ok": ok, "rounds": rounds})
    print(f"\n{'PASS' if ok else 'FAIL'}; finished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
