"""Resumable dense builds: :func:`embed_resumable` embeds a corpus shard by shard of :data:`SHARD_DOCS` texts,
in several processes when it pays (:mod:`.parallel`), each shard checkpointed in a partial cache folder as soon
as it is done, so that an interrupted build resumes. docs/design.md, 'bsard_demo/retrievers/dense.py'.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .base import Progress, Step, report_progress
from .encoders import DEFAULT_POOLING, Encoder, embed_documents
from .parallel import embed_shards

#: Articles per checkpointed shard: about a minute of e5 work on 2 busy cores (measured
#: 1.2-2.3 articles/s, docs/benchmarks.md "e5"), a few seconds of USE. A multiple of the
#: default batch size (64), so that shards cut no batch of an unchunked corpus.
SHARD_DOCS = 128
_SHARD_NAME = re.compile(r"^shard-(\d{6,})-([0-9a-f]{16})\.npy$")
#: Shards left to embed below which a build stays in this process (starting a worker and loading
#: its encoder costs a few seconds; 8 shards of USE are ~20 s of work).
PARALLEL_MIN_SHARDS = 8


def embed_resumable(encoder: Encoder, texts: Sequence[str], partial: Path | None, *, shard_docs: int = SHARD_DOCS,
                    pooling: str = DEFAULT_POOLING, window: int | None = None, batch_size: int = 64,
                    progress: Progress | None = None, notice: Callable[[str], None] | None = None,
                    workers: int | None = None) -> np.ndarray:
    """:func:`~.encoders.embed_documents` of ``texts``, shard by shard of ``shard_docs`` texts.

    Shards are embedded in ``workers`` processes at once (:func:`shard_workers`; default every
    usable core) when the encoder can be rebuilt in a child process (its ``worker_factory``) and
    there are enough shards to pay for starting them (:data:`PARALLEL_MIN_SHARDS`); each shard
    is embedded by the same call either way, so the vectors are the same bit for bit.

    With a ``partial`` folder, a shard already there (complete: its name holds the sha256 of its
    bytes, which must match, and its shape must fit) is read instead of embedded, and each new
    shard is written there atomically (temporary file, then rename) as soon as it is done. The
    result is the same bit for bit as without ``partial`` and whatever the interruptions: each
    shard is embedded on its own either way. ``progress(done, total, message)`` counts texts,
    with one message throughout ("embedding articles (<encoder>)"); a resumed build first
    reports what its shards hold. A folder that cannot be written is reported once through
    ``notice`` and the build goes on without checkpoints."""
    texts = [str(t) for t in texts]
    n, dim = len(texts), int(encoder.dim)
    shard_docs = max(1, int(shard_docs))
    out = np.empty((n, dim), dtype=np.float32)
    message = Step("embedding_articles", encoder=encoder.name)
    bounds = [(start, min(start + shard_docs, n)) for start in range(0, n, shard_docs)]
    todo = []
    done = 0
    for number, (a, b) in enumerate(bounds):
        stored = _read_shard(partial, number, b - a, dim) if partial is not None else None
        if stored is None:
            todo.append(number)
        else:
            out[a:b] = stored
            done += b - a
    if done and notice:
        notice(f"resuming the {encoder.name} embeddings: {done} of {n} articles already in the cache")
    report_progress(progress, done, n, message)

    def store(number: int, vectors: np.ndarray) -> None:
        nonlocal partial, done
        a, b = bounds[number]
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (b - a, dim):
            raise ValueError(f"the {encoder.name} encoder returned {vectors.shape} vectors for {b - a} texts")
        out[a:b] = vectors
        if partial is not None:
            try:
                _write_shard(partial, number, vectors)
            except OSError as exc:
                if notice:
                    notice(f"cannot checkpoint the {encoder.name} embeddings in the cache ({exc.strerror or exc}); "
                           "an interrupted build will start over")
                partial = None
        done += b - a
        report_progress(progress, done, n, message)

    pool = shard_workers(encoder, len(todo), workers)
    if pool > 1:
        if hasattr(encoder, "ready"):
            encoder.ready()  # e5's graph written here once, before the workers look for it
        jobs = {number: texts[bounds[number][0]:bounds[number][1]] for number in todo}
        embed_shards(encoder.worker_factory, jobs, store, workers=pool, pooling=pooling, window=window,
                     batch_size=batch_size)
        return out
    for number in todo:
        a, b = bounds[number]
        base = done

        def within(d: int, t: int, _m: str, base=base, size=b - a) -> None:
            if t > 0:
                report_progress(progress, base + min(size, size * d // t), n, message)

        store(number, embed_documents(encoder, texts[a:b], pooling=pooling, window=window, batch_size=batch_size,
                                      progress=within))
    return out


def shard_workers(encoder: Encoder, shards: int, workers: int | None = None) -> int:
    """How many processes embed ``shards`` shards with ``encoder``: 1 unless the encoder has a
    ``worker_factory`` (an encoder that parallelises itself, such as e5, has none) and there
    are at least :data:`PARALLEL_MIN_SHARDS` shards; else ``workers`` (default: the usable
    cores), at most one per shard."""
    if getattr(encoder, "worker_factory", None) is None or shards < PARALLEL_MIN_SHARDS:
        return 1
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(int(workers), shards))


def _shard_bytes(vectors: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    return buffer.getvalue()


def _write_shard(folder: Path, number: int, vectors: np.ndarray) -> None:
    """Write shard ``number`` as ``shard-NNNNNN-<sha256[:16]>.npy`` via a temporary file + rename
    (a reader sees a whole shard or none; concurrent writers of the same shard write the same bytes)."""
    data = _shard_bytes(vectors)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"shard-{number:06d}-{hashlib.sha256(data).hexdigest()[:16]}.npy"
    tmp = folder / f".shard-{number:06d}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def _read_shard(folder: Path, number: int, rows: int, dim: int) -> np.ndarray | None:
    """Shard ``number`` if a complete, intact one of ``rows`` × ``dim`` float32 is in ``folder``;
    damaged candidates are removed. Never raises."""
    try:
        candidates = sorted(folder.glob(f"shard-{number:06d}-*.npy"))
    except OSError:
        return None
    for path in candidates:
        match = _SHARD_NAME.match(path.name)
        try:
            if match is None or int(match.group(1)) != number or path.is_symlink() or not path.is_file():
                raise ValueError("not a shard")
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest()[:16] != match.group(2):
                raise ValueError("checksum mismatch")
            vectors = np.load(io.BytesIO(data), allow_pickle=False)
            if vectors.dtype != np.float32 or vectors.shape != (rows, dim) or not np.isfinite(vectors).all():
                raise ValueError("wrong shape or values")
            return vectors
        except Exception:  # noqa: BLE001 - a damaged shard is embedded again
            try:
                path.unlink()
            except OSError:
                pass
    return None


def discard_partial(folder: Path) -> None:
    try:
        stale = folder.with_name(f".{folder.name}.done-{uuid.uuid4().hex[:8]}")
        os.rename(folder, stale)
    except OSError:
        return
    shutil.rmtree(stale, ignore_errors=True)
    try:
        folder.parent.rmdir()  # the last unfinished build gone: leave no empty dense-partial/ behind
    except OSError:
        pass  # other unfinished builds still have shards there
