"""Long texts for a dense encoder: a text longer than the encoder's window is cut into overlapping word spans
(:func:`token_windows`, 25 % overlap), each embedded, then pooled into one unit vector (:func:`embed_documents`,
:func:`pool_chunks`; default ``"mean"``: docs/effectiveness.md, "Long texts: windows and pooling").
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .base import Progress
from .encoder_base import Encoder, normalize_rows

#: ``"truncate"`` embeds the first window of a long text; ``"max"``/``"mean"`` pool all windows.
POOLINGS = ("truncate", "max", "mean")
DEFAULT_POOLING = "mean"
#: Fraction of a window repeated at the start of the next one when chunking.
CHUNK_OVERLAP = 0.25
#: Bump when the chunking or pooling of long texts changes (:func:`token_windows`,
#: :func:`embed_documents`, :func:`pool_chunks`): cached embeddings are keyed on it.
CHUNKING_VERSION = 1


def token_windows(word_tokens: Sequence[int], budget: int, overlap: float = CHUNK_OVERLAP) -> list[tuple[int, int]]:
    """Word spans ``(start, end)`` covering all words, each as long as fits in ``budget`` tokens
    (``word_tokens[i]`` = tokens of word ``i``; a word alone larger than the budget is its own
    span). The next span starts ``floor(len * (1 - overlap))`` words later (at least 1), so
    consecutive spans share about ``overlap`` of their words."""
    n = len(word_tokens)
    if n == 0:
        return [(0, 0)]
    cum = np.concatenate([[0], np.cumsum(np.asarray(word_tokens, dtype=np.int64))])
    spans = []
    start = 0
    while True:
        end = int(np.searchsorted(cum, cum[start] + max(int(budget), 1), side="right")) - 1
        end = min(max(end, start + 1), n)
        spans.append((start, end))
        if end >= n:
            return spans
        start += max(1, int((end - start) * (1 - overlap)))


def embed_documents(encoder: Encoder, texts: Sequence[str], *, pooling: str = DEFAULT_POOLING,
                    window: int | None = None, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
    """One unit vector per text, handling texts longer than the window.

    ``window`` (tokens, prefix and special tokens included) defaults to ``encoder.max_tokens``;
    without a window every text is embedded whole. A text that fits is embedded as it is; a
    longer one is cut into word spans of at most ``window`` tokens (:func:`token_windows`, 25 %
    overlap), and ``pooling`` decides: ``"truncate"`` keeps the first span only, ``"max"`` /
    ``"mean"`` embed every span and pool element-wise, then re-normalise.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
    texts = [str(t) for t in texts]
    window = encoder.max_tokens if window is None else int(window)
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    if window is None:
        return normalize_rows(encoder.encode_documents(texts, batch_size=batch_size, progress=progress))
    counts = encoder.count_tokens(texts)
    overhead = max(encoder.count_tokens(["a"])[0] - 1, 0)
    chunks: list[str] = []
    owner: list[int] = []
    for i, (text, n) in enumerate(zip(texts, counts)):
        words = text.split()
        if n <= window or len(words) <= 1:
            parts = [text]
        else:
            word_tokens = [max(c - overhead, 0) for c in encoder.count_tokens(words)]
            spans = token_windows(word_tokens, window - overhead)
            parts = [" ".join(words[s:e]) for s, e in spans[:1 if pooling == "truncate" else None]]
        chunks.extend(parts)
        owner.extend([i] * len(parts))
    vectors = normalize_rows(encoder.encode_documents(chunks, batch_size=batch_size, progress=progress))
    return pool_chunks(vectors, np.asarray(owner, dtype=np.int64), len(texts), pooling)


def pool_chunks(vectors: np.ndarray, owner: np.ndarray, n: int, pooling: str) -> np.ndarray:
    """Pool chunk ``vectors`` into ``n`` unit rows; ``owner[j]`` is the row chunk ``j`` belongs
    to (non-decreasing, every row owning at least one chunk). ``"truncate"`` keeps the first."""
    starts = np.searchsorted(owner, np.arange(n), side="left")
    if pooling == "truncate":
        pooled = vectors[starts]
    elif pooling == "max":
        pooled = np.maximum.reduceat(vectors, starts, axis=0)
    elif pooling == "mean":
        pooled = np.add.reduceat(vectors, starts, axis=0) / np.bincount(owner, minlength=n)[:, None]
    else:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
    return normalize_rows(pooled)
