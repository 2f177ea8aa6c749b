"""Index bundles: their size at BSARD scale, load time, and whether float16 embeddings keep rankings.

    python bench/bench_bundles.py [--data DIR] [--dense-articles 3000] [--depth 500] [--sample]

- BM25 (bm25s, defaults) over the full corpus (default ``bench/out/synth``: the synthetic
  22,633-article corpus of ``bench/synthetic.py``, generated when absent): build time, the
  exported bundle's size per file, load time from the bundle with an empty cache.
- Dense ``use`` over the first ``--dense-articles`` articles (encoding all 22.6k takes ~8 min):
  the embeddings stored as float32 (today) and as float16 cast back to float32 at load; for every
  test question the top-``--depth`` ranking of both is compared. Prints the share of identical
  rankings (same ids in the same order), identical top-k sets, the largest rank shift and the
  largest score difference. Sizes are exact for the full corpus (rows × dim × bytes + header).
- ``--sample``: the same float16 check on the bundled sample for ``use`` and ``minilm``, every
  question of every split, full depth.

Every figure is measured in this process; nothing is cached between runs (temporary folders).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # python bench/bench_bundles.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import (  # noqa: E402
    SYNTH as DEFAULT_DATA,  # noqa: E402
    json_option,
    synthetic_corpus,
    write_json,
)
from bsard_demo import bundles, cache  # noqa: E402
from bsard_demo.retrievers.bm25 import BM25Retriever  # noqa: E402
from bsard_demo.retrievers.dense import DenseRetriever  # noqa: E402
from bsard_demo.retrievers.encoders import resolve_encoder  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402


def size_text(n: float) -> str:
    """Bytes as decimal megabytes, ``"    12.3 MB"``."""
    return f"{n / 1e6:8.1f} MB"


def folder_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def bm25_bundle(data, tmp: Path) -> dict:
    articles = data.articles
    print(f"## BM25 bundle: {len(articles):,} articles ({data.name})")
    cache.forget_used()
    t0 = time.perf_counter()
    BM25Retriever.build(articles, cache_root=tmp / "cache")
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    corpus = bundles.corpus_id(articles, data.name)
    fp_time = time.perf_counter() - t0
    bundle = bundles.export_bundle(tmp / "bm25-bundle", cache.used_entries(), corpus=corpus)
    print(f"build {build:6.2f} s; corpus fingerprint {fp_time:5.2f} s; bundle total {size_text(bundle.total_size)}")
    for name, meta in sorted(bundle.manifest["files"].items(), key=lambda kv: -kv[1]["size"]):
        print(f"  {size_text(meta['size'])}  {name.split('/', 2)[-1] if '/' in name else name}")
    bundles.activate(bundle)
    empty = tmp / "empty-cache"
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        BM25Retriever.build(articles, cache_root=empty)
        times.append(time.perf_counter() - t0)
    bundles.deactivate()
    assert not empty.exists() or not any(empty.rglob("*")), "the bundle load wrote into the cache"
    print(f"load from the bundle, empty cache: first {times[0]:.2f} s (checksums), then median "
          f"{sorted(times[1:])[0]:.2f} s")
    return {"articles": len(articles), "build_s": build, "fingerprint_s": fp_time, "bundle_bytes": bundle.total_size,
            "files": {name: meta["size"] for name, meta in bundle.manifest["files"].items()}, "load_s": times}


def compare_float16(name: str, articles: pd.DataFrame, questions: list[str], depth: int, tmp: Path) -> dict:
    enc = resolve_encoder(name)
    t0 = time.perf_counter()
    r32 = DenseRetriever.build(articles, encoder=enc, cache_root=tmp / f"cache-{name}")
    encode = time.perf_counter() - t0
    emb16 = r32.embeddings.astype(np.float16)
    r16 = DenseRetriever(r32.article_ids, emb16.astype(np.float32), enc, fields=r32.fields, pooling=r32.pooling,
                         window=r32.window)
    depth = min(depth, r32.size)
    same_order = same_set = same_top100 = 0
    max_shift = 0
    max_dscore = 0.0
    for q in questions:
        v = r32.encoder.encode_queries([q], batch_size=1)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        a = r32.search_vectors(v, depth)[0]
        b = r16.search_vectors(v, depth)[0]
        ia, ib = [h.article_id for h in a], [h.article_id for h in b]
        same_order += ia == ib
        same_set += set(ia) == set(ib)
        same_top100 += ia[:100] == ib[:100]
        pos_b = {x: i for i, x in enumerate(ib)}
        max_shift = max([max_shift] + [abs(i - pos_b[x]) for i, x in enumerate(ia) if x in pos_b])
        max_dscore = max(max_dscore, max(abs(x.score - y.score) for x, y in zip(a, b)))
    n = len(questions)
    full = 22_633
    header = 128
    print(f"{name:7s} {len(articles):6,} art  {n:4d} q  depth {depth:4d}  identical order {same_order / n:7.1%}  "
          f"identical top-100 order {same_top100 / n:7.1%}  identical set {same_set / n:7.1%}  "
          f"max rank shift {max_shift:4d}  max |Δscore| {max_dscore:.2e}  (encode {encode:5.1f} s)")
    print(f"        embeddings at {full:,} articles × {enc.dim}: float32 {size_text(full * enc.dim * 4 + header)}, "
          f"float16 {size_text(full * enc.dim * 2 + header)}")
    return {"encoder": name, "articles": len(articles), "questions": n, "depth": depth,
            "identical_order": same_order / n,
            "identical_top100": same_top100 / n, "identical_set": same_set / n, "max_rank_shift": max_shift,
            "max_abs_score_diff": max_dscore, "encode_s": encode}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--dense-articles", type=int, default=3000)
    ap.add_argument("--depth", type=int, default=500)
    ap.add_argument("--sample", action="store_true", help="also check float16 on the sample for use and minilm")
    ap.add_argument("--no-bm25", action="store_true")
    json_option(ap, "bench_bundles")
    args = ap.parse_args(argv)
    data_dir = Path(args.data)
    if data_dir == DEFAULT_DATA:
        synthetic_corpus(data_dir)
    results: dict = {"float16": []}
    data = load_dataset(str(data_dir))
    with tempfile.TemporaryDirectory(prefix="bench-bundles-") as t:
        tmp = Path(t)
        os.environ.pop("BSARD_INDEX", None)
        if not args.no_bm25:
            results["bm25"] = bm25_bundle(data, tmp)
        print(f"\n## float16 embeddings (cast back to float32 at load) vs float32, top-{args.depth}")
        questions = list(data.questions("test")["question"])
        results["float16"].append(compare_float16("use",
                                                  data.articles.iloc[:args.dense_articles].reset_index(drop=True),
                                                  questions, args.depth, tmp))
        if args.sample:
            sample = load_dataset("sample")
            qs = [q for split in sample.split_names for q in sample.questions(split)["question"]]
            for name in ("use", "minilm"):
                results["float16"].append(compare_float16(name, sample.articles, qs, len(sample.articles), tmp))
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
