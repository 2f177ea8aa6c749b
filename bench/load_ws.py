"""Capacity and soak of the app with browserless visitors (``tests/_ws_client.py``): a ramp of
concurrent visitors, then a bounded soak with the server's RSS sampled every 10 s
(docs/reliability.md, "10. Capacity and soak"; docs/benchmarks.md, "Capacity").

    python bench/load_ws.py ramp --data DIR [--bundle DIR] [--python PY] [--steps 10,25,50,100]
        [--visits 3] [--servers 1] [--settle S] [--workdir bench/out/load-ws] [--tree DIR]
    python bench/load_ws.py soak --data DIR [--bundle DIR] [--python PY] --visitors N [--minutes 30]
        [--think 1] [--servers 1|2 --nginx] [--restart-at MIN] [--settle 150]

Each server is ``streamlit run app.py`` on 127.0.0.1 (``AppServer`` of ``tests/_browser.py``, the
interpreter ``--python``: the torch-free hosted venv for the figures), ``BSARD_DATA=DIR``,
``BSARD_INDEX=BUNDLE``, an empty ``BSARD_MODELS`` and one fresh ``BSARD_CACHE`` shared by all
servers. With ``--servers 2 --nginx`` the visitors go through nginx (``deploy/run.sh``: sticky
by client address, websocket upgrade) on 127.0.0.1:``--nginx-port``.

The visitors' link is the one the page writes for a first visitor (opened once without
``systems``: BM25 and the best system of ``bsard_demo/retrievers/defaults.py``: on frlaw-dev the
learned ranker with the deploy recipe's bundle, BM25 + the adapter + neighbours + structure with
a bundle of the adapter alone), with ``q`` set to a question of the dataset's test and train splits, distinct
within a step. Every search visit opens that deep link on a new connection (a new tab) and
checks each column's hit ids against a run written by the CLI (``python -m bsard_demo run``
with the same systems, weights and bundle, same interpreter); every 10th visit is a score
visit (the Score page's built-in BM25) checked against ``evaluate``'s R@100.

Reported per step: visits, page time p50/p95 (deep link to a finished run; the press for a
score visit), server search time p50/p95/p99 (the page's ``(serveur)`` captions), errors,
wrong answers, server CPU seconds per visit, peak RSS, load average before/after. The soak
writes ``rss.csv`` (every 10 s: time, each server's RSS, load average) and, once every
visitor has left, samples for ``--settle`` s more (Streamlit keeps a disconnected session
120 s). Bounded everywhere: fixed visits per step, a wall-clock deadline, a per-run timeout;
servers and nginx are always stopped. Exit status 0 only when no visit failed.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # python bench/load_ws.py (bench/_path.py)
    import _path  # noqa: F401

from _browser import AppServer, app_env, free_port  # noqa: E402

# Wrapped by hand (isort skips it): one name a line would repeat other benches' import blocks.
from bench.common import (REPO, cpu_seconds, json_option, load_average, machine_facts, mb,  # noqa: E402  # isort: skip
                          percentile, process_tree, table, tree_memory_kb, write_json)
from _ws_client import Visit, Visitor, score_visit, search_visit  # noqa: E402

SCORE_EVERY = 10
DEPLOY = REPO / "deploy"


# --------------------------------------------------------------------------- servers

class Fleet:
    """``n`` app servers sharing one cache (and nginx in front when asked); a context manager."""

    def __init__(self, args, workdir: Path) -> None:
        self.args, self.workdir = args, workdir
        self.cache = workdir / "server-cache"
        shutil.rmtree(self.cache, ignore_errors=True)
        models = workdir / "no-models"
        models.mkdir(parents=True, exist_ok=True)
        extra = {"BSARD_MODELS": str(models)}
        if args.bundle:
            extra["BSARD_INDEX"] = str(Path(args.bundle).resolve())
        if args.malloc_arena_max:  # glibc: at most N malloc arenas (default 8 per core), fewer pages kept
            extra["MALLOC_ARENA_MAX"] = str(args.malloc_arena_max)
        extra.update(e.split("=", 1) for e in args.server_env)
        self.env = app_env(str(Path(args.data).resolve()), self.cache, **extra)
        self.ports = [args.first_port + i for i in range(args.servers)] if args.nginx else [free_port()]
        self.servers = [AppServer(self.env, workdir / f"server-{i}.log", port=p, python=args.python, cwd=args.tree)
                        for i, p in enumerate(self.ports)]
        self.nginx: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "Fleet":
        for s in self.servers:
            s.start()
        for s in self.servers:
            s.wait_healthy(timeout=300)
        if self.args.nginx:
            self.url = f"http://127.0.0.1:{self.args.nginx_port}"
            env = {**os.environ, "NGINX_PORT": str(self.args.nginx_port), "APP_PORTS": " ".join(map(str, self.ports)),
                   "RUN_DIR": str(self.workdir / "nginx"), "PYTHON": sys.executable}
            self.nginx = subprocess.Popen(["bash", str(DEPLOY / "run.sh"), "nginx"], env=env, start_new_session=True)
            wait_http(self.url + "/_stcore/health", 30)
        else:
            self.url = self.servers[0].url
        return self

    def __exit__(self, *exc) -> None:
        if self.nginx is not None:
            os.killpg(self.nginx.pid, signal.SIGTERM)
            self.nginx.wait(timeout=15)
        for s in self.servers:
            s.stop()

    def pids(self) -> list[int]:
        return [p for s in self.servers if s.proc and s.proc.poll() is None for p in process_tree(s.pid)]

    def rss_mb(self) -> list[float]:
        return [mb(tree_memory_kb(s.pid)["rss"]) if s.proc and s.proc.poll() is None else 0.0 for s in self.servers]


def wait_http(url: str, timeout: float) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --------------------------------------------------------------------------- what visitors must see

def cli(python: str, args: list[str], env: dict, tree: Path = REPO) -> str:
    done = subprocess.run([python, "-m", "bsard_demo", *args], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"bsard_demo {' '.join(args)} failed: {done.stderr[-1500:]}")
    return done.stdout


def read_top(path: Path, k: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        qid, _q0, doc, rank, _score, _tag = line.split()
        if int(rank) <= k:
            out.setdefault(qid, []).append(doc)
    return out


def drawn_weights(label: str) -> list[str] | None:
    """The weights a hybrid column's heading says it fuses with (``Hybride RRF k=60 w=1,0.5,0.5 (…)``,
    Markdown-escaped), ``None`` when it names none (all 1)."""
    import re

    m = re.search(r"w=([0-9.,]+)", label.replace("\\", ""))
    return m.group(1).rstrip(",.").split(",") if m else None


def cli_systems(query: str, drawn: list[str] | None = None, labels: list[str] = ()) -> list[list[str]]:
    """``run`` options of each column of the link ``query`` (bm25; hybrid with its henc, w and
    struct; ranker, its model named by its column's label in ``labels``: « Classement appris
    (NAME) »; ``drawn``: the weights the page's hybrid column says it uses, which win over the link's)."""
    from urllib.parse import parse_qs

    params = parse_qs(query)
    out = []
    for system in ",".join(params.get("systems", ["bm25"])).split(","):
        if system == "bm25":
            out.append(["--retriever", "bm25"])
        elif system == "hybrid":
            encoders = [e.split(":", 1)[-1] for e in ",".join(params.get("henc", ["use"])).split(",")]
            opts = ["--retriever", "hybrid", "--encoder", ",".join(encoders)]
            weights = drawn or params.get("w")
            if weights:
                opts += ["--weights", ",".join(weights)]
            if params.get("struct", ["0"])[-1] == "1":
                opts.append("--structure")
            out.append(opts)
        elif system == "ranker":
            names = [label.replace("\\", "").split("(", 1)[-1].rstrip(")") for label in labels
                     if label.replace("\\", "").startswith("Classement appris (")]
            if not names:
                raise SystemExit(f"no « Classement appris (NAME) » column among {labels} (link {query})")
            out.append(["--retriever", "ranker", "--encoder", names[0]])
        else:
            raise SystemExit(f"the bench checks bm25, hybrid and ranker columns, not {system!r} (link {query})")
    return out


def prepare(args, fleet: Fleet, workdir: Path) -> dict:
    """The first visitor's link, the questions, each column's expected top k (CLI runs) and the
    CLI's R@100 of the built-in BM25 run."""
    from urllib.parse import parse_qs, urlencode

    from bsard_demo.sources import load_dataset

    async def first_link():
        async with Visitor(fleet.url, timeout=600) as v:
            page = await v.open("search", {"q": "bonjour"})
            return page.query_string or "", [c.label for c in page.columns()]
    link, labels = asyncio.run(first_link())

    async def warm(url: str) -> None:  # every process loads its indexes and opens each page before anything is
        async with Visitor(url, timeout=600) as v:  # measured: the Score page starts the upload reader's process
            await v.open("search", {"q": "bonjour", **parse_qs(link)})
        async with Visitor(url, timeout=600) as v:
            await v.open("score")
    for server in fleet.servers:
        asyncio.run(warm(server.url))
    drawn = next((drawn_weights(label) for label in labels if label.startswith("Hybride")), None)
    written = parse_qs(link).get("w")
    if drawn and written and [float(x) for x in drawn] != [float(x) for x in written]:
        print(f"WRONG: the first visitor's hybrid column fuses with w={','.join(drawn)} while the link the page "
              f"writes says w={','.join(written)}; the expected rankings use the column's weights", flush=True)
    params = {k: v for k, v in parse_qs(link).items() if k != "q"}
    k = int(params.get("k", ["10"])[0])
    ds = load_dataset(str(args.data))
    runs = workdir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    # the train questions are ranked by the CLI as a "test" split of a folder of links to the same
    # files: on its own train split the neighbours part leaves each question out of its neighbours,
    # which the page (searching a typed text) does not
    sources = [("test", Path(args.data))]
    if (Path(args.data) / "questions_train.csv").is_file():
        alias = workdir / "train-as-test"
        shutil.rmtree(alias, ignore_errors=True)
        alias.mkdir()
        for name, target in (("articles.csv", "articles.csv"), ("questions_train.csv", "questions_train.csv"),
                             ("questions_test.csv", "questions_train.csv")):
            (alias / name).symlink_to(Path(args.data).resolve() / target)
        sources.append(("train", alias))
    env = {**fleet.env, "BSARD_CACHE": str(workdir / "cli-cache")}
    columns = cli_systems(link, drawn, labels)
    items = []
    for split, folder in sources:
        frame = ds.questions(split)
        tops = []
        for n, opts in enumerate(columns):
            out = runs / f"{split}-column{n}.trec"
            cli(args.python, ["run", "--data", str(folder), "--split", "test", "--no-progress", "--depth", str(k),
                              *opts, "--out", str(out)], env, args.tree)
            tops.append(read_top(out, k))
        items += [(urlencode({"q": text, **params}, doseq=True), [top.get(str(qid), []) for top in tops])
                  for qid, text in zip(frame["id"], frame["question"])]
    default = runs / "bm25-default.trec"
    cli(args.python, ["run", "--data", str(args.data), "--no-progress", "--out", str(default)], env, args.tree)
    report = json.loads(cli(args.python, ["evaluate", "--data", str(args.data), "--format", "json", str(default)], env,
                            args.tree))
    r100 = f"{100 * report['runs'][default.name]['recall@100']:.2f}"
    print(f"link of a first visitor: ?{link}; {len(items)} questions; CLI R@100 of the built-in BM25 run {r100}",
          flush=True)
    return {"link": link, "labels": labels, "drawn weights": drawn, "items": items, "r100": r100}


