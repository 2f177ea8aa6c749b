"""The Score page's Streamlit glue: the upload limit, the scoreboards and the built-in runs kept per
process (:data:`~bsard_demo.app.score_uploads.SCOREBOARD_ENTRIES`, an hour), one large scoring at a time
(:func:`bsard_demo.app.hosting_ui.large_upload_slot`), and each scored board's charts as Streamlit sends
them, made once per board (:func:`chart_spec`).
"""
from __future__ import annotations

from typing import Callable, Hashable

import streamlit as st
from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec as altair_to_spec

from ..cache import BuildOnce
from ..dataset import DataError, Dataset
from ..evaluation.misses import board_misses
from ..evaluation.scoring import Scoreboard
from ..evaluation.stamp import board_stamp
from ..retrievers.base import Retriever
from ..retrievers.kinds import RANKER_LABEL, ranker_folder
from ..retrievers.ranker import read_record
from ..runs import Run
from . import hosting_ui, menus
from .data_words import folder_access
from .naming import public_name
from .score_builtin_runs import builtin_run, builtin_run_text
from .score_systems import ranker_caption
from .score_uploads import SCOREBOARD_ENTRIES, SCOREBOARD_TTL_S, run_sources, score_files, scoreboard_key
from .state import ActiveData
from .visitor_limits import UploadBudget


def upload_limit_bytes() -> int:
    """``server.maxUploadSize`` (MB) in bytes."""
    return int(st.get_option("server.maxUploadSize")) * 2**20


def upload_budget_bytes() -> int:
    """The bytes of uploads one visitor may hold (``BSARD_UPLOAD_BUDGET_MB``: :mod:`bsard_demo.app.visitor_limits`,
    which the server enforces before storing a file)."""
    return UploadBudget.of(hosting_ui.app_settings().upload_budget).per_visitor


@st.cache_resource(show_spinner="Lecture et évaluation des runs…", max_entries=SCOREBOARD_ENTRIES, ttl=SCOREBOARD_TTL_S)
def _scoreboard(key: tuple, _dataset: Dataset, _files: tuple, split: str, limit: int, lower: tuple = (),
                _runs: tuple = ()):  # noqa: ARG001
    return score_files(list(_files), _dataset, split, limit_bytes=limit, lower_is_better=lower, runs=list(_runs))


def scoreboard(data: ActiveData, split: str, files: list[tuple[str, bytes]], lower_is_better=(),
               built=()) -> tuple:
    """``(board, stamp, misses)`` of the uploads ``files`` and the built-in runs ``built``
    (:meth:`bsard_demo.app.score_builtin_runs.BuiltinRun.built`: name, Run, TREC bytes), each kept per
    process under one :func:`bsard_demo.app.score_uploads.scoreboard_key` (the files hashed once a run):
    the board (:func:`bsard_demo.app.score_uploads.score_files`), the downloads' reproducibility stamp
    (:func:`bsard_demo.evaluation.stamp.board_stamp` of the board's sources) and where each usable run
    misses (:func:`bsard_demo.evaluation.misses.board_misses`; ``None`` when the dataset has no articles
    to place them in)."""
    limit = upload_limit_bytes()
    key = scoreboard_key(data.key, split, files, built, limit, lower_is_better)
    lower = key[-1]
    runs = tuple((name, run) for name, run, _ in built)
    blobs = list(files) + [(name, blob) for name, _, blob in built]
    with hosting_ui.large_upload_slot(blobs, key):  # one large scoring at a time per process
        board = _scoreboard(key, data.dataset, tuple(files), split, limit, lower, runs)
    # a built-in run is stamped by the TREC file the page offers for it (the bytes `evaluate` would hash)
    stamp = _stamp(key, board, tuple(files) + tuple((name, blob) for name, _, blob in built), lower)
    misses = None
    if data.dataset.articles is not None:
        try:
            misses = _misses(key, board)
        except DataError:
            pass
    return board, stamp, misses


@st.cache_resource(show_spinner=False, max_entries=SCOREBOARD_ENTRIES, ttl=SCOREBOARD_TTL_S)
def _stamp(key: tuple, _board, _files: tuple, lower: tuple) -> dict:  # noqa: ARG001 - key: cache key
    return board_stamp(_board, run_sources(list(_files), lower))


@st.cache_resource(show_spinner="Où tombent les articles manqués…", max_entries=SCOREBOARD_ENTRIES,
                   ttl=SCOREBOARD_TTL_S)
def _misses(key: tuple, _board) -> dict:  # noqa: ARG001 - key is the cache key
    return board_misses(_board)


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
