"""Facts derived from a corpus DataFrame, memoised per frame object: :func:`frame_memo` (the indexed texts,
fingerprints and structure graph a cold ``run`` or page would recompute over 29k articles) and
:func:`keeping`, the scope in which its large values are held. docs/benchmarks.md, "Cold start".
"""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Callable, Hashable, Iterator, TypeVar

T = TypeVar("T")


class _FrameMemo:
    """What :func:`frame_memo` holds for one frame: ``kept`` values live with the frame, ``held``
    ones while :func:`keeping` is open."""

    __slots__ = ("ref", "stamp", "kept", "held")

    def __init__(self, ref: weakref.ref, stamp: tuple):
        self.ref, self.stamp, self.kept, self.held = ref, stamp, {}, {}


_frame_lock = threading.Lock()
_frame_memos: dict[int, _FrameMemo] = {}
_keeping = 0


def _frame_stamp(frame) -> tuple:
    return tuple(frame.shape), tuple(str(c) for c in frame.columns)


def _forget_frame(key: int, ref: weakref.ref) -> None:
    with _frame_lock:
        if key in _frame_memos and _frame_memos[key].ref is ref:
            del _frame_memos[key]


def frame_memo(frame, key: Hashable, compute: Callable[[], T], *, keep: bool = True) -> T:
    """``compute()`` once per DataFrame object and ``key``: facts derived from a corpus frame (its
    indexed texts, its fingerprints, its structure graph's key), which a cold ``run`` or page
    recomputed up to five times over 29k articles (docs/benchmarks.md, "Cold start"). A frame is
    taken as unchanged once read (the dataset's frames are new ones; every edit in the package is
    made on a copy): the memo of a frame goes with it (a new frame, even at a recycled address,
    starts empty) and is dropped when its shape or columns change. ``keep=False`` (large values,
    the 29k texts): held only while :func:`keeping` is open, else computed each time. An object
    that cannot be weakly referenced is never memoised. Two threads may both compute; one result
    is kept."""
    try:
        stamp, ident = _frame_stamp(frame), id(frame)
    except (AttributeError, TypeError):
        return compute()
    with _frame_lock:
        entry = _frame_memos.get(ident)
        if entry is not None and (entry.ref() is not frame or entry.stamp != stamp):
            del _frame_memos[ident]
            entry = None
        if entry is not None:
            store = entry.kept if keep else entry.held
            if key in store:
                return store[key]
        if not keep and not _keeping:
            return compute()
    value = compute()
    with _frame_lock:
        entry = _frame_memos.get(ident)
        if entry is None or entry.ref() is not frame or entry.stamp != stamp:
            try:
                ref = weakref.ref(frame, lambda r, ident=ident: _forget_frame(ident, r))
            except TypeError:
                return value
            entry = _frame_memos[ident] = _FrameMemo(ref, stamp)
        if keep or _keeping:
            (entry.kept if keep else entry.held).setdefault(key, value)
            return (entry.kept if keep else entry.held)[key]
    return value


@contextmanager
def keeping() -> Iterator[None]:
    """While open (in any thread), :func:`frame_memo` holds its ``keep=False`` values too; when the
    last one closes they are dropped (the CLI's build of a command, the app's page runs)."""
    global _keeping
    with _frame_lock:
        _keeping += 1
    try:
        yield
    finally:
        with _frame_lock:
            _keeping -= 1
            if not _keeping:
                for entry in _frame_memos.values():
                    entry.held.clear()