# --------------------------------------------------------------------------- load

async def one_visit(url: str, n: int, plan: dict, timeout: float, headers: dict) -> Visit:
    if n % SCORE_EVERY == SCORE_EVERY - 1:
        return await score_visit(url, plan["r100"], timeout=timeout, headers=headers)
    query, expected = plan["items"][n % len(plan["items"])]
    return await search_visit(url, query, expected, timeout=timeout, headers=headers)


async def crowd(url: str, plan: dict, visitors: int, *, visits: int | None, until: float | None, first: int,
                think: float, timeout: float) -> list[Visit]:
    """``visitors`` at once, each making visits one after another (``visits`` each, or until the
    wall clock ``until``); visit numbers (so questions) are distinct across the crowd. Each
    visitor keeps one route cookie (``bsard_route``, as a browser keeps nginx's) for all its visits."""
    out: list[Visit] = []

    async def visitor(i: int) -> None:
        j, headers = 0, {"Cookie": f"bsard_route=visitor-{first}-{i}"}
        while (visits is None or j < visits) and (until is None or time.time() < until):
            out.append(await one_visit(url, first + j * visitors + i, plan, timeout, headers))
            j += 1
            if think:
                await asyncio.sleep(think)
    await asyncio.gather(*(visitor(i) for i in range(visitors)))
    return out


