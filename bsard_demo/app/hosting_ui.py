"""Streamlit glue of :mod:`bsard_demo.app.hosting`: the app's :class:`~bsard_demo.settings.Settings`
from ``st.secrets`` (then the environment: :func:`app_settings`), the index bundle activated once per process and its
notices, the Cloud-safe error setting, the large-upload slot's waiting notice, and the process's memory after a
crowd and its native libraries' threads (:func:`tune_process`, :func:`page_running`).

Conventions: every text drawn is escaped (:func:`~bsard_demo.app.highlight.md_escape`); nothing
here raises on a missing or malformed ``secrets.toml`` (that file is optional: without it
``st.secrets`` raises ``FileNotFoundError`` on first use).
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Hashable, Iterator

import streamlit as st
from streamlit import runtime

from .. import settings
from ..frame_memo import keeping
from .highlight import md_escape
from .hosting import (
    ARENA_MAX,
    MMAP_THRESHOLD,
    WAIT_NOTICE,
    BundleSetup,
    IdleGiveBack,
    UploadSlot,
    bundle_caption,
    bundle_notices,
    cap_malloc_arenas,
    fix_mmap_threshold,
    give_back_memory,
    keep_build_note,
    setup_bundle,
    upload_size,
)
from .naming import files_fingerprint, public_name, strip_paths
from .score_uploads import SCOREBOARD_ENTRIES, SCOREBOARD_TTL_S
from .state import ActiveData
from .visitor_limits import UploadBudget, cap_uploads, refuse_cache_clears

log = logging.getLogger(__name__)


class _Secrets:
    """``st.secrets`` as :meth:`bsard_demo.settings.Settings.from_env` reads it, read once per instance
    (Streamlit looks for the secrets files again at every read while none exists: nine reads a call):
    a missing or unreadable secrets file sets nothing (an unreadable one is logged once per process)."""

    def __init__(self) -> None:
        self._values: dict | None = None

    def get(self, name: str, default=None):
        if self._values is None:
            try:
                self._values = dict(st.secrets)
            except FileNotFoundError:  # no secrets.toml anywhere: the usual local case
                self._values = {}
            except Exception as exc:  # noqa: BLE001 - a malformed secrets.toml must not take the app down
                _log_once(f"secrets.toml unreadable ({type(exc).__name__}); using the environment")
                self._values = {}
        value = self._values.get(name)
        return default if value is None else value


def app_settings() -> settings.Settings:
    """The app's settings: each from ``st.secrets`` when a secrets file sets it (Streamlit
    Community Cloud: the app's "Secrets" box), else from the environment (read now: cheap)."""
    return settings.current(_Secrets())


def secret(name: str) -> str | None:
    """The raw value of setting ``name`` (one of :data:`bsard_demo.settings.NAMES`) as
    :func:`app_settings` reads it, ``None`` when neither the secrets nor the environment set it."""
    return settings.read(None, _Secrets()).get(name)


_logged: set[str] = set()


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        log.warning("%s", message)


def hide_error_details() -> None:
    """Community Cloud forces ``client.showErrorDetails = false``, which Streamlit 1.67 reads as
    "stacktrace" (the deprecated spelling): set "none" again, at run time, on every run."""
    if st.get_option("client.showErrorDetails") != "none":
        st.set_option("client.showErrorDetails", "none")


@st.cache_resource(show_spinner="Préparation des index préconstruits…")
def bundle_setup() -> BundleSetup:
    """The process's index bundle, activated (and, from the hub, downloaded) once per process."""
    setup = setup_bundle(secret)
    if setup.bundle is not None:
        log.info("index bundle %s: %s%s", setup.value, setup.bundle.summary(),
                 f"; damaged: {setup.damaged[0]}" if setup.damaged else "")
    elif setup.value:
        log.warning("index bundle not used: %s", setup.problem)
    return setup


def bundle_notes(data: ActiveData) -> list[tuple[str, str]]:
    """The bundle's notices for the active dataset, ``(level, text)``, for the page's one notice
    (:func:`bsard_demo.app.sidebar.data_notice`); its summary goes in the sidebar now."""
    setup = bundle_setup()
    ds = data.dataset
    if setup.serves(data.key, ds.articles, ds.name):
        st.sidebar.caption(sidebar_line(setup))
    return list(bundle_notices(setup, data.key, ds.articles, ds.name))


