"""The Score page's Streamlit glue: the upload limit, and the scoreboards kept per process
(:data:`~bsard_demo.app.score_uploads.SCOREBOARD_ENTRIES`, an hour), one large scoring at a time
(:func:`bsard_demo.app.hosting_ui.large_upload_slot`).
"""
from __future__ import annotations

import streamlit as st

from ..dataset import Dataset
from . import hosting_ui
from .score_uploads import SCOREBOARD_ENTRIES, SCOREBOARD_TTL_S, score_files, scoreboard_key
from .state import ActiveData


def upload_limit_bytes() -> int:
    """``server.maxUploadSize`` (MB) in bytes."""
    return int(st.get_option("server.maxUploadSize")) * 2**20


@st.cache_resource(show_spinner="Lecture et évaluation des runs…", max_entries=SCOREBOARD_ENTRIES, ttl=SCOREBOARD_TTL_S)
def _scoreboard(key: tuple, _dataset: Dataset, _files: tuple, split: str, limit: int, lower: tuple = (),
                _runs: tuple = ()):  # noqa: ARG001
    return score_files(list(_files), _dataset, split, limit_bytes=limit, lower_is_better=lower, runs=list(_runs))


def scoreboard(data: ActiveData, split: str, files: list[tuple[str, bytes]], lower_is_better=(), built=()):
    """:func:`bsard_demo.app.score_uploads.score_files` of the uploads ``files`` and the built-in
    runs ``built`` (:meth:`bsard_demo.app.score_builtin_runs.BuiltinRun.built`: name, Run, TREC bytes),
    memoised by :func:`bsard_demo.app.score_uploads.scoreboard_key`."""
    limit = upload_limit_bytes()
    key = scoreboard_key(data.key, split, files, built, limit, lower_is_better)
    lower = key[-1]
    blobs = list(files) + [(name, blob) for name, _, blob in built]
    with hosting_ui.large_upload_slot(blobs, key):  # one large scoring at a time per process
        return _scoreboard(key, data.dataset, tuple(files), split, limit, lower,
                           tuple((name, run) for name, run, _ in built))
