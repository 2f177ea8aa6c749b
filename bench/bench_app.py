"""Benchmark: the Streamlit app's speed in a real browser (docs/benchmarks.md, section "App").

    /work/venv/bin/python bench/bench_app.py [--rounds 3] [--searches 20] [--only sample|full|cold]
        [--synthetic DIR] [--articles N] [--dense-cache ROOT] [--warm-cache ROOT] [--bundle DIR] [--no-dense]
        [--workdir bench/out/app]

A real ``streamlit run app.py`` on 127.0.0.1 (free port) driven by Debian's Chromium through
Playwright (helpers in ``bench/browser.py``); nothing leaves the loopback interface. Chromium is
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

- **cold** (issue 9's hosted cold start; the synthetic corpus, ``--articles`` of them, 29,115 by
  default as the issue's real corpus): every measurement is a new server opened straight on a
  shared link, ``/?q=…&systems=bm25`` (*first BM25 hits*) or ``/?q=…&systems=bm25&systems=hybrid``
  (*first hybrid hits*: BM25 + dense ``use``, RRF), timed from the server process start to the
  question box (*first page*) and to all hit cards drawn. Three set-ups: an index bundle
  (``BSARD_INDEX``, exported once with ``python -m bsard_demo index --retriever hybrid --export``)
  with an **empty** ``BSARD_CACHE`` (the hosted cold start; target ≤ 45 s for the hybrid link, and
  nothing may be built: the cache must stay empty), no bundle with the warm cache (a developer
  machine), and no bundle with an empty cache for BM25 (its build; the dense build without a bundle
  is the encoding time of ``index``, printed, not repeated). The hit ids of every set-up must equal.

``--dense-cache ROOT`` copies ``ROOT/dense/*`` (embeddings computed elsewhere, e.g. by
``bench/bench_retrieval.py``) into the full-scale cache before prebuilding: the cache key is a
fingerprint of the corpus and the encoder, so only the matching entry is used, and it is checked
against its checksums when loaded. Without it the dense prebuild computes the embeddings (~5 min
of 2 CPUs for 22,633 articles with USE); ``--no-dense`` leaves dense and hybrid out.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # python bench/bench_app.py (bench/_path.py)
    import _path  # noqa: F401

from _browser import (  # noqa: E402
    QUESTION_BOX,
    RESULTS_READY_JS,
    SERVER_TIMES_JS,
    STEP_MS,
    SYSTEMS,
    TOP_K,
    VIEWPORT,
    AppServer,
    app_env,
    browser_missing,
    choose,
    chromium_options,
)
from bench.common import (  # noqa: E402
    REPO,
    app_machine_facts,
    cli,
    fresh_dir,
    json_option,
    load_average,
    mb,
    p50_p95,
    synthetic_corpus,
    table,
    target,
    tree_memory_kb,
    write_json,
)
from bsard_demo.sources import load_dataset  # noqa: E402

FIRST_PAGE_TARGET_S = target("app_first_page_s")
SEARCH_TARGET_MS = target("app_search_ms")
FIRST_HITS_TARGET_S = target("app_first_hits_s")
COLD_LINK_TARGET_S = target("app_cold_link_s")
RSS_TARGET_MB = target("app_rss_mb")


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
        return {"health_s": health, "first_page_s": first_page, "first_search_wall_ms": first_wall, "wall_ms": walls,
                "bm25_ms": bm25, "hybrid_ms": hybrid,
                "memory": tree_memory_kb(server.pid), "builds": server.log_text().count(": building ")}
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
                "hybrid_ms": [t[1] for t in shown] if hybrid else [], "memory": tree_memory_kb(server.pid),
                "builds": server.log_text().count(": building ")}
    finally:
        context.close()
        server.stop()


# --------------------------------------------------------------------------- cold start (shared links)

COLD_SETUPS = ("bundle, empty cache", "no bundle, warm cache", "no bundle, empty cache")


def link_path(question: str, systems: Sequence[str]) -> str:
    return "/?" + urllib.parse.urlencode([("q", question)] + [("systems", s) for s in systems])


def export_bundle(data: Path, cache: Path, dest: Path) -> dict:
    """The hybrid bundle of ``data``, exported from ``cache`` (built there first when missing)."""
    if (dest / "bundle.json").is_file():
        return {"bundle_s": None}
    start = time.perf_counter()
    done = cli(["index", "--retriever", "hybrid", "--data", str(data), "--no-progress", "--index", "",
                "--export", str(dest)], cache, timeout=7200)
    return {"bundle_s": time.perf_counter() - start, "bundle_log": done.stderr.strip().splitlines()[-1:]}


def cold_link(browser, workdir: Path, name: str, data: Path, cache: Path, bundle: Path | None, question: str,
              systems: Sequence[str]) -> dict:
    """A new server on ``data`` opened straight on the link of ``question`` × ``systems``."""
    extra = {"BSARD_INDEX": str(bundle) if bundle else ""}
    server = AppServer(app_env(str(data), cache, **extra), workdir / f"cold-{name}.log").start()
    context = browser.new_context(viewport=VIEWPORT, locale="fr-BE")
    columns = len(systems)
    try:
        server.wait_healthy()
        page = context.new_page()
        page.goto(server.url + link_path(question, systems), wait_until="commit", timeout=STEP_MS)
        page.get_by_label(QUESTION_BOX).wait_for(state="visible", timeout=10 * STEP_MS)
        first_page = time.perf_counter() - server.started
        page.wait_for_function(RESULTS_READY_JS, arg=[question, columns, columns * TOP_K], timeout=30 * STEP_MS,
                               polling=50)
        first_hits = time.perf_counter() - server.started
        hits = page.evaluate("""() => [...document.querySelectorAll('.bsard-hit')].map(e => e.dataset.article)""")
        notes = page.evaluate("""() => [...document.querySelectorAll("[data-testid='stAlertContentInfo'],"
            + "[data-testid='stAlertContentWarning']")].map(e => e.innerText.slice(0, 160))""")
        return {"first_page_s": first_page, "first_hits_s": first_hits, "hits": hits,
                "memory": tree_memory_kb(server.pid),
                "notes": [n for n in notes if "FICTIFS" not in n], "log": server.log_text()}
    finally:
        context.close()
        server.stop()


def cache_entries(cache: Path) -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for p in cache.glob("*/[!.]*") if p.is_dir())


def cold_round(browser, workdir: Path, n: int, data: Path, warm: Path, bundle: Path, question: str) -> dict:
    out = {}
    for setup in COLD_SETUPS:
        for systems in (("bm25",), ("bm25", "hybrid")):
            if setup == "no bundle, empty cache" and "hybrid" in systems:
                continue  # the corpus would be encoded: that is the index build time, printed apart
            cache = warm if setup == "no bundle, warm cache" else fresh_dir(workdir / f"cold-cache-{n}")
            name = f"{n}-{setup.replace(', ', '-').replace(' ', '_')}-{'+'.join(systems)}"
            got = cold_link(browser, workdir, name, data, cache, bundle if setup.startswith("bundle") else None,
                            question, systems)
            got["cache_after"] = cache_entries(cache) if cache != warm else None
            out[(setup, systems)] = got
    return out


def report_cold(rounds: list[dict], facts: dict) -> tuple[str, bool]:
    ok = True
    rows = []
    for setup in COLD_SETUPS:
        for systems in (("bm25",), ("bm25", "hybrid")):
            runs = [r[(setup, systems)] for r in rounds if (setup, systems) in r]
            if not runs:
                continue
            pages = [x["first_page_s"] for x in runs]
            hits = [x["first_hits_s"] for x in runs]
            target = COLD_LINK_TARGET_S if setup.startswith("bundle") and "hybrid" in systems else None
            verdict_text = "" if target is None else verdict(statistics.median(hits), target)
            ok &= verdict_text != "MISSED"
            rows.append([f"{setup}: {' + '.join(systems)}", f"{statistics.median(pages):.2f}",
                         " / ".join(f"{v:.1f}" for v in hits), f"{statistics.median(hits):.2f}",
                         "" if target is None else f"≤ {target:g}", verdict_text,
                         f"{max(mb(x['memory']['rss']) for x in runs):.0f}"])
    lines = [table(rows, ["cold server opened on a shared link", "first page s (median)", "first hits s (rounds)",
                          "median", "target", "", "RSS max MB"]), ""]
    reference = {systems: rounds[0][("no bundle, warm cache", systems)]["hits"]
                 for systems in (("bm25",), ("bm25", "hybrid"))}
    for r_i, r in enumerate(rounds, 1):
        for (setup, systems), x in r.items():
            same = x["hits"] == reference[systems]
            ok &= same
            if not same:
                lines.append(f"round {r_i}: {setup} {systems}: hits DIFFER from the warm cache's")
            if setup.startswith("bundle"):
                built = x["cache_after"]
                ok &= not built and not x["notes"]
                if built or x["notes"]:
                    lines.append(f"round {r_i}: {setup} {systems}: cache written {built}, notices {x['notes']}")
    lines.append("hit ids identical in every set-up and round: " + ("yes" if all(
        x["hits"] == reference[s] for r in rounds for (_, s), x in r.items()) else "NO"))
    lines.append("bundle rounds: empty cache stayed empty and no notice was shown: " + ("yes" if all(
        not x["cache_after"] and not x["notes"] for r in rounds for (st, _), x in r.items() if st.startswith("bundle"))
        else "NO"))
    lines.append(facts["text"])
    return "\n".join(lines), ok


# --------------------------------------------------------------------------- report

def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


def report_sample(rounds: list[dict]) -> str:
    rows = []
    first = [r["first_page_s"] for r in rounds]
    rows.append(["first page ready (s)", f"≤ {FIRST_PAGE_TARGET_S:g}", *(f"{v:.2f}" for v in first),
                 f"{statistics.median(first):.2f}", verdict(statistics.median(first), FIRST_PAGE_TARGET_S)])
    health = [r["health_s"] for r in rounds]
    rows.append(["  of which server health (s)", "", *(f"{v:.2f}" for v in health), f"{statistics.median(health):.2f}",
                 ""])
    fs = [r["first_search_wall_ms"] / 1000 for r in rounds]
    rows.append(["first search, builds BM25+dense (s)", "", *(f"{v:.2f}" for v in fs), f"{statistics.median(fs):.2f}",
                 ""])
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


def run_cold(browser, args, workdir: Path, results: dict) -> bool:
    data = (args.synthetic or workdir / f"synth-{args.articles}").resolve()
    synthetic_corpus(data, articles=args.articles)
    warm = (args.warm_cache or workdir / f"cache-{args.articles}").resolve()
    if args.dense_cache is not None:
        prebuild_full(data, warm, args.dense_cache, True)
    bundle = (args.bundle or workdir / f"bundle-{args.articles}").resolve()
    made = export_bundle(data, warm, bundle)
    from bsard_demo import bundles

    opened = bundles.open_bundle(bundle)
    ds = load_dataset(data)
    question = str(ds.questions("test")["question"].iloc[0])
    facts = {"text": f"corpus {data} ({len(ds.articles):,} articles); bundle {bundle}: {opened.summary()}"
                     + (f"; exported in {made['bundle_s']:.1f} s" if made.get("bundle_s") else "")}
    rounds = []
    for n in range(args.rounds):
        rounds.append(cold_round(browser, workdir, n, data, warm, bundle, question))
        print(f"  cold round {n + 1}: load average {load_average()}", flush=True)
    results["cold"] = {"facts": facts, "made": made,
                       "rounds": [{k: {**v, "log": None} for k, v in r.items()} for r in rounds]}
    text, ok = report_cold(rounds, facts)
    print("\n" + text, flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--searches", type=int, default=20, help="timed searches per round and setting")
    ap.add_argument("--only", choices=["sample", "full", "cold"])
    ap.add_argument("--articles", type=int, default=29115, help="cold: synthetic articles (default 29,115, the "
                    "issue's real corpus; 22,633 is BSARD)")
    ap.add_argument("--warm-cache", type=Path, default=None, help="cold: a cache root holding (or to hold) the "
                    "corpus's BM25 and dense use indexes (default <workdir>/cache-<articles>)")
    ap.add_argument("--bundle", type=Path, default=None, help="cold: an exported hybrid bundle of the corpus "
                    "(default: exported into <workdir>/bundle-<articles> from the warm cache)")
    ap.add_argument("--synthetic", type=Path, default=None, help="full-scale dataset folder (default: generated "
                    "into <workdir>/synth with bench/synthetic.py)")
    ap.add_argument("--dense-cache", type=Path, help="a cache root whose dense/ entries are copied first")
    ap.add_argument("--no-dense", action="store_true", help="full scale: BM25 only")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "app")
    json_option(ap, "bench_app")
    args = ap.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(app_machine_facts())
    print(f"rounds {args.rounds}, {args.searches} timed searches per round and setting; "
          f"started {time.strftime('%Y-%m-%d %H:%M:%S')}")
    sample_out = full_out = None
    results: dict = {}
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
                results["sample"] = rounds
                sample_out = report_sample(rounds)
                print("\n" + sample_out, flush=True)
            if args.only in (None, "full"):
                data = (args.synthetic or workdir / "synth").resolve()
                synthetic_corpus(data)
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
                results["full"] = {"prebuilt": prebuilt, "bm25": bm25, "bm25_and_hybrid": both}
                full_out = report_full(bm25, both, prebuilt)
                print("\n" + full_out, flush=True)
            if args.only == "cold":
                ok = run_cold(browser, args, workdir, results)
                if not ok:
                    print("\nCOLD START: FAIL", flush=True)
        finally:
            browser.close()
    print(f"\nfinished {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load_average()}")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
