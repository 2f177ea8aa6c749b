"""Process-wide state of the Streamlit app (``st.cache_resource``): which dataset is active
(:func:`open_data`, which never fails), loaded datasets and built indexes (:class:`BuildOnce`), shared by every
rerun and every browser session, and which folders a visitor may load (:func:`folder_access`).

Conventions: docs/design.md, 'bsard_demo/app/state.py'.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, Hashable, TypeVar

from .. import settings
from ..dataset import DataError, Dataset
from ..retrievers import Retriever, RetrieverSpec, build_retriever, retriever_kinds
from ..retrievers.base import Progress
from ..retrievers.dense import CACHE_KIND as DENSE_CACHE
from ..sources import DataUnavailable, default_spec, load_dataset

T = TypeVar("T")
log = logging.getLogger(__name__)
FAILURE_TTL_S = 300.0
SOURCE_LABELS = {"hub": "BSARD (hub Hugging Face)", "sample": "Échantillon fictif (démo)", "local": "Dossier local"}
FICTIONAL_NOTICE = ("Échantillon de démonstration : ces articles sont FICTIFS, inventés pour montrer "
                    "l'application. Ce ne sont pas des textes de loi belges ; ne vous y fiez pas.")

FICTIONAL_SHORT = "Articles FICTIFS : échantillon de démonstration, pas du droit belge."


class BuildOnce(Generic[T]):
    """A keyed memo that builds each value at most once, even under concurrent callers.

    Failures are not stored: the next caller tries again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._items: dict[Hashable, T] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        if key in self._items:
            return self._items[key]
        with self._lock:
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._items:
                self._items[key] = build()
            return self._items[key]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._locks.clear()


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


def source_kind(spec: str) -> str:
    """``"hub"``, ``"sample"`` or ``"local"`` for a spec."""
    return spec if spec in ("hub", "sample") else "local"


ALLOW_FOLDERS_ENV = settings.ALLOW_FOLDERS
FOLDERS_DISABLED = ("Dossier local désactivé sur ce serveur. Pour l'activer, démarrez l'application avec "
                    "`BSARD_DATA=/chemin/du/dossier` (ce dossier seul) ou `BSARD_ALLOW_FOLDERS=1` (tout dossier "
                    "lisible par le serveur : à réserver à un usage local).")


@dataclass(frozen=True)
class FolderAccess:
    """Which local folders visitors may load: any (``free``), else only ``fixed`` (the folder
    named by ``BSARD_DATA``), else none."""

    free: bool = False
    fixed: str | None = None

    @property
    def offered(self) -> bool:
        return self.free or self.fixed is not None

    def allows(self, spec: str) -> bool:
        """Whether ``spec`` may be loaded (``"hub"`` and ``"sample"`` always may)."""
        return source_kind(spec) != "local" or self.free or spec == self.fixed


def folder_access(config: settings.Settings | None = None) -> FolderAccess:
    """The folder policy from ``BSARD_ALLOW_FOLDERS`` (``1``, ``true`` or ``yes``) and
    ``BSARD_DATA`` of ``config`` (default: :func:`bsard_demo.settings.current`)."""
    config = settings.current() if config is None else config
    data = config.data
    return FolderAccess(config.allow_folders, data if data and source_kind(data) == "local" else None)


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

    @property
    def key(self) -> tuple:
        return data_key(self.spec)


def spec_name(spec: str) -> str:
    """French name of a dataset spec: the source label, plus the folder for a local one."""
    kind = source_kind(spec)
    return SOURCE_LABELS[kind] if kind != "local" else f"{SOURCE_LABELS['local']} : {spec}"


def display_name(data: ActiveData) -> str:
    """French name of the active dataset (:func:`spec_name` of what was loaded)."""
    return spec_name(data.spec)


#: The French words for :attr:`~bsard_demo.sources.DataUnavailable.cause`, shown in the banner.
HUB_CAUSES = {
    "offline": "hub injoignable et aucune copie en cache local",
    "timeout": "le hub n'a pas répondu à temps",
    "damaged": "fichiers reçus incomplets ou endommagés",
}


def hub_cause(error: Exception) -> str | None:
    """The French cause of a hub failure, ``None`` when the error does not name a known one."""
    return HUB_CAUSES.get(getattr(error, "cause", None))


