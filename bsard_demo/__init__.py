"""bsard-demo: search and score BSARD, the Belgian Statutory Article Retrieval Dataset.

The public verbs: :func:`load_dataset` (hub, sample or folder), :func:`read_run_path` /
:func:`read_run_bytes` (run files with validation), :func:`evaluate` (per-question and
macro-averaged recall@k, map@k, mrr@k) and :func:`build_retriever` (BM25, dense, hybrid).
"""
import os

# faiss and torch each bundle their own OpenMP runtime, whose idle threads spin after every
# parallel region and starve the other one (and numpy's BLAS) on a small machine: one question's
# encode + search measured 200-500 ms with spinning threads, ~20 ms with PASSIVE waits
# (bench/bench_retrieval.py). Set here, before anything can load faiss or torch; a user's
# own value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .evaluation import evaluate  # noqa: E402
from .runs import read_run_bytes, read_run_path  # noqa: E402
from .sources import load_dataset  # noqa: E402


def build_retriever(*args, **kwargs):
    """See :func:`bsard_demo.retrievers.registry.build_retriever` (imported lazily: heavy)."""
    from .retrievers.registry import build_retriever as build

    return build(*args, **kwargs)


__all__ = ["load_dataset", "read_run_path", "read_run_bytes", "evaluate", "build_retriever"]