#: The sidebar's bundle line, with the bundle it was made for: ``{"line": (bundle, line)}``.
_SIDEBAR_LINE: dict = {}


def sidebar_line(setup: BundleSetup) -> str | None:
    """The sidebar's line about ``setup``'s bundle (:func:`~bsard_demo.app.hosting.bundle_caption` in
    :func:`public_caption`'s words, escaped), ``None`` without one. Made once per bundle, not at every page
    run (its files' fingerprint and the paths' scan): kept with the bundle object it describes, so another
    bundle makes it anew."""
    bundle = setup.bundle
    if bundle is None:
        return None
    held = _SIDEBAR_LINE.get("line")
    if held is None or held[0] is not bundle:
        held = _SIDEBAR_LINE["line"] = (bundle, md_escape(public_caption(setup, bundle_caption(setup))))
    return held[1]


def public_caption(setup: BundleSetup, caption: str) -> str:
    """The sidebar's line about the bundle, naming it by its name and fingerprint
    (:mod:`bsard_demo.app.naming`): no path of the machine that built it or serves it."""
    bundle = setup.bundle
    fingerprint = files_fingerprint(bundle.manifest.get("files") or {}) if bundle is not None else ""
    name = public_name(bundle.label) if bundle is not None else ""
    return (strip_paths(caption) + (f" Paquet « {name} »" if name else "")
            + (f", empreinte {fingerprint}." if fingerprint else "."))


def build_notes(data: ActiveData, notes: list[str]) -> list[str]:
    """The build notes worth a caption (a bundle's "not for this corpus" notes are said once above)."""
    setup = bundle_setup()
    serves = setup.serves(data.key, data.dataset.articles, data.dataset.name)
    return [n for n in notes if keep_build_note(setup, serves, n)]


#: The scoreboards the app's cache keeps (:data:`bsard_demo.app.score_uploads.SCOREBOARD_ENTRIES`):
#: scorings the slot may take as already done.
SCORED_REMEMBERED, SCORED_TTL_S = SCOREBOARD_ENTRIES, SCOREBOARD_TTL_S


#: Setting (secret or environment): how many large uploads one server process scores at once (default 1).
SLOTS_SETTING = settings.LARGE_UPLOADS


@st.cache_resource(show_spinner=False)
def upload_slot() -> UploadSlot:
    """The large scorings this server process runs at once: ``BSARD_LARGE_UPLOADS`` (default 1)."""
    return UploadSlot(slot_count(app_settings().large_uploads), remember=SCORED_REMEMBERED, ttl=SCORED_TTL_S)


def slot_count(value: str | None) -> int:
    """A positive integer setting, else 1 (a bad value is logged once)."""
    try:
        n = int(str(value).strip()) if value is not None and str(value).strip() else 1
    except ValueError:
        n = 0
    if n < 1:
        _log_once(f"{SLOTS_SETTING}={value!r} is not a positive integer; 1 large upload at a time")
        return 1
    return n


@contextmanager
def large_upload_slot(files, key: Hashable | None = None) -> Iterator[None]:
    """Hold the process's large-upload slot while the block scores ``files`` (when they are large
    and not already scored under ``key``); while waiting, a notice says so."""
    holder = []  # the notice's placeholder, made only when waiting: no element on the usual path

    def waiting(seconds: float) -> None:
        if not holder:
            holder.append(st.empty())
        holder[0].info(f"{WAIT_NOTICE} ({seconds:.0f} s)", icon=":material/hourglass_top:")

    def clear() -> None:
        if holder:
            holder[0].empty()

    slot, size = upload_slot(), upload_size(files)
    scored = slot.needed(size, key)
    try:
        with slot.hold(size, key, on_wait=waiting):
            clear()
            yield
            if scored:
                give_back_memory()  # inside the slot: the next large scoring starts from a trimmed heap
    finally:
        clear()


