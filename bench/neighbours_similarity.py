"""Question similarity for the neighbours retriever (bsard_demo/retrievers/neighbours.py): BM25 over
the questions' text (the product's today) against the dense encoder ``use`` (zero-shot), the query
adapter and mixes, decided on frlaw-dev train (leave-one-out), reported on test and on BSARD's
question files (docs/effectiveness.md, "Question similarity of the neighbours").

    python bench/neighbours_similarity.py --data ../shared/data/frlaw-dev \
        --inputs /work/artifacts/ranking/frlaw-dev-train.npz --test-inputs /work/artifacts/ranking/frlaw-dev-test.npz \
        --adapter /work/artifacts/models/frlaw-use-adapter --bsard ../shared/data/bsard [--n 10,20,40] [--test-n 20] \
        [--similarities bm25,use,adapter,adapter@0.05,...]

Each similarity scores a question against every training question; the product's
:func:`~bsard_demo.retrievers.neighbours.transfer_scores` (its 20 most similar with a positive
similarity, weighted by it) and its leave-one-out (a question is never its own neighbour: the
same folded text) turn it into a ranking, through the product's retriever (only its similarity
is replaced). Similarities:

- ``bm25``: the product's (BM25 over the training questions' text);
- ``use``: cosine of ``use``'s question vectors;
- ``adapter``: cosine of the adapted vectors of both questions, ``u(q) . u(t)`` (the adapter maps a
  question near its gold articles, so two questions are close when they point at the same
  articles); ``adapter-plain``: adapted query against plain training questions, ``u(q) . t``;
- ``mix-use``, ``mix-adapter``: the mean of BM25 divided by its best over the questions that may
  be drawn on (the own question left out) and that cosine;
- ``NAME@TAU`` (e.g. ``adapter@0.05``): ``exp(cosine / TAU)``, weights sharper than the cosines' narrow range.

On train the adapter is **out-of-fold**: the 5 seeded folds of ``--inputs`` (bench/ranking_inputs.py),
each fold's questions adapted, with every training question they are compared with, by an adapter
fitted on the other four (bench/adapter_cv.py's torch fit, train's settings); the five matrices are
kept in ``--cache`` (default bench/out/neighbours_similarity). On test, ``--adapter DIR`` (fitted on
all of train). Per system: neighbours alone and the RRF (k 60; 1, 0.5, 0.5) of BM25, the adapter
(the stored candidates of ``--inputs``: out-of-fold on train) and these neighbours, R@100 and
MAP@100 by the product's ``compute_metrics``; on train also the per-fold gain over ``bm25`` and
its fold-to-fold standard deviation, and on every split ``compare``'s sign-flip p against ``bm25``
(no multiple-test correction). BSARD (``--bsard``): neighbours alone on the question files, over
a corpus of the cited ids (as tests/retrievers/test_neighbours.py: every article neighbours can
rank is cited by a training question); the adapter is frlaw-dev's, so not there.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/neighbours_similarity.py
    import _path  # noqa: F401

from bench.common import OUT, load_average  # noqa: E402
from bench.ranking_inputs import ADAPTER_SETTINGS, load  # noqa: E402
from bench.structure_cv import fused, per_question as structure_per_question  # noqa: E402
from bsard_demo.retrievers.neighbours import DEFAULT_NEIGHBOURS  # noqa: E402

FRLAW_SIMILARITIES = ("bm25", "use", "adapter", "adapter-plain", "mix-use", "mix-adapter", "use@0.05", "use@0.1",
                      "adapter@0.05", "adapter@0.1")
#: The similarities BSARD can have (the adapter is frlaw-dev's).
BSARD_BASES = ("bm25", "use", "mix-use")
DEPTH = 1000
#: The product's neighbours today: the row every other is compared with.
BASE = f"bm25 n={DEFAULT_NEIGHBOURS}"


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def encode(texts, cache: Path, what: str) -> np.ndarray:
    """``use``'s unit question vectors (one question a batch, as bench/ranking_inputs.py), kept in ``cache``."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"use-{what}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    from bsard_demo.retrievers.encoders import resolve_encoder

    enc = resolve_encoder("use")
    vectors = unit(np.vstack([enc.encode_queries([t], batch_size=1) for t in texts]))
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def oof_adapters(ds, train_vectors, gold, folds, cache: Path, log) -> list[np.ndarray]:
    """The five out-of-fold adapter matrices (fold ``f``'s fitted on the other folds), kept in ``cache``."""
    key = hashlib.sha256(folds.tobytes() + train_vectors.tobytes() + repr(sorted(ADAPTER_SETTINGS.items())).encode())
    path = cache / f"adapters-{key.hexdigest()[:16]}.npy"
    if path.is_file():
        return list(np.load(path))
    import torch

    from bench.adapter_cv import fit_torch
    from bsard_demo.retrievers.dense import DenseRetriever

    E = torch.tensor(DenseRetriever.build(ds.articles, encoder="use").embeddings)
    Q = torch.tensor(train_vectors)
    out = []
    for f in range(int(folds.max()) + 1):
        t0 = time.perf_counter()
        rest = np.flatnonzero(folds != f)
        out.append(fit_torch(Q[rest], [gold[i] for i in rest], E, **ADAPTER_SETTINGS).numpy())
        log(f"adapter fold {f + 1}: {time.perf_counter() - t0:.0f} s (load {load_average()})")
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, np.stack(out))
    return out


