"""Fusion of any set of systems: weighted RRF and weighted min-max over n rankings, checked
against an exact reference (fractions), deterministic ties, and the hybrid_spec helper."""
from __future__ import annotations

import random
from fractions import Fraction

import pandas as pd
import pytest
from hypothesis import given, strategies as st

from bsard_demo.dataset import Dataset
from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.hybrid import reciprocal_rank_fusion, weighted_fusion
from bsard_demo.retrievers.hybrid_specs import (
    ZERO_SHOT_DENSE_WEIGHT,
    default_weights,
    hybrid_parts,
    hybrid_spec,
    make_hybrid,
    parse_encoders,
    parse_weights,
    system_labels,
)
from bsard_demo.retrievers.registry import RetrieverSpec, build_retriever

IDS = [str(i) for i in (1, 2, 9, 10, 11, 19, 100, 101)] + ["a", "b"]


def exact_order(scores: dict[str, Fraction | float]) -> list[tuple[str, float]]:
    """Reference order: exact score descending, ties by id descending as strings."""
    return [(d, float(s)) for d, s in sorted(scores.items(), key=lambda kv: (-kv[1], _desc(kv[0])))]


def _desc(s: str):
    # a key sorting strings in descending order: negate each code point, longer first on a tie of prefix
    return tuple(-ord(c) for c in s) + (1,)


def ref_rrf(rankings, k, weights):
    scores: dict[str, Fraction] = {}
    for w, ranking in zip(weights, rankings):
        seen = set()
        for rank, hit in enumerate(ranking, start=1):
            if hit.article_id in seen:
                continue
            seen.add(hit.article_id)
            # the same float contribution the product computes, then summed exactly (as fsum)
            scores[hit.article_id] = scores.get(hit.article_id, Fraction(0)) + Fraction(float(w) / (k + rank))
    return exact_order({d: float(s) for d, s in scores.items()})


def ref_minmax(rankings, weights):
    scores: dict[str, Fraction] = {}
    for w, ranking in zip(weights, rankings):
        best = {}
        for hit in ranking:
            best.setdefault(hit.article_id, hit.score)
        if not best:
            continue
        lo, hi = min(best.values()), max(best.values())
        for d, s in best.items():
            norm = 1.0 if hi == lo else (s - lo) / (hi - lo)
            scores[d] = scores.get(d, Fraction(0)) + Fraction(float(w) * norm)
    return exact_order({d: float(s) for d, s in scores.items()})


rankings_st = st.lists(
    st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.5, 3.0])), max_size=12)
    .map(lambda pairs: [Hit(d, s) for d, s in sorted(pairs, key=lambda p: -p[1])]),
    min_size=2, max_size=5)


@given(rankings_st, st.data())
def test_weighted_rrf_matches_the_exact_reference(rankings, data):
    weights = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.0, 2.0]), min_size=len(rankings),
                                 max_size=len(rankings)))
    if not any(weights):
        weights[0] = 1.0
    k = data.draw(st.sampled_from([0, 1, 10, 60, 61.5]))
    got = [(h.article_id, h.score) for h in reciprocal_rank_fusion(rankings, k, weights=weights)]
    assert got == ref_rrf(rankings, k, weights)


@given(rankings_st, st.data())
def test_weighted_minmax_matches_the_exact_reference(rankings, data):
    weights = data.draw(st.lists(st.sampled_from([0.0, 0.3, 0.5, 1.0, 2.0]), min_size=len(rankings),
                                 max_size=len(rankings)))
    if not any(weights):
        weights[-1] = 0.5
    got = [(h.article_id, h.score) for h in weighted_fusion(rankings, weights)]
    assert got == ref_minmax(rankings, weights)


@given(rankings_st, st.randoms(use_true_random=False))
def test_the_order_of_the_systems_does_not_matter(rankings, rnd):
    weights = [rnd.choice([0.5, 1.0, 2.0]) for _ in rankings]
    order = list(range(len(rankings)))
    rnd.shuffle(order)
    for fuse in (lambda r, w: reciprocal_rank_fusion(r, 60, weights=w), lambda r, w: weighted_fusion(r, w)):
        assert fuse(rankings, weights) == fuse([rankings[i] for i in order], [weights[i] for i in order])


def test_ties_go_to_the_greater_id_as_a_string():
    # every document once at rank 1 of its own system: all tie; "9" > "19" > "100" > "10" as strings
    rankings = [[Hit(d, 1.0)] for d in ("10", "9", "100", "19")]
    fused = reciprocal_rank_fusion(rankings, 60)
    assert [h.article_id for h in fused] == ["9", "19", "100", "10"]
    assert len({h.score for h in fused}) == 1


