"""Choosing the query adapter's settings on a train split by k-fold cross-validation.

    python bench/adapter_cv.py --data ../shared/data/frlaw-dev --split train \
        '{"tau": 0.05, "lam": 10}' '{"tau": 0.02, "lam": 10}' ...

For each settings (JSON, keys of :class:`bsard_demo.retrievers.adapter.AdapterSettings`, plus
``rank`` for a low-rank ``W = I + U V`` with no pull to the identity), the split's questions are
cut into ``--folds`` seeded folds (``numpy.random.default_rng(--seed)``); each fold is ranked by an
adapter fitted on the other folds, over the full corpus' article embeddings of ``--encoder``
(from the cache: build them with ``python -m bsard_demo index --retriever hybrid``). Printed per
settings: the held-out R@100 / MAP@100 of the adapted dense retriever alone, fused with BM25 (RRF
k=60, w=1,0.5) and fused with BM25 and the neighbours (w=1,0.5,0.5; neighbours left-one-out
over the whole split, as ``run --retriever neighbours`` does on train), beside the same rows
unadapted.

The fit here is torch's (autograd + ``torch.optim.Adam``, float32 scores): the same loss and steps
as the product's numpy :func:`~bsard_demo.retrievers.adapter.fit_adapter` (tests/retrievers/
test_adapter.py checks the two agree), about twice as fast on 2 cores, which is what makes 5 folds
x several settings affordable. Needs torch.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/adapter_cv.py (bench/_path.py)
    import _path  # noqa: F401

from bsard_demo.evaluation.metrics import compute_metrics  # noqa: E402
from bsard_demo.retrievers.base import Hit  # noqa: E402
from bsard_demo.retrievers.hybrid import reciprocal_rank_fusion  # noqa: E402


def recall_at(ranked_rows, gold, k=100):
    """Mean R@k of the ranked rows (bsard_demo.evaluation.metrics, the product's formula)."""
    return float(np.mean([compute_metrics(g, r, k)[0] for r, g in zip(ranked_rows, gold)]))


def ap_at(ranked_rows, gold, k=100):
    """Mean AP@k of the ranked rows (bsard_demo.evaluation.metrics, the product's formula)."""
    return float(np.mean([compute_metrics(g, r, k)[1] for r, g in zip(ranked_rows, gold)]))


def fit_torch(Q, gold, E, *, tau=0.05, lam=10.0, steps=200, lr=1e-3, rank=None, seed=0):
    import torch

    torch.manual_seed(seed)
    d = Q.shape[1]
    if rank:
        U = torch.zeros(d, rank, requires_grad=True)
        V = (torch.randn(rank, d) * 0.01).requires_grad_(True)
        params, get_w = [U, V], (lambda: torch.eye(d) + U @ V)
    else:
        D = torch.zeros(d, d, requires_grad=True)
        params, get_w = [D], (lambda: torch.eye(d) + D)
    opt = torch.optim.Adam(params, lr=lr)
    target = torch.zeros(len(gold), E.shape[0])
    for i, g in enumerate(gold):
        target[i, g] = 1.0 / len(g)
    for _ in range(steps):
        W = get_w()
        q = torch.nn.functional.normalize(Q @ W, dim=1)
        loss = -(target * torch.log_softmax((q @ E.T) / tau, dim=1)).sum(1).mean() \
            + lam * ((W - torch.eye(d)) ** 2).sum() / d
        opt.zero_grad()
        loss.backward()
        opt.step()
    return get_w().detach()


def main(argv=None) -> int:
    import torch

    from bsard_demo.retrievers.bm25 import BM25Retriever
    from bsard_demo.retrievers.dense import DenseRetriever
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.sources import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("settings", nargs="+", help="JSON settings, one per configuration")
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--encoder", default="use")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=None)
    args = p.parse_args(argv)
    cache_root = Path(args.cache_dir) if args.cache_dir else None
    ds = load_dataset(args.data)
    ids = [str(a) for a in ds.articles["id"]]
    pos = {a: i for i, a in enumerate(ids)}
    dense = DenseRetriever.build(ds.articles, encoder=args.encoder, cache_root=cache_root)
    E = torch.tensor(dense.embeddings)
    bm25 = BM25Retriever.build(ds.articles, cache_root=cache_root)
    neighbours = NeighboursRetriever.build(ds)
    q = ds.questions(args.split)
    keep = [i for i, g in enumerate(q["article_ids"]) if any(a in pos for a in g)]
    texts = [str(q["question"].iloc[i]) for i in keep]
    gold = [np.array(sorted({pos[a] for a in q["article_ids"].iloc[i] if a in pos})) for i in keep]
    X = np.vstack([dense.encoder.encode_queries([t], batch_size=1) for t in texts])
    Q = torch.tensor(X / np.linalg.norm(X, axis=1, keepdims=True), dtype=torch.float32)
    bm, nb = bm25.search_many(texts, 1000), neighbours.search_many(texts, 1000)

    def hits(Qs, W):
        with torch.no_grad():
            u = torch.nn.functional.normalize(Qs @ W if W is not None else Qs, dim=1)
            top = torch.topk(u @ E.T, 1000, dim=1)
        return [[Hit(ids[j], float(v)) for j, v in zip(r.tolist(), s.tolist())]
                for r, s in zip(top.indices, top.values)]

    def rows(runs):
        return [[pos[h.article_id] for h in hs] for hs in runs]

    def report(name, dn, seconds=None):
        two = [reciprocal_rank_fusion([bm[i], dn[i]], 60, weights=[1, 0.5])[:500] for i in range(len(dn))]
        three = [reciprocal_rank_fusion([bm[i], dn[i], nb[i]], 60, weights=[1, 0.5, 0.5])[:500] for i in range(len(dn))]
        cells = " | ".join(f"{100 * recall_at(rows(r), gold):.2f} | {100 * ap_at(rows(r), gold):.2f}"
                           for r in (dn, two, three))
        print(f"| {name} | {cells} | {'' if seconds is None else f'{seconds:.0f}'} |", flush=True)

    print(f"{args.data}, split {args.split}: {len(texts)} questions, {args.folds} folds (seed {args.seed}), "
          f"encoder {args.encoder}; held-out figures in %\n")
    print("| settings | dense R@100 | dense MAP@100 | BM25 + dense R@100 | MAP@100 | BM25 + dense + neighbours R@100 "
          "| MAP@100 | fit s (all folds) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    report("unadapted", hits(Q, None))
    folds = np.array_split(np.random.default_rng(args.seed).permutation(len(texts)), args.folds)
    for raw in args.settings:
        cfg = json.loads(raw)
        t0 = time.perf_counter()
        dn = [None] * len(texts)
        for f in folds:
            train_idx = np.setdiff1d(np.arange(len(texts)), f)
            W = fit_torch(Q[train_idx], [gold[i] for i in train_idx], E, **cfg)
            for i, h in zip(f, hits(Q[f], W)):
                dn[i] = h
        report(json.dumps(cfg, sort_keys=True), dn, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
