"""BM25: parity of bm25s with rank_bm25, tie order, headers, caching."""
from __future__ import annotations

import math

import bm25s
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from rank_bm25 import BM25Okapi

from bsard_demo import analyzer as analyzer_module, cache
from bsard_demo.analyzer import TEXT_ONLY, Analyzer
from bsard_demo.retrievers.base import Hit, Retriever, id_ranks, rank_all, rank_rows, ranked_hits
from bsard_demo.retrievers.bm25 import BM25Retriever, BM25Settings, cache_key

ARTICLES = pd.DataFrame({
    "id": ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"],
    "code": ["Code du logement", "Code du logement", "Code civil", "Code civil", "Code civil",
             "Code de la nationalité", "Code du logement", "Code civil", "Code pénal", "Code pénal"],
    "chapter": ["Du bail", "De la garantie", "Du divorce", "Des aliments", "Des successions",
                "Acquisition", "Du préavis", "Du mariage", "Des peines", "De la récidive"],
    "reference": [f"Art. {i}" for i in range(1, 11)],
    "article": [
        "Le bail de résidence principale est conclu pour une durée de neuf ans.",
        "La garantie locative ne peut excéder un montant équivalent à deux mois de loyer.",
        "Le divorce peut être demandé par l'un des époux lorsque la désunion est irrémédiable.",
        "Les enfants doivent des aliments à leurs père et mère et autres ascendants dans le besoin.",
        "Les successions sont déférées aux enfants et descendants du défunt.",
        "L'étranger qui a atteint l'âge de dix-huit ans peut acquérir la nationalité belge.",
        "Le locataire peut mettre fin au bail à tout moment moyennant un préavis de trois mois.",
        "Nul ne contracte mariage avant dix-huit ans.",
        "Les peines applicables aux crimes sont la réclusion et la détention.",
        "Celui qui a été condamné sera puni d'une peine plus forte en cas de récidive.",
    ],
})
QUESTIONS = [
    "Mon propriétaire peut-il me réclamer une garantie locative de trois mois ?",
    "Quel préavis pour résilier mon bail ?",
    "Comment divorcer de mon époux ?",
    "Dois-je payer des aliments à mes parents ?",
    "récidive peine",
    "xyzzy introuvable",
    "bail bail préavis",  # a repeated term counts twice, in both engines
]


def hits_equal(a: list[Hit], b: list[Hit], rel: float = 1e-5) -> bool:
    return [h.article_id for h in a] == [h.article_id for h in b] and all(
        math.isclose(x.score, y.score, rel_tol=rel, abs_tol=1e-7) for x, y in zip(a, b))


def full_ranking(scores: np.ndarray, ids: list[str]) -> list[str]:
    """All docs by score desc, ties by id desc as strings (computed without the retriever)."""
    return [d for d, _ in sorted(sorted(zip(ids, scores), key=lambda p: p[0], reverse=True), key=lambda p: -p[1])]


# -- parity with rank_bm25 -----------------------------------------------------------------

def _bm25s_scores(tokens, query, k1, b):
    index = bm25s.BM25(k1=k1, b=b, method="robertson")
    index.index(tokens, show_progress=False)
    return index.get_scores(query)


def test_bm25s_robertson_equals_rank_bm25_okapi_where_no_idf_is_negative():
    # Robertson's idf log((N - df + .5) / (df + .5)) is negative when a term is in more than half
    # of the documents; BM25Okapi then floors it at epsilon * mean idf and bm25s at 0. With stop
    # words removed no term of this corpus reaches half the documents, so neither floor applies.
    tokens = Analyzer().tokens_many(ARTICLES["article"])
    n = len(tokens)
    df: dict[str, int] = {}
    for doc in tokens:
        for t in set(doc):
            df[t] = df.get(t, 0) + 1
    assert max(df.values()) < n / 2
    k1, b = 1.0, 0.6
    okapi = BM25Okapi(tokens, k1=k1, b=b)  # default epsilon: it never kicks in here
    ids = list(ARTICLES["id"])
    for q in QUESTIONS[:5]:
        query = Analyzer().tokens(q)
        ours = _bm25s_scores(tokens, query, k1, b)
        ref = okapi.get_scores(query)
        assert ref.max() > 0
        # bm25s leaves out Robertson's constant (k1 + 1) factor: same ranking, scores scaled
        np.testing.assert_allclose(ours * (k1 + 1), ref, rtol=1e-5, atol=1e-6)
        assert full_ranking(ours, ids) == full_ranking(ref, ids)


