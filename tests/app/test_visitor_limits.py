"""What one visitor cannot do to the others (bsard_demo/app/visitor_limits.py): clear the process's shared
caches with Streamlit's ``clear_cache`` back-message, or hold more uploaded bytes than the budget. The
unit tests use Streamlit's own file manager; the slow ones a real ``streamlit run`` and the websocket client."""
from __future__ import annotations

import asyncio
import gc
import urllib.error

import pytest
import streamlit as st
from starlette.exceptions import HTTPException
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from _browser import AppServer, app_env
from _ws_client import Visitor
from bsard_demo.app import visitor_limits
from bsard_demo.app.score_page import split_uploads
from bsard_demo.app.score_uploads import too_many_files
from bsard_demo.app.visitor_limits import MB, UploadBudget, held_bytes
from bsard_demo.sources import load_sample


def _rec(file_id: str, size: int) -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name=f"{file_id}.trec", type="text/plain", data=b"x" * size)


def test_streamlit_names_the_limits_rely_on_are_there():
    """The private names this module patches (Streamlit 1.67): a new Streamlit that renames them fails here."""
    assert callable(AppSession._handle_clear_cache_request)
    assert isinstance(MemoryUploadedFileManager("/_stcore/upload_file").file_storage, dict)


def test_budget_setting_is_read_in_mb_and_a_bad_value_keeps_the_default():
    assert UploadBudget.of("2") == UploadBudget(2 * MB, 8 * MB)
    assert UploadBudget.of(" 0.5 ") == UploadBudget(MB // 2, 2 * MB)
    for bad in (None, "", "  ", "x", "-3", "0", "nan"):
        assert UploadBudget.of(bad) == UploadBudget()
    assert UploadBudget().per_visitor == 100 * MB and UploadBudget().total == 400 * MB


def test_a_session_past_its_budget_is_refused_before_the_bytes_are_stored():
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    capped = visitor_limits._CappedAdd(manager, UploadBudget(per_visitor=1000, total=1500))
    capped("s1", _rec("a", 600))
    with pytest.raises(HTTPException) as refused:
        capped("s1", _rec("b", 500))
    assert refused.value.status_code == 413 and "per visitor" in refused.value.detail
    assert held_bytes(manager, "s1") == 600 and "b" not in manager.file_storage["s1"]
    capped("s1", _rec("a", 900))  # the same file sent again replaces it: its old bytes do not count
    assert held_bytes(manager, "s1") == 900
    manager.remove_file("s1", "a")
    capped("s1", _rec("b", 1000))  # a removed file frees its share
    capped("s2", _rec("c", 500))
    with pytest.raises(HTTPException) as busy:  # s3 is within its own budget, the server is not
        capped("s3", _rec("d", 100))
    assert "server" in busy.value.detail and held_bytes(manager) == 1500


def test_the_page_reads_uploads_within_the_budget_and_names_the_others():
    class Upload:
        def __init__(self, name: str, size: int) -> None:
            self.name, self.size = name, size

    files = [Upload("a", 40), Upload("b", 50), Upload("c", 20), Upload("d", 5)]
    read, left = split_uploads(files, limit=10, budget=100)
    assert [u.name for u in read] == ["a", "b", "d"] and [u.name for u in left] == ["c"]
    assert split_uploads(files, limit=2, budget=None) == (files[:2], files[2:])
    assert "100 Mo en tout" in too_many_files(["c"], budget_mb=100)


def test_a_client_clear_drops_its_own_session_state_only():
    calls = []

    @st.cache_resource
    def shared() -> list:
        calls.append(1)
        return []

    shared()
    assert visitor_limits.refuse_cache_clears()

    class Session:
        def __init__(self) -> None:
            self._session_state = {"mine": 1}

    session = Session()
    AppSession._handle_clear_cache_request(session)  # what Streamlit calls for the back-message
    shared()
    assert session._session_state == {} and calls == [1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    env = app_env("sample", tmp_path_factory.mktemp("cache"), BSARD_UPLOAD_BUDGET_MB="1")
    with AppServer(env, tmp_path_factory.mktemp("log") / "streamlit.log") as app:
        yield app


def _builds(app: AppServer) -> int:
    return app.log_text().count(" building ")


@pytest.mark.slow
def test_clear_cache_from_clients_leaves_the_shared_index_and_dataset(server):
    question = list(load_sample().questions("test")["question"])[0]
    link = {"q": question, "systems": "bm25", "k": "5"}

    async def visits() -> tuple[list, list]:
        async with Visitor(server.url) as first:
            before = (await first.open("search", link)).columns()
            builds = _builds(server)
            for _ in range(3):
                await first.clear_cache()
                async with Visitor(server.url) as other:
                    await other.open("search", link)
                    await other.clear_cache()
        async with Visitor(server.url) as fresh:
            after = (await fresh.open("search", link)).columns()
        assert _builds(server) == builds, "a client's clear_cache made the server build its index again"
        return before, after

    before, after = asyncio.run(visits())
    assert before and [c.ids for c in after] == [c.ids for c in before]


@pytest.mark.slow
def test_uploads_past_the_visitor_budget_are_refused_by_the_server(server):
    async def upload() -> None:
        async with Visitor(server.url) as v:
            page = await v.open("score")
            await v.upload(page, [("a.trec", b"x" * (MB // 2)), ("b.trec", b"y" * (MB // 3))])
            with pytest.raises(urllib.error.HTTPError) as refused:
                await v.upload(page, [("c.trec", b"z" * (MB // 3))])
            assert refused.value.code == 413

    asyncio.run(upload())
    assert "upload refused: upload budget per visitor: 1 MB" in server.log_text()


def test_a_session_keeps_no_dataset_between_runs(monkeypatch, tmp_path):
    """The shell hands the page its dataset by a weak reference: once the run is over the session holds none
    (a disconnected session is kept two minutes; with a dataset each, a crowd's sessions grew the server)."""
    from _app_helpers import set_app_env, start
    from bsard_demo.app.state import ActiveData
    from bsard_demo.dataset import Dataset

    set_app_env(monkeypatch, tmp_path / "cache", "sample")
    at = start()
    gc.collect()
    held = [key for key in list(at.session_state.keys())
            if isinstance(at.session_state[key], (ActiveData, Dataset))
            or isinstance(getattr(at.session_state[key], "dataset", None), Dataset)]
    assert held == []
    ref = at.session_state["active_data"]
    assert callable(ref) and ref() is None
