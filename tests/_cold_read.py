"""The cold read of a run in a fresh interpreter: read + score with nothing before the read
(test support shared by tests/runs/test_run_streaming.py and bench/bench_memory.py)."""

# A read with nothing before it: no dataset load whose freed memory the reader could
# reuse (qrels: each question's first 3 articles, no corpus ids). The stricter measure.
# ``python -c COLD_WORKER RUN [K [CUTOFFS]]`` (default 500 and 100,200,500); tests/runs/
# test_run_streaming.py measures its memory bound with it, bench/bench_memory.py its "cold" table.
COLD_WORKER = r"""
import json, resource, sys, time
from bsard_demo.evaluation import evaluate
from bsard_demo.runs import read_run_path
k = int(sys.argv[2]) if len(sys.argv) > 2 else 500
cutoffs = tuple(int(c) for c in (sys.argv[3] if len(sys.argv) > 3 else "100,200,500").split(","))
def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":")) / 1024
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
t = time.perf_counter()
rf = read_run_path(sys.argv[1], k=k)
qrels = {q: frozenset(docs[:3]) for q, docs in rf.run.items()} if rf.run else {}
ev = evaluate(qrels, rf.run, cutoffs) if rf.run else None
seconds = time.perf_counter() - t
print(json.dumps({"cost": status("VmHWM") - before, "before": before, "seconds": seconds,
                  "lines": sum(map(len, rf.run.values())) if rf.run else 0, "means": ev.means if ev else None}))
"""
