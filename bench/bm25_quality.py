"""Retrieval quality of BM25 variants (question text, headers, stemming, k1/b) on a dataset.

    python bench/bm25_quality.py sample            # the bundled fictional sample, all splits
    python bench/bm25_quality.py /path/to/bsard    # a folder with articles.csv

Prints recall@k / map@k / mrr@k (macro, in %) per variant and split; used to choose the
defaults of ``bsard_demo.retrievers.batch`` (``--with-description``) and of BM25.
"""
from __future__ import annotations

import argparse
import sys

import pandas as pd

if __package__ in (None, ""):  # python bench/bm25_quality.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import json_option, write_json  # noqa: E402
from bsard_demo.analyzer import TEXT_ONLY  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers.batch import question_texts  # noqa: E402
from bsard_demo.retrievers.bm25 import BM25Retriever  # noqa: E402
from bsard_demo.runs import Run  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402

VARIANTS = {
    "default (headers, stem, lucene k1=1 b=0.6)": {},
    "text only": {"fields": TEXT_ONLY},
    "no stemming": {"stem": False},
    "text only, no stemming": {"fields": TEXT_ONLY, "stem": False},
    "robertson": {"method": "robertson"},
    "k1=1.2 b=0.75": {"k1": 1.2, "b": 0.75},
    "no stop words": {"stopwords": False},
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data")
    p.add_argument("--ks", type=int, nargs="+", default=[10, 100])
    json_option(p, "bm25_quality")
    args = p.parse_args(argv)
    ds = load_dataset(args.data)
    rows = []
    for label, options in VARIANTS.items():
        r = BM25Retriever.build(ds.articles, use_cache=False, **options)
        for split in ds.split_names:
            q = ds.questions(split)
            for with_desc in (False, True):
                hits = r.search_many(question_texts(q, with_desc), max(args.ks))
                run = Run.from_rankings({qid: [h.article_id for h in hs] for qid, hs in zip(q["id"], hits)})
                means = evaluate(ds.qrels(split), run, args.ks).means
                rows.append({"variant": label, "split": split, "description": with_desc,
                             **{m: round(100 * v, 1) for m, v in means.items()}})
    pd.set_option("display.width", 200)
    print(pd.DataFrame(rows).to_string(index=False))
    write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
