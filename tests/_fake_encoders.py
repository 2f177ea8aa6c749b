"""Fake text encoders for the dense tests: a hashed bag of words, the same vector for the same
text in every process (no model, no download)."""
from __future__ import annotations

import hashlib

import numpy as np


def bag_of_words(text: str, dim: int) -> np.ndarray:
    """``dim`` float32 counts: each lower-cased word adds 1 at its md5 hash modulo ``dim``."""
    v = np.zeros(dim, dtype=np.float32)
    for w in text.lower().split():
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1.0
    return v


class HashEncoder:
    """A deterministic bag-of-words encoder (16 dims) that counts the texts it encodes."""

    name = "hash16"
    version = "1"
    dim = 16
    normalized = False
    max_tokens = None

    def __init__(self):
        self.documents = 0

    def _vec(self, text: str) -> np.ndarray:
        v = bag_of_words(text, self.dim)
        v[0] += 0.5  # no all-zero vector
        return v

    def encode_documents(self, texts, batch_size=64, progress=None):
        self.documents += len(texts)
        return np.array([self._vec(t) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    def encode_queries(self, texts, batch_size=64, progress=None):
        return np.array([self._vec(t) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    def count_tokens(self, texts):
        return [len(t.split()) for t in texts]
