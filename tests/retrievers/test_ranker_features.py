"""The learned ranker's features (bsard_demo/retrievers/ranker.py) on a hand-made corpus: the
candidates are the union of each system's top and of the structure re-scoring, each column holds
what its name says (missing systems as NaN / depth + 1), and the RRF column is the product's."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bsard_demo.dataset import normalize_articles
from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.hybrid import reciprocal_rank_fusion
from bsard_demo.retrievers.ranker import (
    FEATURES,
    article_lengths,
    citation_counts,
    feature_names,
    question_features,
    rrf_rows,
)
from bsard_demo.retrievers.structure import ArticleGraph, StructureSettings

ARTICLES = normalize_articles(pd.DataFrame({
    "id": [str(i) for i in range(10)],
    "reference": [f"Art. {i}" for i in range(10)],
    "article": ["un deux", "trois", "quatre cinq six", "sept", "huit", "voir article 9", "dix", "onze", "douze",
                "treize"],
    "code": ["C"] * 10,
    "section": ["a", "a", "a", "b", "b", "b", "c", "c", "c", "d"],
}))
GRAPH = ArticleGraph(ARTICLES)


def run(rows, scores, depth=6):
    r = np.full(depth, -1)
    s = np.zeros(depth)
    r[:len(rows)], s[:len(rows)] = rows, scores
    return r, s


RUNS = {"bm25": run([1, 4, 7], [9.0, 6.0, 3.0]), "adapter": run([4, 3], [0.8, 0.4]),
        "neighbours": run([8], [2.0])}


def features(candidates=2, **kw):
    return question_features(RUNS, graph=GRAPH, structure=StructureSettings(sibling=0.3, section=0.0, refs=0.0),
                             prior=np.arange(10, dtype=float), lengths=np.full(10, 5.0), candidates=candidates,
                             depth=6, **kw)


def test_candidates_and_columns():
    rows, X = features(votes=np.eye(10)[8] * 3, votes_sim=np.eye(10)[8] * 2.0)
    col = {name: X[:, j] for j, name in enumerate(FEATURES)}
    assert X.shape == (len(rows), len(FEATURES)) and FEATURES == feature_names()
    # top 2 of each system: 1, 4 | 4, 3 | 8; the fusion's top 2 and its re-scoring (siblings of the head)
    fused_rows, _ = rrf_rows(RUNS, len(GRAPH))
    assert set(rows) >= {1, 4, 3, 8} | set(fused_rows[:2].tolist())
    assert list(rows) == sorted(set(rows))
    at = {int(r): i for i, r in enumerate(rows)}
    assert col["bm25_score"][at[4]] == 6.0 and col["bm25_rank"][at[4]] == 2 and col["bm25_norm"][at[4]] == 6 / 9
    assert col["bm25_gap"][at[4]] == 3.0
    assert np.isnan(col["bm25_score"][at[8]]) and col["bm25_rank"][at[8]] == 7  # missing: depth + 1
    assert np.isnan(col["use_score"]).all() and (col["use_rank"] == 7).all()  # no use run given at all
    assert col["votes"][at[8]] == 3 and col["votes_sim"][at[8]] == 2.0 and col["votes"][at[1]] == 0
    assert col["prior"][at[4]] == pytest.approx(np.log1p(4)) and (col["length"] == 5).all()
    assert col["position"][at[4]] == 1 and col["section_size"][at[4]] == 3 and col["relative_position"][at[4]] == 0.5


def test_the_fused_column_is_the_products_rrf():
    rows, X = features()
    hits = {n: [Hit(str(r), float(s)) for r, s in zip(*RUNS[n]) if r >= 0] for n in RUNS}
    product = reciprocal_rank_fusion([hits["bm25"], hits["adapter"], hits["neighbours"]], 60, weights=[1, 0.5, 0.5])
    fused = X[:, FEATURES.index("fused_score")]
    best = product[0].score
    for h in product:
        if int(h.article_id) in rows:
            assert fused[list(rows).index(int(h.article_id))] == pytest.approx(h.score / best)
    ranks = X[:, FEATURES.index("fused_rank")]
    assert ranks[list(rows).index(int(product[0].article_id))] == 1


def test_sibling_and_section_columns_follow_the_fusion():
    rows, X = features(candidates=10)  # the re-scoring's top 10 holds every sibling of the ranked
    col = {name: X[:, j] for j, name in enumerate(FEATURES)}
    at = {int(r): i for i, r in enumerate(rows)}
    fused_rows, fused_scores = rrf_rows(RUNS, len(GRAPH))
    n = dict(zip(fused_rows.tolist(), (fused_scores / fused_scores[0]).tolist()))
    # article 2 (section a, after 1): its best sibling is 1; its section's best other is 1 too
    assert col["sibling"][at[2]] == pytest.approx(n[1]) and col["section_best"][at[2]] == pytest.approx(n[1])
    # article 4 is the best of section b: its section's best other is 3
    assert col["section_best"][at[4]] == pytest.approx(n[3])


def test_citation_counts():
    assert citation_counts([np.array([1, 1, 2]), np.array([2])], 4).tolist() == [0, 1, 2, 0]


def test_article_lengths_count_the_words_of_str_split():
    texts = ["a\x1cb c", None, "x\u00a0y", "  ", "é\u2003f\ng", 12, float("nan"), "un  deux\ttrois"]
    # pandas' own count, which the loop replaced: the same numbers, unicode white space and missing texts included
    expected = pd.Series(texts, dtype=object).fillna("").astype(str).str.split().str.len().to_numpy(dtype=np.float64)
    got = article_lengths(pd.DataFrame({"article": texts}))
    assert got.dtype == np.float64 and got.tolist() == expected.tolist() == [3, 0, 2, 0, 3, 1, 0, 3]
    assert article_lengths(ARTICLES).tolist() == [2, 1, 3, 1, 1, 3, 1, 1, 1, 1]
