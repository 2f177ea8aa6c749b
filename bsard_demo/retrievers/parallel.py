"""Embedding a corpus' shards in several processes at once (:func:`~.dense_shards.embed_resumable`): the ``use``
encoder runs on one core (pure-Python tokenising, one BLAS thread: :data:`~.encoders.USE_THREADS`), so a build
spreads its shards over worker processes (by default every usable core). Each worker embeds whole shards with the
very call a one-process build makes, so every shard's vectors, and the cache entry and its key, are the same bit for
bit; workers are started with ``spawn``.

Why processes, the workers, interruptions: docs/design.md, 'bsard_demo/retrievers/parallel.py'.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
import types
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from .encoders import embed_documents

_ENCODERS: dict = {}
#: How often a worker checks that the build that started it is alive (a ``kill`` of the build, which runs no
#: cleanup, left its workers embedding their shards for minutes, parentless).
PARENT_CHECK_S = 1.0


def _exit_with_parent(parent: int) -> None:
    """In a worker (the pool's initializer): end this process once ``parent`` is gone (reparented)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _embed(factory: Callable[[], object], texts: Sequence[str], pooling: str, window: int | None,
           batch_size: int) -> np.ndarray:
    """In a worker: ``factory()``'s encoder (made once per process) embeds one shard."""
    key = repr(factory)
    encoder = _ENCODERS.get(key)
    if encoder is None:
        encoder = _ENCODERS[key] = factory()
    return embed_documents(encoder, list(texts), pooling=pooling, window=window, batch_size=batch_size)


@contextmanager
def _no_page_as_main() -> Iterator[None]:
    """While workers start: ``spawn`` runs the file of ``sys.modules["__main__"]`` again in each worker (as
    ``__mp_main__``). Under ``streamlit run`` that module is the page script Streamlit installed for a run, not the
    program (``sys.argv[0]``): each worker ran the whole app again, outside Streamlit. Such a ``__main__`` is an
    empty module meanwhile; it is put back unless a page run installed its own in the meantime."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    program = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
    if path is None or getattr(main, "__spec__", None) is not None or (
            program is not None and os.path.realpath(path) == os.path.realpath(program)):
        yield
        return
    stand_in = sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if sys.modules.get("__main__") is stand_in:
            sys.modules["__main__"] = main


def embed_shards(factory: Callable[[], object], jobs: Mapping[int, Sequence[str]],
                 store: Callable[[int, np.ndarray], None], *, workers: int, pooling: str, window: int | None,
                 batch_size: int) -> None:
    """Embed each shard ``jobs[number]`` (its texts) in ``workers`` processes; ``store(number,
    vectors)`` is called in this process as each one is done. At most two shards per worker are
    in flight (bounded memory); the first failure is raised once the running shards end."""
    pending = iter(sorted(jobs))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_exit_with_parent,
                             initargs=(os.getpid(),)) as pool:
        running = {}
        try:
            def submit() -> bool:
                number = next(pending, None)
                if number is None:
                    return False
                with _no_page_as_main():  # a submit starts a worker while fewer than ``workers`` are idle
                    running[pool.submit(_embed, factory, list(jobs[number]), pooling, window, batch_size)] = number
                return True

            for _ in range(2 * workers):
                if not submit():
                    break
            while running:
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda f: running[f]):
                    number = running.pop(future)
                    store(number, future.result())
                    submit()
        except BaseException:
            for future in running:
                future.cancel()
            raise
