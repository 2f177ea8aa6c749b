"""Time run-file parsing: 222 questions x 500 articles (111,000 lines) in each format.

Usage: python bench/bench_run_files.py [repeats]
Prints the best of ``repeats`` CPU times (process_time, robust to a busy machine) per format (target for TREC: well
under 0.2 s); writes them to ``bench/out/bench_run_files.json``.
"""
from __future__ import annotations

import gzip
import json
import random
import sys
import time

if __package__ in (None, ""):  # python bench/bench_run_files.py (bench/_path.py)
    import _path  # noqa: F401

from bench.common import OUT, write_json  # noqa: E402
from bsard_demo.runs import read_run_bytes  # noqa: E402


def make_scores(n_questions: int = 222, depth: int = 500, seed: int = 0) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    return {
        str(q): {str(d): round(100.0 - r * 0.1 + rng.random() * 0.01, 6)
                 for r, d in enumerate(rng.sample(range(1, 22634), depth))}
        for q in range(1, n_questions + 1)
    }


def files(scores) -> dict[str, bytes]:
    trec = "".join(
        f"{q} Q0 {d} {r} {s} bm25\n"
        for q, docs in scores.items()
        for r, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), 1)
    ).encode()
    return {
        "trec": trec,
        "trec.gz": gzip.compress(trec, 6),
        "3col-score": "".join(f"{q}\t{d}\t{s}\n" for q, docs in scores.items() for d, s in docs.items()).encode(),
        "csv": ("qid,docid,score\n"
                + "".join(f"{q},{d},{s}\n" for q, docs in scores.items() for d, s in docs.items())).encode(),
        "json-scores": json.dumps(scores).encode(),
    }


def main(repeats: int = 7) -> None:
    scores = make_scores()
    qids = list(scores)
    corpus = {str(i) for i in range(1, 22634)}
    results = {}
    for name, data in files(scores).items():
        best = float("inf")
        for _ in range(repeats):
            t = time.process_time()
            rf = read_run_bytes(data, name, qids=qids, corpus_ids=corpus)
            best = min(best, time.process_time() - t)
        assert rf.ok, [str(p) for p in rf.problems]
        print(f"{name:12s} {len(data) / 2**20:6.1f} MB  best {best * 1000:7.1f} ms CPU  ({rf.format}, "
              f"{len(rf.problems)} problems)")
        results[name] = {"bytes": len(data), "best_cpu_s": best, "format": rf.format, "problems": len(rf.problems)}
    write_json(OUT / "bench_run_files.json", {"repeats": repeats, "formats": results})


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
