"""The Score page's Streamlit glue: the upload limit and budget, the scoreboards kept per process within a
memory budget (:data:`~bsard_demo.app.score_uploads.SCOREBOARD_BUDGET`, an hour) and the built-in runs, one
large scoring at a time (:func:`bsard_demo.app.hosting_ui.large_upload_slot`), and each scored board's charts
and French tables as Streamlit sends them, made once per board (:func:`chart_spec`, :func:`kept_dataframe`).
"""
from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Callable, Hashable

import streamlit as st
from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec as altair_to_spec

from ..build_once import BuildOnce
from ..dataset import DataError
from ..evaluation.labels import labels_from_upload
from ..evaluation.misses import board_misses
from ..evaluation.scoring import RunSource, Scoreboard
from ..evaluation.stamp import board_stamp
from ..retrievers.base import Retriever
from ..retrievers.kinds import RANKER_LABEL, ranker_folder
from ..retrievers.ranker import read_record
from ..runs import Run
from . import hosting_ui, menus, ui
from .charts import french_chart
from .data_words import folder_access
from .highlight import md_escape
from .naming import public_name, strip_paths
from .score_builtin_runs import builtin_run, builtin_run_text
from .score_builtins import BUILD_ERRORS
from .score_systems import ranker_caption
from .score_uploads import (
    SCOREBOARD_BUDGET,
    SCOREBOARD_ENTRIES,
    SCOREBOARD_TTL_S,
    run_sources,
    score_sources,
    scoreboard_key,
)
from .state import ActiveData
from .visitor_limits import UploadBudget


def upload_limit_bytes() -> int:
    """``server.maxUploadSize`` (MB) in bytes."""
    return int(st.get_option("server.maxUploadSize")) * 2**20


def upload_budget_bytes() -> int:
    """The bytes of uploads one visitor may hold (``BSARD_UPLOAD_BUDGET_MB``: :mod:`bsard_demo.app.visitor_limits`,
    which the server enforces before storing a file)."""
    return UploadBudget.of(hosting_ui.app_settings().upload_budget).per_visitor


@dataclass(frozen=True)
class _Scored:
    """One scoring as kept: the board, its downloads' stamp, where its runs miss, and its weight."""

    board: Scoreboard
    stamp: dict
    misses: dict | None
    weight: int


#: The scorings of this process (not ``st.cache_resource``, which any client could empty: docs/reliability.md,
#: section 12), kept within :data:`~bsard_demo.app.score_uploads.SCOREBOARD_BUDGET` bytes, each at most an hour.
_BOARDS: BuildOnce = BuildOnce(ttl=SCOREBOARD_TTL_S, budget=SCOREBOARD_BUDGET, weigh=lambda scored: scored.weight)


#: Labels files read by this process (the last few; each is small: a labels file is capped at 64 MiB).
_LABELS: BuildOnce = BuildOnce(entries=8, ttl=SCOREBOARD_TTL_S)


def labels_of(data: ActiveData, split: str, name: str, blob: bytes) -> tuple:
    """``(labels file, dataset)`` of an uploaded labels file (qrels: :func:`bsard_demo.evaluation.labels.
    labels_from_upload`, every problem at once, nothing native in this process) over the active dataset's corpus,
    its ``split`` replaced by the file's labels; the dataset is ``None`` when the file has errors. Read once per
    process and file."""
    key = (data.key, split, name, hashlib.sha256(blob).hexdigest())
    return _LABELS.get(key, lambda: labels_from_upload(blob, name, split, base=data.dataset))


