"""Effectiveness of each retriever on a dataset split: R@100, R@200, R@500, MAP@100, MRR@100.

    python bench/effectiveness.py [--data sample|hub|DIR] [--split test] [--retrievers NAME ...]
                                  [--format markdown|table|csv|latex] [--with-description] [--cache-dir DIR]

Retrievers (``--retrievers``, default all): ``bm25`` (defaults: headers, stemming, lucene k1=1
b=0.6), ``bm25-text-nostem`` (article text only, no stemming), ``dense-use``, ``dense-minilm``,
``hybrid-rrf`` (BM25 + dense use, reciprocal rank fusion k=60) and ``hybrid-weighted`` (BM25 +
dense use, min-max scores, alpha=0.5). Hybrids reuse the built BM25 and dense use indexes.

Every question of the split is searched to depth 500 (question text only unless
``--with-description``, as the CLI's ``run``) and scored by :func:`bsard_demo.evaluation.evaluate`;
the table is :func:`bsard_demo.report.render_table` (percentages). On the real BSARD test labels
the paper's published rows are appended. Indexes are cached in ``--cache-dir`` (default
``$BSARD_CACHE``, else ``bench/out/cache``). An encoder that cannot be loaded is skipped with a note.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bsard_demo.analyzer import TEXT_ONLY  # noqa: E402
from bsard_demo.retrievers.batch import question_texts, search_all  # noqa: E402
from bsard_demo.dataset import DataError  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.report import FORMATS, is_bsard_test, metrics_table, render_table  # noqa: E402
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.retrievers.registry import make_hybrid  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402

KS = (100, 200, 500)
DEPTH = 500
BM25 = RetrieverSpec("bm25")
DENSE_USE = RetrieverSpec("dense", {"encoder": "use"})
#: name -> (table label, spec); hybrids are built over the already built BM25 and dense use.
RETRIEVERS: dict[str, tuple[str, RetrieverSpec]] = {
    "bm25": ("BM25 (default: headers, stemming)", BM25),
    "bm25-text-nostem": ("BM25 text only, no stemming", RetrieverSpec("bm25", {"fields": TEXT_ONLY, "stem": False})),
    "dense-use": ("dense use", DENSE_USE),
    "dense-minilm": ("dense minilm", RetrieverSpec("dense", {"encoder": "minilm"})),
    "hybrid-rrf": ("hybrid RRF k=60 (BM25 + use)", RetrieverSpec("hybrid", {"retrievers": [BM25, DENSE_USE], "method": "rrf"})),
    "hybrid-weighted": ("hybrid weighted α=0.5 (BM25 + use)",
                        RetrieverSpec("hybrid", {"retrievers": [BM25, DENSE_USE], "method": "weighted", "alpha": 0.5})),
}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="sample", help="hub, sample (default) or a dataset folder")
    p.add_argument("--split", default="test")
    p.add_argument("--retrievers", nargs="+", choices=list(RETRIEVERS), default=list(RETRIEVERS))
    p.add_argument("--format", choices=[f for f in FORMATS if f != "json"], default="markdown")
    p.add_argument("--with-description", action="store_true", help="append each question's extra_description")
    p.add_argument("--cache-dir", default=None)
    args = p.parse_args(argv)
    cache_root = Path(args.cache_dir or os.environ.get("BSARD_CACHE", "").strip() or ROOT / "bench" / "out" / "cache").expanduser()

    try:
        ds = load_dataset(args.data)
        questions = ds.questions(args.split)
    except DataError as exc:
        print(f"effectiveness: {exc}", file=sys.stderr)
        return 2
    qids = [str(q) for q in questions["id"]]
    texts = question_texts(questions, args.with_description)
    qrels = ds.qrels(args.split)

    built: dict[str, object] = {}  # spec key -> retriever (hybrid parts are shared)
    evaluations, lines = {}, []

    def get(spec: RetrieverSpec):
        if spec.key() not in built:
            built[spec.key()] = build_retriever(spec, ds, cache_root=cache_root)
        return built[spec.key()]

    for name in args.retrievers:
        label, spec = RETRIEVERS[name]
        start = time.perf_counter()
        try:
            if spec.kind == "hybrid":
                parts = [get(s) for s in spec.options["retrievers"]]
                retriever = make_hybrid(spec, parts, corpus_size=len(ds.articles))
            else:
                retriever = get(spec)
        except ValueError as exc:  # EncoderUnavailable is a ValueError
            lines.append(f"{label}: skipped ({exc})")
            continue
        built_s = time.perf_counter() - start
        start = time.perf_counter()
        hits = search_all(retriever, texts, DEPTH)
        search_s = time.perf_counter() - start
        evaluations[label] = evaluate(qrels, {q: [h.article_id for h in hs] for q, hs in zip(qids, hits)}, KS)
        lines.append(f"{label}: `{retriever.name}`; build or cache load {built_s:.1f} s, "
                     f"{len(qids)} questions searched in {search_s:.1f} s")

    print(f"dataset: {ds.name} ({len(ds.articles)} articles), split {args.split}: {len(qids)} questions, "
          f"{sum(len(v) for v in qrels.values())} relevant pairs; depth {DEPTH}; "
          f"question text{' + extra_description' if args.with_description else ' only'}")
    print()
    table = metrics_table(evaluations, published=is_bsard_test(qrels))
    print(render_table(table.drop(columns=["missing_questions", "unknown_questions"]), args.format), end="")
    print()
    for line in lines:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
