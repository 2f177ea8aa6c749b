"""Process-wide state of the Streamlit app (``st.cache_resource``): which dataset is active
(:func:`open_data`, which never fails), loaded datasets and built indexes (:class:`BuildOnce`), shared by every
rerun and every browser session, and which folders a visitor may load (:func:`folder_access`).

Conventions: docs/design.md, 'bsard_demo/app/state.py'.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Hashable, TypeVar

from ..build_once import BuildOnce
from ..dataset import DataError, Dataset
from ..retrievers import Retriever, RetrieverSpec, build_retriever
from ..retrievers.base import Progress
from ..retrievers.registry import kind as retriever_kind, prepare_parts
from ..sources import default_spec, load_dataset
from .data_words import failure_detail, fallback_reason, source_kind
from .hosting import freeze_what_is_kept

T = TypeVar("T")
log = logging.getLogger(__name__)
FAILURE_TTL_S = 300.0
class FailureMemo:
    """Recent failures per key (message, time), forgotten after ``ttl`` seconds."""

    def __init__(self, ttl: float = FAILURE_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.clock = ttl, clock
        self._items: dict[Hashable, tuple[DataError, float]] = {}

    def recent(self, key: Hashable) -> DataError | None:
        hit = self._items.get(key)
        if hit is None or self.clock() - hit[1] > self.ttl:
            self._items.pop(key, None)
            return None
        return hit[0]

    def remember(self, key: Hashable, error: DataError) -> None:
        self._items[key] = (error, self.clock())

    def forget(self, key: Hashable) -> None:
        self._items.pop(key, None)


def data_key(spec: str) -> tuple:
    """What identifies the content behind ``spec`` (see the module conventions)."""
    if spec in ("hub", "sample"):
        return (spec,)
    folder = Path(spec).expanduser()
    try:
        stamps = tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.glob("*.csv")))
        return (str(folder.resolve()), stamps)
    except OSError:
        return (str(folder), ())


@dataclass(frozen=True)
class ActiveData:
    """The dataset in use. ``spec`` is what was loaded, ``requested`` what was asked for; when
    they differ, ``fallback_reason`` (French) and ``detail`` (the loader's message) say why."""

    dataset: Dataset
    spec: str
    requested: str
    fallback_reason: str | None = None
    detail: str | None = None

    @cached_property
    def key(self) -> tuple:
        """:func:`data_key` of :attr:`spec`, once per object (one page run): a folder's is a glob and two
        stats a file, and a run reads the key a dozen times."""
        return data_key(self.spec)


def open_data(requested: str | None, load: Callable[[str], Dataset], failures: FailureMemo | None = None,
              fallback: str | None = None, default: str | None = None) -> ActiveData:
    """Load ``requested`` (default ``default``, else :func:`default_spec`) with ``load``; when it
    fails, load ``fallback`` (the dataset the session had: a failed switch keeps it), else the sample.

    ``load`` is the (cached) loader; a requested dataset that failed within the memo's TTL is not
    tried again. The sample itself failing is a bug and raises.
    """
    spec = (requested or "").strip() or (default or "").strip() or default_spec()
    if spec == "sample":
        return ActiveData(load("sample"), "sample", spec)
    error = failures.recent(data_key(spec)) if failures else None
    if error is None:
        try:
            return ActiveData(load(spec), spec, spec)
        except DataError as exc:
            error = exc
            if failures:
                failures.remember(data_key(spec), exc)
    if fallback and fallback not in (spec, "sample"):
        try:
            return ActiveData(load(fallback), fallback, spec, fallback_reason(spec, error, fallback),
                              failure_detail(error))
        except DataError:
            pass  # the kept dataset went away too (a deleted folder): the sample it is
    return ActiveData(load("sample"), "sample", spec, fallback_reason(spec, error), failure_detail(error))


def load_uncached(spec: str) -> Dataset:
    """:func:`bsard_demo.sources.load_dataset`: the hub with its corpus (searching needs it); a
    local folder may lack ``articles.csv`` (scoring works without it, the Search page says so)."""
    return load_dataset(spec, need_corpus=source_kind(spec) != "local")


def dataset_summary(dataset: Dataset) -> dict[str, int]:
    """Counts shown in the sidebar: ``articles`` and questions per split (in split order)."""
    out = {"articles": 0 if dataset.articles is None else len(dataset.articles)}
    for split in dataset.split_names:
        out[f"questions_{split}"] = len(dataset.questions(split))
    return out


def _logged(what: str, build: Callable[[], T]) -> Callable[[], T]:
    """``build`` that logs one line before it starts and one when it is done (with its duration), then
    sets what the process now keeps aside from Python's collector (:func:`~.hosting.freeze_what_is_kept`)."""
    def run() -> T:
        log.info("building %s", what)
        start = time.perf_counter()
        value = build()
        log.info("built %s in %.2f s", what, time.perf_counter() - start)
        freeze_what_is_kept()
        return value
    return run


def get_retriever(registry: BuildOnce, data: ActiveData, spec: RetrieverSpec, *, progress: Progress | None = None,
                  notice: Callable[[str], None] | None = None) -> Retriever:
    """The retriever ``spec`` over the active dataset, built once per process.

    A kind made of parts (a hybrid, a learned ranker: :attr:`~bsard_demo.retrievers.RetrieverKind.parts`)
    is assembled from its parts' registry entries, so their BM25 and dense indexes are shared with
    the other columns, and is itself cheap to make.
    """
    kind = retriever_kind(spec.kind)
    if kind.parts is not None and not is_built(registry, data, spec):
        parts = prepare_parts(kind.parts(spec))
        built = [get_retriever(registry, data, p, progress=progress, notice=notice) for p in parts]
        return registry.get((data.key, spec.key()), _logged(f"{spec.kind} over {data.spec}",
                                                            lambda: kind.assemble(spec, built, data.dataset)))
    return registry.get((data.key, spec.key()),
                        _logged(f"{spec.kind} index over {data.spec}",
                                lambda: build_retriever(spec, data.dataset, progress=progress, notice=notice)))


def is_built(registry: BuildOnce, data: ActiveData, spec: RetrieverSpec) -> bool:
    return (data.key, spec.key()) in registry
