"""Streamlit glue shared by the app's pages: the shared index registry, the stylesheet, progress bars,
the encoder menus' cached facts, the error guard and the shell (unknown paths, legacy page mode, widget
states no page drew); the
dataset sidebar is :mod:`bsard_demo.app.sidebar`, the Score page's glue :mod:`bsard_demo.app.score_ui`.
What the pages decide lives in :mod:`bsard_demo.app.state`, :mod:`bsard_demo.app.menus`,
:mod:`bsard_demo.app.search_page` and :mod:`bsard_demo.app.score_page`; this module only draws and caches.

Conventions: all text shown is French; every value from the data or the user goes through
:mod:`bsard_demo.app.highlight` (HTML escaping, Markdown neutralised) before it is rendered.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.state.common import is_element_id

from ..build_once import BuildOnce
from ..dataset import DataError
from ..retrievers import Retriever, RetrieverSpec
from ..retrievers.kinds import DENSE
from ..training import articles_fingerprint
from . import hosting_ui, menus
from .first_builds import BuildEta, dense_index_stored
from .highlight import md_escape
from .progress_words import progress_fraction, progress_text
from .sidebar import active_data
from .state import ActiveData, get_retriever, is_built
from .style import STYLE

log = logging.getLogger("bsard_demo.app")


def _console_logging() -> None:
    """Show the package's INFO lines (index builds, unexpected errors) on the server console; once
    per process."""
    package = logging.getLogger("bsard_demo")
    if not any(getattr(h, "bsard_console", False) for h in package.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.bsard_console = True
        package.addHandler(handler)
        package.setLevel(logging.INFO)


_console_logging()
ERROR_MESSAGE = ("Une erreur inattendue est survenue ({what}). La page reste utilisable : modifiez les réglages "
                 "ou rechargez la page. Si le problème persiste, signalez-le avec les étapes qui y mènent.")


# --------------------------------------------------------------------------- cached resources

@st.cache_resource(show_spinner=False)
def index_registry() -> BuildOnce:
    """Built retrievers, shared by every session of this process."""
    return BuildOnce()


# --------------------------------------------------------------------------- shell

def inject_style() -> None:
    st.html(STYLE)


# --------------------------------------------------------------------------- building indexes

def progress_bar(label: str) -> tuple[Callable[[int, int, str], None], Callable[[], None]]:
    """A progress bar drawn now; returns ``(callback, clear)``."""
    holder = st.empty()
    bar = holder.progress(0.0, text=label)
    eta = BuildEta()

    def update(done: int, total: int, message: str) -> None:
        bar.progress(progress_fraction(done, total),
                     text=f"{label} — {md_escape(progress_text(message))}{eta.text(done, total, message)}")

    return update, holder.empty


def retriever(data: ActiveData, spec: RetrieverSpec, label: str) -> Retriever:
    """The retriever, built once per process; its first build shows a progress bar."""
    registry = index_registry()
    if is_built(registry, data, spec):
        return get_retriever(registry, data, spec)
    update, clear = progress_bar(f"Construction de l'index « {md_escape(label)} » (une seule fois par serveur)")
    notices: list[str] = []
    try:
        return get_retriever(registry, data, spec, progress=update, notice=notices.append)
    finally:
        clear()
        for n in hosting_ui.build_notes(data, notices):
            st.caption("Note : " + md_escape(n))


# --------------------------------------------------------------------------- dense encoders

@st.cache_resource(show_spinner=False, max_entries=4)
def _corpus_sha256(key: tuple, _articles) -> str:  # noqa: ARG001 - key is the cache key
    """The corpus fingerprint trained models record (to say whether they were trained on it)."""
    return articles_fingerprint(_articles)


def rankers_here(data: ActiveData) -> list[str]:
    """:func:`bsard_demo.app.menus.rankers_here` of the active dataset (its fingerprint cached)."""
    return menus.rankers_here(data, lambda: _corpus_sha256(data.key, data.dataset.articles))


def encoder_menu(data: ActiveData) -> list:
    """Every dense encoder the app knows for the active dataset, offered or not
    (:func:`bsard_demo.app.menus.encoder_menu`, with the process's bundle and the cached fingerprint)."""
    return menus.encoder_menu(data, hosting_ui.bundle_setup(), lambda: _corpus_sha256(data.key, data.dataset.articles))


#: Seconds a "not stored" answer of :func:`dense_stored` is kept (a "stored" one stays).
STORED_RECHECK_S = 60


@st.cache_resource(show_spinner=False, max_entries=16, ttl=STORED_RECHECK_S)
def _dense_stored(key: tuple, target: str, backend: str, _articles) -> bool:  # noqa: ARG001 - key is the cache key
    return dense_index_stored(_articles, target, backend=backend)


def dense_stored(data: ActiveData, target: str, backend: str = "auto") -> bool:
    """Whether the dense index of ``target`` (default settings, run by ``backend``) over the active dataset is built
    in this process, or stored in the index bundle or the cache (checked at most once a minute)."""
    if data.dataset.articles is None:
        return False
    options = {"encoder": target} | ({"backend": backend} if backend != "auto" else {})
    if is_built(index_registry(), data, RetrieverSpec(DENSE.name, options)):
        return True
    return _dense_stored(data.key, target, backend, data.dataset.articles)


# --------------------------------------------------------------------------- errors

@contextmanager
def guard(what: str) -> Iterator[None]:
    """Run a page body; an unexpected error shows a short French message instead of a traceback.

    Data errors (:class:`DataError`, :class:`ValueError`) show their own message."""
    try:
        yield
    except DataError as exc:
        st.error("Données inutilisables : " + md_escape(exc))
    except ValueError as exc:
        st.error("Réglage ou donnée invalide : " + md_escape(exc))
    except MemoryError:
        st.error("Mémoire insuffisante pour cette opération. Essayez avec moins de fichiers ou un k plus petit.")
    except Exception as exc:  # noqa: BLE001 - last resort: no traceback reaches the user
        log.exception("unexpected error in %s", what)
        st.error(ERROR_MESSAGE.format(what=md_escape(what)) + f"  \nDétail : {md_escape(type(exc).__name__)}")


#: Session key of a weak reference to the dataset the shell (``app.py``) chose for the run.
RUN_DATA = "active_data"


def current_data() -> ActiveData:
    """The dataset chosen by the shell (``app.py``) for this run (its weak reference lives while the run holds
    it), else :func:`~bsard_demo.app.sidebar.active_data`."""
    ref = st.session_state.get(RUN_DATA)
    data = ref() if callable(ref) else None
    return data if data is not None else active_data()

def unknown_path(known: Iterable[str]) -> str | None:
    """The path the browser asked for when it is none of ``known`` (the pages' URL paths), after
    telling Streamlit to run the default page instead; ``None`` when the path is a page.

    ``st.navigation`` resolves the page of a URL by the run's intended page name and, when no
    page has it, sends Streamlit's English « Page not found » modal before running the default
    page; clearing that intent first runs the default page without it, so the caller can say
    so in French. Call it before ``st.navigation``."""
    manager = getattr(get_script_run_ctx(), "pages_manager", None)
    name = getattr(manager, "intended_page_name", None)
    if not name or getattr(manager, "intended_page_script_hash", None) or name.strip("/") in set(known):
        return None
    manager.set_script_intent("", "")
    return name


def unknown_path_note(path: str) -> None:
    """The French note for a path that is no page (:func:`unknown_path`)."""
    st.info(f"L'adresse « /{md_escape(path.strip('/'))} » ne correspond à aucune page de cette application : voici la "
            "page « Rechercher ». Les pages : `/` ou `/search` (rechercher), `/score` (évaluer des runs).",
            icon=":material/travel_explore:")


def drop_forged_widget_states() -> int:
    """Forget the widget states of this rerun whose id no widget can have (not Streamlit's ``$$ID-…`` form, and
    no widget registered under it), before the script reads the session: a client may send any id, and
    Streamlit 1.67 then raised ``KeyError`` at the page's first widget (« Détail : KeyError » for that
    session; issue 37). A browser only sends the ids the page drew. Returns how many were dropped (0 where
    Streamlit's private names differ from 1.67's: then nothing is changed)."""
    try:
        safe = get_script_run_ctx().session_state
        with safe._lock:  # the lock Streamlit holds around the session's state
            widgets = safe._state._new_widget_state
            forged = [k for k in widgets.states if not is_element_id(k) and k not in widgets.widget_metadata]
            for k in forged:
                del widgets.states[k]
    except Exception:  # noqa: BLE001 - another Streamlit: its state is left as it is
        return 0
    if forged:
        log.info("ignored %d widget state(s) for widgets no page drew", len(forged))
    return len(forged)


def ensure_shell() -> None:
    """Make sure the page runs inside ``app.py`` (navigation, sidebar, notices).

    Streamlit runs a script in its legacy "pages/ folder" mode until ``st.navigation`` has been
    called once in the process (and at every ``AppTest`` run): a first visitor arriving straight
    at ``/score`` would get the page without the shell. The page then switches the legacy mode
    off and reruns once; the rerun goes through ``app.py``'s ``st.navigation``, which keeps the
    requested page.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
