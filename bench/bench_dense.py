"""Dense retrieval: encoder throughput, query latency at BSARD scale, long-text handling quality.

    python bench/bench_dense.py [throughput] [latency] [quality] [--n 200] [--repeats 50]

- ``throughput``: docs/s of ``use`` and ``minilm`` embedding ``--n`` articles of the bundled
  sample (headers + text, ~137 words), model loading excluded.
- ``latency``: one question, encode + FAISS search (k=100), on a 22,633 × dim index of random
  unit vectors; p50/p90 over ``--repeats`` different questions.
- ``quality``: the sample's test split (and all its questions) scored for ``use`` / ``minilm``
  with ``pooling`` truncate / max / mean (and USE cut at explicit windows, since it has none).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bsard_demo.analyzer import article_texts  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers.dense import DenseRetriever  # noqa: E402
from bsard_demo.retrievers.encoders import resolve_encoder  # noqa: E402
from bsard_demo.sources import load_sample  # noqa: E402

BSARD_ARTICLES = 22_633


def throughput(n: int) -> None:
    texts = article_texts(load_sample().articles)[:n]
    words = np.mean([len(t.split()) for t in texts])
    print(f"## throughput: {len(texts)} sample articles, {words:.0f} words on average")
    for name in ("use", "minilm"):
        enc = resolve_encoder(name)
        enc.encode_documents(texts[:8])  # load + warm up
        start = time.perf_counter()
        enc.encode_documents(texts)
        dt = time.perf_counter() - start
        extra = ""
        if enc.max_tokens:
            over = sum(c > enc.max_tokens for c in enc.count_tokens(texts))
            extra = f" ({over} of {len(texts)} over its {enc.max_tokens}-token window)"
        print(f"{name:7s} {len(texts) / dt:7.1f} docs/s  {dt:6.2f} s{extra}  "
              f"-> {BSARD_ARTICLES / (len(texts) / dt) / 60:.1f} min for {BSARD_ARTICLES} articles")


def latency(repeats: int) -> None:
    questions = list(load_sample().questions("test")["question"]) + list(load_sample().questions("train")["question"])
    print(f"## latency: one question, encode + search k=100, {BSARD_ARTICLES} random unit vectors")
    rng = np.random.default_rng(0)
    ids = [str(i + 1) for i in range(BSARD_ARTICLES)]
    for name in ("use", "minilm"):
        enc = resolve_encoder(name)
        emb = rng.standard_normal((BSARD_ARTICLES, enc.dim), dtype=np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        r = DenseRetriever(ids, emb, enc)
        r.search(questions[0])  # warm up
        total, search = [], []
        for i in range(repeats):
            q = questions[i % len(questions)] + f" {i}"
            t0 = time.perf_counter()
            vec = enc.encode_queries([q])
            t1 = time.perf_counter()
            r.search_vectors(vec, 100)
            t2 = time.perf_counter()
            total.append(t2 - t0)
            search.append(t2 - t1)
        p = lambda xs, q: 1000 * float(np.percentile(xs, q))  # noqa: E731
        print(f"{name:7s} dim {enc.dim}: encode+search p50 {p(total, 50):6.1f} ms  p90 {p(total, 90):6.1f} ms"
              f"  (search alone p50 {p(search, 50):5.2f} ms)")


def quality() -> None:
    data = load_sample()
    splits = {"test": data.questions("test")}
    splits["all"] = __import__("pandas").concat([data.questions("test"), data.questions("train")])
    print(f"## quality: sample ({len(data.articles)} articles), questions only; test = {len(splits['test'])} questions, all = {len(splits['all'])}")
    print("encoder  window  pooling    test R@10  R@100  MAP@100 MRR@100 | all R@10  R@100  MAP@100 MRR@100   build s")
    configs = [("use", None, "whole"), ("use", 128, "truncate"), ("use", 128, "max"), ("use", 128, "mean"),
               ("use", 64, "truncate"), ("use", 64, "max"), ("use", 64, "mean"),
               ("minilm", None, "truncate"), ("minilm", None, "max"), ("minilm", None, "mean")]
    for name, window, pooling in configs:
        t0 = time.perf_counter()
        r = DenseRetriever.build(data.articles, encoder=name, window=window, use_cache=False,
                                 pooling="max" if pooling == "whole" else pooling)
        build = time.perf_counter() - t0
        cells = []
        for split, q in splits.items():
            hits = r.search_many(list(q["question"]), k=len(data.articles))
            run = {qid: [h.article_id for h in hs] for qid, hs in zip(q["id"], hits)}
            qrels = dict(zip(q["id"], q["article_ids"]))
            m = evaluate(qrels, run, ks=(10, 100)).means
            cells.append(f"{m['recall@10']:9.3f} {m['recall@100']:6.3f} {m['map@100']:7.3f} {m['mrr@100']:7.3f}")
        win = str(window or resolve_encoder(name).max_tokens or "-")
        print(f"{name:7s}  {win:6s}  {pooling:9s} {cells[0]} | {cells[1]}   {build:6.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["throughput", "latency", "quality"])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    for what in args.what:
        {"throughput": lambda: throughput(args.n), "latency": lambda: latency(args.repeats), "quality": quality}[what]()


if __name__ == "__main__":
    main()
