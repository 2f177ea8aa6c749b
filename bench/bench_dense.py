"""Dense retrieval: how long texts are handled (window, pooling) and what it does to quality.

    python bench/bench_dense.py [quality]

``quality``: the sample's test split (and all its questions) scored for ``use`` / ``minilm``
with ``pooling`` truncate / max / mean (and USE cut at explicit windows, since it has none).
Speed (encoding throughput, query latency, memory) is measured at BSARD scale by
``bench/bench_retrieval.py``; effectiveness of every retriever by ``bench/effectiveness.py``.
"""
from __future__ import annotations

import argparse
import time

if __package__ in (None, ""):  # python bench/bench_dense.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import json_option, write_json  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers.dense import DenseRetriever  # noqa: E402
from bsard_demo.retrievers.encoders import resolve_encoder  # noqa: E402
from bsard_demo.sources import load_sample  # noqa: E402


def quality() -> list[dict]:
    data = load_sample()
    splits = {"test": data.questions("test")}
    splits["all"] = __import__("pandas").concat([data.questions("test"), data.questions("train")])
    print(f"## quality: sample ({len(data.articles)} articles), questions only; test = {len(splits['test'])} "
          f"questions, all = {len(splits['all'])}")
    print("encoder  window  pooling    test R@10  R@100  MAP@100 MRR@100 | all R@10  R@100  MAP@100 MRR@100   build s")
    configs = [("use", None, "whole"), ("use", 128, "truncate"), ("use", 128, "max"), ("use", 128, "mean"),
               ("use", 64, "truncate"), ("use", 64, "max"), ("use", 64, "mean"),
               ("minilm", None, "truncate"), ("minilm", None, "max"), ("minilm", None, "mean")]
    rows = []
    for name, window, pooling in configs:
        t0 = time.perf_counter()
        r = DenseRetriever.build(data.articles, encoder=name, window=window, use_cache=False,
                                 pooling="max" if pooling == "whole" else pooling)
        build = time.perf_counter() - t0
        cells, figures = [], {}
        for split, q in splits.items():
            hits = r.search_many(list(q["question"]), k=len(data.articles))
            run = {qid: [h.article_id for h in hs] for qid, hs in zip(q["id"], hits)}
            qrels = dict(zip(q["id"], q["article_ids"]))
            m = evaluate(qrels, run, ks=(10, 100)).means
            figures[split] = m
            cells.append(f"{m['recall@10']:9.3f} {m['recall@100']:6.3f} {m['map@100']:7.3f} {m['mrr@100']:7.3f}")
        win = str(window or resolve_encoder(name).max_tokens or "-")
        print(f"{name:7s}  {win:6s}  {pooling:9s} {cells[0]} | {cells[1]}   {build:6.1f}")
        rows.append({"encoder": name, "window": win, "pooling": pooling, "build_s": build, **figures})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", choices=["quality"], default=["quality"])
    json_option(ap, "bench_dense")
    args = ap.parse_args()
    write_json(args.json, {"quality": quality()})


if __name__ == "__main__":
    main()
