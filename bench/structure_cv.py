"""Choosing the structure re-scoring (bsard_demo/retrievers/structure.py) on a train split.

    python bench/ranking_inputs.py --data ../shared/data/frlaw-dev --split train      # once
    python bench/structure_cv.py --data ../shared/data/frlaw-dev [--split train] [--base bm25,adapter,neighbours]

The base ranking is the product's fusion of the stored candidates (bench/ranking_inputs.py: each
system 1000 deep; RRF k = 60 with the product's default weights: BM25 1, a zero-shot encoder or
adapter 0.5, neighbours 0.5; on train the adapter's candidates are out-of-fold and the neighbours'
leave-one-out). Every point of a grid of :class:`~bsard_demo.retrievers.structure.StructureSettings`
(sibling x section x refs x window, decay 0.5) re-scores it (:func:`~bsard_demo.retrievers.structure.rescore`,
the product's function); R@100 and MAP@100 (the product's :func:`~bsard_demo.evaluation.compute_metrics`)
per point. The criterion is R@100 + MAP@100 (both are targets). Printed: the whole grid on the
split, the best point, and a ``--folds``-fold cross-validation of that choice (the point chosen on
the other folds, scored on the held-out fold), so the chosen point's figure is not only its
own selection's; then the chosen point on the other bases (``--also``).
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/structure_cv.py
    import _path  # noqa: F401

from bench.common import load_average  # noqa: E402
from bench.ranking_inputs import default_path, load  # noqa: E402

WEIGHTS = {"bm25": 1.0, "use": 0.5, "adapter": 0.5, "neighbours": 0.5}
GRID = {"sibling": (0.0, 0.1, 0.2, 0.3, 0.5, 0.7), "section": (0.0, 0.05, 0.1, 0.2), "refs": (0.0, 0.1, 0.2),
        "window": (1, 2, 3)}


def fused(inputs: dict, systems, ids, depth=1000):
    """Per question, the product's RRF of ``systems``' stored candidates (Hit lists, ``depth`` deep)."""
    from bsard_demo.retrievers.base import Hit
    from bsard_demo.retrievers.hybrid import reciprocal_rank_fusion

    out = []
    for i in range(len(inputs["qids"])):
        rankings = []
        for name in systems:
            rows, scores = inputs[name]
            ok = rows[i] >= 0
            rankings.append([Hit(ids[r], float(s)) for r, s in zip(rows[i][ok], scores[i][ok])])
        out.append(reciprocal_rank_fusion(rankings, 60, weights=[WEIGHTS[s] for s in systems], limit=depth))
    return out


def per_question(runs, gold_ids, k=100):
    from bsard_demo.evaluation import compute_metrics

    return np.array([compute_metrics(g, [h.article_id for h in r[:k]], k)[:2] for r, g in zip(runs, gold_ids)])


def main(argv=None) -> int:
    from bsard_demo.retrievers.structure import ArticleGraph, StructureSettings, rescore
    from bsard_demo.sources import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--inputs", default=None)
    p.add_argument("--base", default="bm25,adapter,neighbours")
    p.add_argument("--also", default="bm25,use,neighbours;bm25,neighbours;bm25,adapter;bm25,use")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--grid", default=None, help="JSON {setting: [values]} instead of GRID")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    grid = {**GRID, **json.loads(args.grid)} if args.grid else GRID
    inputs = load(Path(args.inputs) if args.inputs else default_path(args.data, args.split))
    ds = load_dataset(args.data)
    ids = [str(a) for a in ds.articles["id"]]
    t0 = time.perf_counter()
    graph = ArticleGraph(ds.articles)
    print(f"{args.data}, split {args.split}: {len(inputs['qids'])} questions; graph of {len(graph)} articles, "
          f"{graph.n_sections} sections, {sum(len(c) > 0 for c in graph.cites)} articles citing others, "
          f"built in {time.perf_counter() - t0:.1f} s; load {load_average()}")
    gold_ids = [{ids[r] for r in g} for g in inputs["gold"]]
    base_systems = args.base.split(",")
    base = fused(inputs, base_systems, ids)
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    points = [pt for pt in points if pt["sibling"] or pt["window"] == 1]  # window only matters with siblings
    table = {}
    t0 = time.perf_counter()
    for pt in points:
        st = StructureSettings(**pt).check()
        table[json.dumps(pt, sort_keys=True)] = per_question([rescore(graph, r, st, 100) for r in base], gold_ids)
    print(f"{len(points)} grid points in {time.perf_counter() - t0:.0f} s\n")
    none = json.dumps({"refs": 0.0, "section": 0.0, "sibling": 0.0, "window": 1}, sort_keys=True)
    if none not in table:
        table[none] = per_question([r[:100] for r in base], gold_ids)
    crit = {key: v.mean(axis=0).sum() for key, v in table.items()}
    best = max(crit, key=lambda key: (round(crit[key], 12), key == none))
    print(f"base {' + '.join(base_systems)} (RRF k=60): R@100 {100 * table[none][:, 0].mean():.2f}, "
          f"MAP@100 {100 * table[none][:, 1].mean():.2f}\n")
    print("| sibling | section | refs | window | R@100 | MAP@100 |\n|---:|---:|---:|---:|---:|---:|")
    for key in sorted(table, key=lambda k: -crit[k])[:25]:
        pt = json.loads(key)
        m = 100 * table[key].mean(axis=0)
        mark = " **(best)**" if key == best else ""
        print(f"| {pt['sibling']:g} | {pt['section']:g} | {pt['refs']:g} | {pt['window']} | {m[0]:.2f} | "
              f"{m[1]:.2f}{mark} |")
    # cross-validation of the choice
    n = len(base)
    order = np.random.default_rng(args.seed).permutation(n)
    held = np.zeros((n, 2))
    chosen = []
    for f in np.array_split(order, args.folds):
        rest = np.setdiff1d(np.arange(n), f)
        pick = max(table, key=lambda key: (round(table[key][rest].mean(axis=0).sum(), 12), key == none))
        chosen.append(pick)
        held[f] = table[pick][f]
    print(f"\n{args.folds}-fold cross-validation of the choice (chosen on the other folds): held-out R@100 "
          f"{100 * held[:, 0].mean():.2f}, MAP@100 {100 * held[:, 1].mean():.2f} against the base's "
          f"{100 * table[none][:, 0].mean():.2f} / {100 * table[none][:, 1].mean():.2f}; points chosen: "
          + "; ".join(chosen))
    st = StructureSettings(**json.loads(best))
    spent = []
    for r in base:
        t1 = time.perf_counter()
        rescore(graph, r, st, 100)
        spent.append(time.perf_counter() - t1)
    print(f"\nre-scoring one question's 1000 fused hits with the chosen point: "
          f"{1000 * np.median(spent):.1f} ms median, "
          f"p95 {1000 * np.percentile(spent, 95):.1f} ms (load {load_average()})")
    print(f"\nchosen: {st.label()}\n")
    print("| base | R@100 | MAP@100 | + structure R@100 | MAP@100 |\n|---|---:|---:|---:|---:|")
    rows_out = []
    for systems in [base_systems] + [s.split(",") for s in args.also.split(";") if s]:
        runs = base if systems == base_systems else fused(inputs, systems, ids)
        a = 100 * per_question([r[:100] for r in runs], gold_ids).mean(axis=0)
        b = 100 * per_question([rescore(graph, r, st, 100) for r in runs], gold_ids).mean(axis=0)
        rows_out.append({"base": systems, "before": a.tolist(), "after": b.tolist()})
        print(f"| {' + '.join(systems)} | {a[0]:.2f} | {a[1]:.2f} | {b[0]:.2f} | {b[1]:.2f} |")
    if args.json:
        grid_means = {k: v.mean(axis=0).tolist() for k, v in table.items()}
        Path(args.json).write_text(json.dumps({"best": json.loads(best), "cv": held.mean(axis=0).tolist(),
                                               "cv_chosen": chosen, "bases": rows_out, "grid": grid_means}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
