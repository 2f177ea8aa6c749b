"""The benchmarks' targets, in one table: what each bench compares its figures with, and where
the result is written up (docs/benchmarks.md points here). ``python bench/targets.py`` prints it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    value: float
    unit: str
    #: ``at most`` (the figure must be ≤ value) or ``at least``
    kind: str
    what: str
    where: str  # the bench, and the section of docs/benchmarks.md


_RETRIEVAL = "bench/bench_retrieval.py; docs/benchmarks.md, \"Retrieval\" and \"Memory\""
_APP = "bench/bench_app.py; docs/benchmarks.md, \"App\""
_COLD = "docs/benchmarks.md, \"Cold start with an index bundle\""

TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("bm25_all_s", 1.0, "s", "at most", "BM25 (bm25s): the 222 test questions, top 500", _RETRIEVAL),
    Target("bm25_speedup", 50.0, "×", "at least", "BM25 (bm25s) against rank_bm25, 222 questions top 500", _RETRIEVAL),
    Target("bm25_one_ms", 5.0, "ms", "at most", "BM25 (bm25s): one question, p50, k = 100 and 500", _RETRIEVAL),
    Target("bm25_build_s", 15.0, "s", "at most", "BM25 (bm25s): index build, full corpus", _RETRIEVAL),
    Target("dense_one_ms", 50.0, "ms", "at most", "dense use, cached index: one question encode + search, p50",
           _RETRIEVAL),
    Target("memory_mb", 1024.0, "MB", "at most", "BM25 + dense use loaded together, peak RSS of a fresh process",
           _RETRIEVAL),
    Target("evaluate_whole_s", 0.3, "s", "at most", "read + score a 222 × 500 run in-process (no interpreter start-up)",
           "bench/bench_evaluate.py; docs/benchmarks.md, \"Scoring\""),
    Target("read_run_above_tiny_mb", 150.0, "MB", "at most",
           "reading + scoring a 222 × 5,000 run, RSS above a one-line run",
           "bench/bench_memory.py; docs/benchmarks.md, \"Memory of reading a large run\""),
    Target("app_first_page_s", 5.0, "s", "at most", "app, sample: server start → question box visible", _APP),
    Target("app_search_ms", 300.0, "ms", "at most", "app, sample: search server time, p95", _APP),
    Target("app_first_hits_s", 10.0, "s", "at most", "app, full scale: server start → first hits drawn", _APP),
    Target("app_rss_mb", 1024.0, "MB", "at most", "app, full scale: server VmRSS / VmHWM", _APP),
    Target("app_cold_link_s", 45.0, "s", "at most", "app, index bundle + empty cache: shared hybrid link → hits",
           "bench/bench_app.py --only cold; " + _COLD),
    Target("cli_cold_run_s", 120.0, "s", "at most", "CLI run served by an index bundle, empty cache",
           "bench/bench_cold_start.py; " + _COLD),
    Target("uploads_rss_mb", 1536.0, "MB", "at most", "app, 10 large uploads at once: server VmRSS, maximum sampled",
           "bench/load_app.py --scenario uploads; docs/benchmarks.md, \"Large uploads at once\""),
)}


def target(name: str) -> float:
    """The value of target ``name`` (a key of :data:`TARGETS`)."""
    return TARGETS[name].value


def markdown() -> str:
    rows = ["| target | value | what | measured by |", "|---|---:|---|---|"]
    for t in TARGETS.values():
        sign = "≤" if t.kind == "at most" else "≥"
        rows.append(f"| `{t.name}` | {sign} {t.value:g} {t.unit} | {t.what} | {t.where} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown())
    sys.exit(0)