def test_idf_floor_differs_unless_okapi_epsilon_is_zero():
    tokens = [["bail", "loyer"], ["bail", "garantie"], ["bail", "preavis"], ["divorce"], ["bail", "mariage"]]
    query = ["bail", "garantie"]  # "bail" is in 4 of 5 documents: negative Robertson idf
    bm = _bm25s_scores(tokens, query, 1.2, 0.75) * 2.2
    default = BM25Okapi(tokens, k1=1.2, b=0.75).get_scores(query)
    assert not np.allclose(bm, default)  # epsilon=0.25 gives "bail" a positive idf, bm25s gives 0
    zero = BM25Okapi(tokens, k1=1.2, b=0.75, epsilon=0).get_scores(query)
    np.testing.assert_allclose(bm, zero, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("options", [dict(), dict(k1=1.5, b=0.75), dict(fields=TEXT_ONLY, stem=False)])
def test_both_engines_give_the_same_hits(options):
    a = BM25Retriever.build(ARTICLES, engine="bm25s", method="robertson", use_cache=False, **options)
    b = BM25Retriever.build(ARTICLES, engine="rank_bm25", use_cache=False, **options)
    for q in QUESTIONS:
        assert hits_equal(a.search(q, k=10), b.search(q, k=10), rel=1e-9)  # both in float64
    assert b.settings.method == "robertson" and "rank_bm25" in b.name


def test_scores_match_an_independent_okapi_on_the_indexed_text():
    r = BM25Retriever.build(ARTICLES, method="robertson", use_cache=False)
    analyzer = Analyzer()
    texts = ["\n".join(v for v in (row.reference, row.code, row.chapter, row.article) if v)
             for row in ARTICLES.itertuples()]
    okapi = BM25Okapi([analyzer.tokens(t) for t in texts], k1=1.0, b=0.6, epsilon=0)
    q = QUESTIONS[1]
    expected = okapi.get_scores(analyzer.tokens(q)) / 2.0
    got = {h.article_id: h.score for h in r.search(q, k=10)}
    for i, doc in enumerate(ARTICLES["id"]):
        assert math.isclose(got[doc], expected[i], rel_tol=1e-5, abs_tol=1e-7)


# -- behaviour ------------------------------------------------------------------------------

def test_retriever_protocol_defaults_and_name():
    r = BM25Retriever.build(ARTICLES, use_cache=False)
    assert isinstance(r, Retriever)
    assert (r.settings.k1, r.settings.b, r.settings.method, r.settings.stem) == (1.0, 0.6, "lucene", True)
    assert r.name == "bm25 k1=1 b=0.6 lucene"
    assert r.search(QUESTIONS[0], k=3)[0].article_id == "2"
    assert r.search(QUESTIONS[1], k=3)[0].article_id == "7"


def test_k_is_cut_to_the_corpus_and_must_be_positive():
    r = BM25Retriever.build(ARTICLES, use_cache=False)
    assert len(r.search("bail", k=1)) == 1
    full = r.search("bail", k=1000)
    assert len(full) == len(ARTICLES) and len({h.article_id for h in full}) == len(ARTICLES)
    with pytest.raises(ValueError):
        r.search("bail", k=0)


def test_search_many_equals_search():
    r = BM25Retriever.build(ARTICLES, use_cache=False)
    assert r.search_many(QUESTIONS, k=4) == [r.search(q, k=4) for q in QUESTIONS]
    assert r.search_many([], k=4) == []


def test_ties_are_broken_by_article_id_descending_as_strings():
    ids = ["10", "9", "100", "2", "1"]
    df = pd.DataFrame({"id": ids, "article": ["bail loyer", "bail loyer", "bail loyer", "divorce", "mariage"]})
    r = BM25Retriever.build(df, fields=TEXT_ONLY, use_cache=False)
    hits = r.search("bail", k=5)
    # three equal scores, then the two zero scores, each group by id descending as strings
    assert [h.article_id for h in hits] == ["9", "100", "10", "2", "1"]
    assert hits[0].score == hits[1].score == hits[2].score > 0 == hits[3].score == hits[4].score
    # the cut at k keeps the greatest ids of a tie, not an arbitrary subset
    assert [h.article_id for h in r.search("bail", k=2)] == ["9", "100"]
    # a question with no known word ranks everything by id
    assert [h.article_id for h in r.search("xyzzy", k=5)] == ["9", "2", "100", "10", "1"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.integers(1, 40), st.randoms(use_true_random=False))
def test_rank_all_equals_a_full_sort(values, k, rnd):
    ids = [str(i * 7 % 31) + ("x" if i % 3 else "") for i in range(len(values))]
    id_rank = id_ranks(ids)
    assert sorted(ids, key=lambda d: id_rank[ids.index(d)]) == sorted(ids)
    scores = np.array(values, dtype=np.float64)
    expected = full_ranking(scores, ids)[:k]
    assert [h.article_id for h in rank_all(scores, ids, id_rank, k)] == expected
    # scores of a subset of the articles (``rows``), given in any order
    rows = np.array(rnd.sample(range(len(ids)), rnd.randint(1, len(ids))))
    subset = full_ranking(scores[rows], [ids[r] for r in rows])[:k]
    hits = rank_all(scores[rows], ids, id_rank, k, rows=rows)
    assert [h.article_id for h in hits] == subset
    assert [h.score for h in hits] == [float(scores[ids.index(d)]) for d in subset]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.integers(1, 40), st.randoms(use_true_random=False),
       st.sampled_from([np.float32, np.float64]))
