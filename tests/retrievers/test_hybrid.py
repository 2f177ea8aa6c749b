"""Fusion arithmetic (checked by hand), the hybrid retriever, and the retriever registry."""
from __future__ import annotations

import pandas as pd
import pytest

from bsard_demo.dataset import DataError, Dataset
from bsard_demo.retrievers import Hit, Retriever, RetrieverSpec, build_retriever, kinds
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.retrievers.hybrid import HybridRetriever, reciprocal_rank_fusion, weighted_fusion


def H(*pairs) -> list[Hit]:
    return [Hit(d, s) for d, s in pairs]


def ids(hits):
    return [h.article_id for h in hits]


A = H(("a", 10.0), ("b", 6.0), ("c", 2.0))
B = H(("c", 0.9), ("d", 0.5), ("a", 0.1))


def test_rrf_by_hand():
    fused = reciprocal_rank_fusion([A, B], k=60)
    # a: 1/61 + 1/63, c: 1/63 + 1/61 (tie, broken by id desc: c before a), b: 1/62, d: 1/62 (d before b)
    assert ids(fused) == ["c", "a", "d", "b"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 63)
    assert fused[1].score == fused[0].score
    assert fused[2].score == fused[3].score == pytest.approx(1 / 62)
    C = H(("b", 1), ("e", 1))
    fused = reciprocal_rank_fusion([A, B, C], k=0)
    # k=0: a 1/1 + 1/3 = 1.333, c 1/3 + 1/1 = 1.333, b 1/2 + 1/1 = 1.5, d 1/2, e 1/2
    assert ids(fused) == ["b", "c", "a", "e", "d"]
    assert [h.score for h in fused] == pytest.approx([1.5, 4 / 3, 4 / 3, 0.5, 0.5])


def test_rrf_weights_limit_and_repeats():
    fused = reciprocal_rank_fusion([A, B], k=1, weights=[2, 1], limit=2)
    # a: 2/2 + 1/4 = 1.25, b: 2/3, c: 2/4 + 1/2 = 1.0, d: 1/3
    assert ids(fused) == ["a", "c"] and [h.score for h in fused] == pytest.approx([1.25, 1.0])
    repeated = H(("x", 3), ("x", 2), ("y", 1))
    assert [h.score for h in reciprocal_rank_fusion([repeated], k=0)] == pytest.approx([1.0, 1 / 3])
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([A, B], k=-1)
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([A, B], weights=[1])


def test_rrf_sums_are_order_independent():
    # three rankings holding the same ranks in different orders must tie exactly
    r1, r2, r3 = H(("p", 0), ("q", 0), ("r", 0)), H(("q", 0), ("r", 0), ("p", 0)), H(("r", 0), ("p", 0), ("q", 0))
    fused = reciprocal_rank_fusion([r1, r2, r3], k=60)
    assert len({h.score for h in fused}) == 1
    assert ids(fused) == ["r", "q", "p"]


def test_weighted_fusion_minmax_by_hand():
    # A normalised: a 1, b .5, c 0; B normalised: c 1, d 0.5, a 0
    fused = weighted_fusion([A, B], alpha=0.7)
    assert ids(fused) == ["a", "b", "c", "d"]
    assert [h.score for h in fused] == pytest.approx([0.7, 0.35, 0.3, 0.15])
    fused = weighted_fusion([A, B], weights=[1, 3])
    # a 1 + 0 = 1, b .5, c 0 + 3 = 3, d 1.5
    assert ids(fused) == ["c", "d", "a", "b"] and [h.score for h in fused] == pytest.approx([3, 1.5, 1, 0.5])


def test_weighted_fusion_none_and_degenerate():
    fused = weighted_fusion([A, B], alpha=0.5, normalisation="none")
    # a 5 + .05, b 3, c 1 + .45, d .25
    assert ids(fused) == ["a", "b", "c", "d"] and [h.score for h in fused] == pytest.approx([5.05, 3, 1.45, 0.25])
    same = H(("x", 4.0), ("y", 4.0))
    assert [h.score for h in weighted_fusion([same, []], alpha=0.5)] == [0.5, 0.5]
    with pytest.raises(ValueError):
        weighted_fusion([A, B, A], alpha=0.5)
    with pytest.raises(ValueError):
        weighted_fusion([A, B], alpha=1.5)
    with pytest.raises(ValueError):
        weighted_fusion([A, B], normalisation="zscore")


class Fixed:
    """A fake retriever returning a fixed ranking, recording the depths asked for."""

    def __init__(self, name, ranking):
        self.name = name
        self.ranking = ranking
        self.asked: list[int] = []

    def search(self, question, k=100):
        return self.search_many([question], k)[0]

    def search_many(self, questions, k=100):
        self.asked.append(k)
        return [self.ranking[:k] for _ in questions]


def test_hybrid_retriever_depth_fusion_and_cut():
    one, two = Fixed("one", A), Fixed("two", B)
    h = HybridRetriever([one, two], depth=1000, corpus_size=4)
    assert isinstance(h, Retriever)
    assert h.name == "hybrid rrf k=60 (one + two)"
    hits = h.search("q", k=2)
    assert one.asked == [4] and two.asked == [4]  # max(k, depth) capped at the corpus size
    assert ids(hits) == ["c", "a"]
    assert h.search_many(["q1", "q2"], k=10) == [reciprocal_rank_fusion([A, B])] * 2
    w = HybridRetriever([one, two], method="weighted", alpha=0.7, depth=2)
    assert w.name == "hybrid weighted minmax alpha=0.7 (one + two)"
    w.search("q", k=3)
    assert one.asked[-1] == 3  # depth below k: k wins
    with pytest.raises(ValueError):
        HybridRetriever([one])
    with pytest.raises(ValueError):
        HybridRetriever([one, two], method="borda")
    with pytest.raises(ValueError):
        h.search("q", k=0)


