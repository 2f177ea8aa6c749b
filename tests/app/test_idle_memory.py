"""Memory handed back when the app is idle (bsard_demo.app.hosting.IdleGiveBack, cap_malloc_arenas):
a fake clock and a fake give-back, nothing timed."""
from __future__ import annotations

import sys
import threading

import pytest

from bsard_demo import settings
from bsard_demo.app import hosting


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def idle(after=(10.0, 150.0), poll=5.0):
    clock, calls = Clock(), []
    return hosting.IdleGiveBack(after, give_back=lambda: calls.append(clock.now), poll=poll, clock=clock), clock, calls


def advance(tracker, clock, until: float) -> None:
    """Step the tracker as its thread would (sleeping what each step says) up to ``until``."""
    while clock.now < until:
        clock.now = min(until, clock.now + tracker.step())


def test_nothing_is_given_back_before_a_first_page():
    tracker, clock, calls = idle()
    advance(tracker, clock, 1000)
    assert calls == [] and tracker.given == 0


def test_after_a_page_memory_is_given_back_at_each_delay_once():
    tracker, clock, calls = idle()
    clock.now = 100
    with tracker.running():
        clock.now = 130
    advance(tracker, clock, 1000)
    assert calls == [140, 280]  # 10 s and 150 s after the page ended, then never again while idle
    assert tracker.given == 2


def test_never_while_a_page_runs_and_a_new_page_rearms_the_delays():
    tracker, clock, calls = idle()
    with tracker.running():
        advance(tracker, clock, 500)  # a page running for 500 s: nothing
        assert calls == []
    advance(tracker, clock, 520)
    assert calls == [510]
    with tracker.running():  # a page before the second delay: the idle spell starts again
        clock.now = 530
    advance(tracker, clock, 700)
    assert calls == [510, 540, 680]


def test_overlapping_pages_count_until_the_last_ends():
    tracker, clock, calls = idle(after=(10.0,))
    a, b = tracker.running(), tracker.running()
    a.__enter__()
    b.__enter__()
    clock.now = 20
    a.__exit__(None, None, None)
    advance(tracker, clock, 60)  # b still runs
    assert calls == []
    b.__exit__(None, None, None)
    advance(tracker, clock, 100)
    assert calls == [70]


def test_a_page_that_raises_still_ends_its_run():
    tracker, clock, calls = idle(after=(10.0,))
    with pytest.raises(RuntimeError):
        with tracker.running():
            raise RuntimeError("Streamlit stops a script by raising in it")
    advance(tracker, clock, 20)
    assert calls == [10]


def test_the_waits_are_bounded_by_the_poll():
    tracker, clock, _ = idle(after=(10.0, 150.0), poll=5.0)
    with tracker.running():
        assert tracker.step() == 5.0
    clock.now = 7
    assert tracker.step() == pytest.approx(3.0)  # due at 10: wait only what is left


def test_a_failing_give_back_keeps_the_thread_going():
    clock = Clock()

    def broken():
        raise OSError("no libc")
    tracker = hosting.IdleGiveBack((1.0, 2.0), give_back=broken, clock=clock)
    with tracker.running():
        pass
    advance(tracker, clock, 10)
    assert tracker.given == 2


def test_one_thread_per_tracker():
    done = threading.Event()
    tracker = hosting.IdleGiveBack((0.0,), give_back=done.set, poll=0.01)
    with tracker.running():
        pass
    assert tracker.start() is True
    assert tracker.start() is False
    assert done.wait(5)  # the real thread steps it (bounded wait, not a timing assertion)
    assert sum(t.name == "bsard-idle-give-back" and t.daemon for t in threading.enumerate()) >= 1


def test_arena_cap_and_mmap_threshold_call_mallopt_once_per_process(monkeypatch):
    monkeypatch.setattr(hosting, "_set", {})  # as in a new process (the real settings would stay in this one)
    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1
    assert hosting.cap_malloc_arenas(libc=Libc()) is True
    assert hosting.cap_malloc_arenas(5, libc=Libc()) is True
    assert hosting.fix_mmap_threshold(libc=Libc()) is True
    assert hosting.fix_mmap_threshold(1 << 20, libc=Libc()) is True
    assert calls == [(-8, 2), (-3, 128 * 1024)]  # M_ARENA_MAX, M_MMAP_THRESHOLD, once each


def test_a_refused_cap_is_reported_and_not_retried(monkeypatch):
    monkeypatch.setattr(hosting, "_set", {})

    class Libc:
        def mallopt(self, param, value):
            return 0
    assert hosting.cap_malloc_arenas(libc=Libc()) is False
    assert hosting.cap_malloc_arenas(libc=Libc()) is False


