"""Speed of the sparse side: analyzer, BM25 build, cache load and search, bm25s vs rank_bm25.

    python bench/synthetic.py --out /tmp/bsard-synth
    python bench/bench_bm25.py /tmp/bsard-synth [--no-rank-bm25]

Prints wall-clock seconds (best of ``--repeat`` for the fast steps). The corpus is the
BSARD-scale synthetic one (22,633 French-looking articles, 222 test questions).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bsard_demo.analyzer import Analyzer, article_texts
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.sources import load_dataset


def timed(fn, repeat: int = 1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="dataset folder (or 'sample')")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--depth", type=int, default=500)
    p.add_argument("--no-rank-bm25", action="store_true", help="skip the slow reference engine")
    args = p.parse_args(argv)

    ds = load_dataset(args.data)
    questions = list(ds.questions("test")["question"])
    texts = article_texts(ds.articles)
    n_words = sum(len(t.split()) for t in texts)
    print(f"{len(texts)} articles ({n_words / len(texts):.0f} words each with headers), {len(questions)} questions")

    t, tokens = timed(lambda: Analyzer().tokens_many(texts))
    print(f"analyzer, cold cache: {t:.2f} s ({n_words / t / 1e6:.2f} M words/s)")
    a = Analyzer()
    a.tokens_many(texts)
    t, _ = timed(lambda: a.tokens_many(texts), args.repeat)
    print(f"analyzer, warm cache: {t:.2f} s ({n_words / t / 1e6:.2f} M words/s)")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t, r = timed(lambda: BM25Retriever.build(ds.articles, cache_root=root))
        print(f"bm25s build (analyse + index + save to cache): {t:.2f} s")
        t, _ = timed(lambda: BM25Retriever.build(ds.articles, cache_root=root), args.repeat)
        print(f"bm25s load from cache (incl. fingerprint of the texts): {t:.2f} s")
    t, r = timed(lambda: BM25Retriever.build(ds.articles, use_cache=False))
    print(f"bm25s build, no cache: {t:.2f} s")
    r.search_many(questions[:5], args.depth)
    t, ours = timed(lambda: r.search_many(questions, args.depth), args.repeat)
    print(f"bm25s search_many ({len(questions)} questions, depth {args.depth}, exact ties): {t:.3f} s")
    q_tokens = [r.analyzer.tokens(q) for q in questions]
    t, _ = timed(lambda: r._bm25s.retrieve(q_tokens, k=args.depth, show_progress=False), args.repeat)
    print(f"  for comparison, bm25s.retrieve on the same tokens (arbitrary ties): {t:.3f} s")
    t, _ = timed(lambda: r._bm25s.retrieve(q_tokens, k=args.depth, show_progress=False, n_threads=2), args.repeat)
    print(f"  bm25s.retrieve n_threads=2: {t:.3f} s")

    if not args.no_rank_bm25:
        t, ref = timed(lambda: BM25Retriever.build(ds.articles, engine="rank_bm25"))
        print(f"rank_bm25 build: {t:.2f} s")
        t, ref_hits = timed(lambda: ref.search_many(questions, args.depth))
        print(f"rank_bm25 search_many ({len(questions)} questions): {t:.2f} s")
        rob = BM25Retriever.build(ds.articles, method="robertson", use_cache=False)
        same = sum([h.article_id for h in x] == [h.article_id for h in y]
                   for x, y in zip(rob.search_many(questions, args.depth), ref_hits))
        print(f"identical rankings bm25s robertson vs rank_bm25: {same}/{len(questions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
