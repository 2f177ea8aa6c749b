"""Benchmark: a trained encoder served through ONNX (issue 14, item 5), in ONE process.

    /work/main/.venv/bin/python bench/bench_onnx.py --model /work/models/frlaw-minilm-default \
        --data ../shared/data/frlaw-dev [--articles 300] [--questions 100] [--rounds 1] \
        [--sub-size 2000] [--sub-seed 0] [--workdir bench/out/onnx] [--json FILE]

The model folder is never written: it is copied (``cp -r``) to ``<workdir>/model-fp32`` and
``<workdir>/model-int8``, and the exports are timed there (``export_onnx(..., refresh=True)``,
fp32 then ``int8=True``). Then, with the copies' encoders (``--backend onnx`` fp32, int8, and
``torch`` = sentence-transformers on the same weights):

- corpus encoding: the same ``--articles`` articles (the first N of a seeded shuffle of the
  corpus, seed 0), their texts as the dense retriever makes them (``article_texts``, default
  fields), ``embed_documents`` with the encoder's window (256 tokens for MiniLM) and mean pooling,
  interleaved per round; articles/s (median over rounds) and the time for 29,115 articles
  EXTRAPOLATED at that rate;
- question latency: ``encode_queries([q])`` one question at a time over ``--questions`` train
  questions (after one warm-up), median and p90 ms; target <= 50 ms;
- agreement: cosine of int8 and torch vectors against fp32 ONNX (articles and questions);
- int8's retrieval cost: on a seeded sub-corpus (``bench/effectiveness.py`` ``sub_corpus``:
  every gold article of the test split + random distractors up to ``--sub-size``, seed
  ``--sub-seed``) the fp32 and int8 ONNX dense rankings (``DenseRetriever.build``, cached in
  ``<workdir>/cache`` so that ``index --export`` reuses them) of the test questions, scored with
  ``bsard_demo.evaluation.evaluate``; and the sub-corpus written as a dataset folder
  (``<workdir>/sub``) for the bundle, CLI and app checks.

Prints tables and writes the figures as JSON (default ``<workdir>/bench_onnx.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # python bench/bench_onnx.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import REPO, load_average, table  # noqa: E402

FULL_ARTICLES = 29_115
LATENCY_TARGET_MS = 50.0


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 1e6


def pct(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--articles", type=int, default=300)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sub-size", type=int, default=2000)
    ap.add_argument("--sub-seed", type=int, default=0)
    ap.add_argument("--no-sub", action="store_true", help="skip the sub-corpus R@100 comparison")
    ap.add_argument("--workdir", default=str(REPO / "bench/out/onnx"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import numpy as np

    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["BSARD_CACHE"] = str(work / "cache")
    from bsard_demo.settings import prepare_runtime

    prepare_runtime()
    from bench.effectiveness import sub_corpus
    from bsard_demo.analyzer import DEFAULT_FIELDS, article_texts
    from bsard_demo.evaluation import evaluate
    from bsard_demo.retrievers.dense import DenseRetriever
    from bsard_demo.retrievers.encoders import DEFAULT_POOLING, embed_documents, resolve_encoder
    from bsard_demo.retrievers.onnx_export import export_onnx
    from bsard_demo.sources import load_dataset

    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": load_average(),
                 "model": str(args.model), "data": str(args.data)}
    try:
        import subprocess

        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                       text=True).stdout.strip()
    except OSError:
        pass
    print(f"{out['date']} commit {out.get('commit')} load {out['load_start']}", flush=True)

    # -- exports -------------------------------------------------------------------------------
    copies = {}
    exports = {}
    for kind in ("fp32", "int8"):
        dest = work / f"model-{kind}"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(args.model, dest)
        t0 = time.perf_counter()
        export_onnx(str(dest), refresh=True, int8=(kind == "int8"))
        seconds = time.perf_counter() - t0
        exports[kind] = {"s": round(seconds, 2),
                         "model_onnx_mb": round((dest / "onnx/model.onnx").stat().st_size / 1e6, 2),
                         "export_dir_mb": round(dir_mb(dest / "onnx"), 2)}
        copies[kind] = dest
        print(f"export {kind}: {seconds:.1f} s, {exports[kind]['export_dir_mb']} MB", flush=True)
    out["exports"] = exports
    out["torch_weights_mb"] = round((Path(args.model) / "model.safetensors").stat().st_size / 1e6, 2)

    encoders = {"onnx fp32": resolve_encoder(str(copies["fp32"]), "onnx"),
                "onnx int8": resolve_encoder(str(copies["int8"]), "onnx"),
                "torch": resolve_encoder(str(copies["fp32"]), "torch")}
    for name, enc in encoders.items():
        print(f"{name}: {type(enc).__name__} window {enc.max_tokens}", flush=True)

    ds = load_dataset(args.data)
    arts = ds.articles
    order = np.random.default_rng(0).permutation(len(arts))[: args.articles]
    sample = arts.iloc[np.sort(order)].reset_index(drop=True)
    texts = article_texts(sample, DEFAULT_FIELDS)
    train_q = ds.questions("train")
    q_texts = [str(t) for t in train_q["question"]][: args.questions]

    # -- corpus encoding ----------------------------------------------------------------------
    enc_s: dict[str, list[float]] = {n: [] for n in encoders}
    cpu_s: dict[str, list[float]] = {n: [] for n in encoders}
    vectors: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for name, enc in encoders.items():
            t0, c0 = time.perf_counter(), time.process_time()
            vectors[name] = embed_documents(enc, texts, pooling=DEFAULT_POOLING)
            enc_s[name].append(time.perf_counter() - t0)
            cpu_s[name].append(time.process_time() - c0)
            print(f"round {r + 1} {name}: {len(texts) / enc_s[name][-1]:.2f} articles/s (load {load_average()})",
                  flush=True)
    torch_rate = len(texts) / statistics.median(enc_s["torch"])
    throughput = {}
    for name in encoders:
        rate = len(texts) / statistics.median(enc_s[name])
        throughput[name] = {"seconds": [round(s, 2) for s in enc_s[name]], "articles_per_s": round(rate, 2),
                            "cpu_s_per_article": round(statistics.median(cpu_s[name]) / len(texts), 3),
                            "vs_torch": round(rate / torch_rate, 2),
                            "full_min_extrapolated": round(FULL_ARTICLES / rate / 60, 1)}
    out["throughput"] = {"articles": len(texts), "window": encoders["onnx fp32"].max_tokens, **throughput}

    # -- question latency ---------------------------------------------------------------------
    lat: dict[str, list[float]] = {n: [] for n in encoders}
    qvec: dict[str, list] = {n: [] for n in encoders}
    for enc in encoders.values():
        enc.encode_queries([q_texts[0]])  # warm-up
    for q in q_texts:  # interleaved: each question through every backend
        for name, enc in encoders.items():
            t0 = time.perf_counter()
            v = enc.encode_queries([q])
            lat[name].append((time.perf_counter() - t0) * 1000)
            qvec[name].append(v[0])
    torch_med = statistics.median(lat["torch"])
    latency = {}
    for name in encoders:
        med = statistics.median(lat[name])
        latency[name] = {"median_ms": round(med, 1), "p90_ms": round(pct(lat[name], 90), 1),
                         "vs_torch": round(torch_med / med, 2), "target_met": med <= LATENCY_TARGET_MS}
    out["latency"] = {"questions": len(q_texts), **latency}

    # -- agreement ------------------------------------------------------------------------------
    agree = {}
    ref_d, ref_q = vectors["onnx fp32"], np.stack(qvec["onnx fp32"])
    for name in ("onnx int8", "torch"):
        cd = np.sum(ref_d * vectors[name], axis=1)
        cq = np.sum(ref_q * np.stack(qvec[name]), axis=1)
        agree[name] = {"articles_cos_min": float(cd.min()), "articles_cos_median": float(np.median(cd)),
                       "questions_cos_min": float(cq.min()), "questions_cos_median": float(np.median(cq))}
    out["agreement_vs_onnx_fp32"] = agree

    # -- int8's R@100 cost on a sub-corpus ------------------------------------------------------
    if not args.no_sub:
        sub, n_gold = sub_corpus(ds, ["test"], args.sub_size, args.sub_seed)
        sub_dir = work / "sub"
        sub_dir.mkdir(exist_ok=True)
        import pandas as pd

        keep = set(str(a) for a in sub.articles["id"])
        raw = pd.read_csv(Path(args.data) / "articles.csv", dtype=str, keep_default_na=False)
        raw[raw["id"].isin(keep)].to_csv(sub_dir / "articles.csv", index=False)
        for split in ("test", "train"):
            shutil.copy(Path(args.data) / f"questions_{split}.csv", sub_dir / f"questions_{split}.csv")
        test_q = ds.questions("test")
        tq_ids = [str(q) for q in test_q["id"]]
        tq_texts = [str(t) for t in test_q["question"]]
        qrels = ds.qrels("test")
        sub_res = {"articles": len(sub.articles), "gold": n_gold, "seed": args.sub_seed, "questions": len(tq_ids)}
        runs = {}
        for name in ("onnx fp32", "onnx int8"):
            t0 = time.perf_counter()
            retr = DenseRetriever.build(sub.articles, encoder=encoders[name], cache_root=work / "cache")
            build_s = time.perf_counter() - t0
            hits = retr.search_many(tq_texts, k=100)
            runs[name] = {qid: [h.article_id for h in hs] for qid, hs in zip(tq_ids, hits)}
            ev = evaluate(qrels, runs[name], ks=(10, 100))
            sub_res[name] = {"build_s": round(build_s, 1), "figures": {k: float(v) for k, v in ev.means.items()}}
            print(f"sub-corpus {name}: built in {build_s:.0f} s; {sub_res[name]['figures']}", flush=True)
        same_top100 = sum(set(runs["onnx fp32"][q]) == set(runs["onnx int8"][q]) for q in tq_ids)
        same_order = sum(runs["onnx fp32"][q] == runs["onnx int8"][q] for q in tq_ids)
        sub_res["same_top100_set"] = same_top100
        sub_res["same_top100_order"] = same_order
        out["sub_corpus"] = sub_res
    out["load_end"] = load_average()

    # -- report ---------------------------------------------------------------------------------
    print()
    print(table([[k, v["s"], v["model_onnx_mb"], v["export_dir_mb"]] for k, v in exports.items()],
                ["export", "s", "model.onnx MB", "export folder MB"]))
    print(f"torch weights (model.safetensors): {out['torch_weights_mb']} MB")
    print()
    print(table([[n, "/".join(str(s) for s in v["seconds"]), v["articles_per_s"], f"{v['vs_torch']}x",
                  v["cpu_s_per_article"], v["full_min_extrapolated"]] for n, v in throughput.items()],
                ["backend", f"s for {len(texts)} articles", "articles/s", "vs torch", "CPU s/article",
                 f"{FULL_ARTICLES:,} articles min (EXTRAPOLATED)"]))
    print()
    print(table([[n, v["median_ms"], v["p90_ms"], f"{v['vs_torch']}x", "ok" if v["target_met"] else "NOT met"]
                 for n, v in latency.items()],
                ["backend", f"question ms median ({len(q_texts)})", "p90", "speed vs torch",
                 f"<= {LATENCY_TARGET_MS:.0f} ms"]))
    print()
    print(table([[n, f"{v['articles_cos_min']:.7f}", f"{v['articles_cos_median']:.7f}", f"{v['questions_cos_min']:.7f}",
                  f"{v['questions_cos_median']:.7f}"] for n, v in agree.items()],
                ["vs onnx fp32", "articles cos min", "median", "questions cos min", "median"]))
    if "sub_corpus" in out:
        s = out["sub_corpus"]
        print()
        print(f"sub-corpus: {s['articles']} articles ({s['gold']} gold of test + distractors, seed {s['seed']}), "
              f"{s['questions']} test questions")
        keys = list(s["onnx fp32"]["figures"])
        print(table([[n, *[f"{s[n]['figures'][k]:.4f}" for k in keys]] for n in ("onnx fp32", "onnx int8")]
                    + [["int8 - fp32",
                        *[f"{s['onnx int8']['figures'][k] - s['onnx fp32']['figures'][k]:+.4f}" for k in keys]]],
                    ["dense", *keys]))
        print(f"same top-100 set: {s['same_top100_set']}/{s['questions']}, same top-100 order: "
              f"{s['same_top100_order']}/{s['questions']}")
    print(f"load average at the end: {out['load_end']}")
    path = Path(args.json) if args.json else work / "bench_onnx.json"
    path.write_text(json.dumps(out, indent=2, default=float))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
