"""Decision script (issue 31): which inputs, candidates and settings the learned ranker takes, by 5-fold
cross-validation on a train split, then one test run. Retired once its decision is a constant of the package.

    python bench/ranker_cv.py inputs --data ../shared/data/frlaw-dev --split train --adapter ADAPTER --out train.npz
    python bench/ranker_cv.py inputs --data ../shared/data/frlaw-dev --split test --adapter ADAPTER --out test.npz
    python bench/ranker_cv.py cv --data ../shared/data/frlaw-dev --inputs train.npz --systems bm25,use,neighbours,e5
    python bench/ranker_cv.py test --data ../shared/data/frlaw-dev --inputs train.npz --test-inputs test.npz ...

``inputs`` stores each system's 1000 best corpus rows per question, computed by the product: on train,
``bsard_demo.training.ranker.train_inputs`` (the adapter's runs out-of-fold, the neighbours leave-one-out, exactly
what ``train --ranker`` fits on); on test, the retrievers ``run`` builds (the adapter folder itself, the neighbours
of train). ``--extra e5`` adds zero-shot systems (``e5``: multilingual-e5-small through ONNX Runtime). ``cv`` builds
the product's features (:func:`bsard_demo.retrievers.ranker.question_features`) for the chosen systems and
candidate depth, cuts the product's folds (``folds_by_text``), fits LambdaRank on 4 folds and scores the 5th with
the product's ``evaluate``. Prints held-out R@100 and MAP@100 and the share of gold among the candidates.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/ranker_cv.py
    import _path  # noqa: F401

from bench.common import load_average  # noqa: E402

DEPTH = 1000
EXTRA_SPECS = {"e5": ("dense", {"encoder": "e5", "backend": "onnx"})}


def _pad(runs, depth=DEPTH):
    rows = np.full((len(runs), depth), -1, dtype=np.int64)
    scores = np.zeros((len(runs), depth))
    for i, (r, s) in enumerate(runs):
        rows[i, :len(r[:depth])] = r[:depth]
        scores[i, :len(s[:depth])] = s[:depth]
    return rows, scores


def compute(args) -> None:
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.retrievers.neighbours import labelled_with_keys
    from bsard_demo.sources import load_dataset
    from bsard_demo.training.ranker import RankerOptions, train_inputs

    ds = load_dataset(args.data)
    cache = Path(args.cache_dir) if args.cache_dir else None
    row = {str(a): i for i, a in enumerate(ds.articles["id"])}
    t0 = time.perf_counter()
    extra = [e for e in (args.extra or "").split(",") if e]
    out: dict = {}
    if args.split == "train":
        keys, _, _ = labelled_with_keys(ds, "train")
        _, texts, gold, runs, votes = train_inputs(RankerOptions(out="-", adapter=args.adapter, split="train",
                                                                 cache_root=cache), ds)
    else:
        q = ds.questions(args.split)
        keys = [str(k) for k in q["id"]]
        texts = [str(t) for t in q["question"]]
        gold = [np.array(sorted({row[a] for a in g if a in row}), dtype=np.int64) for g in q["article_ids"]]
        specs = {"bm25": ("bm25", {}), "use": ("dense", {"encoder": "use"}),
                 "adapter": ("dense", {"encoder": str(args.adapter)}), "neighbours": ("neighbours", {"split": "train"})}
        built = {n: build_retriever(RetrieverSpec(k, o), ds, cache_root=cache) for n, (k, o) in specs.items()}
        runs = {}
        for n, r in built.items():
            runs[n] = [(np.array([row[h.article_id] for h in hs]), np.array([h.score for h in hs]))
                       for hs in r.search_many(texts, DEPTH)]
        votes = [built["neighbours"].votes(t) for t in texts]
    print(f"base systems: {time.perf_counter() - t0:.0f} s (load {load_average()})", flush=True)
    for name in extra:
        t1 = time.perf_counter()
        kind, opts = EXTRA_SPECS[name]
        r = build_retriever(RetrieverSpec(kind, opts), ds, cache_root=cache)
        runs[name] = [(np.array([row[h.article_id] for h in hs]), np.array([h.score for h in hs]))
                      for hs in r.search_many(texts, DEPTH)]
        print(f"{name}: {time.perf_counter() - t1:.0f} s (load {load_average()})", flush=True)
    for name, value in runs.items():
        out[f"{name}_rows"], out[f"{name}_scores"] = _pad(value)
    vi, vc, vs, vl = [], [], [], []
    for count, best in votes:
        nz = np.flatnonzero(count)
        vi.append(nz), vc.append(count[nz]), vs.append(best[nz]), vl.append(len(nz))
    np.savez_compressed(args.out, keys=np.array(keys), texts=np.array(texts), gold_flat=np.concatenate(gold),
                        gold_len=np.array([len(g) for g in gold]), votes_idx=np.concatenate(vi),
                        votes_count=np.concatenate(vc), votes_sim=np.concatenate(vs), votes_len=np.array(vl),
                        systems=np.array(list(runs)), **out)


def load(path) -> dict:
    z = np.load(path, allow_pickle=False)
    split = lambda a, n: np.split(a, np.cumsum(n)[:-1])  # noqa: E731
    out = {"keys": z["keys"].tolist(), "texts": z["texts"].tolist(), "gold": split(z["gold_flat"], z["gold_len"]),
           "votes": list(zip(split(z["votes_idx"], z["votes_len"]), split(z["votes_count"], z["votes_len"]),
                             split(z["votes_sim"], z["votes_len"]))), "runs": {}}
    for name in z["systems"].tolist():
        out["runs"][name] = (z[f"{name}_rows"], z[f"{name}_scores"])
    return out


def add_inputs(args) -> None:
    """Adds ``--extra`` systems' runs to a stored inputs file (the corpus' e5 embeddings built after the rest)."""
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.sources import load_dataset

    ds = load_dataset(args.data)
    row = {str(a): i for i, a in enumerate(ds.articles["id"])}
    z = dict(np.load(args.inputs, allow_pickle=False))
    texts = z["texts"].tolist()
    systems = z["systems"].tolist()
    for name in args.extra.split(","):
        t1 = time.perf_counter()
        kind, opts = EXTRA_SPECS[name]
        r = build_retriever(RetrieverSpec(kind, opts), ds, cache_root=Path(args.cache_dir) if args.cache_dir else None)
        runs = [(np.array([row[h.article_id] for h in hs]), np.array([h.score for h in hs]))
                for hs in r.search_many(texts, DEPTH)]
        z[f"{name}_rows"], z[f"{name}_scores"] = _pad(runs)
        systems = [s for s in systems if s != name] + [name]
        print(f"{name}: {time.perf_counter() - t1:.0f} s (load {load_average()})", flush=True)
    z["systems"] = np.array(systems)
    np.savez_compressed(args.inputs, **z)


def features(data: dict, systems, n_articles: int, graph, lengths, priors, candidates: int, groups, drop=()):
    """The product's features (:func:`question_features` with the GROUPS columns) of every question, without the
    ``drop`` columns (names of ``feature_names(systems, groups=True)``)."""
    from bsard_demo.retrievers.ranker import feature_names, question_features
    from bsard_demo.retrievers.structure import StructureSettings

    structure = StructureSettings()
    names = feature_names(systems, groups=True)
    keep = [j for j, name in enumerate(names) if name not in set(drop)]
    out = []
    for i, group in zip(range(len(data["texts"])), groups):
        idx, count, sim = data["votes"][i]
        votes = np.zeros(n_articles)
        votes[idx] = count
        votes_sim = np.zeros(n_articles)
        votes_sim[idx] = sim
        runs = {s: (data["runs"][s][0][i], data["runs"][s][1][i]) for s in systems}
        rows, X = question_features(runs, graph=graph, structure=structure, prior=priors[i], lengths=lengths,
                                    votes=votes, votes_sim=votes_sim, systems=systems, candidates=candidates,
                                    group_priors=group)
        out.append((rows, X[:, keep]))
    return out


def _measure(ds, keys, gold_rows, ranked, qrels=None) -> dict:
    from bsard_demo.evaluation import evaluate

    qrels = qrels or {k: frozenset(str(r) for r in g) for k, g in zip(keys, gold_rows)}
    run = {k: [str(r) for r in rows[:100]] for k, rows in zip(keys, ranked)}
    return evaluate(qrels, run, ks=(100,)).means


def _order(rows, X, model, systems):
    from bsard_demo.retrievers.ranker import ranked_rows

    return ranked_rows(rows, X, model.predict(X, raw_score=True), systems)[0]


def cv(args) -> None:
    from bsard_demo.retrievers.ranker import article_lengths
    from bsard_demo.retrievers.structure import graph_of
    from bsard_demo.sources import load_dataset
    from bsard_demo.training.ranker import (
        CONFIGS,
        fit_lambdarank,
        folds_by_text,
        left_out_group_priors,
        left_out_priors,
    )

    ds = load_dataset(args.data)
    data = load(args.inputs)
    n = len(ds.articles)
    graph, lengths = graph_of(ds.articles), article_lengths(ds.articles)
    priors = list(left_out_priors(data["gold"], data["texts"], n))
    groups = list(left_out_group_priors(data["gold"], data["texts"], graph))
    folds = folds_by_text(data["texts"], 5, 0)
    for systems in args.systems:
        systems = systems.split(",")
        for candidates, drop in [(c, d) for c in args.candidates for d in args.drop]:
            drop = [d for d in drop.split(",") if d]
            t0 = time.perf_counter()
            feats = features(data, systems, n, graph, lengths, priors, candidates, groups, drop)
            labels = [np.isin(r, g).astype(np.int32) for (r, _), g in zip(feats, data["gold"])]
            share = np.mean([y.sum() / len(g) for y, g in zip(labels, data["gold"])])
            sizes = np.median([len(y) for y in labels])
            for config in args.configs:
                t1 = time.perf_counter()
                ranked = [None] * len(feats)
                for f in range(5):
                    fit = [i for i in range(len(feats)) if folds[i] != f]
                    model = fit_lambdarank([feats[i][1] for i in fit], [labels[i] for i in fit], CONFIGS[config])
                    for i in np.flatnonzero(folds == f):
                        ranked[i] = _order(*feats[i], model.booster_, systems)
                m = _measure(ds, data["keys"], data["gold"], ranked)
                print(json.dumps({"systems": systems, "candidates": candidates, "config": config, "drop": drop,
                                  "gold_in_candidates": round(100 * share, 2), "median_candidates": sizes,
                                  "R@100": round(100 * m["recall@100"], 2), "MAP@100": round(100 * m["map@100"], 2),
                                  "features_s": round(t1 - t0), "fit_s": round(time.perf_counter() - t1),
                                  "load": load_average()}), flush=True)


def test(args) -> None:
    from bsard_demo.retrievers.ranker import article_lengths, citation_counts, group_priors
    from bsard_demo.retrievers.structure import graph_of
    from bsard_demo.sources import load_dataset
    from bsard_demo.training.ranker import CONFIGS, fit_lambdarank, left_out_group_priors, left_out_priors

    ds = load_dataset(args.data)
    train, held = load(args.inputs), load(args.test_inputs)
    n = len(ds.articles)
    graph, lengths = graph_of(ds.articles), article_lengths(ds.articles)
    systems = args.systems[0].split(",")
    candidates = args.candidates[0]
    priors = list(left_out_priors(train["gold"], train["texts"], n))
    drop = [d for d in args.drop[0].split(",") if d]
    groups = list(left_out_group_priors(train["gold"], train["texts"], graph))
    feats = features(train, systems, n, graph, lengths, priors, candidates, groups, drop)
    labels = [np.isin(r, g).astype(np.int32) for (r, _), g in zip(feats, train["gold"])]
    model = fit_lambdarank([X for _, X in feats], labels, CONFIGS[args.configs[0]])
    prior = citation_counts(train["gold"], n)
    m_test = len(held["texts"])
    test_feats = features(held, systems, n, graph, lengths, [prior] * m_test, candidates,
                          [group_priors(train["gold"], graph)] * m_test, drop)
    ranked = [_order(r, X, model.booster_, systems) for r, X in test_feats]
    ids = [str(a) for a in ds.articles["id"]]
    run = {k: [ids[r] for r in rows] for k, rows in zip(held["keys"], ranked)}
    m = _measure(ds, held["keys"], None, [[ids[r] for r in rows] for rows in ranked], qrels=ds.qrels("test"))
    print(json.dumps({"systems": systems, "candidates": candidates, "config": args.configs[0],
                      "R@100": round(100 * m["recall@100"], 2), "MAP@100": round(100 * m["map@100"], 2)}))
    if args.out_run:
        with open(args.out_run, "w", encoding="utf-8") as fh:
            for k, rows in run.items():
                for rank, a in enumerate(rows[:500], 1):
                    fh.write(f"{k} Q0 {a} {rank} {1000 - rank} cv\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("inputs", "add", "cv", "test"))
    p.add_argument("--data", required=True)
    p.add_argument("--split", default="train")
    p.add_argument("--adapter")
    p.add_argument("--extra", default="")
    p.add_argument("--cache-dir")
    p.add_argument("--out")
    p.add_argument("--inputs")
    p.add_argument("--test-inputs")
    p.add_argument("--out-run")
    p.add_argument("--systems", nargs="+", default=["bm25,use,adapter,neighbours"])
    p.add_argument("--candidates", nargs="+", type=int, default=[200])
    p.add_argument("--configs", nargs="+", default=["l7-300"])
    p.add_argument("--drop", nargs="+", default=[""],
                   help="sets of feature columns left out, comma-separated names (GROUPS: the issue 31 columns)")
    args = p.parse_args(argv)
    {"inputs": compute, "add": add_inputs, "cv": cv, "test": test}[args.command](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