def summary(visits: list[Visit]) -> dict:
    search = [v.seconds for v in visits if v.kind == "search" and v.seconds is not None]
    score = [v.seconds for v in visits if v.kind == "score" and v.seconds is not None]
    server = [ms / 1000 for v in visits for ms in v.server_ms]
    width = max((len(v.server_ms) for v in visits), default=0)
    columns = [[v.server_ms[i] / 1000 for v in visits if len(v.server_ms) == width] for i in range(width)]
    return {"visits": len(visits), "search visits": sum(v.kind == "search" for v in visits),
            "score visits": sum(v.kind == "score" for v in visits),
            "page p50": percentile(search, 50), "page p95": percentile(search, 95),
            "score p50": percentile(score, 50), "score p95": percentile(score, 95),
            "server p50": percentile(server, 50), "server p95": percentile(server, 95),
            "server p99": percentile(server, 99),
            "server by column p50/p95/p99": [[percentile(c, q) for q in (50, 95, 99)] for c in columns],
            "errors": sum(bool(v.errors) for v in visits), "wrong": sum(bool(v.wrong) for v in visits),
            "failures": [f"{v.kind}: {(v.errors + v.wrong)[0][:300]}" for v in visits if not v.ok][:10]}


class Sampler:
    """RSS of every server (and the load average) every ``every`` s into ``rows``, in a thread."""

    def __init__(self, fleet: Fleet, every: float) -> None:
        import threading

        self.fleet, self.every, self.rows, self.peak = fleet, every, [], 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.t0 = time.time()

    def _loop(self) -> None:
        while not self.stop.is_set():
            rss = self.fleet.rss_mb()
            self.peak = max(self.peak, sum(rss))
            self.rows.append([round(time.time() - self.t0, 1), *[round(r, 1) for r in rss], *os.getloadavg()])
            self.stop.wait(self.every)

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=self.every + 5)


