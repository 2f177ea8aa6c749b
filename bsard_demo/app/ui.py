"""Streamlit glue shared by the app's pages: cached resources, the dataset sidebar, the fictional
notice, progress bars and the error guard. Logic lives in :mod:`bsard_demo.app.state`,
:mod:`bsard_demo.app.search_page` and :mod:`bsard_demo.app.score_page`; this module only draws.

Conventions: all text shown is French; every value from the data or the user goes through
:mod:`bsard_demo.app.highlight` (HTML escaping, Markdown neutralised) before it is rendered.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import streamlit as st

from ..dataset import DataError, Dataset
from ..retrievers import Retriever, RetrieverSpec
from . import french, hosting_ui
from .highlight import md_escape
from .state import (
    FICTIONAL_NOTICE,
    FICTIONAL_SHORT,
    FOLDERS_DISABLED,
    SOURCE_LABELS,
    ActiveData,
    BuildOnce,
    FailureMemo,
    data_key,
    dataset_summary,
    display_name,
    folder_access,
    get_retriever,
    is_built,
    load_uncached,
    open_data,
    progress_fraction,
    progress_text,
    source_kind,
)

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
DATA_KEY = "data_spec"          # session: the requested dataset spec (None = default)
FOLDER_KEY = "data_folder"      # session: the folder typed in the sidebar
CHOICE_KEY = "data_choice"      # session: the source radio
LOADED_KEY = "data_loaded"      # session: the spec actually loaded last (kept when a switch fails)
ERROR_MESSAGE = ("Une erreur inattendue est survenue ({what}). La page reste utilisable : modifiez les réglages "
                 "ou rechargez la page. Si le problème persiste, signalez-le avec les étapes qui y mènent.")

STYLE = """
<style>
[data-testid="stMainBlockContainer"] {padding-top: 2.2rem;}
[data-testid="stMetricValue"] {font-size: 1.5rem;}
/* long unbroken strings (ids, junk text, 5,000-letter words) wrap instead of widening the page */
.bsard-hit, .bsard-question, .bsard-missed, .bsard-similar {overflow-wrap: anywhere; min-width: 0;}
.bsard-hit {border: 1px solid rgba(49,51,63,.15); border-radius: .5rem; padding: .6rem .8rem; margin-bottom: .6rem;
            background: rgba(255,255,255,.6);}
