"""bsard-demo: search and score BSARD, the Belgian Statutory Article Retrieval Dataset.

The public verbs: :func:`load_dataset` (hub, sample or folder), :func:`read_run_path` /
:func:`read_run_bytes` (run files with validation), :func:`evaluate` (per-question and
macro-averaged recall@k, map@k, mrr@k, nDCG@10), :func:`score_runs` (read, check and score run
files, as the CLI and the Score page do) and :func:`build_retriever` (BM25, dense, hybrid).
Scoring lives in :mod:`bsard_demo.evaluation`, reading runs in :mod:`bsard_demo.runs`.
Importing the package changes nothing in the environment: :func:`prepare_runtime` (called by the
CLI, the app and the retrievers before they load faiss or torch) sets the threading defaults of
:mod:`bsard_demo.settings`.
"""
from .evaluation import Measure, evaluate, score_runs
from .runs import read_run_bytes, read_run_path
from .settings import prepare_runtime
from .sources import load_dataset


def build_retriever(*args, **kwargs):
    """See :func:`bsard_demo.retrievers.registry.build_retriever` (imported lazily: heavy)."""
    from .retrievers.registry import build_retriever as build

    prepare_runtime()
    return build(*args, **kwargs)


__all__ = ["load_dataset", "read_run_path", "read_run_bytes", "evaluate", "score_runs", "Measure", "build_retriever",
           "prepare_runtime"]
