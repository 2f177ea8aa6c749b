"""Each retriever answers "is this index stored?" itself (issue 15 item 3), with the key its own
build uses: checked against a real build, a bundle and other settings or corpora."""
from __future__ import annotations

import hashlib

import numpy as np

from bsard_demo import cache
from bsard_demo.progress import Step
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.retrievers.dense import DenseRetriever
from bsard_demo.retrievers.encoder_base import normalize_rows
from bsard_demo.sources import load_sample


class TinyEncoder:
    name, dim, normalized, version, max_tokens = "tiny", 4, True, "tiny-1", None

    def _vec(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(4)

    def encode_documents(self, texts, batch_size=64, progress=None):
        return normalize_rows(np.array([self._vec(t) for t in texts], dtype=np.float32).reshape(len(texts), 4))

    encode_queries = encode_documents

    def count_tokens(self, texts):
        return [len(str(t).split()) for t in texts]


def test_bm25_is_stored_after_a_build_and_only_for_its_settings_and_corpus(tmp_path):
    articles = load_sample().articles.head(30)
    assert not BM25Retriever.is_stored(articles, cache_root=tmp_path)
    steps: list = []
    BM25Retriever.build(articles, cache_root=tmp_path, progress=lambda d, t, m: steps.append(m))
    assert BM25Retriever.is_stored(articles, cache_root=tmp_path)
    assert not BM25Retriever.is_stored(articles, cache_root=tmp_path, k1=1.5)
    assert not BM25Retriever.is_stored(articles.head(29), cache_root=tmp_path)
    assert not BM25Retriever.is_stored(articles, cache_root=tmp_path, engine="rank_bm25")  # never stored
    assert not BM25Retriever.is_stored(articles, cache_root=tmp_path, no_such_setting=1)
    assert not BM25Retriever.is_stored(articles.head(0), cache_root=tmp_path)
    # its build reported steps as codes: the same build is now a load
    assert [s.kind for s in steps if isinstance(s, Step)][-1] == "saving"
    steps.clear()
    BM25Retriever.build(articles, cache_root=tmp_path, progress=lambda d, t, m: steps.append(m))
    assert [(s.kind, s.params["entry"]) for s in steps] == [("loaded_cached", "bm25s")]


def test_dense_is_stored_after_a_build_and_in_a_bundle(tmp_path):
    articles = load_sample().articles.head(12)
    enc = TinyEncoder()
    assert not DenseRetriever.is_stored(articles, enc, cache_root=tmp_path)
    DenseRetriever.build(articles, encoder=enc, cache_root=tmp_path)
    assert DenseRetriever.is_stored(articles, enc, cache_root=tmp_path)
    assert not DenseRetriever.is_stored(articles, enc, cache_root=tmp_path, fields=("article",))
    assert not DenseRetriever.is_stored(articles, enc, cache_root=tmp_path, window=1)  # refused by build: not stored
    assert not DenseRetriever.is_stored(articles.head(11), enc, cache_root=tmp_path)
    assert not DenseRetriever.is_stored(articles, "no/such-model-here", cache_root=tmp_path)

    class Bundle:  # an active bundle that holds every entry
        label = "b"

        def lookup(self, kind, key, **kw):
            return tmp_path, None

    empty = tmp_path / "empty"
    try:
        cache.set_bundles((Bundle(),))
        assert DenseRetriever.is_stored(articles.head(11), enc, cache_root=empty)
    finally:
        cache.set_bundles(())
    assert not DenseRetriever.is_stored(articles.head(11), enc, cache_root=empty)