def test_rank_rows_are_rank_alls_hits_as_arrays(values, k, rnd, dtype):
    ids = [str(i * 7 % 31) + ("x" if i % 3 else "") for i in range(len(values))]
    id_rank = id_ranks(ids)
    scores = (np.array(values) / 3).astype(dtype)  # ties, and floats that are not integers
    rows = np.array(rnd.sample(range(len(ids)), rnd.randint(1, len(ids))))
    for kept, subset in ((scores, None), (scores[rows], rows)):
        got_rows, got_scores = rank_rows(kept, id_rank, k, rows=subset)
        assert got_rows.dtype == np.int64 and got_scores.dtype == dtype
        names = ids if subset is None else [ids[r] for r in subset]
        expected = full_ranking(kept, names)[:k]  # the reference: a full sort
        assert [ids[r] for r in got_rows] == expected
        assert got_scores.tolist() == [kept[names.index(d)].item() for d in expected]
        hits = rank_all(kept, ids, id_rank, k, rows=subset)
        assert ranked_hits(got_rows, got_scores, ids) == hits
        assert [ids[r] for r in got_rows] == [h.article_id for h in hits]
        assert got_scores.tolist() == [h.score for h in hits]  # the same floats, bit for bit
    assert [len(a) for a in rank_rows(scores[:0], id_rank, k)] == [0, 0]


def test_search_rows_are_search_manys_hits():
    r = BM25Retriever.build(ARTICLES, use_cache=False)
    questions = ["garantie locative", "divorce", "xyzzy"]
    assert [ranked_hits(rows, scores, r.article_ids) for rows, scores in r.search_rows(questions, 3)] == \
        r.search_many(questions, 3)


def test_index_is_fed_analyzed_tokens():
    r = BM25Retriever.build(ARTICLES, use_cache=False)
    vocab = r._bm25s.vocab_dict
    assert "locat" in vocab and "locative" not in vocab and "le" not in vocab and "l" not in vocab


def test_headers_are_indexed_by_default():
    question = "Que dit le code pénal ?"
    with_headers = BM25Retriever.build(ARTICLES, use_cache=False).search(question, k=2)
    assert {h.article_id for h in with_headers} == {"9", "10"} and with_headers[0].score > 0
    text_only = BM25Retriever.build(ARTICLES, fields=TEXT_ONLY, use_cache=False).search(question, k=10)
    assert all(h.score == 0 for h in text_only)


def test_settings_are_validated():
    with pytest.raises(ValueError):
        BM25Settings(engine="rank_bm25", method="lucene")
    with pytest.raises(ValueError):
        BM25Settings(method="bm25+")
    with pytest.raises(ValueError):
        BM25Settings(b=1.5)
    with pytest.raises(ValueError):
        BM25Retriever.build(ARTICLES.iloc[:0], use_cache=False)