def scoreboard(data: ActiveData, split: str, files: list[tuple[str, bytes]], lower_is_better=(),
               built=(), labels: tuple | None = None) -> tuple:
    """``(board, stamp, misses)`` of the uploads ``files`` and the built-in runs ``built``
    (:meth:`bsard_demo.app.score_builtin_runs.BuiltinRun.built`: name, Run, TREC bytes), made once per process
    and :func:`bsard_demo.app.score_uploads.scoreboard_key` (the files hashed once a run; who asks while it is
    made waits for it): the sources made once (:func:`~bsard_demo.app.score_uploads.run_sources`), read and
    scored (:func:`~bsard_demo.app.score_uploads.score_sources`), the downloads' reproducibility stamp
    (:func:`bsard_demo.evaluation.stamp.board_stamp`; a built-in run stamped by the TREC file the page offers for
    it, the bytes ``evaluate`` would hash) and where each usable run misses
    (:func:`bsard_demo.evaluation.misses.board_misses`; ``None`` when the dataset has no articles to place them in).
    ``labels``: ``(name, sha256, dataset)`` of an uploaded labels file (:func:`labels_of`) scored instead of the
    split's own labels."""
    limit = upload_limit_bytes()
    key = scoreboard_key(data.key, split, files, built, limit, lower_is_better) + (labels[:2] if labels else (),)
    dataset = labels[2] if labels else data.dataset
    blobs = list(files) + [(name, blob) for name, _, blob in built]

    def make() -> _Scored:
        with st.spinner("Lecture et évaluation des runs…"):
            sources = run_sources(files, key[-2], [(name, run) for name, run, _ in built])
            board = score_sources(sources, dataset, split, limit_bytes=limit)
            stamped = sources[:len(files)] + [RunSource.upload(name, blob) for name, _, blob in built]
            return _Scored(board, board_stamp(board, stamped), _misses(board), board.nbytes)

    with hosting_ui.large_upload_slot(blobs, key):  # one large scoring at a time per process
        scored = _BOARDS.get(key, make)
    return scored.board, scored.stamp, scored.misses


def _misses(board: Scoreboard) -> dict | None:
    if board.dataset.articles is None:
        return None
    try:
        return board_misses(board)
    except DataError:
        return None


def chart_spec(board: Scoreboard, key: Hashable, chart: Callable[[], object]) -> dict:
    """The Vega-Lite spec of the Altair chart ``chart()`` as ``st.altair_chart`` sends it (its data as
    named Arrow datasets), made once per ``board`` and ``key`` (:meth:`~bsard_demo.evaluation.scoring.
    Scoreboard.memo`): ``st.vega_lite_chart(spec=...)`` draws the very same element, and a second visitor
    who scores the same board skips the chart's building, validation and Arrow conversion (most of a
    scored visit's CPU: docs/benchmarks.md, "Score page: frames kept per board"). ``key`` names the
    chart and everything it depends on besides the board. Shared: read it, never change it.
    (Streamlit's own conversion, so the element stays byte for byte what ``st.altair_chart`` sends;
    tests/app/test_app_score.py checks it against ``st.altair_chart``.)"""
    return board.memo(("chart", key), lambda: altair_to_spec(chart()))


#: The bytes of French tables kept as Streamlit sends them (:func:`kept_dataframe`; the least recently drawn go first):
#: the largest, a per-question table, is 0.9 MB for ten runs of frlaw-dev's 150 test questions (~1.4 MB for 222).
TABLES_BYTES = 32 * 2**20


def kept_dataframe(board: Scoreboard, key: Hashable | None, styled: Callable[[], object], **options) -> None:
    """``st.dataframe(styled(), **options)`` (``styled``: a French table, a pandas Styler of
    :func:`~bsard_demo.app.score_tables.french_view`), its element made once per ``board``, ``key`` and
    ``options`` and sent again as it was to every later visitor: a Styler's display values are computed by
    Streamlit at every ``st.dataframe`` (``marshall_styler``: most of a kept board's visit,
    docs/benchmarks.md, "Per-visit cost after issues 37 and 38"). ``key`` names the table and everything it
    depends on besides the board; ``None``: a view that depends on the visitor's picks, drawn, not kept.
    Kept by ``st.cache_data``'s replay of the elements of a cached call (Streamlit's public way to send an
    element again without making it), at most :data:`TABLES_BYTES`, each an hour, like the boards; a kept
    element is the one ``st.dataframe`` sent, its Styler's id included (tests/app/test_score_kept_tables.py)."""
    if key is None:
        st.dataframe(styled(), **options)
    else:
        _kept_dataframe(board.memo(("tables token",), _token), key, styled, options)


def _token() -> str:  # a board's name in the tables' cache: boards are kept by value, this one by its identity
    return uuid.uuid4().hex


@st.cache_data(show_spinner=False, max_size=TABLES_BYTES, ttl=SCOREBOARD_TTL_S)
def _kept_dataframe(token: str, key: Hashable, _styled: Callable[[], object], options: dict) -> None:
    st.dataframe(_styled(), **options)


