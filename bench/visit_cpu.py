"""Server CPU of one visit, visit by visit and thread by thread, against a bare Streamlit page of
the same size measured the same way in the same run (docs/benchmarks.md, "CPU per visit").

    python bench/visit_cpu.py --data DIR [--bundle DIR ...] [--pages bare,landing,score,builtin,link]
        [--python PY] [--visits 20] [--env NAME=VALUE ...] [--flag server.OPTION=VALUE ...]
        [--py-spy DIR] [--tree DIR] [--upload RUN_FILE ...]

One ``streamlit run`` per server, started with the tree's own ``.streamlit/config.toml`` and no
setting on the command line but the address (``--flag`` adds one, e.g.
``server.fileWatcherType=none``): a server setting helps the bare page and the app alike. Servers:
``bare`` (a title, a text box, a button and 40 markdown cards, written to the work folder) and
one ``app.py`` per ``--bundle`` (``BSARD_INDEX``; none: the dataset alone). Pages, one visit of
each per round, interleaved so the machine's load falls on all alike:
``bare``; ``landing`` (``/``, no question), ``score`` (``/score``, nothing uploaded) and
``builtin`` (``/score``, then a press on « Évaluer ce système intégré »: BM25 over the test split,
scored and charted), ``upload`` (``/score``, then the ``--upload`` files dropped on the uploader, the
same names each visit: the first visit reads, checks and scores them, the others find their board
kept) and ``upload-new`` (the same bytes under new names each visit, ``run-NN-J.EXT``: a board of
its own, so every visit scores) on the first app server; ``link`` (the first visitor's deep link: the
systems the page chooses for a first visitor, ``q`` a test question) on every app server. Every visit is a new websocket
session (``tests/_ws_client.py``). Each server is warmed (indexes loaded, every page opened once).

For each visit: the page time and the server's CPU seconds (/proc/PID/stat, user + system),
split into the threads alive before and after it (/proc/PID/task: Streamlit's event loop, the
native libraries' pools) and the threads that ended during it (a page's script thread).
``--py-spy DIR`` records each server with py-spy into ``DIR/NAME.txt`` over the measured visits
(raw collapsed stacks, 100 Hz, ``--gil``: only the thread holding the GIL, so shares of the
server's Python time; on a loaded machine a sample's wall time is not CPU, so quote shares);
``--pages`` one kind per run gives a profile of that kind; ``--summarise FILE`` sums such a file
by frames of interest. ``--tree DIR`` runs ``DIR/app.py`` (``git archive COMMIT | tar -x -C
DIR``: another commit, same bench). ``--env`` adds variables to the servers' environment. No
correctness check (the ramp of ``load_ws.py`` has them); nothing is timed in the suite.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):  # python bench/visit_cpu.py (bench/_path.py)
    import _path  # noqa: F401

from _browser import AppServer, app_env  # noqa: E402
from _ws_client import SCORE_BUTTON, Visitor  # noqa: E402
from bench.common import REPO, cpu_seconds, json_option, load_average, machine_facts, write_json  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PAGES = ("bare", "landing", "score", "builtin", "upload", "upload-new", "link")
#: the reference: a bare Streamlit page the size of the Search page with ~40 hits
BARE_PAGE = '''import streamlit as st

st.title("Recherche")
q = st.text_input("Question", "")
st.button("Rechercher")
for i in range(40):
    st.markdown(f"**Article {i}** — " + "Le présent article s'applique aux contrats conclus à distance. " * 8)
'''
#: frames summed by ``--summarise`` (a substring of py-spy's ``function (file:line)`` frame)
FRAMES = ("_run_script", "exec_func_with_error_handling", "update_watched_modules", "update_watched_pages",
          "register_file_change_callback", "LocalSourcesWatcher", "AppSession.__init__", "_on_scriptrunner_event",
          "serialize", "SerializeToString", "enqueue", "marshall", "_compute_element_id", "compute_and_register",
          "cache_utils.py", "hashing.py", "update_hash", "pages/search.py", "pages/score.py", "app.py",
          "sidebar_data", "active_data", "fallback_banner", "fictional_notice", "show_bundle_notices",
          "inject_style", "tune_process", "set_page_config", "navigation", "labelled_questions",
          "neighbours_option", "article_codes", "search_page.py", "score_page.py", "state.py", "builds.py",
          "search_links.py", "ui.py", "render.py", "hosting_ui.py", "hosting.py", "answers.py", "passages.py",
          "highlight.py", "charts.py", "retrievers/", "search (", "encode", "faiss", "onnxruntime",
          "similar", "why", "dataframe", "arrow", "pandas", "altair", "markdown", "html (")


class Server(AppServer):
    """``AppServer`` without its command-line settings: the tree's ``.streamlit/config.toml``
    governs (plus ``flags``), and ``script`` may be another file than ``app.py``."""

    def __init__(self, env, log: Path, *, script: str, flags: list[str], cwd: Path, python: str) -> None:
        super().__init__(env, log, cwd=cwd, python=python)
        self.script, self.flags = script, flags

    def start(self) -> "Server":
        cmd = [self.python, "-m", "streamlit", "run", self.script, "--server.address", "127.0.0.1",
               "--server.port", str(self.port), *(f"--{f}" for f in self.flags)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self


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


async def first_link(url: str, warm_question: str) -> dict:
    """The systems the page writes into a first visitor's address; the indexes loaded (not measured)."""
    from urllib.parse import parse_qs

    async with Visitor(url, timeout=600) as v:
        first = await v.open("search", {"q": "bonjour"})
    link = {k: val for k, val in parse_qs(first.query_string or "").items() if k != "q"}
    async with Visitor(url, timeout=600) as v:
        await v.open("search", {"q": warm_question, **link})
    return link


