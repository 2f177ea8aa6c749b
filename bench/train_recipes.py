"""Choosing ``train``'s fine-tuning recipe on a train split: hold part of it out, score each recipe there.

    python bench/train_recipes.py --data ../shared/data/frlaw-dev [--holdout 0.25] [--seed 0] [--sub-size 2000] \
        '{}' '{"lr": 1e-4}' '{"hard_negatives": 1}' '{"epochs": 2, "max_seq": 128}' ...

The train split's questions are cut once, seeded (``numpy.random.default_rng(--seed)``), into a
fitting part and a held-out part (``--holdout`` of them). Each recipe (JSON: fields of
:class:`bsard_demo.training.TrainOptions` such as ``epochs``, ``batch``, ``max_seq``,
``hard_negatives``, ``lr``; ``{}`` is today's defaults) fine-tunes ``train``'s base on the fitting
part over the full corpus (the ``train`` command's code, hard negatives from BM25 over the full
corpus), then is scored on the held-out questions over a seeded sub-corpus (every gold article of
the held-out questions plus distractors up to ``--sub-size``: ``bench/effectiveness.py``'s
``sub_corpus``), dense alone and fused with BM25 as ``run --retriever hybrid --encoder DIR`` fuses
it (RRF k = 60, weights 1, 1), and with BM25 and the neighbours retriever (the fitting part's
questions as neighbours; weights 1, 1, 0.5). Reference rows on the same questions and sub-corpus:
BM25, neighbours, zero-shot ``use`` and its fusions as the product makes them (use weighs 0.5).
The test split is never read.

``--adapter`` adds the query adapter (``train --adapter``'s code and default settings: a linear map
of ``use``'s question vectors fitted on the fitting part over the full corpus' ``use`` embeddings)
scored the same way, so that the two ways of training compare on the same questions.

Each row is printed as soon as it is scored (a fine-tuning takes 10-40 min on 2 cores, the
adapter minutes once ``use``'s full-corpus embeddings are cached), and ``--json`` keeps them all.
Models go to ``--out`` (default: a temporary folder, removed).
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # python bench/train_recipes.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import json_option, machine_facts, write_json  # noqa: E402
from bench.effectiveness import sub_corpus  # noqa: E402
from bsard_demo.dataset import Dataset  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.retrievers.batch import question_texts, search_all  # noqa: E402
from bsard_demo.retrievers.registry import make_hybrid  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402
from bsard_demo.training import AdapterOptions, TrainOptions, train, train_adapter  # noqa: E402

HELD = "heldout"
MEASURES = ("recall@100", "map@100", "recall@200", "mrr@100")


def holdout_split(ds: Dataset, split: str, fraction: float, seed: int) -> Dataset:
    """``ds`` with ``split`` cut into ``train`` (the fitting part) and :data:`HELD` (seeded)."""
    import numpy as np

    q = ds.questions(split).reset_index(drop=True)
    order = np.random.default_rng(seed).permutation(len(q))
    n_held = max(1, int(round(fraction * len(q))))
    held = q.iloc[sorted(order[:n_held])].reset_index(drop=True)
    fit = q.iloc[sorted(order[n_held:])].reset_index(drop=True)
    return Dataset(ds.name, ds.kind, ds.articles, {"train": fit, HELD: held}, ds.fictional)


def score(ds: Dataset, retriever) -> dict[str, float]:
    questions = ds.questions(HELD)
    hits = search_all(retriever, question_texts(questions, False), 200)
    run = {str(q): [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)}
    return {m: 100 * v for m, v in evaluate(ds.qrels(HELD), run, ks=[100, 200]).means.items() if m in MEASURES}


def _three(sub: Dataset, bm25, neighbours, dense, label: str, weight: float) -> list[tuple[str, object]]:
    """``dense`` alone, fused with BM25 (weights 1, ``weight``) and with BM25 and the neighbours
    (1, ``weight``, 0.5)."""
    def fused(parts, weights):
        spec = RetrieverSpec("hybrid", {"method": "rrf", "rrf_k": 60, "weights": list(weights)})
        return make_hybrid(spec, parts, corpus_size=len(sub.articles))

    return [(label, dense), (f"BM25 + {label} (1, {weight:g})", fused([bm25, dense], (1, weight))),
            (f"BM25 + {label} + neighbours (1, {weight:g}, 0.5)", fused([bm25, dense, neighbours], (1, weight, 0.5)))]


def _row(name: str, figures: dict[str, float], seconds: float | None = None, pairs: int | None = None) -> str:
    cells = " | ".join(f"{figures[m]:.2f}" for m in MEASURES)
    return f"| {name} | {cells} | {'' if pairs is None else pairs} | {'' if seconds is None else f'{seconds:.0f}'} |"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recipes", nargs="*", help="JSON recipes: TrainOptions fields ({} = today's defaults)")
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--holdout", type=float, default=0.25, help="fraction of the split held out (default 0.25)")
    p.add_argument("--seed", type=int, default=0, help="seed of the hold-out cut and the sub-corpus (default 0)")
    p.add_argument("--sub-size", type=int, default=2000)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--out", default=None, help="keep the models in this folder (default: temporary)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--adapter", action="store_true",
                   help="also fit and score the query adapter on use (train --adapter)")
    json_option(p, "train_recipes")
    args = p.parse_args(argv)

    recipes = [json.loads(r) for r in args.recipes]
    ds = holdout_split(load_dataset(args.data), args.split, args.holdout, args.seed)
    sub, n_gold = sub_corpus(ds, [HELD], args.sub_size, args.seed)
    cache_root = Path(args.cache_dir) if args.cache_dir else None
    out_root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="train-recipes-"))
    print(machine_facts("torch", "sentence-transformers"))
    print(f"{ds.name}: split {args.split} cut (seed {args.seed}) into {len(ds.questions('train'))} fitting and "
          f"{len(ds.questions(HELD))} held-out questions; scored on {sub.name} ({n_gold} gold)\n")
    print(f"| system | {' | '.join(MEASURES)} | pairs | train s |")
    print("|---|" + "---:|" * (len(MEASURES) + 2))
    bm25 = build_retriever(RetrieverSpec("bm25"), sub, cache_root=cache_root)
    use = build_retriever(RetrieverSpec("dense", {"encoder": "use"}), sub, cache_root=cache_root)
    neighbours = build_retriever(RetrieverSpec("neighbours"), sub, cache_root=cache_root)
    rows = {}
    for name, retriever in [("BM25", bm25), ("neighbours", neighbours),
                            *_three(sub, bm25, neighbours, use, "use", 0.5)]:
        rows[name] = score(sub, retriever)
        print(_row(name, rows[name]), flush=True)
    results = []

    def fit_and_score(recipe, fit, folder: Path, label: str, weight: float) -> None:
        """Fit a model folder with ``fit(folder)`` and score it as :func:`_three` fuses it."""
        t0 = time.perf_counter()
        result = fit(folder)
        seconds, pairs = result.metadata["seconds"]["training"], result.metadata["pairs"]
        dense = build_retriever(RetrieverSpec("dense", {"encoder": str(folder)}), sub, cache_root=cache_root)
        for name, retriever in _three(sub, bm25, neighbours, dense, label, weight):
            rows[name] = score(sub, retriever)
            print(_row(name, rows[name], seconds, pairs), flush=True)
        results.append({"recipe": recipe, "pairs": pairs, "train_s": seconds, "total_s": time.perf_counter() - t0})

    for i, recipe in enumerate(recipes):
        settings = {"evaluate": False, "overwrite": True, "cache_root": cache_root, "threads": args.threads, **recipe}
        fit_and_score(recipe, lambda folder: train(TrainOptions(out=folder, **settings), ds), out_root / f"recipe-{i}",  # noqa: B023 -- called at once
                      f"fine-tuned {json.dumps(recipe, sort_keys=True)}", 1)
    if args.adapter:
        fit_and_score("adapter", lambda folder: train_adapter(
            AdapterOptions(out=folder, evaluate=False, overwrite=True, cache_root=cache_root), ds),
            out_root / "adapter", "use + adapter", 0.5)
    print("\n" + machine_facts(usable=False, python=False))
    write_json(args.json, {"data": ds.name, "sub_corpus": sub.name, "rows": rows, "recipes": results})
    if not args.out:
        shutil.rmtree(out_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
