"""FusionConfig (bsard_demo.retrievers.hybrid): the one validation and label of a fusion."""
import pytest

from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.hybrid import (
    DEFAULT_ALPHA,
    DEFAULT_RRF_K,
    FusionConfig,
    FusionError,
    HybridRetriever,
    reciprocal_rank_fusion,
    weighted_fusion,
)

A = [Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0)]
B = [Hit("c", 0.9), Hit("d", 0.5), Hit("a", 0.1)]


def test_defaults_and_from_options():
    assert (FusionConfig().method, FusionConfig().rrf_k, DEFAULT_RRF_K, DEFAULT_ALPHA) == ("rrf", 60.0, 60.0, 0.5)
    two = FusionConfig.from_options({"method": "weighted"}, 2)
    assert two.alpha == DEFAULT_ALPHA and two.weights_for(2) == [0.5, 0.5]
    assert FusionConfig.from_options({"method": "weighted", "alpha": 0.7}, 3).alpha is None
    assert FusionConfig.from_options({"method": "rrf", "alpha": 0.7}, 2).alpha is None
    assert FusionConfig.from_options({"weights": [1, 0.5]}, 2).weights_for(2) == [1.0, 0.5]


@pytest.mark.parametrize("config, n, code", [
    (FusionConfig("borda"), 2, "method"), (FusionConfig(normalisation="z"), 2, "normalisation"),
    (FusionConfig(weights=(1,)), 2, "weight_count"), (FusionConfig(weights=("x", 1)), 2, "weight_type"),
    (FusionConfig(alpha=0.5), 2, "alpha_method"),
    (FusionConfig("weighted", weights=(1, 1), alpha=0.5), 2, "alpha_and_weights"),
    (FusionConfig("weighted", alpha=0.5), 3, "alpha_count"), (FusionConfig("weighted", alpha=2), 2, "alpha_range"),
    (FusionConfig(weights=(1, -1)), 2, "weight_range"), (FusionConfig(weights=(0, 0)), 2, "weights_zero"),
    (FusionConfig(rrf_k=-1), 2, "rrf_k"), (FusionConfig(rrf_k=None), 2, "rrf_k"), (FusionConfig(depth=0), 2, "depth"),
])
def test_validate_names_the_rule(config, n, code):
    with pytest.raises(FusionError) as caught:
        config.validate(n)
    assert caught.value.code == code and isinstance(caught.value, ValueError)


def test_validate_names_the_systems_when_given():
    with pytest.raises(FusionError, match=r"1 weight\(s\) for 2 systems \(bm25, use\)") as caught:
        FusionConfig(weights=(1,)).validate(2, ["bm25", "use"])
    assert caught.value.params == {"given": 1, "needed": 2}
    with pytest.raises(FusionError, match="1 weights for 2 rankings"):
        FusionConfig(weights=(1,)).validate(2)


def test_label_and_fuse_are_the_retrievers():
    assert FusionConfig(weights=(1, 0.5)).validate(2).label(2) == "rrf k=60 w=1,0.5"
    assert FusionConfig(weights=(1, 1)).label(2) == "rrf k=60"
    assert FusionConfig("weighted", alpha=0.3).label(2, {"rrf": "RRF", "weighted": "pondéré", "alpha": "α"}) == \
        "pondéré α=0.3"
    assert FusionConfig("weighted", normalisation="none").label(3) == "weighted none w=1,1,1"
    config = FusionConfig(weights=(1, 0.5)).validate(2)
    assert config.fuse([A, B], 3) == reciprocal_rank_fusion([A, B], 60, weights=[1, 0.5], limit=3)
    assert FusionConfig("weighted", alpha=0.3).validate(2).fuse([A, B]) == weighted_fusion([A, B], alpha=0.3)

    class Fixed:
        def __init__(self, name):
            self.name = name

    h = HybridRetriever([Fixed("x"), Fixed("y")], fusion=config)
    assert h.fusion == config and h.name == "hybrid rrf k=60 w=1,0.5 (x + y)" and h.weights == (1.0, 0.5)