def test_glibc_is_found_where_it_is_the_c_library():
    libc = hosting._glibc()
    if libc is None:
        pytest.skip("not glibc: the cap and the trim are no-ops here")
    assert hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")


def test_give_back_releases_pyarrows_pool_only_when_pyarrow_is_loaded(monkeypatch):
    """Counted in this thread only: the idle give-back thread an earlier test of this process started may call
    ``give_back_memory`` meanwhile (it did once in CI's shuffled order: two releases)."""
    from types import SimpleNamespace

    released = []
    mine = threading.get_ident()
    pool = SimpleNamespace(release_unused=lambda: released.append(threading.get_ident()))
    monkeypatch.setitem(sys.modules, "pyarrow", SimpleNamespace(default_memory_pool=lambda: pool))
    hosting.give_back_memory()
    assert released.count(mine) == 1
    monkeypatch.setitem(sys.modules, "pyarrow", SimpleNamespace())  # a pyarrow without a pool: no crash
    hosting.give_back_memory()
    monkeypatch.delitem(sys.modules, "pyarrow")
    hosting.give_back_memory()  # not loaded: not imported for this
    assert "pyarrow" not in sys.modules and released.count(mine) == 1


def test_a_deployers_malloc_settings_are_left_alone():
    assert not settings.malloc_arenas_configured({})
    assert not settings.malloc_arenas_configured({"MALLOC_ARENA_MAX": " "})
    assert settings.malloc_arenas_configured({"MALLOC_ARENA_MAX": "4"})
    tunables = "glibc.malloc.trim_threshold=1:glibc.malloc.arena_max=2"
    assert settings.malloc_arenas_configured({"GLIBC_TUNABLES": tunables})
    assert not settings.malloc_arenas_configured({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"})
    assert not settings.malloc_mmap_configured({"MALLOC_ARENA_MAX": "4"})
    assert settings.malloc_mmap_configured({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert settings.malloc_mmap_configured({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"})


# --------------------------------------------------------------------------- Streamlit's disconnected sessions

class FakeSession:
    def __init__(self, name: str, shut: list) -> None:
        from streamlit.runtime.state.session_state import SessionState

        self.id, self.name, self.shut = name, name, shut
        self.session_state = SessionState()

    def shutdown(self) -> None:
        self.shut.append(self.name)


def fake_runtime(monkeypatch, clock: Clock, ttl: float = 120.0):
    """Streamlit's own session storage (a real MemorySessionStorage on a fake clock) behind a
    stand-in of its WebsocketSessionManager (the lock and the storage it names)."""
    from types import SimpleNamespace

    from streamlit import runtime
    from streamlit.runtime.caching.ttl_cache import TTLCache
    from streamlit.runtime.memory_session_storage import MemorySessionStorage

    storage = MemorySessionStorage(ttl_seconds=int(ttl))
    storage._cache = TTLCache(maxsize=128, ttl=ttl, timer=clock)
    manager = SimpleNamespace(_storage_lock=threading.Lock(), _session_storage=storage)
    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: SimpleNamespace(_session_mgr=manager))
    return storage


def test_expired_disconnected_sessions_are_shut_down_and_recent_ones_kept(monkeypatch):
    from streamlit.runtime.session_manager import SessionInfo

    from bsard_demo.app import hosting_ui

    clock, shut = Clock(), []
    storage = fake_runtime(monkeypatch, clock)
    for name, at in (("a", 0.0), ("b", 10.0), ("c", 100.0)):
        clock.now = at
        storage.save(SessionInfo(client=None, session=FakeSession(name, shut)))
    clock.now = 125.0
    assert hosting_ui.drop_expired_sessions() == 1
    assert shut == ["a"] and len(storage._cache) == 2
    clock.now = 300.0
    assert hosting_ui.drop_expired_sessions() == 2
    assert shut == ["a", "b", "c"] and len(storage._cache) == 0


def test_a_dropped_session_keeps_nothing_of_its_state(monkeypatch):
    """Streamlit's runtime loop keeps the last session it flushed (``active_session_info``, a local of
    ``Runtime._loop_coroutine``) until it flushes another's: a session that is dropped must not keep its state
    alive through it (the file uploader's value holds the uploads' bytes: 2 x 48 MB kept for good after an
    upload flood, docs/reliability.md, section 12)."""
    import weakref

    from streamlit.runtime.session_manager import SessionInfo

    from bsard_demo.app import hosting_ui

    class Upload:  # stands for an UploadedFile and its bytes
        pass

    clock, shut = Clock(), []
    storage = fake_runtime(monkeypatch, clock)
    session, upload = FakeSession("a", shut), Upload()
    session.session_state["runs"] = [upload]
    held = weakref.ref(upload)
    del upload
    storage.save(SessionInfo(client=None, session=session))
    clock.now = 125.0
    assert hosting_ui.drop_expired_sessions() == 1
    assert shut == ["a"]
    assert held() is None  # the session itself is still referenced (here, as by Streamlit's loop)


def test_another_streamlit_leaves_its_sessions_alone(monkeypatch):
    from types import SimpleNamespace

    from streamlit import runtime

    from bsard_demo.app import hosting_ui

    monkeypatch.setattr(runtime, "exists", lambda: False)
    assert hosting_ui.drop_expired_sessions() == 0  # AppTest, bare mode: no runtime
    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: SimpleNamespace(_session_mgr=object()))
    assert hosting_ui.drop_expired_sessions() == 0  # private names changed: a no-op, never a crash


def test_the_installed_streamlit_has_the_names_it_relies_on():
    import inspect

    from streamlit.runtime.memory_session_storage import MemorySessionStorage
    from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

    source = inspect.getsource(WebsocketSessionManager.__init__)
    assert "self._storage_lock = threading.Lock()" in source and "self._session_storage = " in source
    assert callable(MemorySessionStorage()._cache.expire)
    # drop_expired_sessions clears a dropped session's state (the public property, SessionState.clear)
    from streamlit.runtime.app_session import AppSession
    from streamlit.runtime.state.session_state import SessionState

    assert isinstance(AppSession.session_state, property) and callable(SessionState.clear)
    # keep_script_cache: the runtime's one ScriptCache, which the session manager empties when the last session leaves
    from streamlit.runtime.runtime import Runtime

    assert "self._script_cache = ScriptCache()" in inspect.getsource(Runtime.__init__)
    assert "self._script_cache.clear()" in inspect.getsource(WebsocketSessionManager)


@pytest.mark.parametrize("watcher", ["none", "auto"])
def test_without_a_source_watcher_the_compiled_pages_are_kept(monkeypatch, tmp_path, watcher):
    """keep_script_cache: with no watcher (the app's setting), emptying Streamlit's script cache (which its
    session manager does when the last session leaves) no longer drops the compiled pages; with a watcher,
    Streamlit's behaviour is left as it is."""
    import streamlit as st
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    from bsard_demo.app import hosting_ui

    cache = ScriptCache()

    class FakeRuntime:  # streamlit.runtime's two functions, over Streamlit's own ScriptCache
        @staticmethod
        def exists():
            return True

        @staticmethod
        def get_instance():
            return type("R", (), {"_script_cache": cache})()

    monkeypatch.setattr(hosting_ui, "runtime", FakeRuntime)
    real = st.get_option
    monkeypatch.setattr(st, "get_option", lambda name: watcher if name == "server.fileWatcherType" else real(name))
    page = tmp_path / "page.py"
    page.write_text("x = 1\n")
    assert hosting_ui.keep_script_cache() is (watcher == "none")
    first = cache.get_bytecode(str(page))
    cache.clear()  # the last session left
    assert (cache.get_bytecode(str(page)) is first) is (watcher == "none")  # not compiled again when kept


def test_what_is_kept_is_frozen_and_what_died_since_is_still_collected():
    """freeze_what_is_kept sets the live objects aside from the collector, so a full collection no longer
    walks them; give_back_memory thaws them first (a cycle that died after the freeze is collected) and
    freezes again."""
    import gc
    import weakref

    class Node:
        pass

    node = Node()
    node.self = node  # a cycle: only the collector frees it
    collected = []
    weakref.finalize(node, collected.append, "node")
    try:
        with hosting._GIVE_BACK_LOCK:  # the idle give-back thread an earlier test started waits meanwhile
            hosting.freeze_what_is_kept()
            assert gc.get_freeze_count() > 0
            del node
            gc.collect()
            assert collected == []  # frozen: a full collection does not see it
            hosting.give_back_memory()
            assert collected == ["node"] and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_default_schedule_reaches_sessions_that_left_long_after_the_last_page():
    """A session that leaves without running a page (an upload flood refused by the budget) is kept 120 s by
    Streamlit: the idle give-back that drops it must come after that, even when the session left well after
    the last page ran (docs/reliability.md, section 12)."""
    from bsard_demo.app.hosting import IDLE_GIVE_BACK_S

    assert max(IDLE_GIVE_BACK_S) >= 150 + 120
