"""Benchmark: a bundle carrying a trained ONNX model, served by the torch-free hosted install
(issue 14, items 5 and 6): bundle sizes, identical runs in both installs, server memory, cold start.

    /work/main/.venv/bin/python bench/bench_onnx_hosted.py --hosted /work/venv-hosted/bin/python \
        --data bench/out/onnx/sub --cache bench/out/onnx/cache \
        --model bench/out/onnx/model-fp32 --model-int8 bench/out/onnx/model-int8 \
        [--name frlaw-minilm-default] [--rounds 2] [--workdir bench/out/onnx]

Runs after ``bench/bench_onnx.py`` (which writes the sub-corpus ``<workdir>/sub`` and its fp32 and
int8 embeddings in ``<workdir>/cache``). Steps:

1. bundles: the model copies are copied again under ``--name`` (the name a bundle records a
   model by: its folder's base name) and ``index --retriever hybrid --encoder DIR --export`` is
   run from this (torch) venv for fp32 and int8; their sizes (whole bundle, the model's part);
2. runs: ``run --retriever dense|hybrid --encoder NAME --index BUNDLE`` (``--depth 100``) with this
   venv and with ``--hosted`` (the torch-free venv), each with an empty cache; run files compared
   byte for byte and ``evaluate`` on both (figures compared); also ``run --retriever bm25`` in
   the hosted venv: peak RSS (``wait4``) of BM25 alone vs BM25 + the bundled trained hybrid;
3. app: ``streamlit run app.py`` from the hosted venv, empty ``BSARD_CACHE``, ``BSARD_INDEX`` =
   the fp32 bundle, opened straight on ``/?q=…&systems=bm25`` and then (new server)
   ``/?q=…&systems=bm25&systems=hybrid&henc=NAME``, timed from the process start to the hits
   (Debian Chromium via playwright), the servers' VmRSS after the hits, the notices shown, a
   screenshot of the hybrid page (``docs/screenshots/onnx-hosted-hybrid.png`` with --screenshot).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # python bench/bench_onnx_hosted.py (bench/_path.py)
    import _path  # noqa: F401

from bench.bench_onnx import dir_mb, load_average, table  # noqa: E402

COLD_TARGET_S = 45.0
MEMORY_TARGET_MB = 200.0


def cli(python: str, args: list[str], cache: Path, bundle: Path | None, log: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_CACHE": str(cache), "BSARD_INDEX": str(bundle or "")}
    t0 = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen([python, "-m", "bsard_demo", *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    text = log.read_text(errors="replace")
    if code != 0:
        raise RuntimeError(f"{python} -m bsard_demo {' '.join(args)} failed ({code}): {text[-1500:]}")
    return {"s": time.perf_counter() - t0, "rss_mb": usage.ru_maxrss / 1024, "stderr": text}


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosted", required=True, help="python of the torch-free venv")
    ap.add_argument("--data", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-int8", default=None)
    ap.add_argument("--name", default="frlaw-minilm-default")
    ap.add_argument("--link-encoder", default=None,
                    help="the encoder as the Search page's links name it (default bundle:NAME)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", default=str(REPO / "bench/out/onnx"))
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: bundles,runs,app")
    ap.add_argument("--screenshot", action="store_true")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    work = Path(args.workdir).resolve()
    data, cache = Path(args.data).resolve(), Path(args.cache).resolve()
    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": load_average(),
                 "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                          text=True).stdout.strip()}
    print(f"{out['date']} commit {out['commit']} load {out['load_start']}", flush=True)
    probe = subprocess.run([args.hosted, "-c", "import importlib.util as u; print([m for m in ('torch', "
                            "'sentence_transformers', 'transformers', 'onnxruntime', 'tokenizers') "
                            "if u.find_spec(m)])"],
                           capture_output=True, text=True)
    out["hosted_importable"] = probe.stdout.strip()
    print(f"hosted venv finds: {out['hosted_importable']}", flush=True)

    bundles = {"fp32": work / "bundle-fp32", "int8": work / "bundle-int8"}
    logs = fresh(work / "logs")
    # -- 1. bundles ------------------------------------------------------------------------------
    if "bundles" not in skip:
        sizes = {}
        for kind, src in (("fp32", args.model), ("int8", args.model_int8)):
            if not src:
                continue
            named = work / f"named-{kind}" / args.name
            if named.exists():
                shutil.rmtree(named)
            shutil.copytree(src, named)
            if bundles[kind].exists():
                shutil.rmtree(bundles[kind])
            got = cli(sys.executable, ["index", "--retriever", "hybrid", "--encoder", str(named), "--data", str(data),
                                       "--no-progress", "--index", "", "--export", str(bundles[kind])], cache, None,
                      logs / f"index-{kind}.log")
            models = bundles[kind] / "models"
            sizes[kind] = {"export_s": round(got["s"], 1), "bundle_mb": round(dir_mb(bundles[kind]), 2),
                           "model_mb": round(dir_mb(models), 2) if models.exists() else None,
                           "log_tail": got["stderr"].strip().splitlines()[-3:]}
            print(f"bundle {kind}: {sizes[kind]}", flush=True)
        out["bundles"] = sizes
    # -- 2. runs in both installs --------------------------------------------------------------------
    if "runs" not in skip:
        runs = {}
        for retriever in ("dense", "hybrid", "bm25"):
            for install, python in (("torch venv", sys.executable), ("hosted venv", args.hosted)):
                if retriever == "bm25" and install == "torch venv":
                    continue
                tag = f"{retriever}-{install.split()[0]}"
                run_file = work / f"runs-{install.split()[0]}" / f"{retriever}.trec"  # same name: same evaluate rows
                run_file.parent.mkdir(exist_ok=True)
                enc = [] if retriever == "bm25" else ["--encoder", args.name]
                got = cli(python, ["run", "--retriever", retriever, *enc, "--data", str(data), "--split", "test",
                                   "--depth", "100", "--no-progress", "--out", str(run_file), "--tag", "x"],
                          fresh(work / f"cache-{tag}"), bundles["fp32"], logs / f"run-{tag}.log")
                built = sorted(str(p.relative_to(work / f"cache-{tag}")) for p in (work / f"cache-{tag}").glob("*/*"))
                evaluated = subprocess.run([python, "-m", "bsard_demo", "evaluate", str(run_file), "--data", str(data),
                                            "--split", "test"], cwd=REPO, capture_output=True, text=True,
                                           env={**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_INDEX": ""}).stdout
                runs[tag] = {"s": round(got["s"], 1), "peak_rss_mb": round(got["rss_mb"], 1), "file": str(run_file),
                             "written_to_cache": built, "evaluate": evaluated.strip(),
                             "notes": [line for line in got["stderr"].splitlines() if "note" in line.lower()][:5]}
                print(f"run {tag}: {got['s']:.1f} s, peak RSS {got['rss_mb']:.0f} MB, cache written: {built}",
                      flush=True)
        for retriever in ("dense", "hybrid"):
            a = Path(runs[f"{retriever}-torch"]["file"]).read_bytes()
            b = Path(runs[f"{retriever}-hosted"]["file"]).read_bytes()
            runs[f"{retriever} identical files"] = a == b
            runs[f"{retriever} identical evaluate"] = (runs[f"{retriever}-torch"]["evaluate"]
                                                       == runs[f"{retriever}-hosted"]["evaluate"])
        out["runs"] = runs
        print(table([[t, v["s"], v["peak_rss_mb"],
                      "nothing" if not v["written_to_cache"] else ",".join(v["written_to_cache"])]
                     for t, v in runs.items() if isinstance(v, dict)],
                    ["run (depth 100, test)", "wall s", "peak RSS MB", "written to the empty cache"]))
        for retriever in ("dense", "hybrid"):
            print(f"{retriever}: run files identical torch venv vs hosted venv: "
                  f"{runs[f'{retriever} identical files']}; evaluate output identical: "
                  f"{runs[f'{retriever} identical evaluate']}")
        print(runs["hybrid-hosted"]["evaluate"])
        print(f"hosted RSS: BM25 alone {runs['bm25-hosted']['peak_rss_mb']} MB, BM25 + trained hybrid "
              f"{runs['hybrid-hosted']['peak_rss_mb']} MB: "
              f"+{runs['hybrid-hosted']['peak_rss_mb'] - runs['bm25-hosted']['peak_rss_mb']:.0f} MB (target <= "
              f"{MEMORY_TARGET_MB:.0f})")
    # -- 3. app ----------------------------------------------------------------------------------
    if "app" not in skip:
        out["app"] = app_check(args, data, bundles["fp32"], work)
    out["load_end"] = load_average()
    print(f"load average at the end: {out['load_end']}")
    (work / "bench_onnx_hosted.json").write_text(json.dumps(out, indent=2, default=str))
    print(f"wrote {work / 'bench_onnx_hosted.json'}")
    return 0


def app_check(args, data: Path, bundle: Path, work: Path) -> dict:
    import pandas as pd
    from playwright.sync_api import sync_playwright

    from bench.browser import RESULTS_READY_JS, STEP_MS, AppServer, app_env, chromium_options

    question = str(pd.read_csv(data / "questions_test.csv")["question"].iloc[0])
    hosted = args.hosted

    links = {"bm25": ("bm25",), "bm25 + trained hybrid": ("bm25", "hybrid")}
    results: dict = {name: [] for name in links}
    with sync_playwright() as p:
        browser = p.chromium.launch(**chromium_options())
        try:
            for r in range(args.rounds):
                for name, systems in links.items():
                    cache = fresh(work / f"app-cache-{r}")
                    server = AppServer(app_env(str(data), cache, BSARD_INDEX=str(bundle)),
                                       work / "logs" / f"app-{r}-{systems[-1]}.log", python=hosted).start()
                    context = browser.new_context(viewport={"width": 1440, "height": 1000}, locale="fr-BE")
                    params = [("q", question)] + [("systems", s) for s in systems]
                    if "hybrid" in systems:
                        params.append(("henc", args.link_encoder or f"bundle:{args.name}"))
                    try:
                        server.wait_healthy(timeout=300)
                        page = context.new_page()
                        page.goto(server.url + "/?" + urllib.parse.urlencode(params), wait_until="commit",
                                  timeout=STEP_MS)
                        page.wait_for_function(RESULTS_READY_JS, arg=[question, len(systems), len(systems) * 10],
                                               timeout=10 * STEP_MS, polling=50)
                        hits_s = time.perf_counter() - server.started
                        time.sleep(0.5)
                        got = {"first_hits_s": round(hits_s, 2), "memory_kb": server.memory_kb(),
                               "hits": page.evaluate("() => [...document.querySelectorAll('.bsard-hit')].map(e => "
                                                     "e.dataset.article)"),
                               "columns": page.evaluate("() => [...document.querySelectorAll('h3, h4, "
                                                        "[data-testid=\"stMarkdownContainer\"] strong')].map(e => "
                                                        "e.innerText).slice(0, 40)"),
                               "notes": page.evaluate("""() => [...document.querySelectorAll(
                                   "[data-testid='stAlertContentInfo'],"
                                   + "[data-testid='stAlertContentWarning'],[data-testid='stAlertContentError']")]
                                   .map(e => e.innerText.slice(0, 300))"""),
                               "cache_after": sorted(str(x.relative_to(cache)) for x in cache.glob("*/*"))}
                        if args.screenshot and "hybrid" in systems and r == 0:
                            shot = REPO / "docs/screenshots/onnx-hosted-hybrid.png"
                            page.screenshot(path=str(shot), full_page=False)
                            got["screenshot"] = str(shot)
                    except Exception as exc:  # noqa: BLE001 - reported, not fatal
                        got = {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "log": server.log_text()[-1500:]}
                    finally:
                        context.close()
                        server.stop()
                    results[name].append(got)
                    shown = {k: v for k, v in got.items() if k not in ('columns', 'log')}
                    print(f"app round {r + 1} {name}: {shown}", flush=True)
        finally:
            browser.close()
    rows = []
    for name, rs in results.items():
        ok = [x for x in rs if "first_hits_s" in x]
        if ok:
            med = statistics.median(x["first_hits_s"] for x in ok)
            rss = max(x["memory_kb"]["rss"] for x in ok) / 1024
            rows.append([name, " / ".join(f"{x['first_hits_s']:.1f}" for x in ok), f"{med:.2f}",
                         ("ok" if med <= COLD_TARGET_S else "NOT met") if "hybrid" in name else "", f"{rss:.0f}"])
    print(table(rows, ["hosted server, empty cache, bundle: link", "first hits s (rounds)", "median",
                       f"<= {COLD_TARGET_S:.0f} s", "VmRSS max MB"]))
    return results


if __name__ == "__main__":
    sys.exit(main())
