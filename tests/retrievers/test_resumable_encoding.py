"""Resumable dense builds: shards checkpointed in the cache, an interrupted build continues where
it stopped and ends with the same bytes as an uninterrupted one; progress counts articles."""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from bsard_demo import cache
from bsard_demo.retrievers import dense as D, dense_shards as S
from bsard_demo.retrievers.encoders import normalize_rows


class Interrupted(Exception):
    pass


class FakeEncoder:
    """Deterministic vectors from each text's sha256, nudged by the size of the batch it came in
    (as padding does in real batched encoders), so shard boundaries show in the last bits.
    ``fail_after`` calls of encode_documents, it raises."""

    name = "fake"
    dim = 8
    normalized = True
    version = "fake-1"

    def __init__(self, max_tokens=None, fail_after=None):
        self.max_tokens = max_tokens
        self.fail_after = fail_after
        self.encoded: list[str] = []
        self.calls = 0

    def _vec(self, text: str, batch: int) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim) + 1e-4 * batch

    def encode_documents(self, texts, batch_size=64, progress=None):
        texts = list(texts)
        out = []
        for start in range(0, len(texts), batch_size):
            if self.fail_after is not None and self.calls >= self.fail_after:
                raise Interrupted("encoder stopped")
            self.calls += 1
            batch = texts[start:start + batch_size]
            self.encoded.extend(batch)
            out.extend(self._vec(t, len(batch)) for t in batch)
            if progress:
                progress(min(start + batch_size, len(texts)), len(texts), "fake batch")
        return normalize_rows(np.array(out, dtype=np.float32).reshape(len(texts), self.dim))

    def encode_queries(self, texts, batch_size=64, progress=None):
        return normalize_rows(np.array([self._vec(t, 1) for t in texts], dtype=np.float32))

    def count_tokens(self, texts):
        return [len(str(t).split()) + 2 for t in texts]


def corpus(n: int = 18) -> pd.DataFrame:
    return pd.DataFrame({"id": [str(100 + i) for i in range(n)],
                         "article": [" ".join(f"mot{i}_{j}" for j in range(3 + i % 7)) for i in range(n)]})


def build(root, enc, progress=None, notice=None, use_cache=True, shard_docs=4, **kw):
    return D.DenseRetriever.build(corpus(), encoder=enc, fields=("article",), cache_root=root, use_cache=use_cache,
                                  progress=progress, notice=notice, shard_docs=shard_docs, batch_size=3, **kw)


def partial_dir(root):
    folders = list((root / D.PARTIAL_KIND).glob("*")) if (root / D.PARTIAL_KIND).is_dir() else []
    return folders[0] if folders else None


def stop_after(articles: int):
    seen = []

    def progress(done, total, message):
        seen.append((done, total, message))
        if message.startswith("embedding articles") and done > articles:  # past `articles`
            raise Interrupted(f"stopped at {done}")
    return progress, seen


def test_interrupted_build_resumes_and_ends_bit_identical(tmp_path):
    reference = build(tmp_path / "ref", FakeEncoder()).embeddings
    assert np.array_equal(build(None, FakeEncoder(), use_cache=False).embeddings, reference)

    root = tmp_path / "cache"
    progress, _ = stop_after(8)  # after 2 shards of 4
    with pytest.raises(Interrupted):
        build(root, FakeEncoder(), progress=progress)
    shards = sorted(p.name for p in partial_dir(root).iterdir())
    assert [s[:12] for s in shards] == ["shard-000000", "shard-000001"]
    assert not (root / D.CACHE_KIND).is_dir() or not any((root / D.CACHE_KIND).iterdir())

    enc = FakeEncoder()
    seen, notes = [], []
    resumed = build(root, enc, progress=lambda d, t, m: seen.append((d, t, m)), notice=notes.append)
    assert resumed.embeddings.tobytes() == reference.tobytes()
    assert enc.encoded == list(corpus()["article"])[8:]  # only the missing shards were embedded
    articles = [(d, t) for d, t, m in seen if m == "embedding articles (fake)"]
    assert articles[0] == (8, 18) and articles[-1] == (18, 18)
    assert all(a[0] <= b[0] for a, b in zip(articles, articles[1:]))
    assert any("8 of 18 articles already in the cache" in n for n in notes)
    assert partial_dir(root) is None  # stored whole: shards removed
    assert np.array_equal(build(root, FakeEncoder(fail_after=0)).embeddings, reference)  # from the cache


def test_an_encoder_failure_keeps_the_finished_shards(tmp_path):
    reference = build(tmp_path / "ref", FakeEncoder()).embeddings
    root = tmp_path / "cache"
    with pytest.raises(Interrupted):
        build(root, FakeEncoder(fail_after=5))  # 2 calls per shard of 4 (batches of 3): dies in shard 2
    assert len(list(partial_dir(root).glob("shard-*.npy"))) == 2
    enc = FakeEncoder()
    assert build(root, enc).embeddings.tobytes() == reference.tobytes()
    assert len(enc.encoded) == 10