def ramp(args, fleet: Fleet, plan: dict) -> tuple[list[dict], bool]:
    rows, first = [], 0
    for step in args.steps:
        before_cpu, load_before, client_cpu = cpu_seconds(fleet.pids()), load_average(), time.process_time()
        with Sampler(fleet, 1.0) as sampler:
            start = time.perf_counter()
            visits = asyncio.run(crowd(fleet.url, plan, step, visits=args.visits, until=time.time() + args.step_timeout,
                                       first=first, think=0.0, timeout=args.run_timeout))
            wall = time.perf_counter() - start
        first += step * args.visits
        s = summary(visits)
        s.update(step=step, wall=wall, cpu_per_visit=(cpu_seconds(fleet.pids()) - before_cpu) / max(1, len(visits)),
                 client_cpu=time.process_time() - client_cpu,
                 peak_rss=sampler.peak, rss_after=sum(fleet.rss_mb()), load_before=load_before,
                 load_after=load_average())
        rows.append(s)
        print(f"  step {step}: {s['visits']} visits in {wall:.1f} s, page p95 {s['page p95']:.2f} s, "
              f"errors {s['errors']}, wrong {s['wrong']}, load average {s['load_after']}", flush=True)
    ok = all(r["errors"] == 0 and r["wrong"] == 0 for r in rows)
    return rows, ok