def fallback_reason(requested: str, error: DataError, kept: str = "sample") -> str:
    """The French banner shown when ``requested`` could not be loaded and ``kept`` is used instead."""
    if source_kind(requested) == "hub":
        cause = hub_cause(error)
        what = "Le jeu BSARD n'a pas pu être obtenu du hub Hugging Face" + (f" ({cause})" if cause else "")
    else:
        what = f"Le dossier « {requested} » n'a pas pu être chargé"
    instead = ("l'échantillon fictif fourni avec elle" if kept == "sample"
               else f"le jeu de données déjà chargé ({spec_name(kept)})")
    return f"{what} : l'application utilise {instead}."


def failure_detail(error: Exception) -> str:
    """The loader's message for the banner (its ``advice`` code is not worded here)."""
    if isinstance(error, DataUnavailable):
        return error.detail
    return str(error)


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
    """``build`` that logs one line before it starts and one when it is done (with its duration)."""
    def run() -> T:
        log.info("building %s", what)
        start = time.perf_counter()
        value = build()
        log.info("built %s in %.2f s", what, time.perf_counter() - start)
        return value
    return run


def get_retriever(registry: BuildOnce, data: ActiveData, spec: RetrieverSpec, *, progress: Progress | None = None,
                  notice: Callable[[str], None] | None = None) -> Retriever:
    """The retriever ``spec`` over the active dataset, built once per process.

    A kind made of parts (a hybrid, a learned ranker: :attr:`~bsard_demo.retrievers.RetrieverKind.parts`)
    is assembled from its parts' registry entries, so their BM25 and dense indexes are shared with
    the other columns, and is itself cheap to make.
    """
    kind = retriever_kinds()[spec.kind]
    if kind.parts is not None and not is_built(registry, data, spec):
        built = [get_retriever(registry, data, p, progress=progress, notice=notice) for p in kind.parts(spec)]
        return registry.get((data.key, spec.key()), _logged(f"{spec.kind} over {data.spec}",
                                                            lambda: kind.assemble(spec, built, data.dataset)))
    return registry.get((data.key, spec.key()),
                        _logged(f"{spec.kind} index over {data.spec}",
                                lambda: build_retriever(spec, data.dataset, progress=progress, notice=notice)))


def is_built(registry: BuildOnce, data: ActiveData, spec: RetrieverSpec) -> bool:
    return (data.key, spec.key()) in registry


#: The French words of a build's :class:`~bsard_demo.progress.Step`, by kind; a cache step's by
#: kind and entry (the cache kind: ``bm25s``, ``dense``); a parameter in parentheses follows (engine, encoder).
STEP_FR = {
    "analysing_articles": "analyse des articles",
    "indexing": "indexation",
    "embedding_articles": "encodage des articles",
    "embedding_questions": "encodage des questions",
    "searching_questions": "recherche des questions",
    "fitting_adapter": "ajustement de l'adaptateur des questions",
    "fitting_ranker": "ajustement du classement appris",
}
ENTRY_STEP_FR = {
    ("saving", "bm25s"): "enregistrement de l'index BM25",
    ("saving", DENSE_CACHE): "enregistrement des plongements",
    ("loaded_cached", "bm25s"): "index BM25 chargé depuis le cache",
    ("loaded_cached", DENSE_CACHE): "plongements chargés depuis le cache",
    ("loaded_bundle", "bm25s"): "index BM25 chargé",
    ("loaded_bundle", DENSE_CACHE): "plongements chargés",
}
#: Where a ``loaded_bundle`` step loaded from.
FROM_BUNDLE_FR = " depuis les index préconstruits"


def progress_text(message: str) -> str:
    """French wording of a library progress message: a :class:`~bsard_demo.progress.Step` from
    its kind and parameters (an unknown kind keeps its English words); any other text as it is."""
    kind, params = getattr(message, "kind", None), getattr(message, "params", {})
    if kind in STEP_FR:
        detail = params.get("engine") or params.get("encoder")
        return STEP_FR[kind] + (f" ({detail})" if detail else "")
    words = ENTRY_STEP_FR.get((kind, params.get("entry")))
    if words is None:
        return str(message)
    subject = params.get("subject")
    return words + (f" ({subject})" if subject else "") + (FROM_BUNDLE_FR if kind == "loaded_bundle" else "")


def progress_fraction(done: int, total: int) -> float:
    """``done / total`` clipped to [0, 1] (0 when ``total`` is not positive)."""
    return 0.0 if total <= 0 else min(1.0, max(0.0, done / total))
