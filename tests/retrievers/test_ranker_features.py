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
from bsard_demo.retrievers.ranker import FEATURES, citation_counts, feature_names, question_features, rrf_rows
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


def test_the_issue_31_columns_count_the_questions_citing_the_section_and_the_branch():
    """``group_priors`` adds GROUPS: the section's and the branch's citation counts (log 1 + q); without it the
    columns are the earlier ranker's."""
    from bsard_demo.retrievers.ranker import GROUPS, group_priors

    labels = [np.array([0, 1]), np.array([2]), np.array([3, 9])]  # sections a, a, a, b, d
    section, branch = group_priors(labels, GRAPH)
    assert section.tolist() == [2, 2, 2, 1, 1, 1, 0, 0, 0, 1]  # questions citing an article of the section
    assert GRAPH.n_branches == 1 and branch.tolist() == [3] * 10  # one code: every question cites it
    rows, X = features(candidates=10, group_priors=(section, branch))
    names = feature_names(groups=True)
    plain = features(candidates=10)[1]
    assert X.shape[1] == plain.shape[1] + len(GROUPS) and np.array_equal(X[:, :plain.shape[1]], plain, equal_nan=True)
    col = {name: X[:, j] for j, name in enumerate(FEATURES + list(GROUPS))}
    assert names[-len(GROUPS):] == list(GROUPS)
    at = {int(r): i for i, r in enumerate(rows)}
    assert col["section_prior"][at[4]] == pytest.approx(np.log1p(1)) and col["section_prior"][at[7]] == 0
    assert col["branch_prior"][at[4]] == pytest.approx(np.log1p(3))


def test_citation_counts_by_unit_and_left_out():
    from bsard_demo.training.ranker import left_out_group_priors

    assert citation_counts([np.array([1, 2]), np.array([5])], GRAPH.n_sections, GRAPH.section).tolist() == \
        [1, 1, 0, 0]
    labels = [np.array([0, 1]), np.array([2]), np.array([3])]
    left = list(left_out_group_priors(labels, ["q1", "q2", "Q1 "], GRAPH))  # "Q1 " is q1's same-text twin
    # each twin leaves out both twins' sections (a of q1, b of its twin): a is cited by q2 alone, b by nobody
    assert left[0][0][0] == left[2][0][0] == 1 and left[0][0][3] == left[2][0][3] == 0
    assert left[1][0][0] == 1 and left[1][0][3] == 1  # q2 leaves out its own a: q1's remains; b is the twin's