def settle(fleet: Fleet, seconds: float, peak: float) -> dict:
    """RSS every 10 s for ``seconds`` once every visitor has left (Streamlit keeps a disconnected
    session 120 s): the process's memory after a crowd, against ``peak``."""
    cpu = cpu_seconds(fleet.pids())
    with Sampler(fleet, 10.0) as sampler:
        time.sleep(seconds)
    rows = sampler.rows
    left = sum(rows[0][1:1 + len(fleet.servers)])
    end = sum(fleet.rss_mb())
    return {"settle_s": seconds, "peak_rss": peak, "rss_left": left, "rss_settled": end,
            "cpu_s": cpu_seconds(fleet.pids()) - cpu,
            "rss_min_settle": min(sum(r[1:1 + len(fleet.servers)]) for r in rows + [[0, end]]),
            "load": load_average(), "samples": rows}


def ramp_table(rows: list[dict]) -> str:
    body = [[r["step"], r["visits"], f"{r['page p50']:.2f}", f"{r['page p95']:.2f}", f"{r['score p50']:.2f}",
             " / ".join("/".join(f"{1000 * x:.0f}" for x in c) for c in r["server by column p50/p95/p99"]),
             r["errors"], r["wrong"], f"{r['cpu_per_visit']:.2f}", f"{r['client_cpu']:.1f}", f"{r['peak_rss']:.0f}",
             f"{r['wall']:.0f}",
             r["load_before"].split(",")[0] + " → " + r["load_after"].split(",")[0]] for r in rows]
    return table(body, ["visitors", "visits", "page p50 s", "page p95 s", "score p50 s",
                        "search p50/p95/p99 ms, by column", "errors", "wrong", "CPU s/visit", "client CPU s",
                        "peak RSS MB", "wall s", "load 1-min"])


