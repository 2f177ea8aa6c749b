"""bsard_demo.build_once.BuildOnce: the in-memory memo of the app's indexes and built-in runs and of a question's
``use`` vector: each key built once under concurrent callers, failures not kept, bounded by entries and age."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from bsard_demo.build_once import BuildOnce


def test_build_once_builds_each_key_once_under_concurrency():
    reg = BuildOnce()
    calls = []

    def build():
        calls.append(1)
        time.sleep(0.05)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(reg.get("k", build))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1 and "k" in reg


def test_build_once_does_not_store_failures():
    reg = BuildOnce()
    with pytest.raises(RuntimeError):
        reg.get("k", lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert "k" not in reg
    assert reg.get("k", lambda: 5) == 5


def test_build_once_bounded_keeps_the_last_keys_used_and_rebuilds_old_values():
    now = [0.0]
    reg = BuildOnce(entries=2, ttl=10, clock=lambda: now[0])
    builds = []

    def build(key):
        return lambda: builds.append(key) or f"{key}{len(builds)}"

    assert reg.get("a", build("a")) == "a1" and reg.get("b", build("b")) == "b2"
    assert reg.get("a", build("a")) == "a1"  # kept: "a" is now the most recently used
    assert reg.get("c", build("c")) == "c3" and "b" not in reg and "a" in reg and len(reg) == 2
    now[0] = 10  # "a" and "c" are 10 s old: built again
    assert "a" not in reg and reg.get("a", build("a")) == "a4" and builds == ["a", "b", "c", "a"]


def test_build_once_within_a_budget_keeps_the_last_values_that_fit_and_always_the_newest():
    memo = BuildOnce(budget=10, weigh=len)
    for key, size in (("a", 4), ("b", 4)):
        memo.get(key, lambda size=size: "x" * size)
    assert memo.weight == 8 and "a" in memo and "b" in memo
    memo.get("a", lambda: "never")  # used again: now the most recent
    memo.get("c", lambda: "x" * 4)  # 12 > 10: the least recently used (b) goes
    assert "a" in memo and "c" in memo and "b" not in memo and memo.weight == 8
    memo.get("big", lambda: "x" * 50)  # over the budget alone: kept, every other value goes
    assert len(memo) == 1 and "big" in memo and memo.weight == 50
    memo.clear()
    assert memo.weight == 0 and len(memo) == 0
    with pytest.raises(ValueError):
        BuildOnce(budget=10)


def test_build_once_keeps_no_lock_per_key_once_built():
    """A memo of many keys (every question a visitor types, for ``use``) keeps its values, not a lock per key."""
    reg = BuildOnce(entries=2)
    for i in range(1000):
        assert reg.get(i, lambda i=i: i * 2) == i * 2
    with pytest.raises(RuntimeError):
        reg.get("bad", lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert len(reg) == 2 and reg._locks == {}


def test_use_hands_each_caller_its_own_copy_of_a_question_computed_once(monkeypatch):
    from bsard_demo.retrievers import encoders

    calls = []

    class FakeUse:
        def encode(self, batch):
            calls.append(list(batch))
            return np.ones((len(batch), 512), dtype=np.float32)

    monkeypatch.setattr(encoders, "_load_use", lambda threads=1: FakeUse())
    monkeypatch.setattr(encoders, "USE_QUERIES", BuildOnce(entries=64))
    enc = encoders.USEEncoder.__new__(encoders.USEEncoder)
    enc.dim = 512
    first, second = enc.encode_queries(["loyer"]), enc.encode_queries(["loyer"])
    assert calls == [["loyer"]] and first is not second
    first[0, 0] = -1.0  # a caller's changes stay its own
    assert enc.encode_queries(["loyer"])[0, 0] == second[0, 0] and calls == [["loyer"]]
