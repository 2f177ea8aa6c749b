"""What a hosted demo needs beyond the pages, without Streamlit: the index bundle of the server
(``BSARD_INDEX``) and what to tell visitors about it, one slot for scoring large uploads
(:class:`UploadSlot`), and memory handed back after a crowd (:class:`IdleGiveBack`). Its Streamlit
side is :mod:`bsard_demo.app.hosting_ui`.

Conventions: docs/design.md, 'bsard_demo/app/hosting.py'.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator

from .. import bundles
from ..bundles import Bundle, CorpusId
from . import french
from .naming import bundle_name, without_address

INDEX_SETTING = bundles.ENV_VAR        # "BSARD_INDEX"
TOKEN_SETTING = bundles.TOKEN_ENV_VAR  # "HF_TOKEN"
FALLBACK = ("les index sont lus dans le cache du serveur ou construits (la première recherche peut alors prendre "
            "plusieurs minutes)")


@dataclass
class BundleSetup:
    """The process's index bundle: ``value`` as configured (``""``: none), the active ``bundle``
    (``None`` when none or when it could not be had: ``problem`` says why, in English), and the
    problems of its files found by the full check (``damaged``)."""

    value: str = ""
    bundle: Bundle | None = None
    problem: str | None = None
    damaged: tuple[str, ...] = ()
    _corpora: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def corpus_of(self, key: Hashable, articles, name: str) -> CorpusId:
        """:func:`bsard_demo.bundles.corpus_id` of a dataset, memoised on its key (0.2 s at BSARD scale)."""
        with self._lock:
            hit = self._corpora.get(key)
        if hit is None:
            hit = bundles.corpus_id(articles, name)
            with self._lock:
                self._corpora[key] = hit
        return hit

    def serves(self, key: Hashable, articles, name: str = "") -> bool:
        """Whether the bundle was built for this dataset's corpus."""
        return (self.bundle is not None and articles is not None
                and self.bundle.corpus.same_corpus(self.corpus_of(key, articles, name)))


def setup_bundle(lookup: Callable[[str], str | None], *, activate: Callable[..., Bundle | None] | None = None
                 ) -> BundleSetup:
    """Activate the bundle named by ``lookup("BSARD_INDEX")`` (a folder or ``hf://…``, fetched with
    ``lookup("HF_TOKEN")``) for this process, check its files, and say what went wrong. Never
    raises: a bundle that cannot be had leaves none active. Every line visitors may read names the bundle by
    :func:`~.naming.bundle_name`, never by its address (the bundle's ``label``, which its notes quote, is set to it)."""
    value = (lookup(INDEX_SETTING) or "").strip()
    if not value:
        bundles.deactivate()
        return BundleSetup()
    problems: list[str] = []
    bundle = (activate or bundles.activate)(value, token=(lookup(TOKEN_SETTING) or "").strip() or None,
                                            on_error=problems.append)
    name = bundle_name(value)
    if bundle is None:
        return BundleSetup(value, None, without_address(problems[0], value, name) if problems else
                           f"index bundle {name}: not usable")
    bundle.label = name
    try:
        damaged = tuple(bundle.check())
    except Exception as exc:  # noqa: BLE001 - a check that fails is a damaged bundle, never a crash
        damaged = (f"cannot check the files ({type(exc).__name__})",)
    return BundleSetup(value, bundle, None, damaged)


def _label(setup: BundleSetup) -> str:
    return f"« {bundle_name(setup.bundle.label if setup.bundle is not None else setup.value)} »"


def bundle_notices(setup: BundleSetup, key: Hashable, articles, name: str = "") -> list[tuple[str, str]]:
    """What the pages say about the bundle for the dataset ``(key, articles, name)``."""
    if not setup.value:
        return []
    if setup.bundle is None:
        return [("warning", f"Index préconstruits ({INDEX_SETTING}) inutilisables : {setup.problem}. "
                            f"En attendant, {FALLBACK}.")]
    out = []
    if setup.damaged:
        more = f" ; {len(setup.damaged) - 1} autre(s)" if len(setup.damaged) > 1 else ""
        out.append(("warning", f"Index préconstruits {_label(setup)} endommagés ({setup.damaged[0]}{more}) : "
                               f"les index touchés sont lus dans le cache ou reconstruits, les autres servent."))
    if articles is not None and not setup.serves(key, articles, name):
        out.append(("info", f"Les index préconstruits {_label(setup)} ont été faits pour un autre corpus "
                            f"({setup.bundle.corpus.describe()} ; celui-ci : "
                            f"{setup.corpus_of(key, articles, name).describe()}) : ils ne servent pas pour ce jeu de "
                            f"données, dont {FALLBACK}."))
    return out


def _what_fr(what: str) -> str:
    """A bundle entry's English label (``"BM25 index"``, ``"embeddings (use)"``) in French."""
    if what == "BM25 index":
        return "index BM25"
    if what.startswith("embeddings"):
        return "plongements" + what[len("embeddings"):]
    return what