def soak(args, fleet: Fleet, plan: dict, workdir: Path) -> tuple[dict, bool]:
    until = time.time() + 60 * args.minutes
    restart: dict = {}

    async def restarter():
        if args.restart_at is None:
            return
        await asyncio.sleep(60 * args.restart_at)
        victim = fleet.servers[-1]
        t = time.time()
        victim.stop()
        victim.start()
        await asyncio.to_thread(victim.wait_healthy, 300)
        restart.update(at=t - sampler.t0, down_s=time.time() - t, port=victim.port)

    async def run():
        visits, _ = await asyncio.gather(
            crowd(fleet.url, plan, args.visitors, visits=None, until=until, first=0, think=args.think,
                  timeout=args.run_timeout), restarter())
        return visits
    before_cpu = cpu_seconds(fleet.pids())
    with Sampler(fleet, 10.0) as sampler:
        visits = asyncio.run(run())
        left = time.time() - sampler.t0
        cpu = cpu_seconds(fleet.pids()) - before_cpu
        time.sleep(args.settle)  # every visitor is gone: disconnected sessions expire after 120 s
    s = summary(visits)
    rows = sampler.rows
    with open(workdir / "rss.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", *[f"rss_mb_server{i}" for i in range(len(fleet.servers))], "load1", "load5", "load15"])
        w.writerows(rows)

    def total_at(seconds: float) -> float:
        near = min(rows, key=lambda r: abs(r[0] - seconds))
        return sum(near[1:1 + len(fleet.servers)])
    s.update(visitors=args.visitors, minutes=args.minutes, cpu_per_visit=cpu / max(1, len(visits)),
             peak_rss=sampler.peak, rss_min5=total_at(300), rss_end_load=total_at(left),
             rss_settled=total_at(rows[-1][0]), left_at_s=left, restart=restart, load_end=load_average(),
             failed_near_restart=sum(1 for v in visits if not v.ok and restart
                                     and abs(v.started - sampler.t0 - restart["at"]) < restart["down_s"] + 30))
    s["growth_5_to_end"] = (s["rss_end_load"] - s["rss_min5"]) / s["rss_min5"] if s["rss_min5"] else float("nan")
    return s, s["errors"] == 0 and s["wrong"] == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("ramp", "soak"))
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--bundle", type=Path)
    ap.add_argument("--python", default=sys.executable, help="the servers' and the CLI's interpreter")
    ap.add_argument("--steps", type=lambda s: [int(x) for x in s.split(",")], default=[10, 25, 50, 100])
    ap.add_argument("--visits", type=int, default=3, help="ramp: visits per visitor and step")
    ap.add_argument("--visitors", type=int, default=50, help="soak: visitors at once")
    ap.add_argument("--minutes", type=float, default=30, help="soak: minutes of load (at most 30)")
    ap.add_argument("--think", type=float, default=1.0, help="soak: seconds between a visitor's visits")
    ap.add_argument("--settle", type=float, help="seconds of RSS sampled after the visitors left (soak: 150 "
                    "unless given; ramp: none unless given)")
    ap.add_argument("--restart-at", type=float, help="soak: minute at which the last server is restarted")
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--nginx", action="store_true", help="put nginx (deploy/run.sh) in front of the servers")
    ap.add_argument("--nginx-port", type=int, default=8580)
    ap.add_argument("--first-port", type=int, default=8581)
    ap.add_argument("--malloc-arena-max", type=int, help="MALLOC_ARENA_MAX of the servers (glibc)")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a variable added to the servers' environment (repeatable)")
    ap.add_argument("--run-timeout", type=float, default=120)
    ap.add_argument("--step-timeout", type=float, default=900, help="ramp: wall-clock bound of a step")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "load-ws")
    ap.add_argument("--tree", type=Path, default=REPO, help="the app's tree, servers and CLI (default: this one; "
                    "`git archive COMMIT | tar -x -C DIR` measures another commit with this client)")
    json_option(ap, "load_ws")
    args = ap.parse_args(argv)
    args.tree = args.tree.resolve()
    if args.minutes > 30:
        ap.error("--minutes is bounded at 30")
    if args.settle is None:
        args.settle = 150.0 if args.mode == "soak" else 0.0
    if args.servers > 1 and not args.nginx:
        ap.error("--servers 2 needs --nginx (one address for the visitors)")
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(machine_facts("streamlit", "websockets"))
    print(f"{args.mode} on {args.data} (bundle {args.bundle}), {args.servers} "
          f"server(s){' behind nginx' if args.nginx else ''}, tree {args.tree}, interpreter {args.python}; started "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    with Fleet(args, workdir) as fleet:
        print(f"servers healthy, RSS {[round(r) for r in fleet.rss_mb()]} MB, load average {load_average()}",
              flush=True)
        plan = prepare(args, fleet, workdir)
        warm_rss = sum(fleet.rss_mb())
        print(f"RSS once warm (indexes loaded, each page opened once, before any crowd; the server and its "
              f"upload reader): {warm_rss:.0f} MB", flush=True)
        if args.mode == "ramp":
            rows, ok = ramp(args, fleet, plan)
            print("\n" + ramp_table(rows))
            result = {"mode": "ramp", "rows": rows, "warm_rss": warm_rss}
            if args.settle:
                after = settle(fleet, args.settle, max(r["peak_rss"] for r in rows))
                print(f"after the visitors left: peak RSS {after['peak_rss']:.0f} MB, {after['rss_left']:.0f} MB as "
                      f"the last left, {after['rss_settled']:.0f} MB {args.settle:.0f} s later (lowest "
                      f"{after['rss_min_settle']:.0f}); server CPU meanwhile {after['cpu_s']:.2f} s; load average "
                      f"{after['load']}", flush=True)
                result["settle"] = after
        else:
            s, ok = soak(args, fleet, plan, workdir)
            print(json.dumps({k: v for k, v in s.items() if k != "failures"}, indent=1, default=str))
            result = {"mode": "soak", **s}
        logs = {f"server-{i}": s.log_text()[-3000:] for i, s in enumerate(fleet.servers)}
    for row in (result.get("rows") or [result]):
        for f in row["failures"]:
            print(f"FAILED: {f}")
    write_json(args.json, {**result, "args": {k: str(v) for k, v in vars(args).items()}, "server_logs": logs})
    print(f"\n{'PASS' if ok else 'FAIL'}; finished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
