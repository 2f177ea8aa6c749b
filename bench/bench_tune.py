"""Tuning on a train split: how fast the grid search is, and what the tuned settings change.

    python bench/bench_tune.py speed [--data DIR] [--points 5] [--hybrid]
    python bench/bench_tune.py effect --data sample|DIR [--measure recall@100] [--hybrid] [--cache-dir DIR]

``speed`` (default data: the BSARD-scale synthetic corpus ``bench/out/synth`` with 886 train
questions, generated when absent): the one-off cost of the tokenised corpus
(:class:`bsard_demo.tuning.TermMatrix`), the median cost of one grid point (weights + scoring +
exact top 100 + ``evaluate``) over ``--points`` points, and the whole 187-point paper grid
(:func:`bsard_demo.tuning.tune_bm25`), in wall and CPU seconds; against, in the same process,
what one point costs the naive way (build a bm25s index with those k1/b, search the split, score).

``effect``: tunes BM25 (the paper's grid) on the train split by ``--measure``, then scores the
default and the tuned settings on the test split (R@100, R@200, R@500, MAP@100, MRR@100 by
``bsard_demo.evaluation.evaluate`` on 500-deep runs, as ``run`` + ``evaluate``). ``--hybrid``
also tunes the fusion of BM25 (tuned) + dense ``use`` and scores it the same way.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Sequence

if __package__ in (None, ""):  # python bench/bench_tune.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import (  # noqa: E402
    REPO as ROOT,  # noqa: E402
    json_option,
    machine_facts,
    synthetic_corpus,
    write_json,
)
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.retrievers.batch import question_texts, search_all  # noqa: E402
from bsard_demo.retrievers.bm25 import BM25Retriever, BM25Settings  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402
from bsard_demo.tuning import TermMatrix, TuneTarget, tune_bm25, tune_hybrid  # noqa: E402

KS = (100, 200, 500)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def cmd_speed(args) -> int:
    data = Path(args.data) if args.data else synthetic_corpus(ROOT / "bench" / "out" / "synth")
    dataset = load_dataset(str(data))
    questions = dataset.questions("train")
    qrels = dataset.qrels("train")
    texts = question_texts(questions, False)
    qids = [str(q) for q in questions["id"]]
    print(machine_facts(usable=False, python=False))
    print(f"data: {data} — {len(dataset.articles)} articles, train split {len(questions)} questions")
    matrix, w, c = _timed(lambda: TermMatrix.build(dataset.articles, BM25Settings()))
    rows = [("tokenised corpus (once)", w, c)]
    queries = matrix.query_matrix([matrix.analyzer.tokens(t) for t in texts])
    measure = TuneTarget.parse("recall@100")
    points = [(1.0, 0.6), (0.0, 0.0), (8.0, 1.0), (2.5, 0.3), (4.5, 0.8), (1.5, 0.9), (6.0, 0.1)][:args.points]

    def one_point(k1: float, b: float):
        top = matrix.top(queries, matrix.weights(k1, b), 100)
        ids = matrix.article_ids
        return measure.evaluate(qrels, {q: [ids[d] for d in docs.tolist()] for q, (docs, _) in zip(qids, top)})

    def naive(k1: float, b: float):
        r = BM25Retriever.build(dataset.articles, BM25Settings(k1=k1, b=b), use_cache=False)
        hits = search_all(r, texts, 100)
        return measure.evaluate(qrels, {q: [h.article_id for h in hs] for q, hs in zip(qids, hits)})

    fast, slow = [], []
    for k1, b in points:  # interleaved, so load bursts hit both alike
        got_fast, w1, c1 = _timed(lambda: one_point(k1, b))  # noqa: B023 -- called at once
        got_slow, w2, c2 = _timed(lambda: naive(k1, b))  # noqa: B023 -- called at once
        assert got_fast == got_slow, (k1, b, got_fast, got_slow)  # the same figures, exactly
        fast.append((w1, c1))
        slow.append((w2, c2))
    med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
    rows.append((f"one grid point (median of {len(points)})", med(fast, 0), med(fast, 1)))
    rows.append((f"one point the naive way: index + search (median of {len(points)})", med(slow, 0), med(slow, 1)))
    result, w, c = _timed(lambda: tune_bm25(dataset, "train", matrix=matrix))
    rows.append((f"whole grid, {len(result.grid)} points (corpus reused)", w, c))
    print(f"\n{'step':<62} {'wall s':>8} {'CPU s':>8}")
    for label, w, c in rows:
        print(f"{label:<62} {w:>8.2f} {c:>8.2f}")
    print(f"\nper point: {med(slow, 0) / med(fast, 0):.1f}x faster than the naive way (wall), "
          f"{med(slow, 1) / med(fast, 1):.1f}x (CPU); the same figures at every point compared")
    print(f"naive grid would take ~{len(result.grid) * med(slow, 0) / 60:.0f} min wall here "
          f"(EXTRAPOLATED from the median point)")
    print(f"best on train: {result.settings_text(result.best)} recall@100 = {result.best_value:.4f} "
          f"(start k1=1 b=0.6: {result.start_value:.4f})")
    if args.hybrid:
        # two BM25 variants as the parts: the fusion grid's own cost, without an encoder's
        from bsard_demo.analyzer import TEXT_ONLY

        spec = RetrieverSpec("hybrid", {"retrievers": [RetrieverSpec("bm25"),
                                                       RetrieverSpec("bm25", {"fields": TEXT_ONLY, "stem": False})]})
        parts = [build_retriever(p, dataset) for p in spec.options["retrievers"]]
        hybrid, w, c = _timed(lambda: tune_hybrid(dataset, "train", spec=spec, parts=parts))
        print(f"\nhybrid of two BM25 variants, {len(hybrid.grid)} fusion settings: {w:.1f} s wall, {c:.1f} s CPU; "
              + ", ".join(f"{k} {v:.1f} s" for k, v in hybrid.stages.items()))
        print(f"best: {hybrid.settings_text(hybrid.best)} recall@100 = {hybrid.best_value:.4f} (start "
              f"{hybrid.start_value:.4f})")
    print(machine_facts(usable=False, python=False))
    write_json(args.json, {"what": "speed", "rows": [{"step": label, "wall_s": w, "cpu_s": c} for label, w, c in rows],
                           "best": result.settings_text(result.best), "best_value": result.best_value,
                           "start_value": result.start_value})
    return 0


def _test_figures(dataset, retriever) -> dict[str, float]:
    questions = dataset.questions("test")
    hits = search_all(retriever, question_texts(questions, False), 500)
    run = {str(q): [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)}
    m = evaluate(dataset.qrels("test"), run, ks=KS).means
    return {"R@100": m["recall@100"], "R@200": m["recall@200"], "R@500": m["recall@500"],
            "MAP@100": m["map@100"], "MRR@100": m["mrr@100"]}


def cmd_effect(args) -> int:
    dataset = load_dataset(args.data)
    cache_root = Path(args.cache_dir) if args.cache_dir else None
    print(machine_facts(usable=False, python=False))
    rows = []
    tuned = tune_bm25(dataset, "train", measure=args.measure, data=args.data)
    print(tuned.summary())
    default_bm25 = build_retriever(RetrieverSpec("bm25"), dataset, cache_root=cache_root)
    tuned_bm25 = build_retriever(tuned.spec, dataset, cache_root=cache_root)
    rows.append(("BM25 default (k1=1, b=0.6)", "", _test_figures(dataset, default_bm25)))
    rows.append((f"BM25 tuned on train by {args.measure} ({tuned.settings_text(tuned.best)})",
                 f"{tuned.best_value:.4f} vs {tuned.start_value:.4f}", _test_figures(dataset, tuned_bm25)))
    if args.hybrid:
        use = build_retriever(RetrieverSpec("dense", {"encoder": "use"}), dataset, cache_root=cache_root)
        from bsard_demo.retrievers.registry import hybrid_spec, make_hybrid

        default_h = make_hybrid(hybrid_spec(), [default_bm25, use], corpus_size=len(dataset.articles))
        rows.append(("hybrid default: RRF k=60 w=1,0.5 (BM25 default + use)", "", _test_figures(dataset, default_h)))
        equal_h = make_hybrid(RetrieverSpec("hybrid"), [default_bm25, use], corpus_size=len(dataset.articles))
        rows.append(("hybrid RRF k=60, equal weights (BM25 default + use)", "", _test_figures(dataset, equal_h)))
        spec = hybrid_spec(bm25_options=tuned.spec.options)  # the default fusion over the tuned BM25
        th = tune_hybrid(dataset, "train", spec=spec, measure=args.measure, data=args.data,
                         parts=[tuned_bm25, use])
        print(th.summary())
        hybrid = make_hybrid(th.spec, [tuned_bm25, use], corpus_size=len(dataset.articles))
        rows.append((f"hybrid tuned on train ({th.settings_text(th.best)}; BM25 tuned + use)",
                     f"{th.best_value:.4f} vs {th.start_value:.4f}", _test_figures(dataset, hybrid)))
    n_test = len(dataset.questions("test"))
    print(f"\n{dataset.name}: tuned on train ({tuned.questions} questions), scored on test ({n_test} questions), "
          "in %\n")
    print(f"| settings | train {args.measure}: tuned vs start | R@100 | R@200 | R@500 | MAP@100 | MRR@100 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, train_fig, m in rows:
        print(f"| {label} | {train_fig} | " + " | ".join(f"{100 * m[k]:.2f}" for k in
                                                       ("R@100", "R@200", "R@500", "MAP@100", "MRR@100")) + " |")
    print(machine_facts(usable=False, python=False))
    write_json(args.json, {"what": "effect", "measure": args.measure,
                           "rows": [{"settings": label, "train": fig, **m} for label, fig, m in rows]})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("speed", help="grid search speed at full scale")
    s.add_argument("--data", default=None, help="a dataset folder (default: bench/out/synth, generated if absent)")
    s.add_argument("--points", type=int, default=5, help="grid points timed against the naive way (max 7)")
    s.add_argument("--hybrid", action="store_true", help="also time a fusion grid (parts: two BM25 variants)")
    json_option(s, "bench_tune")
    s.set_defaults(func=cmd_speed)
    e = sub.add_parser("effect", help="default vs train-tuned settings on the test split")
    e.add_argument("--data", default="sample")
    e.add_argument("--measure", default="recall@100")
    e.add_argument("--hybrid", action="store_true", help="also tune the fusion of BM25 + dense use")
    e.add_argument("--cache-dir", default=None)
    json_option(e, "bench_tune")
    e.set_defaults(func=cmd_effect)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