.bsard-hit.gold {border-left: 5px solid #2e7d32; background: rgba(46,125,50,.06);}
.bsard-head {display: flex; flex-wrap: wrap; gap: .4rem; align-items: baseline; font-size: .92rem;}
.bsard-rank {font-weight: 700; color: #31333f;}
/* a reference or breadcrumb of junk length is cut after three lines (its title attribute keeps it whole) */
.bsard-ref {font-weight: 600; min-width: 0; display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 3;
            overflow: hidden;}
.bsard-score {color: #6b6f76; font-size: .8rem; margin-left: auto; font-variant-numeric: tabular-nums;}
.bsard-badge {border-radius: .7rem; padding: 0 .45rem; font-size: .75rem; font-weight: 600; white-space: nowrap;}
.bsard-badge.gold {background: #2e7d32; color: #fff;}
.bsard-badge.up {background: #e3f2e5; color: #1b5e20;}
.bsard-badge.down {background: #fdecea; color: #b71c1c;}
.bsard-badge.same {background: #eceff1; color: #455a64;}
.bsard-badge.new {background: #e8eaf6; color: #283593;}
.bsard-crumbs {color: #6b6f76; font-size: .78rem; margin: .15rem 0 .35rem 0; display: -webkit-box;
               -webkit-box-orient: vertical; -webkit-line-clamp: 3; overflow: hidden;}
.bsard-text {font-size: .88rem; line-height: 1.45;}
.bsard-text mark, .bsard-full mark {background: #fff59d; padding: 0 .1rem; border-radius: .15rem;}
.bsard-hit details summary {cursor: pointer; color: #0068c9; font-size: .8rem; margin-top: .3rem;}
.bsard-full {font-size: .86rem; line-height: 1.45; margin-top: .3rem; white-space: normal;}
.bsard-missed {font-size: .86rem;}
.bsard-upload-refused {display: none; color: #7d1a1a; background: #fdecea; border-radius: .5rem; padding: .6rem .8rem;
                       font-size: .9rem;}
/* Streamlit refuses a file above server.maxUploadSize in the browser (red file chip): say so */
[data-testid="stMain"]:has([data-testid="stFileChip"][aria-invalid="true"]) .bsard-upload-refused {display: block;}
.bsard-why {color: #0b5cad; font-size: .78rem; margin: .05rem 0 .3rem 0;}
.bsard-tools {display: flex; flex-wrap: wrap; gap: .3rem .6rem; align-items: baseline; margin-top: .35rem;}
.bsard-copy {font-size: .75rem; border: 1px solid rgba(49,51,63,.25); border-radius: .4rem; background: #fff;
             color: #0b5cad; padding: .1rem .5rem; cursor: pointer;}
.bsard-section {flex-basis: 100%;}
.bsard-section summary {cursor: pointer; color: #0068c9; font-size: .8rem;}
.bsard-ctx {border-left: 3px solid #d0d7de; padding: .2rem .5rem; margin: .3rem 0;}
.bsard-ctx.hit {border-left-color: #0b5cad; background: rgba(11,92,173,.06);}
.bsard-member {border-top: 1px dashed rgba(49,51,63,.2); padding-top: .35rem; margin-top: .35rem;}
.bsard-member.gold {border-left: 4px solid #2e7d32; padding-left: .4rem;}
.bsard-badge.passage {background: #fff3e0; color: #8a4b00;}
.bsard-badge.in, .bsard-badge.hit {background: #e3f2fd; color: #0b5cad; margin-right: .2rem;}
.bsard-reminder {padding: .35rem .8rem; background: rgba(243,246,250,.8);}
.bsard-note {font-size: .8rem; color: #6b6f76;}
.bsard-similar {border: 1px solid rgba(11,92,173,.25); border-radius: .5rem; padding: .6rem .8rem;
                margin: .2rem 0 .8rem 0; background: rgba(11,92,173,.03);}
.bsard-sq {margin: .4rem 0; font-size: .9rem;}
.bsard-sq summary {cursor: pointer;}
.bsard-sq ul {margin: .3rem 0 .3rem 1.2rem; padding: 0; font-size: .86rem;}
/* a phone (Streamlit stacks the columns below 640 px): narrower margins, no element wider than the screen */
@media (max-width: 640px) {
  [data-testid="stMainBlockContainer"] {padding-left: .9rem; padding-right: .9rem;}
  [data-testid="stMainBlockContainer"] h1 {font-size: 1.9rem;}
  .bsard-score {margin-left: 0;}
}
.bsard-question {font-size: 1rem; padding: .5rem .8rem; border-left: 4px solid #0068c9; background: rgba(0,104,201,.05);
                 border-radius: .3rem; margin-bottom: .6rem; white-space: pre-wrap;}
</style>
"""


# --------------------------------------------------------------------------- cached resources

@st.cache_resource(show_spinner=False)
def index_registry() -> BuildOnce:
    """Built retrievers, shared by every session of this process."""
    return BuildOnce()


@st.cache_resource(show_spinner=False)
def failure_memo() -> FailureMemo:
    return FailureMemo()


@st.cache_resource(show_spinner="Chargement des données…", max_entries=8)
def _load(spec: str, key: tuple) -> Dataset:  # noqa: ARG001 - key is part of the cache key
    return load_uncached(spec)


def cached_load(spec: str) -> Dataset:
    return _load(spec, data_key(spec))


def active_data() -> ActiveData:
    """The dataset of this session: the requested one or, when it cannot be loaded, the one the
    session already had (else the sample), with the reason."""
    config = hosting_ui.app_settings()
    access = folder_access(config)
    requested, kept = st.session_state.get(DATA_KEY), st.session_state.get(LOADED_KEY)
    data = open_data(requested if requested and access.allows(requested) else None, cached_load, failure_memo(),
                     fallback=kept if kept and access.allows(kept) else None, default=config.data_spec)
    st.session_state[LOADED_KEY] = data.spec
    return data


# --------------------------------------------------------------------------- shell

def inject_style() -> None:
    st.html(STYLE)


def fictional_notice(data: ActiveData, *, short: bool = False, where=st) -> None:
    """The warning that the sample's articles are invented (when the sample is active)."""
    if data.dataset.fictional:
        where.warning(FICTIONAL_SHORT if short else FICTIONAL_NOTICE, icon=":material/warning:")


def fallback_banner(data: ActiveData) -> None:
    if data.fallback_reason:
        st.info(md_escape(data.fallback_reason) + "  \n" + "Raison : " + md_escape(data.detail or ""),
                icon=":material/info:")


def sidebar_data(data: ActiveData) -> None:
    """Sidebar: the active dataset with its counts, and the controls to switch."""
    sb = st.sidebar
    sb.subheader("Données")
    summary = dataset_summary(data.dataset)
    lines = [f"**{md_escape(display_name(data))}**", f"{french.integer(summary['articles'])} articles"]
    for split in data.dataset.split_names:
        lines.append(f"{summary[f'questions_{split}']} questions ({md_escape(split)})")
    sb.markdown("  \n".join(lines))
    fictional_notice(data, short=True, where=sb)
    if data.fallback_reason:
        sb.button("Réessayer la source demandée", key="data_retry", on_click=_switch, args=(data.requested,))
    access = folder_access(hosting_ui.app_settings())
    choices = ["hub", "sample"] + (["local"] if access.offered else [])
    if st.session_state.get(CHOICE_KEY) not in choices:
        kind = source_kind(data.requested)
        st.session_state[CHOICE_KEY] = kind if kind in choices else source_kind(data.spec)
    if access.free and source_kind(data.requested) == "local" and FOLDER_KEY not in st.session_state:
        st.session_state[FOLDER_KEY] = data.requested
    choice = sb.radio("Changer de source", choices, format_func=SOURCE_LABELS.get, key=CHOICE_KEY,
                      on_change=_on_choice)
    if not access.offered:
        sb.caption(FOLDERS_DISABLED)
    elif choice == "local" and access.free:
        folder = sb.text_input("Chemin du dossier", key=FOLDER_KEY,
                               placeholder="/chemin/vers/bsard (articles.csv, questions_test.csv…)")
        sb.button("Charger ce dossier", key="load_folder", disabled=not (folder or "").strip(), on_click=_load_folder)
    elif choice == "local":
        sb.caption("Dossier choisi au démarrage (`BSARD_DATA`) : " + md_escape(access.fixed))


# Widget callbacks run before the script, so the new dataset is used by the same run (no rerun,
# and no button state lost on the way).

def _switch(spec: str) -> None:
    if not folder_access(hosting_ui.app_settings()).allows(spec):  # the sidebar does not offer it; nothing else may
        return
    failure_memo().forget(data_key(spec))  # an explicit choice is always tried again
    st.session_state[DATA_KEY] = spec


def _on_choice() -> None:
    choice = st.session_state.get(CHOICE_KEY)
    access = folder_access(hosting_ui.app_settings())
    if choice in ("hub", "sample"):
        _switch(choice)
    elif choice == "local" and not access.free and access.fixed:
        _switch(access.fixed)  # the one folder offered: no path to type


def _load_folder() -> None:
    folder = (st.session_state.get(FOLDER_KEY) or "").strip()
    if folder:
        _switch(folder)


# --------------------------------------------------------------------------- building indexes

def progress_bar(label: str) -> tuple[Callable[[int, int, str], None], Callable[[], None]]:
    """A progress bar drawn now; returns ``(callback, clear)``."""
    from .builds import BuildEta

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
    from ..training import articles_fingerprint

    return articles_fingerprint(_articles)


def rankers_here(data: ActiveData) -> list[str]:
    """The learned rankers fitted on the active corpus, as ``--encoder`` takes them: the index
    bundle's first (by name), then ``$BSARD_MODELS``' folders (:func:`bsard_demo.training.trained_for_corpus`)."""
    from .. import cache
    from ..training import models_folder, trained_for_corpus

    ds = data.dataset
    if ds.articles is None or not (cache.active_bundles() or models_folder().is_dir()):
        return []
    return trained_for_corpus(_corpus_sha256(data.key, ds.articles))["ranker"]


def encoder_menu(data: ActiveData) -> list:
    """Every dense encoder the app knows for the active dataset, offered or not
    (:func:`bsard_demo.app.builds.encoder_options`): the built-in ones, the models of the index
    bundle when it serves this corpus, the trained folders of ``$BSARD_MODELS``, and the
    neighbours part (offered when the dataset has labelled training questions)."""
    from ..training import list_trained_models
    from .builds import encoder_options, neighbours_option

    ds = data.dataset
    setup = hosting_ui.bundle_setup()
    bundle = setup.bundle if ds.articles is not None and setup.serves(data.key, ds.articles, ds.name) else None
    models = list_trained_models()
    has_models = bool(models) or (bundle is not None and bool(bundle.model_list()))
    sha = _corpus_sha256(data.key, ds.articles) if has_models and ds.articles is not None else None
    return encoder_options(models, corpus_sha256=sha, bundle=bundle) + [neighbours_option(ds)]


#: Seconds a "not stored" answer of :func:`dense_stored` is kept (a "stored" one stays).
STORED_RECHECK_S = 60


@st.cache_resource(show_spinner=False, max_entries=16, ttl=STORED_RECHECK_S)
def _dense_stored(key: tuple, target: str, _articles) -> bool:  # noqa: ARG001 - key is the cache key
    from .builds import dense_index_stored

    return dense_index_stored(_articles, target)


def dense_stored(data: ActiveData, target: str) -> bool:
    """Whether the dense index of ``target`` (default settings) over the active dataset is built
    in this process, or stored in the index bundle or the cache (checked at most once a minute)."""
    if data.dataset.articles is None:
        return False
    if is_built(index_registry(), data, RetrieverSpec("dense", {"encoder": target})):
        return True
    return _dense_stored(data.key, target, data.dataset.articles)


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


def current_data() -> ActiveData:
    """The dataset chosen by the shell (``app.py``) for this run."""
    data = st.session_state.get("active_data")
    return data if data is not None else active_data()


# --------------------------------------------------------------------------- scoring

def upload_limit_bytes() -> int:
    """``server.maxUploadSize`` (MB) in bytes."""
    return int(st.get_option("server.maxUploadSize")) * 2**20


#: Scoreboards kept per process (each holds its files' bytes and evaluations): a few recent ones, an hour.
SCOREBOARD_ENTRIES, SCOREBOARD_TTL_S = 4, 3600


@st.cache_resource(show_spinner="Lecture et évaluation des runs…", max_entries=SCOREBOARD_ENTRIES, ttl=SCOREBOARD_TTL_S)
def _scoreboard(key: tuple, _dataset: Dataset, _files: tuple, split: str, limit: int, lower: tuple = (),
                _runs: tuple = ()):  # noqa: ARG001
    from .score_page import score_files

    return score_files(list(_files), _dataset, split, limit_bytes=limit, lower_is_better=lower, runs=list(_runs))


def scoreboard(data: ActiveData, split: str, files: list[tuple[str, bytes]], lower_is_better=(), built=()):
    """:func:`bsard_demo.app.score_page.score_files` of the uploads ``files`` and the built-in
    runs ``built`` (:meth:`bsard_demo.app.score_page.BuiltinRun.built`: name, Run, TREC bytes),
    memoised on the dataset, split, file digests (a built-in run's: its TREC file's) and each
    upload's score orientation (``lower_is_better``, parallel to ``files``)."""
    import hashlib

    blobs = list(files) + [(name, blob) for name, _, blob in built]
    digests = tuple((name, hashlib.sha256(blob).hexdigest(), len(blob)) for name, blob in blobs)
    limit, lower = upload_limit_bytes(), tuple(bool(x) for x in lower_is_better)
    key = (data.key, split, digests, len(files), limit, lower)
    with hosting_ui.large_upload_slot(blobs, key):  # one large scoring at a time per process
        return _scoreboard(key, data.dataset, tuple(files), split, limit, lower,
                           tuple((name, run) for name, run, _ in built))


def unknown_path(known: Iterable[str]) -> str | None:
    """The path the browser asked for when it is none of ``known`` (the pages' URL paths), after
    telling Streamlit to run the default page instead; ``None`` when the path is a page.

    ``st.navigation`` resolves the page of a URL by the run's intended page name and, when no
    page has it, sends Streamlit's English « Page not found » modal before running the default
    page; clearing that intent first runs the default page without it, so the caller can say
    so in French. Call it before ``st.navigation``."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

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


def ensure_shell() -> None:
    """Make sure the page runs inside ``app.py`` (navigation, sidebar, notices).

    Streamlit runs a script in its legacy "pages/ folder" mode until ``st.navigation`` has been
    called once in the process (and at every ``AppTest`` run): a first visitor arriving straight
    at ``/score`` would get the page without the shell. The page then switches the legacy mode
    off and reruns once; the rerun goes through ``app.py``'s ``st.navigation``, which keeps the
    requested page.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