def test_weights_shift_the_ranking_and_a_common_scale_does_not():
    bm25 = [Hit("a", 9), Hit("b", 8), Hit("c", 7)]
    dense = [Hit("c", 0.9), Hit("b", 0.8), Hit("a", 0.7)]
    assert [h.article_id for h in reciprocal_rank_fusion([bm25, dense], 60, weights=[1, 0.5])][0] == "a"
    assert [h.article_id for h in reciprocal_rank_fusion([bm25, dense], 60, weights=[0.5, 1])][0] == "c"
    # equal weights: a (1st, 3rd) and c (3rd, 1st) tie exactly, above b (2nd twice); c > a as ids
    assert [h.article_id for h in reciprocal_rank_fusion([bm25, dense], 60, weights=[1, 1])] == ["c", "a", "b"]
    ones = reciprocal_rank_fusion([bm25, dense, bm25], 10, weights=[1, 1, 1])
    twos = reciprocal_rank_fusion([bm25, dense, bm25], 10, weights=[2, 2, 2])
    assert [h.article_id for h in ones] == [h.article_id for h in twos]
    assert [2 * h.score for h in ones] == [h.score for h in twos]


@pytest.mark.parametrize("weights, message", [
    ([1, 2], "2 weights for 3 rankings"), ([1, -1, 1], "finite and >= 0"), ([1, float("nan"), 1], "finite and >= 0"),
    ([1, float("inf"), 1], "finite and >= 0"), ([0, 0, 0], "at least one weight"), (["x", 1, 1], "must be numbers"),
])
def test_bad_weights_are_refused_clearly(weights, message):
    with pytest.raises(ValueError, match=message):
        reciprocal_rank_fusion([[], [], []], 60, weights=weights)


# -- hybrid_spec -------------------------------------------------------------------------------

def test_hybrid_spec_lists_bm25_then_every_encoder():
    spec = hybrid_spec(["use", "e5"], weights=[1, 0.5, 0.5], bm25_options={"k1": 1.2},
                       dense_options={"fields": ("article",)})
    parts = hybrid_parts(spec)
    assert [p.kind for p in parts] == ["bm25", "dense", "dense"]
    assert parts[0].options == {"k1": 1.2}
    assert [p.options for p in parts[1:]] == \
        [{"fields": ("article",), "encoder": "use"}, {"fields": ("article",), "encoder": "e5"}]
    assert spec.options["weights"] == [1.0, 0.5, 0.5] and spec.options["method"] == "rrf" and \
        spec.options["rrf_k"] == 60
    assert system_labels(spec) == ["bm25", "use", "e5"] and system_labels(RetrieverSpec("hybrid")) == ["bm25", "use"]
    assert hybrid_spec("use, E5 ", weights="1, 0.5,0.5") == hybrid_spec(["use", "e5"], weights=[1, 0.5, 0.5])
    assert hybrid_spec("use, E5 ", weights="1, 0.5,0.5").key() == \
        hybrid_spec(["use", "e5"], weights=[1, 0.5, 0.5]).key()


def test_hybrid_spec_weighted_fusions():
    two = hybrid_spec("use", method="weighted", alpha=0.7)
    assert two.options == \
        {"retrievers": hybrid_parts(two), "method": "weighted", "normalisation": "minmax", "alpha": 0.7}
    assert hybrid_spec("use", method="weighted").options["alpha"] == 0.5
    three = hybrid_spec("use,e5", method="weighted", weights="2,1,1", normalisation="none")
    assert three.options["weights"] == [2.0, 1.0, 1.0] and "alpha" not in three.options and "rrf_k" not in three.options
    h = make_hybrid(three, [_Named("bm25"), _Named("dense use"), _Named("dense e5")])
    assert h.name == "hybrid weighted none w=2,1,1 (bm25 + dense use + dense e5)"
    h = make_hybrid(hybrid_spec("use,e5", weights="1,0.5,0.5", rrf_k=30),
                    [_Named("bm25"), _Named("dense use"), _Named("dense e5")])
    assert h.name == "hybrid rrf k=30 w=1,0.5,0.5 (bm25 + dense use + dense e5)"


