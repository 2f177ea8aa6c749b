"""Choosing the neighbours' similarity threshold (``min_similarity``, bsard_demo/retrievers/neighbours.py) on a train
split by cross-validation, then its figures on test (issue 38 item 3).

    python bench/neighbours_threshold.py --data ../shared/data/frlaw-dev [--thresholds 0,0.1,...] [--folds 5]
        [--bsard ../shared/data/bsard]

The similarity is the product's (:class:`~bsard_demo.retrievers.neighbours.SelfScores`: a training question's BM25
score for the question divided by the question's score against itself, 0–1). For every threshold the product's
retrievers are built as ``run`` builds them (:func:`~bsard_demo.retrievers.registry.make_hybrid` of BM25 and
``NeighboursRetriever(min_similarity=t)``; BM25 searched once, 1000 deep, and reused), for the first visitor's
hybrid without embeddings (BM25 + neighbours + structure, RRF k 60, weights 1 and 0.5) and without the structure.
On train each question draws on the other train questions only (the product's leave-one-out); on test on all of
train. Per question: R@100 and AP@100 (the product's :func:`~bsard_demo.evaluation.compute_metrics`), and how many of
its neighbours are kept and how many of them are related (cite at least one of its gold articles).

With ``--bsard``, neighbours alone on BSARD's question files (over a corpus of the cited ids, as
tests/retrievers/test_neighbours.py does: every article neighbours can rank is cited by a training question), train
leave-one-out and test, for every threshold: the check that the threshold decided on frlaw-dev holds for BSARD.

Two rules choose the threshold, over BM25 + neighbours + structure. ``strict`` (the first one fixed): the highest
threshold whose R@100 + MAP@100 is not below no threshold's. ``noise`` (the brief's "not lower than without a
threshold, within noise"; the one decided by): the highest threshold whose R@100 and MAP@100 are not significantly
below no threshold's (compare's paired permutation test, p >= 0.05, over the same questions). Each is
cross-validated (chosen on the other folds, scored on the held-out fold, against no threshold's held-out figures,
per fold), then applied to all of train; the threshold ``--rule`` chooses there is run on test.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/neighbours_threshold.py
    import _path  # noqa: F401

from bench.common import load_average  # noqa: E402

THRESHOLDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
DEPTH = 1000
PANEL_TOP = 5  # bsard_demo.app.answers.PANEL_TOP


class Stored:
    """A retriever answering from rankings searched once (BM25's, the same for every threshold)."""

    def __init__(self, retriever, questions, depth: int):
        self.name, self.article_ids = retriever.name, retriever.article_ids
        self.size = len(self.article_ids)
        self._hits = dict(zip(questions, retriever.search_many(list(questions), depth)))

    def search_many(self, questions, k: int = 100):
        return [self._hits[q][:k] for q in questions]


def measured(system, texts, gold, k: int = 100) -> np.ndarray:
    """Per question ``(R@k, AP@k)`` in %."""
    from bsard_demo.evaluation import compute_metrics

    runs = system.search_many(list(texts), k)
    return 100 * np.array([compute_metrics(g, [h.article_id for h in r[:k]], k)[:2] for r, g in zip(runs, gold)])


def neighbour_stats(retriever, texts, gold) -> np.ndarray:
    """Per question: neighbours kept, of them related (citing a gold article), the panel's (first
    :data:`PANEL_TOP`) kept and related."""
    out = []
    for text, g in zip(texts, gold):
        named = retriever.neighbours(text)
        related = [bool(set(n.article_ids) & g) for n in named]
        out.append((len(named), sum(related), min(len(named), PANEL_TOP), sum(related[:PANEL_TOP])))
    return np.array(out, dtype=float)


def figures(ds, bm25: Stored, texts, gold, thresholds):
    """``{t: {"struct": (n, 2), "plain": (n, 2), "stats": (n, 4)}}`` for ``texts``."""
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.retrievers.registry import hybrid_spec, make_hybrid

    out = {}
    for t in thresholds:
        nb = NeighboursRetriever.build(ds, min_similarity=t)
        size = len(ds.articles)
        struct = make_hybrid(hybrid_spec("neighbours", structure=True), [bm25, nb], corpus_size=size,
                             articles=ds.articles)
        plain = make_hybrid(hybrid_spec("neighbours"), [bm25, nb], corpus_size=size)
        out[t] = {"struct": measured(struct, texts, gold), "plain": measured(plain, texts, gold),
                  "stats": neighbour_stats(nb, texts, gold)}
    return out


def not_lower(got, base) -> bool:
    """R@100 and MAP@100 (columns) of ``got`` not significantly below ``base``'s (p >= 0.05, compare's test)."""
    from bsard_demo.evaluation.stats import paired_permutation_test

    return all(got[:, i].mean() >= base[:, i].mean() or paired_permutation_test(got[:, i], base[:, i]) >= 0.05
               for i in (0, 1))


def pick(table, rows, thresholds, rule: str = "noise", bsard_train: dict | None = None) -> float:
    """The highest threshold of ``rule`` (module docstring) over ``rows``, BM25 + neighbours + structure; with
    ``bsard_train`` (rule ``noise``), BSARD's train figures not significantly lower either."""
    base = table[thresholds[0]]["struct"][rows]

    def kept(t) -> bool:
        got = table[t]["struct"][rows]
        if rule == "strict":
            return got.mean(axis=0).sum() >= base.mean(axis=0).sum() - 1e-9
        return not_lower(got, base) and (bsard_train is None or not_lower(bsard_train[t], bsard_train[thresholds[0]]))

    return max(t for t in thresholds if kept(t))


def print_table(title, table, thresholds, chosen=None, folds=None):
    """One row per threshold; p: the paired permutation test (compare's) of + structure against no threshold;
    with ``folds``, its gain per fold (mean ± sd of the folds' means)."""
    from bsard_demo.evaluation.stats import paired_permutation_test

    print(f"\n{title}\n")
    head = ("| min similarity | + structure R@100 | MAP@100 | p R@100 | p MAP@100 | no structure R@100 | MAP@100 "
            "| neighbours kept | of them related | panel shown | of them related | questions with none |")
    rule = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    if folds is not None:
        head, rule = head + " gain per fold R@100 | MAP@100 |", rule + "---:|---:|"
    print(head + "\n" + rule)
    base = table[thresholds[0]]["struct"]
    for t in thresholds:
        s, p, st = (table[t][key] for key in ("struct", "plain", "stats"))
        m, q = s.mean(axis=0), p.mean(axis=0)
        pv = ["" if t == thresholds[0] else f"{paired_permutation_test(s[:, i], base[:, i]):.2g}" for i in (0, 1)]
        kept, rel, shown, shown_rel = st.sum(axis=0)
        mark = " **(chosen)**" if t == chosen else ""
        line = (f"| {t:g}{mark} | {m[0]:.2f} | {m[1]:.2f} | {pv[0]} | {pv[1]} | {q[0]:.2f} | {q[1]:.2f} | "
                f"{kept / len(st):.1f} | {100 * rel / max(kept, 1):.0f} % | {shown / len(st):.1f} | "
                f"{100 * shown_rel / max(shown, 1):.0f} % | {100 * np.mean(st[:, 0] == 0):.0f} % |")
        if folds is not None:
            g = np.array([s[f].mean(axis=0) - base[f].mean(axis=0) for f in folds])
            line += " " + " | ".join(f"{g[:, i].mean():+.2f} ± {g[:, i].std(ddof=1):.2f}" for i in (0, 1)) + " |"
        print(line)


def bsard(folder, thresholds) -> dict:
    """Neighbours alone on BSARD's question files, per threshold (train leave-one-out, test); returns the train
    split's per-question ``(R@100, AP@100)`` by threshold."""
    import dataclasses

    import pandas as pd

    from bsard_demo.dataset import normalize_articles
    from bsard_demo.evaluation import compute_metrics
    from bsard_demo.evaluation.stats import paired_permutation_test
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.sources import load_dataset

    ds = load_dataset(folder, need_corpus=False)
    cited = sorted({a for split in ds.splits.values() for ids in split["article_ids"] for a in ids}, key=int)
    ds = dataclasses.replace(ds, articles=normalize_articles(pd.DataFrame({"id": cited, "article": ""})))
    print(f"\nBSARD ({folder}): neighbours alone over the {len(cited)} cited ids; p: against no threshold, train\n")
    print("| min similarity | train R@100 (LOO) | train MAP@100 | p R@100 | p MAP@100 | test R@100 | test MAP@100 "
          "| test neighbours kept | test questions with none |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    out = {}
    for t in thresholds:
        nb = NeighboursRetriever.build(ds, min_similarity=t)
        per = {}
        for split in ("train", "test"):
            q, qrels = ds.questions(split), ds.qrels(split)
            texts = list(q["question"])
            runs = nb.search_many(texts, 100)
            per[split] = 100 * np.array([compute_metrics(qrels[str(i)], [h.article_id for h in r], 100)[:2]
                                         for i, r in zip(q["id"], runs)])
        out[t] = per["train"]
        pv = ["" if t == thresholds[0] else f"{paired_permutation_test(out[t][:, i], out[thresholds[0]][:, i]):.2g}"
              for i in (0, 1)]
        a, b = per["train"].mean(axis=0), per["test"].mean(axis=0)
        kept = [len(nb.neighbours(text)) for text in texts]
        print(f"| {t:g} | {a[0]:.2f} | {a[1]:.2f} | {pv[0]} | {pv[1]} | {b[0]:.2f} | {b[1]:.2f} | "
              f"{np.mean(kept):.1f} | {100 * np.mean(np.array(kept) == 0):.0f} % |")
    return out


def main(argv=None) -> int:
    from bsard_demo.retrievers.bm25 import BM25Retriever
    from bsard_demo.sources import load_dataset

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--thresholds", default=",".join(f"{t:g}" for t in THRESHOLDS))
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rule", choices=("noise", "strict"), default="noise")
    p.add_argument("--cache-dir", type=Path, default=None)
    p.add_argument("--bsard", type=Path, default=None, help="BSARD's question files (questions_train/test.csv)")
    args = p.parse_args(argv)
    thresholds = sorted(float(t) for t in args.thresholds.split(","))
    if thresholds[0] != 0.0:
        thresholds = [0.0] + thresholds
    bsard_train = bsard(args.bsard, thresholds) if args.bsard else None
    t0 = time.perf_counter()
    ds = load_dataset(args.data)
    splits = {}
    for split in ("train", "test"):
        q = ds.questions(split)
        qrels = ds.qrels(split)
        splits[split] = (list(q["question"]), [set(qrels[str(i)]) for i in q["id"]])
    bm25_index = BM25Retriever.build(ds.articles, cache_root=args.cache_dir)
    every = splits["train"][0] + splits["test"][0]
    bm25 = Stored(bm25_index, list(dict.fromkeys(every)), DEPTH)
    print(f"{args.data}: {len(ds.articles)} articles, {len(splits['train'][0])} train / {len(splits['test'][0])} "
          f"test questions; BM25 searched {DEPTH} deep in {time.perf_counter() - t0:.0f} s; load {load_average()}")
    t0 = time.perf_counter()
    train = figures(ds, bm25, *splits["train"], thresholds)
    print(f"train: {len(thresholds)} thresholds in {time.perf_counter() - t0:.0f} s; load {load_average()}")
    n = len(splits["train"][0])
    order = np.random.default_rng(args.seed).permutation(n)
    folds = np.array_split(order, args.folds)
    best = pick(train, np.arange(n), thresholds, args.rule, bsard_train)
    print_table(f"train ({n} questions, leave-one-out neighbours), every threshold", train, thresholds, best,
                folds=folds)
    rules = [("strict", None), ("noise", None)] + ([("noise", bsard_train)] if bsard_train else [])
    for rule, gate in rules:
        held, base, chosen, gains = np.zeros((n, 2)), np.zeros((n, 2)), [], []
        for f in folds:
            t = pick(train, np.setdiff1d(np.arange(n), f), thresholds, rule, gate)
            chosen.append(t)
            held[f], base[f] = train[t]["struct"][f], train[0.0]["struct"][f]
            gains.append(held[f].mean(axis=0) - base[f].mean(axis=0))
        gains = np.array(gains)
        on_all = pick(train, np.arange(n), thresholds, rule, gate)
        name = rule + (" + BSARD train" if gate else "")
        print(f"\nrule {name}: {args.folds}-fold cross-validation (seed {args.seed}; chosen on the other folds, "
              f"scored on the held-out fold), BM25 + neighbours + structure: held-out R@100 {held[:, 0].mean():.2f}, "
              f"MAP@100 {held[:, 1].mean():.2f} against no threshold's {base[:, 0].mean():.2f} / "
              f"{base[:, 1].mean():.2f}; gain per fold R@100 {gains[:, 0].mean():+.2f} ± "
              f"{gains[:, 0].std(ddof=1):.2f}, MAP@100 {gains[:, 1].mean():+.2f} ± {gains[:, 1].std(ddof=1):.2f}; "
              "thresholds chosen: " + ", ".join(f"{t:g}" for t in chosen) + f"; on all of train: {on_all:g}")
    print(f"\nchosen (rule {args.rule}{' + BSARD train' if bsard_train else ''}) on all of train: {best:g}")
    t0 = time.perf_counter()
    test = figures(ds, bm25, *splits["test"], thresholds)
    print(f"test: {time.perf_counter() - t0:.0f} s; load {load_average()}")
    print_table(f"test ({len(splits['test'][0])} questions, neighbours from all of train; every threshold for the "
                "record, the choice was made on train)", test, thresholds, best)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