def test_shard_boundaries_matter_so_every_build_uses_them(tmp_path):
    # guards the test above: with another shard size the batches, hence the bits, differ
    assert not np.array_equal(build(None, FakeEncoder(), use_cache=False, shard_docs=5).embeddings,
                              build(None, FakeEncoder(), use_cache=False, shard_docs=4).embeddings)
    enc = FakeEncoder()
    assert D.cache_key(["1"], ["a"], enc, ("article",), "whole", None, 4) != \
        D.cache_key(["1"], ["a"], enc, ("article",), "whole", None, 5)


@pytest.mark.parametrize("damage", ["flip", "truncate", "rename", "empty"])
def test_damaged_shards_are_embedded_again(tmp_path, damage):
    reference = build(tmp_path / "ref", FakeEncoder()).embeddings
    root = tmp_path / "cache"
    progress, _ = stop_after(12)
    with pytest.raises(Interrupted):
        build(root, FakeEncoder(), progress=progress)
    folder = partial_dir(root)
    shard = sorted(folder.glob("shard-000001-*.npy"))[0]
    data = shard.read_bytes()
    if damage == "flip":
        shard.write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])
    elif damage == "truncate":
        shard.write_bytes(data[:len(data) // 2])
    elif damage == "rename":
        shard.rename(folder / "shard-000001-0000000000000000.npy")
    else:
        shard.write_bytes(b"")
    (folder / ".shard-000002.deadbeef.tmp").write_bytes(data[:10])  # a write cut short
    enc = FakeEncoder()
    assert build(root, enc).embeddings.tobytes() == reference.tobytes()
    texts = list(corpus()["article"])
    assert enc.encoded == texts[4:8] + texts[12:]  # shard 1 again and the two never done


def test_a_shard_of_the_wrong_shape_is_not_used(tmp_path):
    root = tmp_path / "cache"
    progress, _ = stop_after(4)
    with pytest.raises(Interrupted):
        build(root, FakeEncoder(), progress=progress)
    folder = partial_dir(root)
    S._write_shard(folder, 1, np.zeros((3, 8), np.float32))  # checksummed but 3 rows, not 4
    enc = FakeEncoder()
    build(root, enc)
    assert enc.encoded == list(corpus()["article"])[4:]


def test_resume_works_with_chunked_long_texts(tmp_path):
    reference = build(tmp_path / "ref", FakeEncoder(max_tokens=5), pooling="mean").embeddings
    root = tmp_path / "cache"
    progress, _ = stop_after(8)
    with pytest.raises(Interrupted):
        build(root, FakeEncoder(max_tokens=5), progress=progress, pooling="mean")
    assert build(root, FakeEncoder(max_tokens=5), pooling="mean").embeddings.tobytes() == reference.tobytes()


def test_progress_counts_articles_under_one_message(tmp_path):
    seen = []
    build(tmp_path, FakeEncoder(), progress=lambda d, t, m: seen.append((d, t, m)))
    articles = [(d, t) for d, t, m in seen if m.startswith("embedding")]
    assert {m for d, t, m in seen if m.startswith("embedding")} == {"embedding articles (fake)"}
    assert articles[0] == (0, 18) and articles[-1] == (18, 18) and all(t == 18 for _, t in articles)
    assert [d for d, _ in articles] == sorted(d for d, _ in articles) and len(articles) > 5


def test_an_unwritable_partial_folder_only_costs_the_checkpoints(tmp_path):
    (tmp_path / D.PARTIAL_KIND).write_text("in the way")  # a file where the folder should be
    notes = []
    r = build(tmp_path, FakeEncoder(), notice=notes.append)
    assert np.array_equal(r.embeddings, build(None, FakeEncoder(), use_cache=False).embeddings)
    assert sum("cannot checkpoint" in n for n in notes) == 1


def test_use_encoder_resumes_bit_identical(tmp_path):
    from bsard_demo.sources import load_dataset

    articles = load_dataset("sample").articles.iloc[:14]
    kw = dict(encoder="use", shard_docs=4)
    reference = D.DenseRetriever.build(articles, cache_root=tmp_path / "ref", **kw).embeddings
    progress, _ = stop_after(8)
    with pytest.raises(Interrupted):
        D.DenseRetriever.build(articles, cache_root=tmp_path / "c", progress=progress, **kw)
    assert D.DenseRetriever.build(articles, cache_root=tmp_path / "c", **kw).embeddings.tobytes() == reference.tobytes()
    assert partial_dir(tmp_path / "c") is None and \
        any(cache.entry_path(D.CACHE_KIND, "x", tmp_path / "c").parent.iterdir())
