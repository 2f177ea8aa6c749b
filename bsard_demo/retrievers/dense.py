"""Dense retrieval: articles and questions embedded by an :mod:`~.encoders` encoder, ranked by cosine similarity with
a FAISS flat inner-product index over unit vectors (:class:`DenseRetriever`). Embeddings are computed once and kept in
a :mod:`bsard_demo.cache` entry; a build is resumable (:func:`~.dense_shards.embed_resumable`, shards checkpointed
as they are done, in several processes: :mod:`.dense_shards`).

Conventions (texts, hits, batching, cache, resumable builds): docs/design.md, 'bsard_demo/retrievers/dense.py'.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import cache, settings
from ..analyzer import DEFAULT_FIELDS, article_texts
from ..frame_memo import frame_memo
from .base import Hit, Progress, clip_k, id_ranks, rank_rows, ranked_hits
from .dense_shards import SHARD_DOCS, discard_partial, embed_resumable
from .encoders import (
    CHUNK_OVERLAP,
    CHUNKING_VERSION,
    DEFAULT_ENCODER,
    DEFAULT_POOLING,
    POOLINGS,
    Encoder,
    normalize_rows,
    resolve_encoder,
)

CACHE_KIND = "dense"
#: Shards of an unfinished build live in ``<cache root>/dense-partial/<key>/``.
PARTIAL_KIND = CACHE_KIND + "-partial"
#: 2: built shard by shard (:data:`~.dense_shards.SHARD_DOCS`, part of the key).
_CACHE_FORMAT = 2
#: Extra neighbours fetched beyond ``k`` so that ties at the cut can be seen and ordered.
_TIE_MARGIN = 16
#: OpenMP threads of a FAISS search, set in the thread that searches (OpenMP keeps the setting per calling
#: thread). With FAISS's default (one per core) a flat index's scores depend on the machine: 1, 2, 3 and 4
#: threads gave four different last bits over the same 29,115 x 512 index. One thread also costs 0.37 of the CPU
#: of two for the same queries (0.37 against 0.99 s for 150, docs/benchmarks.md "Per-visit cost (issue 29)").
SEARCH_THREADS = 1


class _IndexRows:
    """What :func:`index_rows`' array is a view of: it keeps the FAISS index (the memory) alive."""

    def __init__(self, index, faiss) -> None:
        self.index = index
        rows = faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)
        self.__array_interface__ = rows.__array_interface__


def index_rows(index, faiss) -> np.ndarray:
    """The rows of a flat FAISS ``index`` as a read-only float32 array without a copy (a retriever kept
    its embeddings twice, as an array and in the index: 60 MB for ``use`` over 29k articles); the
    array keeps the index alive. The index must not be added to while the array is used."""
    rows = np.asarray(_IndexRows(index, faiss))
    rows.flags.writeable = False
    return rows