@pytest.mark.parametrize("kwargs, message", [
    ({"encoders": "use,,e5"}, "empty encoder name"),
    ({"encoders": "use,USE"}, "more than once: use"),
    ({"encoders": "use,e5", "weights": "1,0.5"}, r"2 weight\(s\) for 3 systems \(bm25, use, e5\)"),
    ({"weights": "1,x,-2"}, "not 'x', '-2'"),
    ({"alpha": 0.3}, "alpha applies to the weighted fusion only"),
    ({"encoders": "use,e5", "method": "weighted", "alpha": 0.3}, "alpha weighs exactly two systems"),
    ({"method": "weighted", "alpha": 0.3, "weights": "1,1"}, "weights or alpha, not both"),
    ({"method": "weighted", "alpha": 1.5}, "between 0 and 1"),
    ({"weights": "0,0"}, "at least one weight"),
    ({"method": "borda"}, "unknown fusion method"),
    ({"rrf_k": -1}, "finite and >= 0"),
    ({"depth": 0}, "depth must be at least 1"),
])
def test_hybrid_spec_refuses_bad_combinations_before_building(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hybrid_spec(**kwargs)


def test_parsers():
    assert parse_encoders(None) == parse_encoders("") == parse_encoders(" ") == ["use"]
    assert parse_encoders(["MiniLM", "/models/x"]) == ["minilm", "/models/x"]
    assert parse_weights(None) is None and parse_weights("") is None
    assert parse_weights("1,0.5") == [1.0, 0.5] and parse_weights([2, "0.5"]) == [2.0, 0.5]


class _Named:
    def __init__(self, name):
        self.name = name


# -- end to end --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fusion-cache")


@pytest.fixture(scope="module")
def small():
    from bsard_demo.sources import load_dataset

    sample = load_dataset("sample")
    return Dataset("sample-24", "local", sample.articles.iloc[:24].reset_index(drop=True), sample.splits)


@pytest.fixture(scope="module")
def tiny(small):
    """8 articles: e5 embeds about one article a second on a busy machine."""
    return Dataset("sample-8", "local", small.articles.iloc[:8].reset_index(drop=True), small.splits)


def test_default_hybrid_weighs_zero_shot_dense_half(cache_dir, small):
    questions = list(small.questions("test")["question"])[:5]
    assert default_weights(["use"]) == [1.0, ZERO_SHOT_DENSE_WEIGHT] == [1.0, 0.5]
    assert default_weights(["use", "E5", "/models/trained"]) == [1.0, 0.5, 0.5, 1.0]
    assert hybrid_spec().options["weights"] == [1.0, 0.5] and hybrid_spec().options["rrf_k"] == 60
    assert hybrid_spec(method="weighted").options["alpha"] == 0.5  # the weighted fusion keeps equal weights
    d = build_retriever(hybrid_spec(), small, cache_root=cache_dir)
    assert d.name == "hybrid rrf k=60 w=1,0.5 (bm25 k1=1 b=0.6 lucene + dense use)"
    parts = [r.search_many(questions, 24) for r in d.retrievers]
    for i, hits in enumerate(d.search_many(questions, 10)):
        assert [(h.article_id, h.score) for h in hits] == ref_rrf([p[i] for p in parts], 60, [1, 0.5])[:10]
    # a hand-written spec without weights is unchanged: equal weights
    plain = build_retriever(RetrieverSpec("hybrid"), small, cache_root=cache_dir)
    assert plain.name == "hybrid rrf k=60 (bm25 k1=1 b=0.6 lucene + dense use)" and plain.weights is None
    for i, hits in enumerate(plain.search_many(questions, 10)):
        assert [(h.article_id, h.score) for h in hits] == ref_rrf([p[i] for p in parts], 60, [1, 1])[:10]
    assert hybrid_spec(weights="1,1").options["weights"] == [1.0, 1.0]


def test_three_systems_fuse_as_the_reference(cache_dir, tiny):
    questions = list(tiny.questions("test")["question"])[:4]
    spec = hybrid_spec("use,e5", weights="1,0.5,0.5", rrf_k=60)
    h = build_retriever(spec, tiny, cache_root=cache_dir)
    assert h.name == "hybrid rrf k=60 w=1,0.5,0.5 (bm25 k1=1 b=0.6 lucene + dense use + dense e5)"
    fused = h.search_many(questions, 8)
    parts = [r.search_many(questions, 8) for r in h.retrievers]
    for i in range(len(questions)):
        assert [(x.article_id, x.score) for x in fused[i]] == ref_rrf([p[i] for p in parts], 60, [1, 0.5, 0.5])
    again = build_retriever(spec, tiny, cache_root=cache_dir)  # from the cache: same bits
    assert again.search_many(questions, 8) == fused
    assert len(fused[0]) == 8 and len({x.article_id for x in fused[0]}) == 8


def test_weighted_minmax_over_three_systems_end_to_end(cache_dir, tiny):
    q = [tiny.questions("test")["question"].iloc[0]]
    h = build_retriever(hybrid_spec("use,e5", method="weighted", weights=[1, 1, 0]), tiny, cache_root=cache_dir)
    two = build_retriever(hybrid_spec("use", method="weighted", alpha=0.5), tiny, cache_root=cache_dir)
    # weight 0 for e5 leaves BM25 + use; alpha 0.5 halves both weights: same order
    assert [x.article_id for x in h.search(q[0], 8)] == [x.article_id for x in two.search(q[0], 8)]


def test_random_rankings_with_deep_ties_stay_deterministic():
    rnd = random.Random(7)
    rankings = [[Hit(str(rnd.randrange(40)), 1.0) for _ in range(30)] for _ in range(4)]
    first = reciprocal_rank_fusion(rankings, 60, weights=[1, 0.5, 0.5, 0.25])
    for _ in range(5):
        assert reciprocal_rank_fusion([list(r) for r in rankings], 60, weights=[1, 0.5, 0.5, 0.25]) == first
    assert pd.Series([h.score for h in first]).is_monotonic_decreasing