# -- registry -------------------------------------------------------------------------------

ARTICLES = pd.DataFrame({
    "id": ["1", "2", "3", "4"],
    "code": ["Code du logement", "Code du logement", "Code civil", "Code civil"],
    "article": ["Le bail est conclu pour neuf ans.", "La garantie locative est de deux mois.",
                "Le divorce est prononcé par le tribunal.", "Les enfants doivent des aliments."],
})
QUESTIONS = pd.DataFrame({"id": ["q1"], "category": [""], "subcategory": [""], "question": ["garantie"],
                          "extra_description": [""], "article_ids": [("2",)]})
DATASET = Dataset(name="tiny", kind="local", articles=ARTICLES, splits={"test": QUESTIONS})


@pytest.fixture
def fake_dense(monkeypatch):
    """Stand-in for the dense kind's retriever (bsard_demo.retrievers.kinds builds it): records how
    DenseRetriever.build is called."""
    calls = []

    class DenseRetriever:
        def __init__(self, encoder):
            self.name = f"dense {encoder}"

        @classmethod
        def build(cls, articles, *, encoder="use", cache_root=None, progress=None, notice=None, **other):
            calls.append({"n": len(articles), "encoder": encoder, "cache_root": cache_root, "progress": progress,
                          "notice": notice, **other})
            return Fixed(f"dense {encoder}", H(("4", 0.9), ("2", 0.8), ("1", 0.1), ("3", 0.0)))

    monkeypatch.setattr(kinds, "DenseRetriever", DenseRetriever)
    return calls


def test_spec_validation_and_key():
    with pytest.raises(ValueError):
        RetrieverSpec("tfidf")
    with pytest.raises(ValueError, match="k3"):
        RetrieverSpec("bm25", {"k3": 1})
    a = RetrieverSpec("hybrid", {"retrievers": [RetrieverSpec("bm25", {"k1": 1.2}), RetrieverSpec("dense")]})
    b = RetrieverSpec("hybrid", {"retrievers": [RetrieverSpec("bm25", {"k1": 1.2}), RetrieverSpec("dense")]})
    assert a.key() == b.key() and hash(a) == hash(b)
    assert a.key() != RetrieverSpec("hybrid").key()


def test_build_bm25_through_the_registry(tmp_path):
    r = build_retriever(RetrieverSpec("bm25", {"k1": 1.2, "b": 0.75}), DATASET, cache_root=tmp_path)
    assert isinstance(r, BM25Retriever) and r.name == "bm25 k1=1.2 b=0.75 lucene"
    assert r.search("garantie", k=1)[0].article_id == "2"
    assert (tmp_path / "bm25s").is_dir()


def test_dense_branch_calls_the_dense_builder(tmp_path, fake_dense):
    progress = lambda *a: None  # noqa: E731
    r = build_retriever(RetrieverSpec("dense", {"encoder": "minilm", "pooling": "mean"}), DATASET,
                        cache_root=tmp_path, progress=progress, notice=print)
    assert r.name == "dense minilm"
    assert fake_dense == [{"n": 4, "encoder": "minilm", "cache_root": tmp_path, "progress": progress,
                           "notice": print, "pooling": "mean"}]
    build_retriever(RetrieverSpec("dense"), DATASET)
    assert fake_dense[-1]["encoder"] == "use"  # the dense module's own default


def test_default_hybrid_is_bm25_plus_dense_rrf60(tmp_path, fake_dense):
    h = build_retriever(RetrieverSpec("hybrid"), DATASET, cache_root=tmp_path)
    assert isinstance(h, HybridRetriever) and h.method == "rrf" and h.rrf_k == 60
    assert [type(r).__name__ for r in h.retrievers] == ["BM25Retriever", "Fixed"]
    assert h.corpus_size == 4
    bm25_hits = h.retrievers[0].search("garantie locative", k=4)
    expected = reciprocal_rank_fusion([bm25_hits, h.retrievers[1].ranking], k=60)[:3]
    assert h.search("garantie locative", k=3) == expected


def test_hybrid_of_two_bm25_and_missing_corpus(tmp_path):
    spec = RetrieverSpec("hybrid", {"retrievers": [{"kind": "bm25"}, {"kind": "bm25", "options": {"stem": False}}],
                                    "method": "weighted", "alpha": 0.3})
    h = build_retriever(spec, DATASET, cache_root=tmp_path)
    assert h.name == "hybrid weighted minmax alpha=0.3 (bm25 k1=1 b=0.6 lucene + bm25 k1=1 b=0.6 lucene nostem)"
    assert len(h.search("bail", k=100)) == 4
    with pytest.raises(DataError):
        build_retriever(RetrieverSpec("bm25"), Dataset(name="q only", kind="local", articles=None, splits={}))


def test_search_parts_gives_the_fused_hits_and_each_parts_ranking():
    from bsard_demo.retrievers.hybrid import first_ranks

    one, two = Fixed("one", A), Fixed("two", B)
    h = HybridRetriever([one, two], depth=1000, corpus_size=4)
    hits, rankings = h.search_parts("q", k=2)
    assert hits == h.search("q", k=2) and rankings == [A[:4], B[:4]]  # each part as deep as the fusion reads it
    assert first_ranks(rankings[0]) == {hit.article_id: i for i, hit in enumerate(A[:4], 1)}
    assert first_ranks(H(("a", 3), ("b", 2), ("a", 1))) == {"a": 1, "b": 2}  # a repeat counts at its first rank