def drop_expired_sessions() -> int:
    """Shut down the disconnected sessions whose keep for a reconnection (Streamlit's 120 s) is over,
    as Streamlit's own ``close_session`` does, and empty their state. Its storage reaps them only when
    another session is stored, and then without a shutdown: after a crowd up to 128 stay alive, with
    their state and their download buttons' files. Returns how many were shut down (0 where Streamlit's private
    names differ from 1.67's: then a no-op)."""
    try:
        if not runtime.exists():
            return 0
        manager = runtime.get_instance()._session_mgr
        lock, storage = manager._storage_lock, manager._session_storage._cache
        with lock:  # the lock Streamlit holds around its storage
            expired = list(storage.expire() or ())
    except Exception:  # noqa: BLE001 - another Streamlit: its sessions are left as they are
        return 0
    for _, info in expired:
        try:
            info.session.shutdown()
            # Its state too (widget values: the file uploader's holds the uploads' bytes): Streamlit's
            # runtime loop keeps the last session it flushed in a local variable (``active_session_info``
            # of ``Runtime._loop_coroutine``) until it flushes another's, and after a lone visitor's upload
            # flood the server kept their 2 x 48 MB for good (docs/reliability.md, section 12).
            info.session.session_state.clear()
        except Exception:  # noqa: BLE001 - one session's cleanup must not stop the others'
            log.warning("could not shut down an expired session", exc_info=True)
    return len(expired)


def _give_back() -> None:
    drop_expired_sessions()
    give_back_memory()


#: The process's pages, and its memory handed back when none has run for a while (one per process).
IDLE = IdleGiveBack(give_back=_give_back)


def tune_process() -> None:
    """Once per process (every run calls it; cheap): start the thread that hands memory back when
    idle (a process otherwise keeps its peak after a crowd: docs/reliability.md, section 10), cap
    glibc's malloc arenas and fix its mmap threshold unless the deployer set them (``MALLOC_ARENA_MAX``,
    ``MALLOC_MMAP_THRESHOLD_`` or glibc's tunables), give numpy's OpenBLAS one thread unless
    ``OPENBLAS_NUM_THREADS`` (or its fallbacks) is set, keep the pages' compiled code
    (:func:`keep_script_cache`), and hold every visitor to what it may do to the others
    (:mod:`bsard_demo.app.visitor_limits`: no shared cache cleared, an upload budget)."""
    if not IDLE.start():
        return
    if not settings.malloc_arenas_configured() and cap_malloc_arenas():
        log.info("glibc malloc arenas capped at %d for this process", ARENA_MAX)
    if not settings.malloc_mmap_configured() and fix_mmap_threshold():
        log.info("glibc mmap threshold fixed at %d bytes for this process", MMAP_THRESHOLD)
    try:
        settings.one_blas_thread()
    except Exception:  # noqa: BLE001 - a tuning, never a reason for a page to fail
        log.warning("could not set OpenBLAS to one thread", exc_info=True)
    if keep_script_cache():
        log.info("the pages' compiled code kept for the process's life (no source watcher)")
    if refuse_cache_clears():  # no visitor can empty what the others use (issue 37)
        log.info("a client's clear_cache clears its own session state only")
    budget = UploadBudget.of(app_settings().upload_budget)
    if cap_uploads(budget):
        log.info("uploads held to %d MB a visitor, %d MB in all", budget.per_visitor // 2**20, budget.total // 2**20)


def keep_script_cache() -> bool:
    """Keep the pages' compiled code for the process's life when no source watcher runs
    (``server.fileWatcherType = "none"``, the app's setting): Streamlit empties its script cache whenever
    the last session leaves, so that a watcher-less edit shows at the next visit, and a lone visitor then
    compiled ``app.py`` and the page again (a landing visit 0.031 against 0.037-0.040 CPU s: docs/benchmarks.md,
    "The pages' compiled code kept"). A deployed demo's files change only with a restart. Returns
    whether the cache is kept (``False`` with a watcher, or where Streamlit's private names differ from
    1.67's: then nothing is changed)."""
    try:
        if st.get_option("server.fileWatcherType") != "none" or not runtime.exists():
            return False
        cache = runtime.get_instance()._script_cache
        if not callable(getattr(cache, "clear", None)) or not hasattr(cache, "get_bytecode"):
            return False
        cache.clear = _kept  # the instance's: Streamlit's session manager and app sessions call this one
    except Exception:  # noqa: BLE001 - another Streamlit: its cache is left as it is
        return False
    return True


def _kept() -> None:
    """A script cache's ``clear`` when no watcher can have seen a file change (:func:`keep_script_cache`)."""


@contextmanager
def page_running() -> Iterator[None]:
    """Context manager around a page's run: no memory is handed back while one runs, and the
    corpus' texts are derived once for the builds of the pages running (:func:`bsard_demo.frame_memo.keeping`)."""
    with IDLE.running(), keeping():
        yield