def draw_chart(board: Scoreboard, kept: Hashable | None, chart: Callable[[], object], **options) -> None:
    """The Altair chart ``chart()``, converted once per board and ``kept``, the chart's key in the board's memo
    (:func:`chart_spec`; the same element as ``st.altair_chart``); ``kept`` None: a view that depends on
    the visitor's picks, drawn, not kept. ``options``: the element's (a widget key, a selection)."""
    french = partial(_french, chart)  # French numbers: « 12,5 % »
    if kept is None:
        st.altair_chart(french(), width="stretch", **options)
    else:
        st.vega_lite_chart(spec=chart_spec(board, kept, french), width="stretch", **options)


def _french(chart):
    return french_chart(chart())


def make_builtin(data: ActiveData, specs: dict, split: str, label: str, query_text: str):
    """The built-in run of system ``label`` of ``specs`` over ``split`` (:func:`builtin`), its build's progress shown;
    None, with the page's error, when the system is not offered here or cannot be built."""
    if label not in specs:
        st.error(f"Système intégré « {md_escape(label)} » indisponible sur ce serveur.")
        return None
    try:
        retriever = ui.retriever(data, specs[label], label)
    except BUILD_ERRORS as exc:  # an encoder that cannot be loaded here, a full disk…
        st.error(f"Système intégré « {md_escape(label)} » indisponible sur ce serveur : son index ou son modèle n'a "
                 "pas pu être chargé.")
        with st.expander("Détails techniques"):  # the builder's own (English) words
            st.caption(md_escape(strip_paths(str(exc))))
        return None
    update, clear = ui.progress_bar(f"{md_escape(label)} sur les questions du split {md_escape(split)}")
    try:
        return builtin(data, split, specs[label].key(), retriever, query_text, progress=update)
    finally:
        clear()


def builtin(data: ActiveData, split: str, spec_key: str, retriever: Retriever, query_text: str,
            progress=None) -> tuple[Run, bytes]:
    """The built-in run of ``retriever`` (built from the spec whose
    :meth:`~bsard_demo.retrievers.registry.RetrieverSpec.key` is ``spec_key``) over ``split``, and its TREC
    file (:func:`~bsard_demo.app.score_builtin_runs.builtin_run`, ``builtin_run_text``), made once per
    process: every visitor who asks for the same system gets the same run, and a visitor who asks while it
    is being made waits for that one (a crowd's score visits were a third of its server CPU when each
    session made its own: docs/benchmarks.md, "Per-visit cost"). ``progress`` shows the one build. The
    last :data:`~bsard_demo.app.score_uploads.SCOREBOARD_ENTRIES` runs are kept, each at most an hour.
    (Not ``st.cache_resource``: it would replay the progress bar's element calls.)"""
    def make() -> tuple[Run, bytes]:
        run = builtin_run(data.dataset, split, retriever, progress=progress, query_text=query_text)
        return run, builtin_run_text(run)

    return _BUILTIN.get((data.key, split, spec_key, query_text), make)


_BUILTIN: BuildOnce = BuildOnce(entries=SCOREBOARD_ENTRIES, ttl=SCOREBOARD_TTL_S)


def dataset_label(data: ActiveData) -> str:
    """The active dataset's name as the page shows it (:func:`bsard_demo.app.menus.dataset_label`)."""
    return menus.dataset_label(data, folder_access(hosting_ui.app_settings()))


@st.cache_resource(show_spinner=False, max_entries=16, ttl=SCOREBOARD_TTL_S)
def _ranker_caption(target: str) -> str:
    try:
        record, _ = read_record(ranker_folder(target))
    except (OSError, ValueError) as exc:  # a folder gone or damaged since the menu listed it
        return f"{public_name(target)} — {RANKER_LABEL.lower()} : fiche illisible ({type(exc).__name__})"
    return ranker_caption(target, record)


def ranker_captions(rankers) -> dict[str, str]:
    """Each learned ranker's line (:func:`bsard_demo.app.score_systems.ranker_caption` of its own record,
    read from the bundle's copy or its folder), by ``--encoder`` value."""
    return {target: _ranker_caption(target) for target in rankers}
