"""Faults mid-flight, with real processes (docs/reliability.md, "10. Faults mid-flight").

    python bench/faults.py [--scenario kill-build,kill-download,full-disk,closed-tab,clear-cache,upload-flood]
        --data DIR [--bundle DIR] [--python PY] [--tree DIR] [--workdir bench/out/faults]

- ``kill-build``: ``python -m bsard_demo index --retriever bm25 --data DIR --index ''`` into a fresh
  cache, SIGKILLed at several moments of its build; after each kill the cache holds no entry or a
  whole one (``cache.verify``), and ``run`` on that cache writes the same run file, byte for
  byte, as an uninterrupted build's; then a server on that cache answers a deep link with the
  uninterrupted run's top 10.
- ``kill-download``: a substituted slow download of a small bundle (BM25 of the sample, exported
  here) that writes every file in place, ``bundle.json`` first, SIGKILLed midway; a server
  started with ``BSARD_INDEX`` on what was left says the bundle is incomplete or damaged, builds
  instead and answers like the whole bundle does; after the copy is finished it serves from
  the bundle (its notice says so), same answers.
- ``full-disk``: a server whose index cache lies on a 64 KB tmpfs (or, without the right to
  mount, under a 64 KB file-size limit, ``RLIMIT_FSIZE``): its first visitor gets one note
  that the index could not be saved and the right hits; the next visitors get the right hits
  and no note (the index stays in memory).
- ``closed-tab``: on DIR (with ``--bundle``), visitors press the Score page's built-in run and
  close the connection 0.3 s later; the server's log and RSS are read, then a visitor scores to
  the end and gets the CLI's R@100; RSS again once Streamlit has dropped the sessions (120 s).
- ``clear-cache`` (docs/reliability.md, section 12): a warm BM25 deep link (median of three), ``--cycles``
  sessions that each search and send ``clear_cache`` (any client can), then a fresh visitor's search: times,
  RSS growth, index builds the server logged. ``--tree``: another checkout's app (before), this client.
- ``upload-flood`` (section 12): one session drops ``--files`` files of 48 MB on the Score page: stored,
  refused (HTTP 413), RSS once the page is drawn, at the peak and 320 s after it left.

Bounded: every process has a timeout, every server is stopped. Exit status 0 when every check holds.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

if __package__ in (None, ""):  # python bench/faults.py (bench/_path.py)
    import _path  # noqa: F401

from _browser import AppServer, app_env  # noqa: E402
from _ws_client import SCORE_BUTTON, Visitor, check_columns, score_visit, search_visit  # noqa: E402
from bench.common import REPO, cpu_seconds, load_average, machine_facts, mb, process_tree, tree_memory_kb  # noqa: E402
from bench.load_ws import read_top  # noqa: E402

SCENARIOS = ("kill-build", "kill-download", "full-disk", "closed-tab", "clear-cache", "upload-flood")
KILL_FRACTIONS = (0.25, 0.5, 0.8)
WRITING_KILLS = (0.0, 0.005, 0.02, 0.05)
TINY_KB = 64


def cli(python: str, args: list[str], cache: Path, timeout: float = 1800, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_CACHE": str(cache), **env}
    return subprocess.run([python, "-m", "bsard_demo", *args], cwd=REPO, env=full, capture_output=True, text=True,
                          timeout=timeout)


def top10(run: Path) -> dict[str, list[str]]:
    return read_top(run, 10)


def first_question(data: str) -> tuple[str, str]:
    from bsard_demo.sources import load_dataset

    frame = load_dataset(data).questions("test")
    return str(frame["id"].iloc[0]), str(frame["question"].iloc[0])


def entries(cache: Path) -> tuple[list[Path], list[Path]]:
    """(entry folders, temporary/stale leftovers) of every kind in ``cache``."""
    from bsard_demo import cache as index_cache

    found, left = [], []
    for kind in (p for p in cache.iterdir() if p.is_dir()) if cache.is_dir() else ():
        for p in kind.iterdir():
            (left if ".tmp-" in p.name or ".stale-" in p.name else found).append(p)
    assert all(index_cache.verify(p) for p in found), f"an entry that does not verify: {found}"
    return found, left


def visit(url: str, question: str, expected: list[list[str]]):
    return asyncio.run(search_visit(url, {"q": question, "systems": "bm25"}, expected))


def temporary_entries(cache: Path) -> set[str]:
    """The temporary entry folders (``.KEY.tmp-…``) in ``cache`` now."""
    if not cache.is_dir():
        return set()
    return {p.name for kind in cache.iterdir() if kind.is_dir() for p in kind.iterdir() if ".tmp-" in p.name}


def kill_build(args, work: Path) -> dict:
    """Kills at fractions of an uninterrupted build's time, then while its entry is being
    written (``WRITING_KILLS``: s after a temporary entry folder appears in the cache)."""
    ref_cache, ref_run = work / "ref-cache", work / "ref.trec"
    shutil.rmtree(ref_cache, ignore_errors=True)
    started = time.perf_counter()
    done = cli(args.python, ["index", "--retriever", "bm25", "--data", args.data, "--index", ""], ref_cache)
    build_s = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    done = cli(args.python, ["run", "--data", args.data, "--index", "", "--no-progress", "--out", str(ref_run)],
               ref_cache)
    assert done.returncode == 0, done.stderr
    cache, rows, ok = work / "killed-cache", [], True
    shutil.rmtree(cache, ignore_errors=True)
    moments = [("timed", f * build_s) for f in KILL_FRACTIONS] + [("writing", d) for d in WRITING_KILLS]
    for how, at in moments:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_CACHE": str(cache)}
        proc = subprocess.Popen([args.python, "-m", "bsard_demo", "index", "--retriever", "bm25", "--data", args.data,
                                 "--index", ""], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        t0, seen, before = time.perf_counter(), False, temporary_entries(cache)
        if how == "timed":
            time.sleep(at)
        else:  # poll for the temporary folder, then wait `at` s
            while proc.poll() is None and not (seen := bool(temporary_entries(cache) - before)) \
                    and time.perf_counter() - t0 < 600:
                time.sleep(0.002)
            time.sleep(at)
        finished = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        found, left = entries(cache)
        rows.append({"kill": f"{how} {at:.2f} s", "killed after s": round(time.perf_counter() - t0, 2),
                     "temporary entry seen": seen, "had finished": finished, "entries": len(found),
                     "leftovers": len(left)})
        for entry in found if (how, at) != moments[-1] else ():  # the next kill starts from no entry again
            shutil.rmtree(entry)
    run = work / "after-kill.trec"
    done = cli(args.python, ["run", "--data", args.data, "--index", "", "--no-progress", "--out", str(run)], cache)
    same = done.returncode == 0 and run.read_bytes() == ref_run.read_bytes()
    ok &= same
    qid, question = first_question(args.data)
    with AppServer(app_env(args.data, cache), work / "kill-build-server.log", python=args.python) as server:
        v = visit(server.url, question, [top10(ref_run)[qid]])
    ok &= v.ok
    return {"ok": ok, "uninterrupted build s": round(build_s, 1), "kills": rows,
            "run after the kills == uninterrupted run (bytes)": same,
            "server after the kills: deep link == uninterrupted": v.ok, "failures": v.wrong + v.errors,
            "leftover temporary folders": [p.name for p in entries(cache)[1]]}


SLOW_COPY = """
import shutil, sys, time
from pathlib import Path
src, dst, pause = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
files = sorted((p for p in src.rglob('*') if p.is_file()), key=lambda p: p.name != 'bundle.json')
for p in files:  # bundle.json first, then every file in place, 4 KB at a time
    out = dst / p.relative_to(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(p, 'rb') as fin, open(out, 'wb') as fout:
        while chunk := fin.read(4096):
            fout.write(chunk); fout.flush(); time.sleep(pause)
print('copied', flush=True)
"""


def kill_download(args, work: Path) -> dict:
    bundle = work / "sample-bundle"
    shutil.rmtree(bundle, ignore_errors=True)
    done = cli(args.python,
               ["index", "--retriever", "bm25", "--data", "sample", "--index", "", "--export", str(bundle)],
               work / "export-cache")
    assert done.returncode == 0, done.stderr
    copy = work / "downloaded"
    shutil.rmtree(copy, ignore_errors=True)
    proc = subprocess.Popen([args.python, "-c", SLOW_COPY, str(bundle), str(copy), "0.05"], stdout=subprocess.PIPE)
    time.sleep(1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    sizes = {p.relative_to(copy).as_posix(): p.stat().st_size for p in copy.rglob("*") if p.is_file()}
    whole = {p.relative_to(bundle).as_posix(): p.stat().st_size for p in bundle.rglob("*") if p.is_file()}
    partial = sorted(n for n in whole if sizes.get(n) != whole[n])
    qid, question = first_question("sample")
    ref_run = work / "sample-ref.trec"
    assert cli(args.python, ["run", "--data", "sample", "--index", "", "--no-progress", "--out", str(ref_run)],
               work / "sample-ref-cache").returncode == 0
    expected = [top10(ref_run)[qid]]
    out = {"files killed short": partial}

    def serve(label: str) -> dict:
        cache = work / f"cache-{label}"
        shutil.rmtree(cache, ignore_errors=True)
        env = app_env("sample", cache, BSARD_INDEX=str(copy))
        with AppServer(env, work / f"download-{label}.log", python=args.python) as server:
            async def page():
                async with Visitor(server.url) as v:
                    return await v.open("search", {"q": question, "systems": "bm25"})
            p = asyncio.run(page())
        built = bool(entries(cache)[0])  # an index written into the cache: built, not read from the bundle
        notes = [a.body for _p, a in p.of_type("alert")] + [m.body for _p, m in p.of_type("markdown")
                                                             if "bundle" in m.body.lower() or "préconstruit" in m.body]
        wrong = check_columns(p.columns(), expected)
        return {"answers == uninterrupted": not wrong and not p.errors(), "built": built,
                "bundle notes": [n[:220] for n in notes if "ndex" in n and not n.startswith("Poids")][:3]}
    out["after the kill"] = serve("partial")
    finish = subprocess.run([args.python, "-c", SLOW_COPY, str(bundle), str(copy), "0"], capture_output=True,
                            timeout=300)
    assert finish.returncode == 0
    out["after the copy was finished"] = serve("whole")
    killed, finished = out["after the kill"], out["after the copy was finished"]
    out["ok"] = bool(partial) and killed["answers == uninterrupted"] and killed["built"] \
        and finished["answers == uninterrupted"] and not finished["built"]
    return out


def tiny_cache(work: Path) -> tuple[Path, str, object]:
    """A 64 KB tmpfs, else a folder to be written under a 64 KB file-size limit."""
    folder = work / "tiny"
    subprocess.run(["umount", str(folder)], capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TINY_KB}k", "tmpfs", str(folder)],
                             capture_output=True)
    if mounted.returncode == 0:
        return folder, f"tmpfs of {TINY_KB} KB", None

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (TINY_KB * 1024, TINY_KB * 1024))
    return folder, f"RLIMIT_FSIZE {TINY_KB} KB (mount refused: {mounted.stderr.decode().strip()[:120]})", limit


def full_disk(args, work: Path) -> dict:
    folder, how, limit = tiny_cache(work)
    ref_cache, ref_run = work / "disk-ref-cache", work / "disk-ref.trec"
    assert cli(args.python, ["run", "--data", args.data, "--index", "", "--no-progress", "--out", str(ref_run)],
               ref_cache).returncode == 0
    frame_top = top10(ref_run)
    from bsard_demo.sources import load_dataset

    frame = load_dataset(args.data).questions("test")
    questions = [(str(q), t) for q, t in zip(frame["id"], frame["question"])][:4]
    server = AppServer(app_env(args.data, folder / "cache"), work / "full-disk-server.log", python=args.python)
    if limit is not None:  # the limit on the server process only (its log is written by this process)
        server.start = _start_with(server, limit)
    visits = []
    try:
        with server:
            for qid, text in questions:
                async def page(text=text):
                    async with Visitor(server.url) as v:
                        return await v.open("search", {"q": text, "systems": "bm25"})
                p = asyncio.run(page())
                notes = [m.body for _p, m in p.of_type("markdown") if m.body.startswith("Note")]
                visits.append({"right hits": not check_columns(p.columns(), [frame_top[qid]]), "errors": p.errors(),
                               "notes": notes})
            alive = server.proc.poll() is None
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)
    ok = alive and all(v["right hits"] and not v["errors"] for v in visits) and len(visits[0]["notes"]) == 1 \
        and not any(v["notes"] for v in visits[1:])
    return {"ok": ok, "cache on": how, "visits": visits, "server alive": alive}


def _start_with(server: AppServer, limit):
    def start():
        cmd = [server.python, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1", "--server.port",
               str(server.port), "--server.headless", "true", "--server.fileWatcherType", "none"]
        with open(server.log, "wb") as out:
            server.started = time.perf_counter()
            server.proc = subprocess.Popen(cmd, cwd=server.cwd, env=server.env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True, preexec_fn=limit)
        return server
    return start


def closed_tab(args, work: Path) -> dict:
    cache = work / "tab-cache"
    shutil.rmtree(cache, ignore_errors=True)
    extra = {"BSARD_INDEX": str(Path(args.bundle).resolve())} if args.bundle else {}
    run = work / "tab-bm25.trec"
    assert cli(args.python, ["run", "--data", args.data, "--no-progress", "--out", str(run)], work / "tab-cli-cache",
               **extra).returncode == 0
    report = json.loads(cli(args.python, ["evaluate", "--data", args.data, "--format", "json", str(run)],
                            work / "tab-cli-cache").stdout)
    r100 = f"{100 * report['runs'][run.name]['recall@100']:.2f}"
    models = work / "no-models"
    models.mkdir(exist_ok=True)
    env = app_env(args.data, cache, BSARD_MODELS=str(models), **extra)
    out = {}
    with AppServer(env, work / "closed-tab-server.log", python=args.python) as server:
        warm = asyncio.run(search_visit(server.url, {"q": "congé", "systems": "bm25"}, [[]]))  # loads BM25
        out["rss after one search MB"] = round(mb(tree_memory_kb(server.pid)["rss"]))

        async def leave(n: int) -> None:
            async with Visitor(server.url, timeout=600) as v:
                await v.open("")
                page = await v.goto("score")
                button = page.button_id(SCORE_BUTTON)
                from streamlit.proto.BackMsg_pb2 import BackMsg

                msg = BackMsg()
                msg.rerun_script.page_script_hash = v.page_hash
                w = msg.rerun_script.widget_states.widgets.add()
                w.id, w.trigger_value = button, True
                await v.ws.send(msg.SerializeToString())
                await asyncio.sleep(0.3)  # the scoring has started; the tab is closed
        async def crowd():
            await asyncio.wait_for(asyncio.gather(*(leave(n) for n in range(args.tabs))), 600)
        start, cpu0 = time.time(), cpu_seconds(process_tree(server.pid))
        asyncio.run(crowd())
        peak = 0.0
        while time.time() - start < 60:
            peak = max(peak, mb(tree_memory_kb(server.pid)["rss"]))
            time.sleep(1)
        out["tabs closed during a scoring"] = args.tabs
        out["rss 60 s after MB"] = round(mb(tree_memory_kb(server.pid)["rss"]))
        out["peak in those 60 s MB"] = round(peak)
        out["server CPU s from the presses to 60 s after"] = round(cpu_seconds(process_tree(server.pid)) - cpu0, 1)
        cpu1 = cpu_seconds(process_tree(server.pid))
        full = asyncio.run(score_visit(server.url, r100, timeout=600))
        out["then one scoring to the end: s, server CPU s"] = (round(full.seconds or -1, 2),
                                                               round(cpu_seconds(process_tree(server.pid)) - cpu1, 1))
        out["a scoring to the end: R@100 == CLI"] = full.ok
        out["failures"] = full.wrong + full.errors
        time.sleep(args.settle)
        out[f"rss {args.settle:.0f} s later MB"] = round(mb(tree_memory_kb(server.pid)["rss"]))
        log = server.log_text()
    out["server log tracebacks"] = log.count("Traceback")
    out["ok"] = full.ok and warm.errors == [] and out["server log tracebacks"] == 0
    return out


async def _search(url: str, question: str, clear: bool = False) -> float:
    async with Visitor(url) as v:
        start = time.perf_counter()
        assert (await v.open("search", {"q": question, "systems": "bm25", "k": "10"})).columns(), "no hits"
        took = time.perf_counter() - start
        if clear:
            await v.clear_cache()
            await asyncio.sleep(0.2)
        return took


def one_visitor(args, work: Path) -> dict:
    """``clear-cache`` and ``upload-flood``: what one visitor can do to the others."""
    env = app_env(args.data, work / f"{args.scenario_now}-cache", BSARD_MODELS=str(work / "no-models"))
    with AppServer(env, work / f"{args.scenario_now}-server.log", python=args.python, cwd=args.tree) as server:
        rss = lambda: round(mb(tree_memory_kb(server.pid)["rss"]))  # noqa: E731
        return asyncio.run((clear_cache if args.scenario_now == "clear-cache" else upload_flood)(args, server, rss))


async def clear_cache(args, server: AppServer, rss) -> dict:
    from bsard_demo.sources import load_dataset

    ds = load_dataset(args.data, need_corpus=False)
    questions = list(ds.questions("test")["question"]) + list(ds.questions("train")["question"])
    await _search(server.url, questions[0])  # the first build
    warm = statistics.median([await _search(server.url, questions[0]) for _ in range(3)])
    rss0, builds = rss(), server.log_text().count(" building ")
    for i in range(args.cycles):
        await _search(server.url, questions[1 + i], clear=True)
    after = await _search(server.url, questions[0])
    out = {"warm s": round(warm, 3), "after s": round(after, 3), "rss growth MB": rss() - rss0,
           "builds during": server.log_text().count(" building ") - builds}
    return {**out, "ok": after <= max(3 * warm, 1.0) and out["rss growth MB"] <= 150}


async def upload_flood(args, server: AppServer, rss) -> dict:
    out = {"stored": 0, "refused": 0, "rss peak MB": 0}
    async with Visitor(server.url) as v:
        page = await v.open("score")
        out["rss warm MB"] = rss()  # the dataset loaded, the page drawn
        for i in range(args.files):
            try:
                await v.upload(page, [(f"f{i}.trec", bytes([48 + i % 10]) * (48 * 2**20))])
                out["stored"] += 1
            except urllib.error.HTTPError as exc:
                out["refused"] += exc.code == 413
            out["rss peak MB"] = max(out["rss peak MB"], rss())
    await asyncio.sleep(320)  # a disconnected session is kept 120 s, dropped by an idle give-back (150 or 300 s)
    return {**out, "rss 320 s after MB": rss(), "ok": out["refused"] > 0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default=",".join(SCENARIOS))
    ap.add_argument("--data", required=True)
    ap.add_argument("--bundle")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--tabs", type=int, default=10, help="closed-tab: visitors who leave during a scoring")
    ap.add_argument("--settle", type=float, default=150, help="closed-tab: seconds before the last RSS")
    ap.add_argument("--cycles", type=int, default=10, help="clear-cache: sessions that search and clear")
    ap.add_argument("--files", type=int, default=20, help="upload-flood: 48 MB files one session drops")
    ap.add_argument("--tree", type=Path, default=REPO, help="clear-cache, upload-flood: the app's checkout")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "faults")
    args = ap.parse_args(argv)
    args.data = str(Path(args.data).resolve()) if Path(args.data).exists() else args.data
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(machine_facts("streamlit"), flush=True)
    results, ok = {}, True
    for name in args.scenario.split(","):
        print(f"\n== {name} (started {time.strftime('%H:%M:%S')}, load average {load_average()})", flush=True)
        args.scenario_now = name
        result = {"kill-build": kill_build, "kill-download": kill_download, "full-disk": full_disk,
                  "closed-tab": closed_tab, "clear-cache": one_visitor, "upload-flood": one_visitor}[name](args, work)
        print(json.dumps(result, indent=1, ensure_ascii=False, default=str), flush=True)
        results[name], ok = result, ok and result["ok"]
    (work / "faults.json").write_text(json.dumps(results, indent=1, ensure_ascii=False, default=str))
    print(f"\n{'PASS' if ok else 'FAIL'}; finished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
