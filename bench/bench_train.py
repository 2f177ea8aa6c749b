"""Fine-tuning a bi-encoder on a train split: what it costs and what it changes.

    python bench/bench_train.py cost --data DIR [--pairs 512] [--max-seq 128 256] [--batch 32]
    python bench/bench_train.py quality --data sample|DIR [--base minilm] [--epochs 1] [--batch 32]
                                 [--max-seq 256] [--hard-negatives 0] [--seed 0] [--out MODEL_DIR]

``cost`` fine-tunes ``--base`` (default minilm) on the first ``--pairs`` (question, gold article)
pairs of the train split, once per ``--max-seq``, and prints the training time (model loading
excluded), pairs/s and the time of one epoch over BSARD's ~4,200 training pairs at that rate
(marked EXTRAPOLATED). ``quality`` scores, on the test split, the base encoder zero-shot and the
model fine-tuned with the given settings (``bsard_demo.training.train``, the ``train`` command's
code), each alone (dense) and fused with BM25 (RRF k = 60, the default hybrid), by R@100 and
MAP@100 (``bsard_demo.evaluation.evaluate`` on 100-deep runs); plus BM25 alone for reference.
Indexes go to ``--cache-dir`` (default ``$BSARD_CACHE``, else ``bench/out/cache``).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # python bench/bench_train.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import (  # noqa: E402
    REPO as ROOT,  # noqa: E402
    json_option,
    machine_facts,
    write_json,
)
from bsard_demo.dataset import Dataset  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.retrievers.batch import question_texts, search_all  # noqa: E402
from bsard_demo.retrievers.registry import make_hybrid  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402
from bsard_demo.training import TrainOptions, train, training_pairs  # noqa: E402

BSARD_TRAIN_PAIRS = 4200


def _first_pairs(dataset: Dataset, split: str, n_pairs: int) -> Dataset:
    """``dataset`` with ``split`` cut to its first questions holding about ``n_pairs`` pairs."""
    q = dataset.questions(split)
    known = set(dataset.articles["id"])
    counts = q["article_ids"].map(lambda ids: sum(a in known for a in ids)).cumsum()
    keep = q[counts.shift(fill_value=0) < n_pairs]
    return Dataset(dataset.name, dataset.kind, dataset.articles, {**dataset.splits, split: keep.reset_index(drop=True)},
                   dataset.fictional)


def cmd_cost(args) -> int:
    dataset = load_dataset(args.data)
    subset = _first_pairs(dataset, "train", args.pairs)
    pairs = len(training_pairs(subset, "train"))
    print(machine_facts(usable=False, python=False))
    print(f"data: {dataset.name}, train pairs used: {pairs} (of {len(training_pairs(dataset, 'train'))}); "
          f"base {args.base}, batch {args.batch}, 1 epoch, seed 0, threads {args.threads or 'default'}")
    print(f"{'max-seq':>8} {'steps':>6} {'train s':>8} {'pairs/s':>8} {'epoch of 4,200 pairs (EXTRAPOLATED)':>38}")
    rows = []
    for max_seq in args.max_seq:
        with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
            opts = TrainOptions(out=Path(tmp) / "m", base=args.base, batch=args.batch, max_seq=max_seq,
                                hard_negatives=args.hard_negatives, seed=0, threads=args.threads)
            result = train(opts, subset)
        seconds = result.metadata["seconds"]["training"]
        rate = pairs / seconds
        print(f"{max_seq:>8} {result.metadata['steps']:>6} {seconds:>8.1f} {rate:>8.2f} "
              f"{BSARD_TRAIN_PAIRS / rate / 60:>34.1f} min")
        rows.append({"max_seq": max_seq, "steps": result.metadata["steps"], "train_s": seconds, "pairs_per_s": rate,
                     "bsard_epoch_min_extrapolated": BSARD_TRAIN_PAIRS / rate / 60})
    print(machine_facts(usable=False, python=False))
    write_json(args.json, {"what": "cost", "pairs": pairs, "rows": rows})
    return 0


def _score(dataset: Dataset, retriever, split: str = "test") -> dict[str, float]:
    questions = dataset.questions(split)
    hits = search_all(retriever, question_texts(questions, False), 100)
    run = {str(q): [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)}
    means = evaluate(dataset.qrels(split), run, ks=[100]).means
    return {"R@100": means["recall@100"], "MAP@100": means["map@100"]}


def cmd_quality(args) -> int:
    dataset = load_dataset(args.data)
    cache_root = Path(args.cache_dir) if args.cache_dir else (None if os.environ.get("BSARD_CACHE")
                                                              else ROOT / "bench" / "out" / "cache")
    print(machine_facts(usable=False, python=False))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-train-")) / "model"
    opts = TrainOptions(out=out, data=args.data, base=args.base, epochs=args.epochs, batch=args.batch,
                        max_seq=args.max_seq, hard_negatives=args.hard_negatives, seed=args.seed,
                        overwrite=bool(args.out), cache_root=cache_root, threads=args.threads)
    t0 = time.perf_counter()
    result = train(opts, dataset)
    print(result.summary())
    print(f"training: {result.metadata['seconds']['training']:.0f} s of {time.perf_counter() - t0:.0f} s total")
    bm25 = build_retriever(RetrieverSpec("bm25"), dataset, cache_root=cache_root)
    rows = [("BM25 (defaults)", _score(dataset, bm25))]
    for label, encoder in ((f"{args.base} zero-shot", args.base), (f"{args.base} fine-tuned", str(out))):
        t = time.perf_counter()
        dense = build_retriever(RetrieverSpec("dense", {"encoder": encoder}), dataset, cache_root=cache_root)
        built = time.perf_counter() - t
        hybrid = make_hybrid(RetrieverSpec("hybrid", {"method": "rrf", "rrf_k": 60}), [bm25, dense],
                             corpus_size=len(dataset.articles))
        rows.append((f"dense {label}", _score(dataset, dense)))
        rows.append((f"RRF(BM25, {label})", _score(dataset, hybrid)))
        print(f"({label}: corpus embedded or loaded in {built:.0f} s)")
    q = dataset.questions("test")
    print(f"\n{dataset.name}, test split: {len(q)} questions; train split: {result.metadata['pairs']} pairs\n")
    print("| system | R@100 | MAP@100 |\n|---|---:|---:|")
    for label, m in rows:
        print(f"| {label} | {100 * m['R@100']:.2f} | {100 * m['MAP@100']:.2f} |")
    print(machine_facts(usable=False, python=False))
    write_json(args.json, {"what": "quality", "metadata": result.metadata, "rows": dict(rows)})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost", help="training time per pair and per BSARD-size epoch")
    c.add_argument("--data", required=True)
    c.add_argument("--pairs", type=int, default=512)
    c.add_argument("--max-seq", type=int, nargs="+", default=[128, 256])
    c.add_argument("--batch", type=int, default=32)
    c.add_argument("--base", default="minilm")
    c.add_argument("--hard-negatives", type=int, default=0)
    c.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, one per core)")
    json_option(c, "bench_train")
    c.set_defaults(func=cmd_cost)
    q = sub.add_parser("quality", help="R@100 / MAP@100 before and after fine-tuning")
    q.add_argument("--data", default="sample")
    q.add_argument("--base", default="minilm")
    q.add_argument("--epochs", type=int, default=1)
    q.add_argument("--batch", type=int, default=32)
    q.add_argument("--max-seq", type=int, default=256)
    q.add_argument("--hard-negatives", type=int, default=0)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--out", default=None, help="keep the trained model here (default: a temporary folder)")
    q.add_argument("--cache-dir", default=None)
    q.add_argument("--threads", type=int, default=None, help="torch threads while training (default: torch's)")
    json_option(q, "bench_train")
    q.set_defaults(func=cmd_quality)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
