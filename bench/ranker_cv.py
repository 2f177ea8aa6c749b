"""Choosing the learned ranker (LightGBM LambdaRank over every system's candidates) on a train split,
then scoring the chosen one on another split.

    python bench/ranking_inputs.py --data ../shared/data/frlaw-dev --split train       # once
    python bench/ranker_cv.py cv --data ../shared/data/frlaw-dev [--configs all] [--drop GROUP ...]
    python bench/ranker_cv.py test --data ../shared/data/frlaw-dev --config NAME --out-run FILE

Inputs (bench/ranking_inputs.py): per question, each system's 1000 best corpus rows and scores
(``bm25``, ``use``, ``adapter``: out-of-fold on train, ``neighbours``: leave-one-out on train).
Features: :func:`bsard_demo.retrievers.ranker.question_features` (each system's score, rank,
normalised score and gap; the neighbours' votes and best similarity, recomputed here with the
product's neighbours retriever, leave-one-out on train; the citation prior of train, leave-one-
out on train; the RRF of the systems; structure features of the decided structure re-scoring;
article length). Label: gold or not. Groups: questions.

``cv``: each configuration of :data:`CONFIGS` is fitted on four of the five folds of the inputs
(the adapter's folds) and ranks the fifth; printed: held-out R@100 and MAP@100 (the product's
``compute_metrics``) over every gold article (gold outside the candidates counts as missed),
beside the RRF base (BM25 + adapter + neighbours) and its structure re-scoring on the same
questions. ``--drop`` leaves feature groups out (``bm25 use adapter neighbours votes prior
fused structure length``) to see which signals move what. Deterministic: LightGBM seeded, one
thread, ``deterministic=True``.

``test``: the configuration fitted on every train question ranks the other split's questions;
writes a 500-deep TREC run for ``python -m bsard_demo compare``.
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
from bench.ranking_inputs import SYSTEMS, default_path, load  # noqa: E402
from bsard_demo.training.ranker import CONFIGS, fit_lambdarank  # noqa: E402 - the product's settings and fit

GROUPS = {"bm25": ("bm25_",), "use": ("use_",), "adapter": ("adapter_",), "neighbours": ("neighbours_",),
          "votes": ("votes",), "prior": ("prior",), "fused": ("fused_",),
          "structure": ("sibling", "section_best", "cited_by", "position", "section_size", "relative_position"),
          "length": ("length",)}


def build_matrix(ds, inputs, *, train_labels, loo: bool, structure, timings=None):
    """Every question's candidates and features: a list of (rows, X, y)."""
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.retrievers.ranker import article_lengths, citation_counts, question_features
    from bsard_demo.retrievers.structure import ArticleGraph

    graph = ArticleGraph(ds.articles)
    n = len(graph)
    lengths = article_lengths(ds.articles)
    prior_all = citation_counts(train_labels, n)
    nb = NeighboursRetriever.build(ds)  # its n most similar training questions, never the question itself
    votes = [nb.votes(text) for text in inputs["texts"]]
    out = []
    for i in range(len(inputs["qids"])):
        runs = {name: (inputs[name][0][i], inputs[name][1][i]) for name in SYSTEMS}
        prior = prior_all.copy()
        if loo:  # a training question's own labels are not in its prior
            prior[np.unique(inputs["gold"][i])] -= 1
        t0 = time.perf_counter()
        rows, X = question_features(runs, graph=graph, structure=structure, prior=prior, lengths=lengths,
                                    votes=votes[i][0], votes_sim=votes[i][1])
        if timings is not None:
            timings.append(time.perf_counter() - t0)
        y = np.isin(rows, inputs["gold"][i]).astype(np.int32)
        out.append((rows, X, y))
    return graph, out


def columns_kept(drop):
    from bsard_demo.retrievers.ranker import FEATURES

    prefixes = tuple(p for g in drop for p in GROUPS[g])
    if not prefixes:
        return list(range(len(FEATURES)))
    return [j for j, name in enumerate(FEATURES) if not name.startswith(prefixes)]


def fit(matrix, idx, config, keep):
    return fit_lambdarank([matrix[i][1][:, keep] for i in idx], [matrix[i][2] for i in idx], config)


def ranked(matrix_i, model, keep, k=500):
    from bsard_demo.retrievers.ranker import ranked_rows

    rows, X, _ = matrix_i
    if not len(rows):
        return rows, np.zeros(0)
    rows, score = ranked_rows(rows, X, model.predict(X[:, keep]))  # ties: the fusion's order
    return rows[:k], score[:k]


def metrics(rows_list, gold, ids):
    from bsard_demo.evaluation import compute_metrics

    return np.array([compute_metrics({ids[g] for g in gs}, [ids[r] for r in rs[:100]], 100)[:2]
                     for rs, gs in zip(rows_list, gold)])


