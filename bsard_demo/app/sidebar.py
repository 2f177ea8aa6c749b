"""The dataset sidebar and the session's dataset (Streamlit glue): which dataset a session sees
(:func:`active_data`: the requested one, else the one it had, else the default), the sidebar that shows
it and switches it, and the notices about it. What the source menu offers is decided in
:mod:`bsard_demo.app.menus`; a failed load is remembered (:func:`failure_memo`) so a dead hub is not
retried on every run.
"""
from __future__ import annotations

from typing import Sequence

import streamlit as st

from ..dataset import Dataset
from . import french, hosting_ui, menus
from .data_words import FICTIONAL_NOTICE, FICTIONAL_SHORT, FOLDERS_DISABLED, SOURCE_LABELS, folder_access, source_kind
from .highlight import md_escape
from .naming import public_name, strip_paths
from .state import ActiveData, FailureMemo, data_key, dataset_summary, load_uncached, open_data

DATA_KEY = "data_spec"          # session: the requested dataset spec (None = default)
FOLDER_KEY = "data_folder"      # session: the folder typed in the sidebar
CHOICE_KEY = "data_choice"      # session: the source radio
LOADED_KEY = "data_loaded"      # session: the spec actually loaded last (kept when a switch fails)


@st.cache_resource(show_spinner=False)
def failure_memo() -> FailureMemo:
    return FailureMemo()


@st.cache_resource(show_spinner="Chargement des données…", max_entries=8)
def _load(spec: str, key: tuple) -> Dataset:  # noqa: ARG001 - key is part of the cache key
    return load_uncached(spec)


def clear_loaded() -> None:
    """Forget every dataset loaded by this process (the next run loads again)."""
    _load.clear()


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


def data_notice(data: ActiveData, notes: Sequence[tuple[str, str]] = ()) -> None:
    """The main area's one notice about the data shown, in French: why it is not the one asked for
    (the fallback), that the sample's articles are invented, the index bundle's ``notes``
    (``(level, text)``); a warning when any of them warns, else an information, nothing without
    any. The loader's own (English) message is the sidebar's « Détails techniques »."""
    lines = []
    if data.fallback_reason:  # a public page names no path of the server (a folder's last part stays)
        lines.append(md_escape(strip_paths(data.fallback_reason)))
    if data.dataset.fictional:
        lines.append(FICTIONAL_NOTICE)
    lines += [md_escape(strip_paths(text)) for _level, text in notes]
    if not lines:
        return
    warns = data.dataset.fictional or any(level == "warning" for level, _text in notes)
    (st.warning if warns else st.info)("  \n".join(lines), icon=":material/warning:" if warns else ":material/info:")


def sidebar_data(data: ActiveData) -> None:
    """Sidebar: the active dataset with its counts, and the controls to switch."""
    sb = st.sidebar
    sb.subheader("Données")
    summary = dataset_summary(data.dataset)
    access = folder_access(hosting_ui.app_settings())
    lines = [f"**{md_escape(menus.dataset_label(data, access))}**", f"{french.integer(summary['articles'])} articles"]
    for split in data.dataset.split_names:
        lines.append(f"{summary[f'questions_{split}']} questions ({md_escape(split)})")
    if data.dataset.fictional:
        lines.append(FICTIONAL_SHORT)
    sb.markdown("  \n".join(lines))
    if data.fallback_reason:
        sb.button("Réessayer la source demandée", key="data_retry", on_click=_switch, args=(data.requested,))
        if data.detail:
            with sb.expander("Détails techniques"):
                st.caption(md_escape(strip_paths(data.detail)))
    choices = menus.source_choices(access)
    # the radio shows what is loaded (after a fallback, the source used, not the one that failed), unless the
    # visitor is typing a folder to load
    current = st.session_state.get(CHOICE_KEY)
    choice = menus.source_choice(current if current == "local" and access.free else None, choices, data.spec,
                                 data.spec)
    if st.session_state.get(CHOICE_KEY) != choice:  # set only when it changes: a set value is the widget's value
        st.session_state[CHOICE_KEY] = choice
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
        sb.caption("Dossier choisi par ce serveur : " + md_escape(public_name(access.fixed)))


# Widget callbacks run before the script, so the new dataset is used by the same run (no rerun,
# and no button state lost on the way).

def _switch(spec: str) -> None:
    if not folder_access(hosting_ui.app_settings()).allows(spec):  # the sidebar does not offer it; nothing else may
        return
    failure_memo().forget(data_key(spec))  # an explicit choice is always tried again
    st.session_state[DATA_KEY] = spec


def _on_choice() -> None:
    spec = menus.chosen_source(st.session_state.get(CHOICE_KEY), folder_access(hosting_ui.app_settings()))
    if spec is not None:
        _switch(spec)


def _load_folder() -> None:
    folder = (st.session_state.get(FOLDER_KEY) or "").strip()
    if folder:
        _switch(folder)
