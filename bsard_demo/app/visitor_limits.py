"""What one visitor cannot do to the others (set once per process by :func:`bsard_demo.app.hosting_ui.tune_process`):
empty the process's shared state, or hold more uploaded bytes than a budget. Streamlit 1.67 takes a ``clear_cache``
message from any client and empties every ``st.cache_resource``: ten such visitors made a fresh BM25 search 9.6 s
instead of 0.17 s and the server grow 593 MB (docs/reliability.md, section 12); :func:`refuse_cache_clears` makes it
clear the sender's session state only. :func:`cap_uploads` refuses a file, before it is stored, that would take its
session or all sessions past :class:`UploadBudget` (HTTP 413; the page says the budget).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from streamlit import runtime
from streamlit.runtime.app_session import AppSession

log = logging.getLogger(__name__)
MB = 2**20


@dataclass(frozen=True)
class UploadBudget:
    """Bytes of uploaded files the server holds at once: ``per_visitor`` for one session (two run files of
    the 50 MB upload limit), ``total`` for all sessions (a ~2.7 GB Community Cloud host idles at ~0.35 GB
    and peaks at ~1.1 GB under a crowd of 50: docs/benchmarks.md)."""

    per_visitor: int = 100 * MB
    total: int = 400 * MB

    def refusal(self, held_by_session: int, held_in_all: int, size: int) -> str | None:
        """Why a new file of ``size`` bytes is refused (English: Streamlit's uploader shows the status, the
        page says the budget in French), ``None`` when it fits."""
        if held_by_session + size > self.per_visitor:
            return (f"upload budget per visitor: {self.per_visitor // MB} MB in all "
                    f"({held_by_session // MB} MB already held); remove a file first")
        if held_in_all + size > self.total:
            return "the server holds too many uploaded files just now; try again in a few minutes"
        return None


    @classmethod
    def of(cls, value: str | None) -> "UploadBudget":
        """The budget of the setting ``BSARD_UPLOAD_BUDGET_MB`` (MB a visitor; all visitors together 4 times
        that); unset or not a positive number: the default."""
        try:
            mb = float(str(value).strip()) if value is not None and str(value).strip() else 0.0
        except ValueError:
            mb = 0.0
        if not mb > 0:
            if value is not None and str(value).strip():
                log.warning("BSARD_UPLOAD_BUDGET_MB=%r is not a positive number; the default budget", value)
            return cls()
        return cls(int(mb * MB), int(4 * mb * MB))


def _clear_own_state(self) -> None:
    """``AppSession._handle_clear_cache_request`` for every client: the sender's session state only."""
    self._session_state.clear()


def refuse_cache_clears() -> bool:
    """Make a client's ``clear_cache`` message clear only its own session state, never the process's caches.
    Returns whether it is set (``False`` where Streamlit's private names differ from 1.67's: then a warning
    is logged, and a test pins the names)."""
    try:
        if not callable(getattr(AppSession, "_handle_clear_cache_request", None)):
            raise AttributeError("_handle_clear_cache_request")
        AppSession._handle_clear_cache_request = _clear_own_state
    except Exception:  # noqa: BLE001 - another Streamlit: say so, the page still works
        log.warning("could not stop clients from clearing the shared caches", exc_info=True)
        return False
    return True


class _CappedAdd:
    """A file manager's ``add_file`` that refuses what ``budget`` does not allow (one lock, so two
    uploads of one session cannot both pass the check)."""

    def __init__(self, manager, budget: UploadBudget) -> None:
        self.manager, self.budget, self.add = manager, budget, manager.add_file
        self.lock = threading.Lock()

    def __call__(self, session_id: str, file) -> None:
        with self.lock:
            held = held_bytes(self.manager, session_id, replacing=file.file_id)
            why = self.budget.refusal(held, held_bytes(self.manager), len(file.data))
            if why is not None:
                log.info("upload refused: %s", why)
                raise HTTPException(status_code=413, detail=why)
            self.add(session_id=session_id, file=file)


def held_bytes(manager, session_id: str | None = None, replacing: str | None = None) -> int:
    """Bytes of the uploads ``manager`` holds for ``session_id`` (None: for every session), leaving out the
    file ``replacing`` (an upload under the same id replaces it)."""
    sessions = [manager.file_storage.get(session_id, {})] if session_id is not None else \
        list(manager.file_storage.values())
    return sum(len(rec.data) for files in sessions for file_id, rec in list(files.items()) if file_id != replacing)


def cap_uploads(budget: UploadBudget) -> bool:
    """Hold the server's file manager to ``budget`` (idempotent). Returns whether it is held (``False``
    without a running server, or where Streamlit's private names differ from 1.67's)."""
    try:
        if not runtime.exists():
            return False
        manager = runtime.get_instance().uploaded_file_mgr
        if isinstance(manager.add_file, _CappedAdd):
            return True
        if not isinstance(getattr(manager, "file_storage", None), dict):  # not Streamlit 1.67's server (AppTest)
            log.warning("uploads not capped per visitor: this Streamlit's file manager holds no file_storage")
            return False
        manager.add_file = _CappedAdd(manager, budget)
    except Exception:  # noqa: BLE001 - another Streamlit: say so, uploads keep their per-file cap
        log.warning("could not cap the uploads per visitor", exc_info=True)
        return False
    return True