def main(argv=None) -> int:
    from bsard_demo.retrievers.ranker import FEATURES, rrf_rows
    from bsard_demo.retrievers.structure import StructureSettings, rescore_rows
    from bsard_demo.sources import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("cv", "test"))
    p.add_argument("--data", required=True)
    p.add_argument("--inputs", default=None, help="train inputs (default bench/out/ranking/<data>-train.npz)")
    p.add_argument("--test-inputs", default=None)
    p.add_argument("--split", default="test")
    p.add_argument("--configs", default="all")
    p.add_argument("--config", default=None)
    p.add_argument("--drop", nargs="*", default=[])
    p.add_argument("--structure", default="{}",
                   help="JSON StructureSettings of the candidates (default: the decided defaults)")
    p.add_argument("--out-run", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    ds = load_dataset(args.data)
    ids = [str(a) for a in ds.articles["id"]]
    structure = StructureSettings.from_options(json.loads(args.structure))
    train = load(Path(args.inputs) if args.inputs else default_path(args.data, "train"))
    t0 = time.perf_counter()
    graph, matrix = build_matrix(ds, train, train_labels=train["gold"], loo=True, structure=structure)
    keep = columns_kept(args.drop)
    sizes = [len(m[2]) for m in matrix]
    cover = np.mean([m[2].sum() / len(g) for m, g in zip(matrix, train["gold"])])
    print(f"{args.data}, train: {len(matrix)} questions, {sum(sizes)} candidates (median {int(np.median(sizes))} a "
          f"question), {100 * cover:.2f} % of the gold among them; features {len(keep)} of {len(FEATURES)}"
          f"{' (dropped: ' + ', '.join(args.drop) + ')' if args.drop else ''}; "
          f"built in {time.perf_counter() - t0:.0f} s; "
          f"load {load_average()}", flush=True)
    if args.what == "cv":
        folds = train["fold"]
        base_rows, struct_rows = [], []
        for i in range(len(matrix)):
            runs = {name: (train[name][0][i], train[name][1][i]) for name in ("bm25", "adapter", "neighbours")}
            fr, fs = rrf_rows(runs, len(ids))
            base_rows.append(fr[:500])
            struct_rows.append(rescore_rows(graph, fr, fs, structure, 500)[0])
        base = metrics(base_rows, train["gold"], ids)
        st = metrics(struct_rows, train["gold"], ids)
        print("\n| system (held-out train questions, 5 folds) | R@100 | MAP@100 | fit s |\n|---|---:|---:|---:|")
        print(f"| RRF BM25 + adapter + neighbours (1, 0.5, 0.5) | {100 * base[:, 0].mean():.2f} | "
              f"{100 * base[:, 1].mean():.2f} | |")
        print(f"| + {structure.label()} | {100 * st[:, 0].mean():.2f} | {100 * st[:, 1].mean():.2f} | |", flush=True)
        results = {"base": base.tolist(), "structure": st.tolist()}
        names = list(CONFIGS) if args.configs == "all" else args.configs.split(",")
        for name in names:
            t1 = time.perf_counter()
            held = [None] * len(matrix)
            for f in np.unique(folds):
                test_idx = np.flatnonzero(folds == f)
                model = fit(matrix, np.flatnonzero(folds != f), CONFIGS[name], keep)
                for i in test_idx:
                    held[i] = ranked(matrix[i], model, keep)[0]
            m = metrics(held, train["gold"], ids)
            results[name] = m.tolist()
            print(f"| LambdaRank {name} {json.dumps(CONFIGS[name])} | {100 * m[:, 0].mean():.2f} | "
                  f"{100 * m[:, 1].mean():.2f} | {time.perf_counter() - t1:.0f} |", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"drop": args.drop, "structure": structure.as_dict(),
                                                   "results": results}))
        return 0
    test = load(Path(args.test_inputs) if args.test_inputs else default_path(args.data, args.split))
    feature_s = []
    _, test_matrix = build_matrix(ds, test, train_labels=train["gold"], loo=False, structure=structure,
                                  timings=feature_s)
    t1 = time.perf_counter()
    model = fit(matrix, np.arange(len(matrix)), CONFIGS[args.config], keep)
    print(f"fitted {args.config} on every train question in {time.perf_counter() - t1:.0f} s")
    lines = []
    runs = []
    timings = []
    for qid, m in zip(test["qids"], test_matrix):
        t2 = time.perf_counter()
        rows, scores = ranked(m, model, keep)
        timings.append(time.perf_counter() - t2)
        runs.append(rows)
        lines += [f"{qid} Q0 {ids[r]} {rank} {len(rows) + 1 - rank} ranker-{args.config}" for rank, (r, s) in
                  enumerate(zip(rows, scores), start=1)]
    m = metrics(runs, test["gold"], ids)
    print(f"{args.split}: R@100 {100 * m[:, 0].mean():.2f}, MAP@100 {100 * m[:, 1].mean():.2f}")
    print(f"per question on top of its inputs: features {1000 * np.median(feature_s):.1f} ms (median; p95 "
          f"{1000 * np.percentile(feature_s, 95):.1f}), prediction and ordering {1000 * np.median(timings):.1f} ms "
          f"(median; p95 {1000 * np.percentile(timings, 95):.1f}); load {load_average()}")
    if args.out_run:
        Path(args.out_run).write_text("\n".join(lines) + "\n")
        print(f"wrote {args.out_run}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