def bm25_normalised(bm25: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """BM25 divided, per question, by its best over the training questions not ``excluded``."""
    kept = np.where(excluded, 0.0, bm25)
    best = kept.max(axis=1, keepdims=True)
    return np.divide(kept, best, out=np.zeros_like(kept), where=best > 0)


def similarity_matrices(names, bm25, query_vectors, train_vectors, excluded, adapters=None, fold_of=None):
    """``name -> (questions x training questions)``; ``adapters[f]`` adapts the questions with
    ``fold_of == f`` and what they are compared with (``fold_of`` None: ``adapters[0]`` for all)."""
    from bsard_demo.retrievers.adapter import adapt

    out = {"bm25": np.asarray(bm25, dtype=np.float64), "use": query_vectors @ train_vectors.T}
    if adapters is not None:
        groups = [np.arange(len(query_vectors))] if fold_of is None else \
            [np.flatnonzero(fold_of == f) for f in range(len(adapters))]
        both = np.zeros_like(out["use"])
        plain = np.zeros_like(out["use"])
        for W, rows in zip(adapters, groups):
            q = adapt(query_vectors[rows], W)
            both[rows] = q @ adapt(train_vectors, W).T
            plain[rows] = q @ train_vectors.T
        out["adapter"], out["adapter-plain"] = both, plain
    norm = bm25_normalised(out["bm25"], excluded)
    for cos in ("use", "adapter"):
        if cos in out:
            out[f"mix-{cos}"] = 0.5 * norm + 0.5 * out[cos]
    sims = {}
    for name in names:
        base, _, tau = name.partition("@")
        if base in out:  # name@tau: exp(cosine / tau), sharper weights than the cosines' narrow range
            sims[name] = np.exp(out[base] / float(tau)) if tau else out[base].astype(np.float64)
    return sims


def neighbours_runs(nb, texts, sims, depth=DEPTH):
    """The product's neighbours rankings of ``texts`` with ``sims`` as their similarities (its
    transfer, n and leave-one-out unchanged): (rows, scores) arrays, -1 padded."""
    from bench.ranking_inputs import _runs_to_arrays

    nb._similarities = lambda questions: sims  # only the similarity is replaced
    try:
        hits = nb.search_many(texts, depth)
    finally:
        del nb._similarities
    return _runs_to_arrays(hits, {a: i for i, a in enumerate(nb.article_ids)}, depth)


def per_question(rows, gold, ids, k=100):
    from bsard_demo.evaluation import compute_metrics

    return np.array([compute_metrics({ids[g] for g in gs}, [ids[r] for r in rs[:k] if r >= 0], k)[:2]
                     for rs, gs in zip(rows, gold)])


def fused_per_question(inputs, neighbours, ids):
    """R@100 and AP@100 per question of the RRF (1, 0.5, 0.5) of BM25, the adapter and ``neighbours``."""
    runs = fused({**inputs, "neighbours": neighbours}, ("bm25", "adapter", "neighbours"), ids)
    return structure_per_question(runs, [{ids[g] for g in gs} for gs in inputs["gold"]])


def excluded_mask(nb, texts) -> np.ndarray:
    from bsard_demo.retrievers.neighbours import fold

    return np.array([nb._folded == fold(t) for t in texts])


def pct(x) -> str:
    return f"{100 * x:.2f}"


def label(name: str, n: int) -> str:
    return f"{name} n={n}"


def report(title, results, *, folds=None, base=None):
    """A markdown table: per similarity, neighbours alone and (when measured) fused (R@100, MAP@100),
    each with ``compare``'s sign-flip p against ``base`` (no correction) and, with ``folds``, the
    gain of the last pair over ``base``: the mean and standard deviation of its per-fold gains."""
    from bsard_demo.evaluation.stats import paired_permutation_test

    kinds = [k for k in ("alone", "fused") if k in next(iter(results.values()))]
    head = ["similarity"]
    for kind in kinds:
        what = "neighbours alone" if kind == "alone" else "BM25 + adapter + neighbours"
        head += [f"{what} R@100", "MAP@100", "p R@100", "p MAP@100"]
    if folds is not None:
        head += [f"{kinds[-1]}: gain R@100 (per-fold mean ± sd)", "gain MAP@100 (per-fold mean ± sd)"]
    lines = [f"\n{title}\n", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    base = base or (BASE if BASE in results else next(iter(results)))
    for name, r in results.items():
        cells = [name]
        for kind in kinds:
            cells += [pct(r[kind][:, 0].mean()), pct(r[kind][:, 1].mean())]
            cells += ["", ""] if name == base else \
                [f"{paired_permutation_test(r[kind][:, m], results[base][kind][:, m]):.4f}" for m in (0, 1)]
        if folds is not None:
            for m in (0, 1):
                gains = np.array([r[kinds[-1]][folds == f, m].mean() - results[base][kinds[-1]][folds == f, m].mean()
                                  for f in range(int(folds.max()) + 1)])
                cells.append(f"{100 * gains.mean():+.2f} ± {100 * gains.std(ddof=1):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines), flush=True)


def frlaw(args, cache, log):
    from bsard_demo.retrievers.adapter import read_adapter
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.sources import load_dataset

    ds = load_dataset(args.data)
    ids = [str(a) for a in ds.articles["id"]]
    nb = NeighboursRetriever.build(ds)
    train = load(Path(args.inputs))
    if train["qids"] != nb.question_ids:
        raise SystemExit(f"{args.inputs}: its questions are not the neighbours retriever's training questions")
    t0 = time.perf_counter()
    tv = encode(nb.texts, cache, "frlaw-train")
    log(f"use vectors of {len(tv)} training questions: {time.perf_counter() - t0:.0f} s")
    adapters = oof_adapters(ds, tv, train["gold"], train["fold"], cache, log)
    names = args.similarities

    def evaluate(inputs, vectors, adapters, fold_of, ns):
        excluded = excluded_mask(nb, inputs["texts"])
        sims = similarity_matrices(names, nb._similarities(inputs["texts"]), vectors, tv, excluded, adapters,
                                   fold_of)
        out = {}
        for n in ns:
            nb.n = n
            for name, s in sims.items():
                runs = neighbours_runs(nb, inputs["texts"], s)
                out[label(name, n)] = {"alone": per_question(runs[0], inputs["gold"], ids),
                                       "fused": fused_per_question(inputs, runs, ids)}
        nb.n = DEFAULT_NEIGHBOURS
        return out

    t0 = time.perf_counter()
    results = evaluate(train, tv, adapters, train["fold"], args.n)
    stored = per_question(train["neighbours"][0], train["gold"], ids)
    if BASE in results and not np.allclose(stored, results[BASE]["alone"]):
        log("warning: the bm25 neighbours differ from the stored inputs' (product changed since?)")
    report(f"frlaw-dev train ({len(tv)} questions, leave-one-out; adapter out-of-fold; "
           f"{time.perf_counter() - t0:.0f} s, load {load_average()})", results, folds=train["fold"])
    if args.test_inputs:
        test = load(Path(args.test_inputs))
        W, _ = read_adapter(args.adapter)
        qv = encode(test["texts"], cache, "frlaw-test")
        t0 = time.perf_counter()
        results = evaluate(test, qv, [W], None, args.test_n)
        report(f"frlaw-dev test ({len(qv)} questions; adapter {args.adapter}; "
               f"{time.perf_counter() - t0:.0f} s, load {load_average()})", results)


def bsard(args, cache, log):
    import pandas as pd

    from bsard_demo.dataset import normalize_articles
    from bsard_demo.retrievers.neighbours import NeighboursRetriever
    from bsard_demo.sources import load_dataset

    ds = load_dataset(args.bsard, need_corpus=False)
    cited = sorted({a for split in ds.splits.values() for q in split["article_ids"] for a in q}, key=int)
    ds = dataclasses.replace(ds, articles=normalize_articles(pd.DataFrame({"id": cited, "article": ""})))
    ids = [str(a) for a in ds.articles["id"]]
    pos = {a: i for i, a in enumerate(ids)}
    nb = NeighboursRetriever.build(ds)
    tv = encode(nb.texts, cache, "bsard-train")
    for split in ("train", "test"):
        q = ds.questions(split)
        texts = [str(t) for t in q["question"]]
        gold = [np.array(sorted({pos[a] for a in g}), dtype=np.int64) for g in q["article_ids"]]
        vectors = tv if split == "train" and texts == nb.texts else encode(texts, cache, f"bsard-{split}")
        excluded = excluded_mask(nb, texts)
        sims = similarity_matrices([s for s in args.similarities if s.partition("@")[0] in BSARD_BASES],
                                   nb._similarities(texts), vectors, tv, excluded)
        results = {}
        for n in args.n:
            nb.n = n
            results.update({label(name, n): {"alone": per_question(neighbours_runs(nb, texts, s)[0], gold, ids)}
                            for name, s in sims.items()})
        nb.n = DEFAULT_NEIGHBOURS
        folds = np.zeros(len(texts), dtype=np.int64)  # seeded folds, only to measure the noise
        for number, rows in enumerate(np.array_split(np.random.default_rng(0).permutation(len(texts)), 5)):
            folds[rows] = number
        report(f"BSARD {split} ({len(texts)} questions{', leave-one-out' if split == 'train' else ''}; "
               f"neighbours alone; folds: 5 seeded, rng 0; load {load_average()})", results, folds=folds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="frlaw-dev (or a dataset of its kind); omit for BSARD only")
    p.add_argument("--inputs", default=None, help="train inputs of bench/ranking_inputs.py (with its folds)")
    p.add_argument("--test-inputs", default=None)
    p.add_argument("--adapter", default=None, help="the adapter folder fitted on all of train (test)")
    p.add_argument("--bsard", default=None, help="BSARD's question files (../shared/data/bsard)")
    p.add_argument("--n", default=str(DEFAULT_NEIGHBOURS), help="neighbours counts, comma-separated (train, BSARD)")
    p.add_argument("--test-n", default=str(DEFAULT_NEIGHBOURS), help="neighbours counts on frlaw-dev test")
    p.add_argument("--similarities", default=",".join(FRLAW_SIMILARITIES))
    p.add_argument("--cache", default=str(OUT / "neighbours_similarity"))
    args = p.parse_args(argv)
    args.similarities = args.similarities.split(",")
    args.n = [int(n) for n in args.n.split(",")]
    args.test_n = [int(n) for n in args.test_n.split(",")]
    if args.test_inputs and not args.adapter:
        p.error("--test-inputs needs --adapter DIR")
    cache = Path(args.cache)
    log = lambda message: print(message, flush=True)  # noqa: E731
    log(f"load {load_average()}")
    if args.data:
        if not args.inputs:
            p.error("--data needs --inputs (the train inputs with their folds)")
        frlaw(args, cache, log)
    if args.bsard:
        bsard(args, cache, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
