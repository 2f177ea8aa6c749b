"""Dense retrieval: articles and questions embedded by an :mod:`~.encoders` encoder, ranked by
cosine similarity with a FAISS flat inner-product index over unit vectors.

Conventions:
- the embedded text of an article is :func:`~bsard_demo.analyzer.article_text` of ``fields``
  (default :data:`~bsard_demo.analyzer.DEFAULT_FIELDS`: headers, then the article itself), the
  same text BM25 indexes; texts longer than the encoder's window follow ``pooling``
  (:func:`~.encoders.embed_documents`);
- a search returns exactly ``min(k, corpus size)`` hits (``k >= 1``), cosine descending, ties
  by article id descending as strings (exact even when ties straddle the cut: the ranking then
  falls back to scoring every article);
- scores do not depend on batching: a question's hits are the same, scores bit for bit, from
  :meth:`~DenseRetriever.search` and from :meth:`~DenseRetriever.search_many` over any list.
  Each distinct question is embedded on its own (batched encoders pad to the longest text of a
  batch, which moves the last bits), and each query vector is scored on its own against the
  FAISS index (FAISS switches to a batched BLAS product from 20 queries on, whose float32 sums
  differ in the last bits from its one-query kernel); near-ties thus never flip between the
  Search page and a run file. This costs speed (no batched encoding or BLAS product), not
  results;
- embeddings are computed once and kept in a :mod:`bsard_demo.cache` entry (``dense/<key>``:
  ``embeddings.npy`` saved without pickle, ``ids.json``) keyed by the article ids, the embedded
  texts and every setting (encoder name and version, passage prefix, fields, pooling, window,
  chunk overlap, chunking version); a reload never re-encodes the articles, and the flat index
  is rebuilt from the array (a memory copy).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import cache
from ..analyzer import DEFAULT_FIELDS, article_texts
from .base import Hit, Progress, clip_k, id_ranks, rank_all
from .encoders import (
    CHUNK_OVERLAP, CHUNKING_VERSION, DEFAULT_ENCODER, DEFAULT_POOLING, POOLINGS, Encoder, embed_documents, normalize_rows,
    resolve_encoder,
)

CACHE_KIND = "dense"
_CACHE_FORMAT = 1
#: Extra neighbours fetched beyond ``k`` so that ties at the cut can be seen and ordered.
_TIE_MARGIN = 16


class DenseRetriever:
    """Cosine search over article embeddings. Build with :meth:`build`; implements the Retriever
    protocol."""

    def __init__(self, article_ids: Sequence[str], embeddings: np.ndarray, encoder: Encoder, *,
                 fields: Sequence[str] = DEFAULT_FIELDS, pooling: str = DEFAULT_POOLING,
                 window: int | None = None, query_batch_size: int = 64):
        import faiss

        self.article_ids = [str(a) for a in article_ids]
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape != (len(self.article_ids), encoder.dim):
            raise ValueError(f"embeddings of shape {emb.shape} for {len(self.article_ids)} articles and a {encoder.dim}-dim encoder")
        norms = np.linalg.norm(emb, axis=1)
        # rows are expected unit-length (as embed_documents gives them); kept bit-for-bit if so
        self.embeddings = emb if np.allclose(norms[norms > 0], 1.0, atol=1e-4) else normalize_rows(emb)
        self.encoder = encoder
        self.fields = tuple(fields)
        self.window = window
        self.pooling = pooling
        self.query_batch_size = query_batch_size
        self.index = faiss.IndexFlatIP(encoder.dim)
        self.index.add(self.embeddings)
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
              notice: Callable[[str], None] | None = None) -> "DenseRetriever":
        """Embed ``articles`` (a DataFrame in the dataset schema) or load their embeddings from the
        cache. ``encoder``: a name for :func:`~.encoders.resolve_encoder` or an :class:`Encoder`.
        ``window`` (tokens) overrides the encoder's own (e.g. to chunk for USE, which has none).
        Raises :class:`~.encoders.EncoderUnavailable` (a ``ValueError``) when the encoder cannot
        be loaded, :class:`ValueError` on bad settings or an empty corpus."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
        fields = (fields,) if isinstance(fields, str) else tuple(fields)
        if not fields:
            raise ValueError("embed at least one article field")
        if articles is None or len(articles) == 0:
            raise ValueError("no articles to index")
        enc = resolve_encoder(encoder) if isinstance(encoder, str) else encoder
        window = enc.max_tokens if window is None else int(window)
        if window is not None and window < 2:
            raise ValueError(f"window must be at least 2 tokens, not {window}")
        effective = pooling if window is not None else "whole"  # no window: every text is embedded whole
        ids = [str(a) for a in articles["id"]]
        texts = article_texts(articles, fields)
        key = cache_key(ids, texts, enc, fields, effective, window)

        def make(embeddings: np.ndarray) -> "DenseRetriever":
            return cls(ids, embeddings, enc, fields=fields, pooling=effective, window=window, query_batch_size=batch_size)

        return cache.load_or_build(
            CACHE_KIND, key, read=lambda folder: make(_read(folder, ids, enc.dim)),
            build=lambda: make(embed_documents(enc, texts, pooling=pooling, window=window, batch_size=batch_size, progress=progress)),
            write=lambda retriever, folder: retriever._write(folder), what=f"embeddings ({enc.name})",
            use_cache=use_cache, root=cache_root, notice=notice, progress=progress)

    def _write(self, folder: Path) -> None:
        np.save(folder / "embeddings.npy", self.embeddings, allow_pickle=False)
        (folder / "ids.json").write_text(json.dumps(self.article_ids))

    # -- searching --------------------------------------------------------------------------
    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        k = clip_k(k, self.size)
        questions = [str(q) for q in questions]
        if not questions:
            return []
        # one question at a time, each distinct question once: see "scores do not depend on batching"
        vectors = {q: normalize_rows(self.encoder.encode_queries([q], batch_size=1)) for q in dict.fromkeys(questions)}
        return [self.search_vectors(vectors[q], k)[0] for q in questions]

    def search_vectors(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """Rank the articles for each row of ``queries`` (unit vectors of the encoder's size);
        each row is scored on its own, so its hits do not depend on the other rows."""
        k = min(int(k), self.size)
        depth = min(self.size, k + _TIE_MARGIN)
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        out = []
        for q in queries:
            scores, rows = self.index.search(q[None, :], depth)
            if depth < self.size and scores[0, -1] >= scores[0, k - 1]:
                # ties reach past what was fetched: score every article (the same one-query
                # kernel, so the same scores) and order them all exactly
                scores, rows = self.index.search(q[None, :], self.size)
            out.append(rank_all(scores[0], self.article_ids, self._id_rank, k, rows=rows[0]))
        return out


def label(encoder_name: str, pooling: str, fields: Sequence[str]) -> str:
    """e.g. ``"dense use"``, ``"dense minilm max"``; non-default fields are appended."""
    parts = [f"dense {encoder_name}"]
    if pooling != "whole":
        parts.append(pooling)
    if tuple(fields) != DEFAULT_FIELDS:
        parts.append("fields=" + "+".join(fields))
    return " ".join(parts)


def cache_key(ids: Sequence[str], texts: Sequence[str], encoder: Encoder, fields: Sequence[str],
              pooling: str, window: int | None) -> str:
    """Fingerprint of the ids, the embedded texts and everything that shapes the vectors."""
    meta = {"encoder": encoder.name, "encoder_version": getattr(encoder, "version", ""), "dim": encoder.dim,
            "passage_prefix": getattr(encoder, "passage_prefix", ""), "fields": list(fields), "pooling": pooling,
            "window": window, "chunk_overlap": CHUNK_OVERLAP, "chunking": CHUNKING_VERSION, "format": _CACHE_FORMAT}
    return cache.fingerprint((f"{i}\x1f{t}" for i, t in zip(ids, texts)), meta)


def _read(folder: Path, ids: list[str], dim: int) -> np.ndarray:
    stored_ids = json.loads((folder / "ids.json").read_text())
    if stored_ids != ids:
        raise ValueError("article ids differ from the corpus")
    emb = np.load(folder / "embeddings.npy", allow_pickle=False)
    if emb.dtype != np.float32 or emb.shape != (len(ids), dim) or not np.isfinite(emb).all():
        raise ValueError(f"embeddings of shape {emb.shape} and type {emb.dtype} do not fit {len(ids)} articles × {dim}")
    return emb


