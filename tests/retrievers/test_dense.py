"""DenseRetriever: ranking and ties, normalisation, chunking in the index, the embedding cache,
and one real offline encoder (USE) on a few French articles."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _fake_encoders import bag_of_words
from bsard_demo.analyzer import DEFAULT_FIELDS, article_texts
from bsard_demo.dataset import normalize_articles
from bsard_demo.retrievers import dense as dense_module
from bsard_demo.retrievers.base import Retriever
from bsard_demo.retrievers.dense import DenseRetriever, cache_key
from bsard_demo.sources import load_dataset


class CountingEncoder:
    """Hashed bag of words (not normalised); one token per word + 2; counts encoded texts."""

    dim = 4096
    normalized = False
    version = "1"

    def __init__(self, name: str = "fake", max_tokens: int | None = None):
        self.name = name
        self.max_tokens = max_tokens
        self.documents = 0
        self.queries = 0

    def vec(self, text: str) -> np.ndarray:
        return bag_of_words(text, self.dim)

    def encode_documents(self, texts, batch_size=64, progress=None):
        self.documents += len(texts)
        return np.array([self.vec(t) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    def encode_queries(self, texts, batch_size=64, progress=None):
        self.queries += len(texts)
        return np.array([self.vec(t) for t in texts], dtype=np.float32).reshape(len(texts), self.dim)

    def count_tokens(self, texts):
        return [len(t.split()) + 2 for t in texts]


class TableEncoder(CountingEncoder):
    """Looks vectors up in a table (text -> vector): scores are known exactly."""

    def __init__(self, table: dict[str, list[float]]):
        super().__init__("table")
        self.table = table
        self.dim = len(next(iter(table.values())))

    def vec(self, text):
        return np.asarray(self.table[text], dtype=np.float32)


def articles(texts: list[str], ids: list[str] | None = None) -> pd.DataFrame:
    ids = ids or [str(i + 1) for i in range(len(texts))]
    return normalize_articles(pd.DataFrame({"id": ids, "article": texts}))


CORPUS = [
    "garantie locative bail loyer",
    "divorce tribunal famille enfants",
    "contrat travail préavis licenciement",
    "bail loyer indexation",
    "pension alimentaire enfants",
]


@pytest.fixture
def cache_dir(tmp_path) -> Path:
    return tmp_path / "cache"


def test_is_a_retriever_and_ranks_by_cosine(cache_dir):
    enc = CountingEncoder()
    r = DenseRetriever.build(articles(CORPUS), encoder=enc, cache_root=cache_dir)
    assert isinstance(r, Retriever) and r.name == "dense fake"
    question = "loyer du bail"
    hits = r.search(question, k=5)
    # independent brute force: cosine of the fake vectors of the embedded texts
    texts = article_texts(articles(CORPUS), DEFAULT_FIELDS)
    q = enc.vec(question)
    cos = [float(enc.vec(t) @ q / (np.linalg.norm(enc.vec(t)) * np.linalg.norm(q))) for t in texts]
    expected = sorted(zip([str(i + 1) for i in range(5)], cos), key=lambda x: x[0], reverse=True)
    expected.sort(key=lambda x: x[1], reverse=True)
    assert [h.article_id for h in hits] == [d for d, _ in expected]
    np.testing.assert_allclose([h.score for h in hits], [c for _, c in expected], rtol=1e-5, atol=1e-6)
    assert r.search_many([question, "divorce"], k=2) == [hits[:2], r.search("divorce", k=2)]


def test_k_bounds(cache_dir):
    r = DenseRetriever.build(articles(CORPUS), encoder=CountingEncoder(), cache_root=cache_dir)
    assert len(r.search("bail", k=100)) == len(CORPUS)
    assert r.search_many([], k=3) == []
    with pytest.raises(ValueError):
        r.search("bail", k=0)


def test_ties_by_article_id_descending_as_strings(cache_dir):
    table = {"a": [1.0, 0.0], "b": [0.0, 1.0], "q": [1.0, 0.0]}
    enc = TableEncoder(table)
    r = DenseRetriever.build(articles(["a", "a", "a", "b"], ids=["10", "9", "100", "2"]), encoder=enc,
                             fields=("article",), cache_root=cache_dir)
    hits = r.search("q", k=4)
    assert [h.article_id for h in hits] == ["9", "100", "10", "2"]
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0, 1.0, 0.0])


def test_ties_straddling_the_cut_are_exact(cache_dir):
    # 60 identical articles: more tied neighbours than the search fetches beyond k
    ids = [str(i) for i in range(60)]
    enc = TableEncoder({"x": [1.0, 1.0], "q": [1.0, 0.0]})
    r = DenseRetriever.build(articles(["x"] * 60, ids=ids), encoder=enc, fields=("article",), cache_root=cache_dir)
    for k in (1, 5, 59, 60):
        assert [h.article_id for h in r.search("q", k=k)] == sorted(ids, reverse=True)[:k]
    # the arrays are the hits: corpus rows (the articles are in id order) and float32 scores
    rows, scores = r.search_rows(["q"], 5)[0]
    assert rows.tolist() == [int(d) for d in sorted(ids, reverse=True)[:5]] and scores.dtype == np.float32
    assert scores.tolist() == [h.score for h in r.search("q", k=5)]


def test_embeddings_are_unit_vectors(cache_dir):
    enc = CountingEncoder()
    r = DenseRetriever.build(articles(CORPUS), encoder=enc, cache_root=cache_dir)
    np.testing.assert_allclose(np.linalg.norm(r.embeddings, axis=1), 1.0, rtol=1e-6)
    hits = r.search("bail bail bail loyer loyer", k=5)
    assert all(-1.0 - 1e-6 <= h.score <= 1.0 + 1e-6 for h in hits)


def test_embeddings_are_the_index_rows_held_once_and_outlive_the_retriever():
    """The retriever's embeddings are the FAISS index's own rows (not a second copy), read-only, and the
    array keeps the index's memory alive after the retriever is gone."""
    import gc

    rng = np.random.default_rng(0)
    emb = rng.standard_normal((50, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    r = DenseRetriever([str(i) for i in range(50)], emb, TableEncoder({"q": [1.0] * 8}))
    rows = r.embeddings
    assert not rows.flags.owndata and not rows.flags.writeable and not np.shares_memory(rows, emb)
    np.testing.assert_array_equal(rows, emb)
    del r
    gc.collect()
    churn = [np.full((50, 8), 7.0, dtype=np.float32) for _ in range(200)]  # would reuse freed memory
    np.testing.assert_array_equal(rows, emb)
    assert len(churn) == 200


def test_long_articles_are_chunked_with_max_pooling(cache_dir):
    filler = " ".join(f"mot{i}" for i in range(20))
    corpus = [filler + " garantie locative restituée", "caution bancaire", "divorce tribunal"]
    enc = CountingEncoder(max_tokens=10)  # 8 words per window
    pooled = DenseRetriever.build(articles(corpus), encoder=enc, fields=("article",), pooling="max",
                                  cache_root=cache_dir)
    truncated = DenseRetriever.build(articles(corpus), encoder=enc, fields=("article",), pooling="truncate",
                                     cache_root=cache_dir)
    assert pooled.name == "dense fake max fields=article" and truncated.name == "dense fake truncate fields=article"
    question = "garantie locative restituée"
    assert pooled.search(question, k=1)[0].article_id == "1"
    # truncation only sees the first filler words of article 1
    scores = {h.article_id: h.score for h in truncated.search(question, k=3)}
    assert truncated.search(question, k=1)[0].article_id != "1"
    assert scores["1"] < pooled.search(question, k=1)[0].score


def test_second_build_loads_from_cache_without_encoding(cache_dir):
    first_enc = CountingEncoder()
    first = DenseRetriever.build(articles(CORPUS), encoder=first_enc, cache_root=cache_dir)
    assert first_enc.documents == len(CORPUS)
    enc = CountingEncoder()
    seen = []
    second = DenseRetriever.build(articles(CORPUS), encoder=enc, cache_root=cache_dir,
                                  progress=lambda d, t, m: seen.append((d, t, m)))
    assert enc.documents == 0
    assert seen and seen[-1][0] == seen[-1][1] and "cached" in seen[-1][2]
    np.testing.assert_array_equal(second.embeddings, first.embeddings)
    assert second.search("bail", k=5) == first.search("bail", k=5)
    assert [p.name for p in (cache_dir / "dense").iterdir() if not p.name.startswith(".")] and \
        list((cache_dir / "dense").glob("*/embeddings.npy"))


@pytest.mark.parametrize("change", [
    {"encoder": "other"}, {"pooling": "max"}, {"pooling": "truncate"}, {"fields": ("article",)},
    {"texts": CORPUS[:-1] + ["autre texte"]},
])
def test_changed_settings_use_a_new_entry(cache_dir, change):
    DenseRetriever.build(articles(CORPUS), encoder=CountingEncoder(max_tokens=4), cache_root=cache_dir)
    enc = CountingEncoder(change.get("encoder", "fake"), max_tokens=4)
    kwargs = {k: v for k, v in change.items() if k in ("pooling", "fields")}
    DenseRetriever.build(articles(change.get("texts", CORPUS)), encoder=enc, cache_root=cache_dir, **kwargs)
    assert enc.documents > 0
    assert len(list((cache_dir / "dense").glob("*/embeddings.npy"))) == 2


def test_chunking_and_prefix_change_the_cache_key(monkeypatch):
    enc = CountingEncoder(max_tokens=4)
    texts = article_texts(articles(CORPUS), DEFAULT_FIELDS)
    ids = [str(i + 1) for i in range(len(CORPUS))]

    def key() -> str:
        return cache_key(ids, texts, enc, DEFAULT_FIELDS, "mean", 4)

    base = key()
    assert key() == base
    enc.passage_prefix = "passage: "
    assert key() != base
    enc.passage_prefix = ""  # no prefix attribute and an empty prefix are the same
    assert key() == base
    for name, value in (("CHUNK_OVERLAP", 0.5), ("CHUNKING_VERSION", dense_module.CHUNKING_VERSION + 1)):
        with monkeypatch.context() as mp:
            mp.setattr(dense_module, name, value)
            assert key() != base, name
    assert key() == base


def test_corrupt_cache_is_rebuilt_with_a_notice(cache_dir):
    first = DenseRetriever.build(articles(CORPUS), encoder=CountingEncoder(), cache_root=cache_dir)
    (stored,) = list((cache_dir / "dense").glob("*/embeddings.npy"))
    data = bytearray(stored.read_bytes())
    data[-4:] = b"\x00\x00\xc0\x7f"  # last float becomes NaN; checksum no longer matches
    stored.write_bytes(bytes(data))
    notices = []
    enc = CountingEncoder()
    again = DenseRetriever.build(articles(CORPUS), encoder=enc, cache_root=cache_dir, notice=notices.append)
    assert enc.documents == len(CORPUS)
    assert len(notices) == 1 and "damaged" in notices[0]
    np.testing.assert_array_equal(again.embeddings, first.embeddings)
    third = CountingEncoder()
    DenseRetriever.build(articles(CORPUS), encoder=third, cache_root=cache_dir, notice=notices.append)
    assert third.documents == 0 and len(notices) == 1


def test_bad_settings_are_refused(cache_dir):
    with pytest.raises(ValueError, match="pooling"):
        DenseRetriever.build(articles(CORPUS), encoder=CountingEncoder(), pooling="median", cache_root=cache_dir)
    with pytest.raises(ValueError, match="no articles"):
        DenseRetriever.build(articles(CORPUS).iloc[:0], encoder=CountingEncoder(), cache_root=cache_dir)


# -- a real offline encoder ------------------------------------------------------------------

FRENCH_ARTICLES = [
    "Si le preneur donne une garantie locative, elle ne peut excéder un montant équivalent à deux mois de loyer.",
    "Le divorce est prononcé pour désunion irrémédiable des époux par le tribunal de la famille.",
    "Le bail de résidence principale est conclu pour une durée de neuf ans.",
    "Le loyer peut être indexé une fois par année de location, à la date anniversaire du bail.",
    "Le contrat de travail à durée indéterminée peut être résilié moyennant un préavis.",
    "Les père et mère sont tenus d'assumer l'hébergement, l'entretien et l'éducation de leurs enfants.",
    "Le testament olographe doit être écrit en entier, daté et signé de la main du testateur.",
    "Toute personne a droit au respect de sa vie privée et familiale.",
    "Le conducteur doit céder le passage aux piétons qui traversent la chaussée.",
    "La pension alimentaire après divorce ne peut excéder le tiers des revenus du débiteur.",
    "L'employeur paie la rémunération au travailleur au moins deux fois par mois.",
    "Le propriétaire est tenu de délivrer le bien loué en bon état de réparations de toute espèce.",
    "Les étrangers peuvent demander un titre de séjour pour regroupement familial.",
    "Le mariage ne peut être contracté avant l'âge de dix-huit ans.",
    "La vente est parfaite dès qu'on est convenu de la chose et du prix.",
    "Le juge de paix connaît des litiges relatifs aux baux d'habitation.",
    "L'adoption plénière confère à l'adopté un statut comparable à celui d'un enfant né des adoptants.",
    "Le délai de prescription des actions personnelles est de dix ans.",
    "Toute contestation relative au chômage relève du tribunal du travail.",
    "La copropriété forcée des immeubles bâtis est régie par les dispositions suivantes.",
]


def test_use_finds_the_rental_deposit_article(cache_dir):
    r = DenseRetriever.build(articles(FRENCH_ARTICLES), encoder="use", fields=("article",), cache_root=cache_dir)
    assert r.name == "dense use fields=article" and r.embeddings.shape == (20, 512)
    ranking = [h.article_id for h in r.search("Mon propriétaire garde ma garantie locative", k=20)]
    assert ranking.index("1") < ranking.index("2")  # garantie locative before divorce
    assert ranking.index("1") < 3


# -- scores do not depend on batching ----------------------------------------------------------

def _all_questions(dataset) -> list[str]:
    return [q for split in dataset.split_names for q in dataset.questions(split)["question"]]


def test_search_equals_search_many_exactly_on_the_sample(cache_dir):
    dataset = load_dataset("sample")
    questions = _all_questions(dataset)
    assert len(questions) > 20  # more than FAISS's threshold for its batched BLAS product
    r = DenseRetriever.build(dataset.articles, encoder=CountingEncoder(), cache_root=cache_dir)
    together = r.search_many(questions, k=50)
    for question, hits in zip(questions, together):
        assert r.search(question, k=50) == hits  # ids and float scores, bit for bit
    # the order inside the batch does not matter either, nor repeats
    assert r.search_many(questions[::-1] + questions[:3], k=50) == together[::-1] + together[:3]


def test_search_equals_search_many_exactly_with_use(cache_dir):
    questions = [
        "Mon propriétaire garde ma garantie locative",
        "Combien de temps dure un bail de résidence principale ?",
        "Peut-on divorcer pour désunion irrémédiable ?",
        "Quel préavis pour licencier un travailleur ?",
        "À quel âge peut-on se marier ?",
    ]
    r = DenseRetriever.build(articles(FRENCH_ARTICLES), encoder="use", fields=("article",), cache_root=cache_dir)
    together = r.search_many(questions, k=20)
    assert [r.search(q, k=20) for q in questions] == together
