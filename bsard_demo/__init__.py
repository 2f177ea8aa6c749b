"""bsard-demo: search and score BSARD, the Belgian Statutory Article Retrieval Dataset.

The public verbs (imported on first use): :func:`load_dataset` (hub, sample or folder), :func:`read_run_path` /
:func:`read_run_bytes` (run files with validation), :func:`evaluate` and :class:`Measure` (recall@k, map@k, mrr@k,
nDCG@10), :func:`score_runs` (read, check and score run files, as the CLI and the Score page do) and
:func:`build_retriever` (any kind of :mod:`bsard_demo.retrievers.registry`: BM25, dense, neighbours, hybrid).
Importing the package changes nothing in the environment: :func:`prepare_runtime` (:mod:`bsard_demo.settings`)
does, called by the CLI, the app and the retrievers before they load faiss or torch.
"""
from importlib import import_module

from .settings import prepare_runtime

#: The public names and the module each comes from, imported on first use (PEP 562): a process
#: that needs only :mod:`bsard_demo.runs` (the parquet reader's fork server) does not load scipy
#: and pandas through :mod:`bsard_demo.evaluation` (1.5 s of a start on a busy machine).
_LAZY = {"Measure": ".evaluation", "evaluate": ".evaluation", "score_runs": ".evaluation",
         "read_run_bytes": ".runs", "read_run_path": ".runs", "load_dataset": ".sources"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def build_retriever(*args, **kwargs):
    """See :func:`bsard_demo.retrievers.registry.build_retriever` (imported on first use, as :data:`_LAZY`'s names:
    heavy, and after :func:`prepare_runtime`)."""
    prepare_runtime()
    return import_module(".retrievers.registry", __name__).build_retriever(*args, **kwargs)


__all__ = ["load_dataset", "read_run_path", "read_run_bytes", "evaluate", "score_runs", "Measure", "build_retriever",
           "prepare_runtime"]
