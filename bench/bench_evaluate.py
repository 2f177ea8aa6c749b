"""Benchmark: parse and score a 222-question × 500-doc TREC run, bsard_demo vs pytrec_eval.

    /work/venv/bin/python bench/bench_evaluate.py [--repeat 15] [--depth 500] [--seed 0]

The labels are the real BSARD test qrels from ``../shared/data/bsard`` (next to the repo) when
present, else the synthetic test questions of ``bench/synthetic.py``; the run is a synthetic
BM25-like run over article ids 1..22,633 (:func:`synthetic.make_run`, with ties).

Timed in the same process, after one warm-up each, in ``--repeat`` interleaved rounds:
- bsard_demo: ``run_files.read_run_path`` (the file → a validated ``Run``, with the question
  ids, the 22,633 corpus ids and k = 500, as ``bsard_demo evaluate`` does), ``evaluation.evaluate`` at
  k = 100, 200, 500 (all nine figures), and the two together ("whole");
- pytrec_eval: ``pytrec_eval.parse_run`` (the file → ``{qid: {docid: score}}``), then
  ``RelevanceEvaluator(qrels, {recall_100, recall_200, recall_500, map_cut_100, recip_rank})``
  built and run on the FULL 500-deep run plus the means, and the two together.
Then checks that R@100, R@200, R@500, MAP@100 agree with pytrec_eval on the full run and MRR@100
with pytrec_eval's recip_rank on the run cut to its top 100 per question (trec_eval order:
score desc, doc id desc), to 1e-9, per question and on the means.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Collection, Mapping, Sequence

import numpy as np
import pytrec_eval

if __package__ in (None, ""):  # python bench/bench_evaluate.py (bench/_path.py)
    import _path  # noqa: F401

from _synthetic import BSARD_ARTICLES, generate, make_run  # noqa: E402
from bench.common import REPO, json_option, machine_facts, percentile, target, write_json  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.runs import RunFile, read_run_path  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402

REAL_DATA = REPO.parent / "shared" / "data" / "bsard"
KS = (100, 200, 500)
MEASURES = {"recall_100", "recall_200", "recall_500", "map_cut_100", "recip_rank"}
TOLERANCE = 1e-9
TARGET_SECONDS = target("evaluate_whole_s")


def read_ours(path: Path, qids: Collection[str], corpus_ids: Collection[str]) -> RunFile:
    """bsard_demo's reading of ``path``, validated as ``bsard_demo evaluate`` does (question ids,
    corpus ids, k = the largest cutoff)."""
    return read_run_path(path, qids=qids, corpus_ids=corpus_ids, k=max(KS))


def parse_pytrec(path: Path) -> dict[str, dict[str, float]]:
    with open(path, encoding="utf-8") as f:
        return pytrec_eval.parse_run(f)


def score_pytrec(qrels: dict, run: dict) -> tuple[dict, dict[str, float]]:
    per_q = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    means = {m: float(np.mean([v[m] for v in per_q.values()])) for m in MEASURES}
    return per_q, means


def cut(run: Mapping[str, Mapping[str, float]], k: int) -> dict[str, dict[str, float]]:
    """Each question's top ``k`` in trec_eval's order (score desc, then doc id desc as strings)."""
    return {q: dict(sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:k]) for q, docs in run.items()}


def time_interleaved(cases: Mapping[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Seconds per call of each case: one warm-up each, then ``repeat`` rounds that run every
    case once, so that a burst of load on the shared machine hits all cases alike."""
    for fn in cases.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed repetitions after one warm-up")
    parser.add_argument("--depth", type=int, default=500, help="run depth per question")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic-qrels", action="store_true", help="ignore the real test qrels")
    json_option(parser, "bench_evaluate")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-evaluate-") as tmp:
        if REAL_DATA.is_dir() and not args.synthetic_qrels:
            dataset = load_dataset(REAL_DATA, need_corpus=False)
            source = f"real BSARD test qrels ({REAL_DATA})"
        else:
            generate(tmp, seed=args.seed, n_articles=BSARD_ARTICLES, n_train=1)
            dataset = load_dataset(tmp, need_corpus=False)
            source = "synthetic test questions (bench/synthetic.py)"
        qrels = dataset.qrels("test")
        run_path = Path(tmp) / "run.trec"
        make_run(qrels, run_path, depth=args.depth, seed=args.seed, n_articles=BSARD_ARTICLES)
        n_lines = run_path.read_text(encoding="utf-8").count("\n")
        pt_qrels = {q: {d: 1 for d in docs} for q, docs in qrels.items()}

        print(machine_facts("numpy", "pandas", "pytrec_eval=pytrec-eval-terrier"))
        print(f"labels: {source}: {len(qrels)} questions, {sum(map(len, qrels.values()))} relevant pairs")
        print(f"run: synthetic, {n_lines} lines ({args.depth} per question, with ties), "
              f"{run_path.stat().st_size / 1e6:.1f} MB; {args.repeat} interleaved timed rounds after 1 warm-up")

        qids = qrels.keys()
        corpus_ids = frozenset(str(i) for i in range(1, BSARD_ARTICLES + 1))
        first = read_ours(run_path, qids, corpus_ids)
        if not first.ok:
            print("bsard_demo cannot read the run: " + "; ".join(p.message for p in first.problems), file=sys.stderr)
            return 2
        print(f"bsard_demo reads it as {first.format}, {len(first.problems)} warning(s): "
              + "; ".join(p.message[:150] for p in first.problems))
        ours_run = first.run
        pt_run = parse_pytrec(run_path)
        cases = {
            "bsard_demo read_run_path": lambda: read_ours(run_path, qids, corpus_ids),
            "bsard_demo evaluate k=100,200,500": lambda: evaluate(qrels, ours_run, KS),
            "bsard_demo whole (read + evaluate)": lambda: evaluate(qrels, read_ours(run_path, qids, corpus_ids).run,
                                                                   KS),
            "pytrec_eval parse_run": lambda: parse_pytrec(run_path),
            "pytrec_eval evaluate (full run)": lambda: score_pytrec(pt_qrels, pt_run),
            "pytrec_eval whole (parse + evaluate)": lambda: score_pytrec(pt_qrels, parse_pytrec(run_path)),
        }
        times = time_interleaved(cases, args.repeat)

        baseline = {"bsard_demo read_run_path": "pytrec_eval parse_run",
                    "bsard_demo evaluate k=100,200,500": "pytrec_eval evaluate (full run)",
                    "bsard_demo whole (read + evaluate)": "pytrec_eval whole (parse + evaluate)"}
        print()
        print(f"{'step':<38} {'median ms':>10} {'p95 ms':>8} {'vs pytrec_eval':>15}")
        for name, ts in times.items():
            med = statistics.median(ts) * 1e3
            p95 = percentile(ts, 95) * 1e3
            ref = baseline.get(name)
            ratio = f"{med / (statistics.median(times[ref]) * 1e3):.2f}×" if ref else ""
            print(f"{name:<38} {med:>10.1f} {p95:>8.1f} {ratio:>15}")
        whole = statistics.median(times["bsard_demo whole (read + evaluate)"])
        verdict = "met" if whole <= TARGET_SECONDS else "NOT met"
        print(f"target: whole evaluate ≤ {TARGET_SECONDS:.1f} s (excluding interpreter start-up): "
              f"{verdict} ({whole:.3f} s median)")

        # agreement
        ours = evaluate(qrels, read_ours(run_path, qids, corpus_ids).run, KS)
        pt_full, pt_means = score_pytrec(pt_qrels, parse_pytrec(run_path))
        pt_cut, pt_cut_means = score_pytrec(pt_qrels, cut(parse_pytrec(run_path), 100))
        checks = [("R@100", "recall@100", "recall_100", pt_full, pt_means),
                  ("R@200", "recall@200", "recall_200", pt_full, pt_means),
                  ("R@500", "recall@500", "recall_500", pt_full, pt_means),
                  ("MAP@100", "map@100", "map_cut_100", pt_full, pt_means),
                  ("MRR@100", "mrr@100", "recip_rank", pt_cut, pt_cut_means)]
        print()
        print(f"{'figure':<8} {'bsard_demo':>12} {'pytrec_eval':>12} {'max |diff| per q':>17}  agree to 1e-9")
        all_ok = True
        for label, ours_col, pt_name, per_q, means in checks:
            col = ours.per_question[ours_col]
            diffs = [abs(float(col[q]) - per_q[q][pt_name]) for q in per_q]
            missing = set(qrels) - set(per_q)  # pytrec_eval skips questions absent from the run
            mean_diff = abs(ours.means[ours_col] - means[pt_name]) if not missing else float("nan")
            ok = max(diffs) <= TOLERANCE and mean_diff <= TOLERANCE
            all_ok &= ok
            note = "" if pt_name != "recip_rank" else "  (pytrec_eval on the run cut to top 100)"
            print(f"{label:<8} {ours.means[ours_col]:>12.6f} {means[pt_name]:>12.6f} {max(diffs):>17.1e}  "
                  f"{'yes' if ok else 'NO'}{note}")
        print(f"agreement with pytrec_eval to {TOLERANCE:g}: {'all five figures agree' if all_ok else 'MISMATCH'}")
        write_json(args.json, {"labels": source, "run_lines": n_lines, "times_s": times, "whole_s": whole,
                               "target": verdict, "agree": all_ok})
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