class DenseRetriever:
    """Cosine search over article embeddings. Build with :meth:`build`; implements the Retriever
    protocol."""

    def __init__(self, article_ids: Sequence[str], embeddings: np.ndarray, encoder: Encoder, *,
                 fields: Sequence[str] = DEFAULT_FIELDS, pooling: str = DEFAULT_POOLING,
                 window: int | None = None, query_batch_size: int = 64):
        settings.prepare_runtime()  # OMP_WAIT_POLICY before faiss's OpenMP runtime loads
        import faiss  # heavy native library: loaded after prepare_runtime, for a dense index only

        self.article_ids = [str(a) for a in article_ids]
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape != (len(self.article_ids), encoder.dim):
            raise ValueError(f"embeddings of shape {emb.shape} for {len(self.article_ids)} articles and a "
                             f"{encoder.dim}-dim encoder")
        norms = np.linalg.norm(emb, axis=1)
        # rows are expected unit-length (as embed_documents gives them); kept bit-for-bit if so
        emb = emb if np.allclose(norms[norms > 0], 1.0, atol=1e-4) else normalize_rows(emb)
        self.encoder = encoder
        self.fields = tuple(fields)
        self.window = window
        self.pooling = pooling
        self.query_batch_size = query_batch_size
        self._faiss = faiss
        self.index = faiss.IndexFlatIP(encoder.dim)
        self.index.add(emb)  # FAISS keeps its own copy: the embeddings are read from it, not kept twice
        self.embeddings = index_rows(self.index, faiss)
        self._id_rank = id_ranks(self.article_ids)
        self.name = label(encoder.name, self.pooling, self.fields)

    @property
    def size(self) -> int:
        return len(self.article_ids)

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def build(cls, articles, *, encoder: str | Encoder = DEFAULT_ENCODER, fields: Sequence[str] = DEFAULT_FIELDS,
              pooling: str = DEFAULT_POOLING, window: int | None = None, batch_size: int = 64,
              cache_root: Path | None = None, use_cache: bool = True, progress: Progress | None = None,
              notice: Callable[[str], None] | None = None, shard_docs: int = SHARD_DOCS,
              backend: str = "auto", workers: int | None = None) -> "DenseRetriever":
        """Embed ``articles`` (a DataFrame in the dataset schema) or load their embeddings from the
        cache. ``encoder``: a name for :func:`~.encoders.resolve_encoder` (with ``backend``:
        auto, torch or onnx, for model folders) or an :class:`Encoder`.
        ``window`` (tokens) overrides the encoder's own (e.g. to chunk for USE, which has none);
        it may not exceed an encoder's ``native_window`` (e5: 512) when it has one. A build
        checkpoints every ``shard_docs`` articles in the cache and resumes from there
        (docs/design.md, 'bsard_demo/retrievers/dense.py'), in ``workers`` processes (:mod:`.dense_shards`;
        default every usable core).
        Raises :class:`~.encoders.EncoderUnavailable` (a ``ValueError``) when the
        encoder cannot be loaded, :class:`ValueError` on bad settings or an empty corpus."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
        fields = (fields,) if isinstance(fields, str) else tuple(fields)
        if not fields:
            raise ValueError("embed at least one article field")
        if articles is None or len(articles) == 0:
            raise ValueError("no articles to index")
        enc = resolve_encoder(encoder, backend) if isinstance(encoder, str) else encoder
        if hasattr(enc, "prepare"):
            enc.prepare()  # e5's graph and session in the background while the embeddings load
        ids, key, effective, window, shard_docs = _entry(articles, enc, fields, pooling, window, shard_docs)
        partial = cache.entry_path(PARTIAL_KIND, key, cache_root) if use_cache else None

        def make(embeddings: np.ndarray) -> "DenseRetriever":
            return cls(ids, embeddings, enc, fields=fields, pooling=effective, window=window,
                       query_batch_size=batch_size)

        def build() -> "DenseRetriever":
            texts = article_texts(articles, fields)
            return make(embed_resumable(enc, texts, partial, shard_docs=shard_docs, pooling=pooling, window=window,
                                        batch_size=batch_size, progress=progress, notice=notice, workers=workers))

        retriever = cache.load_or_build(
            CACHE_KIND, key, read=lambda folder: make(_read(folder, ids, enc.dim)), build=build,
            write=lambda retriever, folder: retriever._write(folder), what=f"embeddings ({enc.name})",
            use_cache=use_cache, root=cache_root, notice=notice, progress=progress, subject=enc.name)
        if partial is not None and cache.entry_path(CACHE_KIND, key, cache_root).is_dir():
            discard_partial(partial)  # the whole entry is stored: its shards are no longer needed
        return retriever

    @classmethod
    def is_stored(cls, articles, encoder: str | Encoder = DEFAULT_ENCODER, *, fields: Sequence[str] = DEFAULT_FIELDS,
                  pooling: str = DEFAULT_POOLING, window: int | None = None, shard_docs: int = SHARD_DOCS,
                  cache_root: Path | None = None, backend: str = "auto") -> bool:
        """Whether :meth:`build` with these settings would only load the embeddings (from an
        active index bundle or the cache): the same entry, its key derived here alone. ``False``
        for an encoder that cannot be loaded or settings :meth:`build` refuses. Never raises."""
        try:
            enc = resolve_encoder(encoder, backend) if isinstance(encoder, str) else encoder
            fields = (fields,) if isinstance(fields, str) else tuple(fields)
            key = _entry(articles, enc, fields, pooling, window, shard_docs)[1]
        except (ValueError, OSError):
            return False
        return cache.is_stored(CACHE_KIND, key, cache_root, what=f"embeddings ({enc.name})")

    def _write(self, folder: Path) -> None:
        np.save(folder / "embeddings.npy", self.embeddings, allow_pickle=False)
        (folder / "ids.json").write_text(json.dumps(self.article_ids))

    # -- searching --------------------------------------------------------------------------
    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        return [ranked_hits(rows, scores, self.article_ids) for rows, scores in self.search_rows(questions, k)]

    def search_rows(self, questions: Sequence[str], k: int = 100) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search_many` as arrays: each question's ``(corpus rows, scores)`` (:func:`~.base.rank_rows`)."""
        k = clip_k(k, self.size)
        questions = [str(q) for q in questions]
        if not questions:
            return []
        # one question at a time, each distinct question once: see "scores do not depend on batching"
        vectors = {q: normalize_rows(self.encoder.encode_queries([q], batch_size=1)) for q in dict.fromkeys(questions)}
        return [self.rank_vectors(vectors[q], k)[0] for q in questions]

    def search_vectors(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """Rank the articles for each row of ``queries`` (unit vectors of the encoder's size);
        each row is scored on its own, so its hits do not depend on the other rows."""
        return [ranked_hits(rows, scores, self.article_ids) for rows, scores in self.rank_vectors(queries, k)]

    def rank_vectors(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search_vectors` as arrays: each row's ``(corpus rows, float32 scores)``."""
        k = min(int(k), self.size)
        depth = min(self.size, k + _TIE_MARGIN)
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        self._faiss.omp_set_num_threads(SEARCH_THREADS)
        out = []
        for q in queries:
            scores, rows = self.index.search(q[None, :], depth)
            if depth < self.size and scores[0, -1] >= scores[0, k - 1]:
                # ties reach past what was fetched: score every article (the same one-query
                # kernel, so the same scores) and order them all exactly
                scores, rows = self.index.search(q[None, :], self.size)
            out.append(rank_rows(scores[0], self._id_rank, k, rows=rows[0]))
        return out


def _entry(articles, enc: Encoder, fields: tuple[str, ...], pooling: str, window: int | None, shard_docs: int):
    """``(ids, key, pooling, window, shard_docs)`` of the cache entry of ``articles`` embedded by
    ``enc`` with these settings (checked: :class:`ValueError` on a bad one); the pooling is
    ``"whole"`` without a window (every text is embedded whole). The key is memoised per frame and
    settings (:func:`~bsard_demo.frame_memo.frame_memo`: the first visitor's checks and the build
    asked for the same one)."""
    window = enc.max_tokens if window is None else int(window)
    if window is not None and window < 2:
        raise ValueError(f"window must be at least 2 tokens, not {window}")
    native = getattr(enc, "native_window", None)
    if window is not None and native and window > native:
        raise ValueError(f"window must be at most {native} tokens for the {enc.name} encoder (its own limit), not "
                         f"{window}")
    shard_docs = int(shard_docs)
    if shard_docs < 1:
        raise ValueError(f"shard_docs must be at least 1, not {shard_docs}")
    effective = pooling if window is not None else "whole"
    ids = [str(a) for a in articles["id"]]
    settings_text = json.dumps(key_settings(enc, fields, effective, window, shard_docs), sort_keys=True, default=str)
    def key() -> str:
        return cache_key(ids, article_texts(articles, fields), enc, fields, effective, window, shard_docs)

    return ids, frame_memo(articles, ("dense_cache_key", settings_text), key), effective, window, shard_docs


def label(encoder_name: str, pooling: str, fields: Sequence[str]) -> str:
    """e.g. ``"dense use"``, ``"dense minilm max"``; non-default fields are appended."""
    parts = [f"dense {encoder_name}"]
    if pooling != "whole":
        parts.append(pooling)
    if tuple(fields) != DEFAULT_FIELDS:
        parts.append("fields=" + "+".join(fields))
    return " ".join(parts)


def cache_key(ids: Sequence[str], texts: Sequence[str], encoder: Encoder, fields: Sequence[str],
              pooling: str, window: int | None, shard_docs: int = SHARD_DOCS) -> str:
    """Fingerprint of the ids, the embedded texts and everything that shapes the vectors (the
    shard size too: a batched encoder's last bits depend on which texts share a batch). A model
    folder counts by its ``cache_name`` (its backend) and content ``version``, not its path, so
    a copy of it, or its ONNX export in an index bundle, finds the same embeddings; the
    built-in encoders count by name and version, as they always have."""
    meta = key_settings(encoder, fields, pooling, window, shard_docs)
    return cache.fingerprint((f"{i}\x1f{t}" for i, t in zip(ids, texts)), meta)


def key_settings(encoder: Encoder, fields: Sequence[str], pooling: str, window: int | None,
                 shard_docs: int = SHARD_DOCS) -> dict:
    """Everything but the corpus that :func:`cache_key` fingerprints."""
    return {"encoder": getattr(encoder, "cache_name", None) or encoder.name,
            "encoder_version": getattr(encoder, "version", ""), "dim": encoder.dim,
            "passage_prefix": getattr(encoder, "passage_prefix", ""),
            "model_prefixes": list(getattr(encoder, "model_prefixes", ())), "fields": list(fields), "pooling": pooling,
            "window": window, "chunk_overlap": CHUNK_OVERLAP, "chunking": CHUNKING_VERSION,
            "shard_docs": int(shard_docs), "format": _CACHE_FORMAT}



def _read(folder: Path, ids: list[str], dim: int) -> np.ndarray:
    stored_ids = json.loads((folder / "ids.json").read_text())
    if stored_ids != ids:
        raise ValueError("article ids differ from the corpus")
    emb = np.load(folder / "embeddings.npy", allow_pickle=False)
    if emb.dtype != np.float32 or emb.shape != (len(ids), dim) or not np.isfinite(emb).all():
        raise ValueError(f"embeddings of shape {emb.shape} and type {emb.dtype} do not fit {len(ids)} articles × {dim}")
    return emb