def test_progress_is_reported():
    calls = []
    BM25Retriever.build(ARTICLES, use_cache=False, progress=lambda d, t, m: calls.append((d, t, m)))
    assert calls and all(0 <= d <= t for d, t, _ in calls)
    assert any("analysing" in m for *_, m in calls) and any("indexing" in m for *_, m in calls)


# -- cache ----------------------------------------------------------------------------------

@pytest.fixture
def index_calls(monkeypatch):
    calls = []
    original = bm25s.BM25.index

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(bm25s.BM25, "index", counting)
    return calls


def test_second_build_loads_from_the_cache(tmp_path, index_calls):
    first = BM25Retriever.build(ARTICLES, cache_root=tmp_path)
    assert len(index_calls) == 1
    second = BM25Retriever.build(ARTICLES, cache_root=tmp_path)
    assert len(index_calls) == 1
    assert second.search_many(QUESTIONS, 10) == first.search_many(QUESTIONS, 10)
    assert len(list((tmp_path / "bm25s").iterdir())) == 1


def test_changed_settings_or_corpus_change_the_cache_key(tmp_path, index_calls):
    base = BM25Settings()
    ids, texts = ["1", "2"], ["le bail", "la garantie"]
    key = cache_key(ids, texts, base)
    others = [
        cache_key(ids, texts, BM25Settings(k1=1.2)),
        cache_key(ids, texts, BM25Settings(b=0.75)),
        cache_key(ids, texts, BM25Settings(method="robertson")),
        cache_key(ids, texts, BM25Settings(stem=False)),
        cache_key(ids, texts, BM25Settings(stopwords=False)),
        cache_key(ids, texts, BM25Settings(keep_numbers=False)),
        cache_key(ids, texts, BM25Settings(fields=TEXT_ONLY)),
        cache_key(ids, ["le bail", "la garantie locative"], base),
        cache_key(["1", "3"], texts, base),
        cache_key(ids[::-1], texts[::-1], base),
    ]
    assert key == cache_key(list(ids), list(texts), BM25Settings())
    assert len({key, *others}) == len(others) + 1
    # what the analyzer depends on beyond the settings: the stemmer version, the word lists
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(analyzer_module, "stemmer_version", lambda: "pystemmer-0.0-other")
        assert cache_key(ids, texts, base) != key
        assert cache_key(ids, texts, BM25Settings(stem=False)) == others[3]  # unstemmed: not used
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(analyzer_module, "FRENCH_STOPWORDS", analyzer_module.FRENCH_STOPWORDS | {"loyer"})
        assert cache_key(ids, texts, base) != key
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(analyzer_module, "ELISIONS", analyzer_module.ELISIONS + ("z",))
        assert cache_key(ids, texts, base) != key
    assert cache_key(ids, texts, base) == key
    BM25Retriever.build(ARTICLES, cache_root=tmp_path)
    BM25Retriever.build(ARTICLES, cache_root=tmp_path, k1=1.2)
    changed = ARTICLES.copy()
    changed.loc[0, "article"] += " Modifié."
    BM25Retriever.build(changed, cache_root=tmp_path)
    assert len(index_calls) == 3
    assert len(list((tmp_path / "bm25s").iterdir())) == 3


def test_corrupt_cache_entry_is_rebuilt(tmp_path, index_calls):
    first = BM25Retriever.build(ARTICLES, cache_root=tmp_path)
    (entry,) = (tmp_path / "bm25s").iterdir()
    victim = next(p for p in sorted(entry.rglob("*.npy")))
    victim.write_bytes(victim.read_bytes()[:-8])
    notices = []
    again = BM25Retriever.build(ARTICLES, cache_root=tmp_path, notice=notices.append)
    assert len(index_calls) == 2 and len(notices) == 1 and "damaged" in notices[0]
    assert again.search_many(QUESTIONS, 10) == first.search_many(QUESTIONS, 10)
    assert cache.verify(entry)  # rebuilt entry is whole again
    BM25Retriever.build(ARTICLES, cache_root=tmp_path)
    assert len(index_calls) == 2


def test_rank_bm25_engine_is_not_cached(tmp_path):
    BM25Retriever.build(ARTICLES, engine="rank_bm25", cache_root=tmp_path)
    assert not (tmp_path / "bm25s").exists()
