"""Every system's candidates for one split, computed once and stored: the inputs of the structure
re-scoring and learned-ranker decisions (bench/structure_cv.py, bench/ranker_cv.py).

    python bench/ranking_inputs.py --data ../shared/data/frlaw-dev --split train [--adapter DIR] [--folds 5]
    python bench/ranking_inputs.py --data ../shared/data/frlaw-dev --split test \
        --adapter /work/artifacts/models/frlaw-use-adapter

For each question of the split (text, gold corpus rows), the top ``--depth`` (1000, the hybrid's
depth) corpus rows and scores of:

- ``bm25``: the product's BM25 defaults;
- ``use``: dense ``use`` (zero-shot);
- ``adapter``: the query adapter. On ``--split train`` no question may be ranked by an adapter
  fitted on its own labels, so the split is cut into ``--folds`` seeded folds
  (``numpy.random.default_rng(--seed)``, as bench/adapter_cv.py) and each fold is ranked by an
  adapter fitted on the other folds (train's settings: τ 0.05, λ 10, 200 steps, lr 1e-3; the
  torch fit of bench/adapter_cv.py, the product's loss); on another split, ``--adapter DIR`` (a
  folder written by ``train``) ranks it, exactly as ``run`` would;
- ``neighbours``: the product's neighbours retriever over the train split (leave-one-out on
  train itself, as ``run`` does).

Stored in ``--out`` (default ``bench/out/ranking/<data name>-<split>.npz``) with every array and the
settings; :func:`load` reads it back. Deterministic apart from float noise of the adapter fit.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/ranking_inputs.py
    import _path  # noqa: F401

from bench.common import OUT, load_average  # noqa: E402

SYSTEMS = ("bm25", "use", "adapter", "neighbours")
ADAPTER_SETTINGS = {"tau": 0.05, "lam": 10.0, "steps": 200, "lr": 1e-3}


def default_path(data: str, split: str) -> Path:
    return OUT / "ranking" / f"{Path(str(data)).name}-{split}.npz"


def _runs_to_arrays(runs, pos, depth):
    rows = np.full((len(runs), depth), -1, dtype=np.int64)
    scores = np.zeros((len(runs), depth), dtype=np.float64)
    for i, hits in enumerate(runs):
        r = [pos[h.article_id] for h in hits[:depth]]
        rows[i, :len(r)] = r
        scores[i, :len(r)] = [h.score for h in hits[:depth]]
    return rows, scores


def compute(data: str, split: str, *, adapter: str | None, folds: int = 5, seed: int = 0, depth: int = 1000,
            cache_root: Path | None = None, log=print) -> dict:
    from bsard_demo.retrievers.bm25 import BM25Retriever
    from bsard_demo.retrievers.dense import DenseRetriever
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.sources import load_dataset

    ds = load_dataset(data)
    ids = [str(a) for a in ds.articles["id"]]
    pos = {a: i for i, a in enumerate(ids)}
    q = ds.questions(split)
    keep = [i for i, g in enumerate(q["article_ids"]) if any(a in pos for a in g)]
    qids = [str(q["id"].iloc[i]) for i in keep]
    texts = [str(q["question"].iloc[i]) for i in keep]
    gold = [np.array(sorted({pos[a] for a in q["article_ids"].iloc[i] if a in pos}), dtype=np.int64) for i in keep]
    out: dict = {"qids": np.array(qids), "texts": np.array(texts, dtype=object)}
    t0 = time.perf_counter()
    bm25 = BM25Retriever.build(ds.articles, cache_root=cache_root)
    out["bm25"] = _runs_to_arrays(bm25.search_many(texts, depth), pos, depth)
    neighbours = NeighboursRetriever.build(ds)
    out["neighbours"] = _runs_to_arrays(neighbours.search_many(texts, depth), pos, depth)
    dense = DenseRetriever.build(ds.articles, encoder="use", cache_root=cache_root)
    out["use"] = _runs_to_arrays(dense.search_many(texts, depth), pos, depth)
    log(f"bm25, neighbours, use: {time.perf_counter() - t0:.0f} s (load {load_average()})")
    if split == "train" and adapter is None:
        import torch

        from bench.adapter_cv import fit_torch

        X = np.vstack([dense.encoder.encode_queries([t], batch_size=1) for t in texts]).astype(np.float32)
        Q = torch.tensor(X / np.linalg.norm(X, axis=1, keepdims=True))
        E = torch.tensor(dense.embeddings)
        rows = np.full((len(texts), depth), -1, dtype=np.int64)
        scores = np.zeros((len(texts), depth))
        order = np.random.default_rng(seed).permutation(len(texts))
        for number, f in enumerate(np.array_split(order, folds)):
            t1 = time.perf_counter()
            rest = np.setdiff1d(np.arange(len(texts)), f)
            W = fit_torch(Q[rest], [gold[i] for i in rest], E, **ADAPTER_SETTINGS)
            with torch.no_grad():
                u = torch.nn.functional.normalize(Q[f] @ W, dim=1)
                top = torch.topk(u @ E.T, depth, dim=1)
            rows[f] = top.indices.numpy()
            scores[f] = top.values.double().numpy()
            log(f"adapter fold {number + 1}/{folds}: {time.perf_counter() - t1:.0f} s (load {load_average()})")
        out["adapter"] = (rows, scores)
        out["fold"] = np.empty(len(texts), dtype=np.int64)
        for number, f in enumerate(np.array_split(order, folds)):
            out["fold"][f] = number
    else:
        if adapter is None:
            raise SystemExit(f"--split {split}: give --adapter DIR (a folder written by train on the train split)")
        adapted = DenseRetriever.build(ds.articles, encoder=str(adapter), cache_root=cache_root)
        out["adapter"] = _runs_to_arrays(adapted.search_many(texts, depth), pos, depth)
    out["gold"] = gold
    return out


def save(path: Path, inputs: dict, meta: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"qids": inputs["qids"], "texts": np.array([str(t) for t in inputs["texts"]]),
              "gold_flat": np.concatenate(inputs["gold"]), "gold_len": np.array([len(g) for g in inputs["gold"]])}
    for name in SYSTEMS:
        arrays[f"{name}_rows"], arrays[f"{name}_scores"] = inputs[name]
    if "fold" in inputs:
        arrays["fold"] = inputs["fold"]
    np.savez_compressed(path, meta=json.dumps(meta), **arrays)


def load(path: Path) -> dict:
    z = np.load(path, allow_pickle=False)
    ends = np.cumsum(z["gold_len"])
    gold = np.split(z["gold_flat"], ends[:-1])
    out = {"qids": z["qids"].tolist(), "texts": z["texts"].tolist(), "gold": gold, "meta": json.loads(str(z["meta"]))}
    for name in SYSTEMS:
        out[name] = (z[f"{name}_rows"], z[f"{name}_scores"])
    if "fold" in z.files:
        out["fold"] = z["fold"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--adapter", default=None)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--depth", type=int, default=1000)
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    inputs = compute(args.data, args.split, adapter=args.adapter, folds=args.folds, seed=args.seed, depth=args.depth,
                     cache_root=Path(args.cache_dir) if args.cache_dir else None)
    path = Path(args.out) if args.out else default_path(args.data, args.split)
    save(path, inputs, {"data": str(args.data), "split": args.split, "adapter": args.adapter, "folds": args.folds,
                        "seed": args.seed, "depth": args.depth, "adapter_settings": ADAPTER_SETTINGS})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
