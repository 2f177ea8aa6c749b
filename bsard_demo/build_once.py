"""In memory, :class:`BuildOnce`: each value built at most once per key, even under concurrent callers, and
bounded where asked (entries, a weight budget, an age): the app's indexes and built-in runs, a question's ``use``
vector, the hybrid parts' rankings, what a scored board draws. docs/design.md, 'bsard_demo/build_once.py'.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


class BuildOnce(Generic[T]):
    """A keyed memo that builds each value at most once, even under concurrent callers (a caller who
    asks while a value is being built waits for that build).

    Failures are not stored: the next caller tries again. Unbounded by default; ``entries`` keeps the
    values of the last ``entries`` keys used, ``budget`` the last ones whose ``weigh(value)`` (bytes, say) add
    up to at most ``budget`` (the newest is always kept), ``ttl`` builds a value again once it is ``ttl``
    seconds old. A key's lock lives only while its value is built, so a memo of many keys keeps only its values.
    """

    def __init__(self, entries: int | None = None, ttl: float | None = None,
                 clock: Callable[[], float] = time.monotonic, *, budget: int | None = None,
                 weigh: Callable[[T], int] | None = None) -> None:
        if (budget is None) != (weigh is None):
            raise ValueError("a budget needs a weigh function, and a weigh function a budget")
        self.entries, self.ttl, self.clock, self.budget, self.weigh = entries, ttl, clock, budget, weigh
        self._lock = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}  # keys being built
        self._items: dict[Hashable, tuple[T, float]] = {}  # key -> (value, built at), least recently used first
        self._weights: dict[Hashable, int] = {}  # key -> weigh(value), with a budget

    def __contains__(self, key: Hashable) -> bool:
        return self._kept(key) is not None

    def __len__(self) -> int:
        return len(self._items)

    def _kept(self, key: Hashable) -> tuple[T] | None:
        """``(value,)`` of ``key`` when it is kept and not too old, else None."""
        with self._lock:
            item = self._items.get(key)
            if item is None or (self.ttl is not None and self.clock() - item[1] >= self.ttl):
                return None
            if self.entries is not None or self.budget is not None:
                self._items[key] = self._items.pop(key)  # the most recently used last
            return (item[0],)

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        kept = self._kept(key)
        if kept is not None:
            return kept[0]
        with self._lock:
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            kept = self._kept(key)
            if kept is not None:
                return kept[0]
            try:
                value = build()
            except BaseException:
                self._release(key, key_lock)  # who waits on it tries again
                raise
            weight = int(self.weigh(value)) if self.weigh is not None else 0
            with self._lock:
                self._items[key] = (value, self.clock())
                if self.weigh is not None:
                    self._weights[key] = weight
                while self._too_many():
                    oldest = next(iter(self._items))
                    del self._items[oldest]
                    self._weights.pop(oldest, None)
            self._release(key, key_lock)  # who waits on it finds the value
            return value

    def _too_many(self) -> bool:
        """Whether the oldest value must go (the lock held): past ``entries``, or past ``budget`` with
        another value besides the newest."""
        if self.entries is not None and len(self._items) > self.entries:
            return True
        return self.budget is not None and len(self._items) > 1 and sum(self._weights.values()) > self.budget

    @property
    def weight(self) -> int:
        """What the kept values weigh together (0 without a ``weigh`` function)."""
        with self._lock:
            return sum(self._weights.values())

    def _release(self, key: Hashable, key_lock: threading.Lock) -> None:
        with self._lock:
            if self._locks.get(key) is key_lock:
                del self._locks[key]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weights.clear()
            self._locks.clear()