async def one_visit(url: str, pid: int, path: str, query: dict, click: str | None = None,
                    upload: list[tuple[str, bytes]] | None = None) -> dict:
    before_t, before_p = threads_cpu(pid), cpu_seconds([pid])
    async with Visitor(url, timeout=600) as v:
        page = await v.open(path, query)
        if click:  # the page, then the press (its page time is the press's run)
            page = await v.click(page, click)
        if upload:  # the page, then the files dropped (upload URLs, PUT, the run that scores them)
            page = await v.upload(page, upload)
    await asyncio.sleep(1.0)  # the script thread ends, idle pools settle: their CPU counts for this visit
    after_t, after_p = threads_cpu(pid), cpu_seconds([pid])
    kept = {t: after_t[t] - before_t[t] for t in after_t if t in before_t}
    total = after_p - before_p
    return {"page_s": page.seconds, "cpu_s": total, "elements": len(page.elements),
            "bytes": sum(e.ByteSize() for e in page.elements.values()),
            "hits": sum(len(c.ids) for c in page.columns()), "server_ms": [c.server_ms for c in page.columns()],
            "errors": page.errors(),
            "ended_threads_s": total - sum(kept.values()) - sum(after_t[t] for t in after_t if t not in before_t),
            "threads_s": {t: round(d, 2) for t, d in sorted(kept.items(), key=lambda x: -x[1]) if d > 0}}


async def measure(servers: dict[str, Server], plan: list[tuple[str, str]], texts: list[str], visits: int,
                  spy: Path | None, upload: list[Path] = ()) -> tuple[dict, dict]:
    links = {}
    for name, server in servers.items():
        if name != "bare":
            links[name] = await first_link(server.url, texts[0])
            for path in ("", "score"):  # each page's first visit imports its modules (charts: altair)
                async with Visitor(server.url, timeout=600) as v:
                    await v.open(path, {})
        else:
            async with Visitor(server.url, timeout=600) as v:
                await v.open("", {})
    await asyncio.sleep(2)
    spies = []
    if spy:
        spy.mkdir(parents=True, exist_ok=True)
        for name, server in servers.items():
            spies.append(subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(server.pid), "--rate", "100",
                 "--format", "raw", "--output", str(spy / f"{name}.txt"), "--nonblocking", "--gil"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        await asyncio.sleep(2)
    rows: dict[str, list[dict]] = defaultdict(list)
    try:
        for i in range(visits):
            for kind, name in plan:
                server = servers[name]
                path, query = ("search", {"q": texts[1 + i], **links.get(name, {})}) if kind == "link" else \
                    ("", {}) if kind in ("bare", "landing") else ("score", {})
                files = None if not kind.startswith("upload") else \
                    [(f"run-{i:02d}-{j}{u.suffix}" if kind == "upload-new" else u.name, u.read_bytes())
                     for j, u in enumerate(upload)]
                rows[f"{kind} {name}" if kind == "link" else kind].append(await one_visit(
                    server.url, server.pid, path, query, SCORE_BUTTON if kind == "builtin" else None, files))
    finally:
        for p in spies:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=60)
    return {n: "&".join(f"{k}={','.join(v)}" for k, v in link.items()) for n, link in links.items()}, rows