def bundle_caption(setup: BundleSetup) -> str | None:
    """One French line for the sidebar when a bundle is in use."""
    if setup.bundle is None:
        return None
    b = setup.bundle
    whats = " + ".join(_what_fr(e.what) for e in b.entries.values()) or "aucun index"
    of = f" de {b.corpus.dataset}" if b.corpus.dataset else ""
    return (f"Index préconstruits : {whats} pour {french.integer(b.corpus.articles)} articles{of} "
            f"({french.megabytes(b.total_size)}, empreinte {b.corpus.fingerprint[:12]}).")


def keep_build_note(setup: BundleSetup, serves: bool, note: str) -> bool:
    """Whether a build's note is worth a caption: a bundle note is dropped when the bundle does not
    serve this dataset (the page already says so once, above)."""
    return serves or setup.bundle is None or not note.startswith("index bundle")


# --------------------------------------------------------------------------- large uploads

#: Uploads (one request's files together) from this size on are scored one at a time per process.
#: A 222 × 5,000 TREC run is 29 MB; a 222 × 500 one about 3 MB stays below.
LARGE_UPLOAD_BYTES = 8 * 2**20
WAIT_NOTICE = "Un autre fichier volumineux est en cours d'évaluation, patientez…"


class UploadSlot:
    """At most ``slots`` holders at a time. :meth:`hold` waits in steps of ``poll`` seconds,
    calling ``on_wait(seconds waited)`` after each (the app redraws its notice there, which also
    lets Streamlit stop a script whose visitor left). Scorings already done (their keys noted by
    :meth:`done`: the last ``remember`` ones, for ``ttl`` seconds, as the app's scoreboard cache
    keeps them) are served from that cache and skip the slot; should the cache have dropped one
    sooner, it is scored again outside the slot."""

    def __init__(self, slots: int = 1, *, threshold: int = LARGE_UPLOAD_BYTES, poll: float = 0.25,
                 remember: int = 4, ttl: float = 3600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold, self.poll, self.remember, self.ttl, self.clock = threshold, poll, remember, ttl, clock
        self._sem = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._done: OrderedDict[Hashable, float] = OrderedDict()
        self.waits = 0  # how many holders had to wait (for tests and the load bench)

    def needed(self, size: int, key: Hashable | None = None) -> bool:
        if size < self.threshold:
            return False
        with self._lock:
            when = self._done.get(key) if key is not None else None
            if when is not None and self.clock() - when > self.ttl:
                del self._done[key]
                when = None
        return when is None

    def done(self, key: Hashable) -> None:
        with self._lock:
            self._done.pop(key, None)
            self._done[key] = self.clock()
            while len(self._done) > self.remember:
                self._done.popitem(last=False)

    @contextmanager
    def hold(self, size: int, key: Hashable | None = None, on_wait: Callable[[float], None] | None = None
             ) -> Iterator[bool]:
        """Hold a slot while the block runs when ``size`` is large (yields whether it waited)."""
        if not self.needed(size, key):
            yield False
            return
        start, waited = self.clock(), False
        while not self._sem.acquire(timeout=self.poll):
            if not waited:
                waited = True
                with self._lock:
                    self.waits += 1
            if on_wait is not None:
                on_wait(self.clock() - start)
        try:
            yield waited
            if key is not None:
                self.done(key)
        finally:
            self._sem.release()


# --------------------------------------------------------------------------- memory after a crowd

def _glibc():
    """The C library when it is glibc (``ctypes.CDLL``), else ``None`` (musl, macOS, Windows)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") else None


#: One give-back at a time (the idle thread, a large scoring's slot): another's gc.freeze could freeze our garbage.
_GIVE_BACK_LOCK = threading.RLock()


def freeze_what_is_kept() -> None:
    """Collect, then set every object alive aside from Python's collector (``gc.freeze``): what a build
    made lives as long as the process, and the full collections a crowd triggers then walk only the
    pages' objects (before: 15–22 of ~130 ms in 75 visits of 25 at once, docs/benchmarks.md)."""
    with _GIVE_BACK_LOCK:
        gc.collect()
        gc.freeze()


def give_back_memory() -> bool:
    """Collect garbage (frozen objects too, then :func:`freeze_what_is_kept` again) and hand the freed
    heap back to the system (glibc's ``malloc_trim``; a no-op elsewhere), and pyarrow's pool its unused
    pages when pyarrow is loaded (Streamlit's tables go through it): after a large scoring, the memory
    it freed otherwise stays resident (fragmented between threads). Returns whether the heap was trimmed."""
    with _GIVE_BACK_LOCK:
        gc.unfreeze()
        freeze_what_is_kept()
    arrow = sys.modules.get("pyarrow")
    try:
        if arrow is not None:
            arrow.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - an older pyarrow without it: nothing to release
        pass
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


#: glibc's malloc arenas for a process whose pages run in many threads (glibc's default: up to 8 per
#: core, each keeping the pages its threads freed). With 2, the peak of 50 pages at once was 980 MB
#: instead of 1,202 (docs/reliability.md, section 10).
ARENA_MAX = 2
#: glibc's mmap threshold, fixed: a block from 128 KiB up gets pages of its own, handed back when it is freed. By
#: default glibc raises the threshold (up to 32 MB) each time such a block is freed, after which the corpus-sized
#: arrays of every search (the learned ranker's: 233 kB over 29k articles) come from the arenas, where a crowd
#: leaves their pages spread: 200 s after 50 visitors at once the server kept 992 MB, 925 MB with the threshold
#: fixed (786 MB warm; docs/benchmarks.md, "Per-visit cost (issue 29)").
MMAP_THRESHOLD = 128 * 1024
_M_ARENA_MAX, _M_MMAP_THRESHOLD = -8, -3  # mallopt's parameters (malloc.h)
_set: dict[int, bool] = {}  # mallopt parameter -> whether glibc took it (set once per process)
_set_lock = threading.Lock()


def _mallopt_once(param: int, value: int, libc) -> bool:
    with _set_lock:
        if param not in _set:
            libc = _glibc() if libc is None else libc
            _set[param] = libc is not None and libc.mallopt(param, int(value)) == 1
        return _set[param]


def cap_malloc_arenas(limit: int = ARENA_MAX, *, libc=None) -> bool:
    """``mallopt(M_ARENA_MAX, limit)`` once per process (glibc; elsewhere a no-op): threads that need
    an arena later share the ones that exist. glibc reads the cap when a thread next needs a new
    arena (its own limit is fixed only past its 8th), so this works from the first page's run, when
    Streamlit has started a few threads. Returns whether the cap is set (now or before). ``libc``:
    the C library to call (default: glibc's, when it is glibc)."""
    return _mallopt_once(_M_ARENA_MAX, limit, libc)


def fix_mmap_threshold(size: int = MMAP_THRESHOLD, *, libc=None) -> bool:
    """``mallopt(M_MMAP_THRESHOLD, size)`` once per process (glibc; elsewhere a no-op; see
    :data:`MMAP_THRESHOLD`). Returns whether the threshold is set (now or before)."""
    return _mallopt_once(_M_MMAP_THRESHOLD, size, libc)


#: Seconds without a running page after which the freed heap is handed back (:func:`give_back_memory`):
#: soon after a crowd, then once Streamlit has dropped the sessions that disconnected (it keeps one 120 s), and
#: once more for a session that left up to three minutes after the last page ran (an upload flood refused by
#: the budget runs no page: its session's files were still held at 150 s; docs/reliability.md, section 12).
IDLE_GIVE_BACK_S = (10.0, 150.0, 300.0)


class IdleGiveBack:
    """Hands memory back when the process is idle: pages run inside :meth:`running`; :meth:`step`
    calls ``give_back`` when no page has run for ``after[0]`` s, then ``after[1]`` s, … (once each per
    idle spell, never while a page runs) and says how long to wait before the next step; one daemon
    thread per process (:meth:`start`) steps it. Nothing is given back before a first page."""

    def __init__(self, after: tuple[float, ...] = IDLE_GIVE_BACK_S, *,
                 give_back: Callable[[], object] = give_back_memory, poll: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.after, self.give_back, self.poll, self.clock = tuple(sorted(after)), give_back, poll, clock
        self._lock = threading.Lock()
        self._running, self._since, self._given = 0, clock(), len(self.after)
        self._thread: threading.Thread | None = None
        self.given = 0  # how many times memory was given back (for tests and logs)

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
            self._given = 0
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                self._since = self.clock()

    def step(self) -> float:
        with self._lock:
            if self._running or self._given >= len(self.after):
                return self.poll
            wait = self.after[self._given] - (self.clock() - self._since)
            if wait > 0:
                return min(self.poll, wait)
            self._given += 1
        try:
            self.give_back()  # outside the lock: a page starting now does not wait for it
        except Exception:  # noqa: BLE001 - housekeeping must never stop its thread
            pass
        self.given += 1
        return self.poll

    def start(self) -> bool:
        """Start the stepping thread unless it runs; returns whether this call started it."""
        with self._lock:
            if self._thread is not None:
                return False
            self._thread = threading.Thread(target=self._loop, name="bsard-idle-give-back", daemon=True)
        self._thread.start()
        return True

    def _loop(self) -> None:
        while True:
            time.sleep(self.step())


def upload_size(files) -> int:
    """Total bytes of ``[(name, bytes), …]``."""
    return sum(len(blob) for _, blob in files)


__all__ = ["ARENA_MAX", "BundleSetup", "IDLE_GIVE_BACK_S", "IdleGiveBack", "LARGE_UPLOAD_BYTES", "MMAP_THRESHOLD",
           "UploadSlot", "WAIT_NOTICE", "bundle_caption", "bundle_notices", "cap_malloc_arenas", "fix_mmap_threshold",
           "freeze_what_is_kept", "give_back_memory", "keep_build_note", "setup_bundle", "upload_size"]
