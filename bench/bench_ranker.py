"""Query time of the served learned ranker (``run --retriever ranker``): per question, the whole search (first, as a
new question meets it), then its inputs (each system searched to depth 1000, the neighbours' votes) and what it adds
on top (features, the numpy trees, ordering), in one process, over every question of a split.

    python bench/bench_ranker.py --data ../shared/data/frlaw-dev --ranker /work/artifacts/ranker/frlaw-ranker

Printed: medians and p95 in ms, and the load average; the indexes load from the cache (build them
once with ``python -m bsard_demo run --retriever ranker --encoder DIR --data ...``).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

if __package__ in (None, ""):  # python bench/bench_ranker.py
    import _path  # noqa: F401

from bench.common import load_average  # noqa: E402


def main(argv=None) -> int:
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts
    from bsard_demo.retrievers.ranker import question_features, ranked_rows
    from bsard_demo.sources import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--ranker", required=True)
    p.add_argument("--split", default="test")
    args = p.parse_args(argv)
    ds = load_dataset(args.data)
    t0 = time.perf_counter()
    ranker = build_retriever(RetrieverSpec("ranker", {"model": args.ranker}), ds)
    print(f"{ranker.name} over {len(ds.articles):,} articles of {ds.name}: loaded in {time.perf_counter() - t0:.1f} s")
    texts = question_texts(ds.questions(args.split), DEFAULT_WITH_DESCRIPTION)
    ranker.search(texts[0], 100)  # warm: first encodings, graph
    inputs, features, trees, total = [], [], [], []
    for text in texts:
        # first the whole search, as a visitor's new question meets it: the breakdown after it reuses the question
        # vectors its parts kept (use's and e5's encoders keep the last 64), so its inputs exclude the encodings
        t4 = time.perf_counter()
        ranker.search(text, 100)
        total.append(time.perf_counter() - t4)
        t0 = time.perf_counter()
        runs = {s: r.search_rows([text], ranker.depth)[0] for s, r in ranker.parts.items()}
        votes = ranker.parts["neighbours"].votes(text) if "neighbours" in ranker.parts else (None, None)
        t1 = time.perf_counter()
        rows, X = question_features(runs, graph=ranker.graph, structure=ranker.structure, prior=ranker.prior,
                                    lengths=ranker.lengths, votes=votes[0], votes_sim=votes[1],
                                    systems=ranker.systems, candidates=ranker.candidates, depth=ranker.depth)
        t2 = time.perf_counter()
        ranked_rows(rows, X, ranker.ensemble.predict(X), ranker.systems)
        t3 = time.perf_counter()
        inputs.append(t1 - t0), features.append(t2 - t1), trees.append(t3 - t2)
    ms = lambda xs, q: 1000 * float(np.percentile(xs, q))  # noqa: E731
    print(f"\n{len(texts)} questions of {args.split}, load {load_average()}\n")
    print("| per question | p50 ms | p95 ms |\n|---|---:|---:|")
    for name, xs in ((f"inputs: {len(ranker.systems)} systems to depth 1000 + votes, one after another (question "
                      "vectors kept from the search)", inputs), ("features", features),
                     ("trees + ordering", trees), ("on top of the inputs (features + trees)",
                                                   [a + b for a, b in zip(features, trees)]),
                     ("whole search (ranker.search)", total)):
        print(f"| {name} | {ms(xs, 50):.1f} | {ms(xs, 95):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