def summarise(path: Path, frames=FRAMES) -> str:
    """Share of samples whose stack holds each frame of interest (py-spy raw: ``stack count``)."""
    total, hits = 0, defaultdict(int)
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        for f in frames:
            if f in stack:
                hits[f] += n
    lines = [f"{path.name}: {total} samples"]
    lines += [f"  {hits[f] / total:6.1%}  {f}" for f in sorted(hits, key=lambda f: -hits[f])] if total else []
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path)
    ap.add_argument("--bundle", type=Path, action="append", default=[], help="one app server per bundle")
    ap.add_argument("--pages", default="bare,landing,score,link", help=f"of {','.join(PAGES)}")
    ap.add_argument("--python", default=sys.executable, help="the servers' interpreter")
    ap.add_argument("--visits", type=int, default=20)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE added to the servers' environment")
    ap.add_argument("--flag", action="append", default=[], help="a Streamlit setting, e.g. server.runOnSave=false")
    ap.add_argument("--tree", type=Path, default=REPO, help="the app's tree (default: this one)")
    ap.add_argument("--py-spy", type=Path, help="record each server with py-spy into this folder")
    ap.add_argument("--upload", type=Path, action="append", default=[],
                    help="a run file of the upload and upload-new visits (repeat: several files at once)")
    ap.add_argument("--summarise", type=Path, nargs="+", help="only sum py-spy raw files by frames of interest")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "visit-cpu")
    json_option(ap, "visit_cpu")
    args = ap.parse_args(argv)
    if args.summarise:
        print("\n".join(summarise(p) for p in args.summarise))
        return 0
    if args.data is None:
        ap.error("--data is required")
    pages = [p for p in args.pages.split(",") if p]
    if unknown := set(pages) - set(PAGES):
        ap.error(f"unknown pages {sorted(unknown)}")
    if {"upload", "upload-new"} & set(pages) and not args.upload:
        ap.error("--upload RUN_FILE is required by the upload visits")
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    models = workdir / "no-models"
    models.mkdir(exist_ok=True)
    (workdir / "bare_page.py").write_text(BARE_PAGE, encoding="utf-8")
    base = {"BSARD_MODELS": str(models), **dict(e.split("=", 1) for e in args.env)}
    tree = args.tree.resolve()
    servers: dict[str, Server] = {}
    if "bare" in pages:
        servers["bare"] = Server(app_env(str(args.data.resolve()), workdir / "server-cache", **base),
                                 workdir / "bare.log", script=str(workdir / "bare_page.py"), flags=args.flag,
                                 cwd=tree, python=args.python)
    apps = []
    for bundle in args.bundle or [None]:
        name = bundle.name if bundle else "no-bundle"
        extra = {**base, **({"BSARD_INDEX": str(bundle.resolve())} if bundle else {})}
        servers[name] = Server(app_env(str(args.data.resolve()), workdir / "server-cache", **extra),
                               workdir / f"{name}.log", script="app.py", flags=args.flag, cwd=tree, python=args.python)
        apps.append(name)
    if not set(pages) - {"bare"}:
        servers = {"bare": servers["bare"]}
    plan = [("bare", "bare")] if "bare" in pages else []
    plan += [(k, apps[0]) for k in ("landing", "score", "builtin", "upload", "upload-new") if k in pages]
    plan += [("link", a) for a in apps] if "link" in pages else []
    print(machine_facts("streamlit"))
    print(f"tree {tree}, interpreter {args.python}, flags {args.flag}, env {args.env}; load {load_average()}",
          flush=True)
    loads = [load_average()]
    try:
        for s in servers.values():
            s.start()
        for s in servers.values():
            s.wait_healthy(timeout=300)
        texts = questions(args.data, args.visits + 1)
        links, rows = asyncio.run(measure(servers, plan, texts, args.visits, args.py_spy, args.upload))
        loads.append(load_average())
    finally:
        for s in servers.values():
            s.stop()
    # /proc counts CPU in 10 ms ticks: a visit's figure is ±0.01 s, so the ratio is taken on means
    bare = statistics.mean(r["cpu_s"] for r in rows["bare"]) if rows.get("bare") else None
    print(f"links: {links}")
    print(f"{'visit':28} {'n':>3} {'CPU s mean':>10} {'median':>6} {'min–max':>11} {'× bare':>7} {'page s':>7} "
          f"{'script thr s':>12} {'elements':>8} {'kB sent':>8} errors")
    for kind, rs in rows.items():
        cpu = [r["cpu_s"] for r in rs]
        mean = statistics.mean(cpu)
        ratio = f"{mean / bare:.2f}" if bare else "—"
        print(f"{kind:28} {len(rs):>3} {mean:>10.3f} {statistics.median(cpu):>6.2f} {min(cpu):>5.2f}–{max(cpu):<5.2f} "
              f"{ratio:>7} "
              f"{statistics.median(r['page_s'] for r in rs):>7.2f} "
              f"{statistics.median(r['ended_threads_s'] for r in rs):>12.3f} {rs[0]['elements']:>8} "
              f"{statistics.median(r['bytes'] for r in rs) / 1000:>8.1f} {sum(len(r['errors']) for r in rs)}")
    print(f"load average {loads[0]} → {loads[-1]}")
    if args.py_spy:
        print("\n".join(summarise(p) for p in sorted(args.py_spy.glob("*.txt"))))
    write_json(args.json, {"links": links, "rows": rows, "load": loads, "bare_mean": bare,
                           "args": {k: str(v) for k, v in vars(args).items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
