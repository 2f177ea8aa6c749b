"""The Search page's hybrid columns (bsard_demo.app.search_page.hybrid_column): BM25 fused with
any list of encoders, RRF with weights, the weighted fusion by α (two systems) or weights, and
the built retriever ranks like the library's fusion of its parts."""
from __future__ import annotations

import pytest

from bsard_demo.app.search_page import column_specs
from bsard_demo.retrievers import Hit, RetrieverSpec
from bsard_demo.retrievers.hybrid import reciprocal_rank_fusion, weighted_fusion
from bsard_demo.retrievers.hybrid_specs import hybrid_parts, hybrid_spec, make_hybrid
from bsard_demo.retrievers.kinds import hybrid_column


def parts_of(spec: RetrieverSpec) -> list[tuple[str, str | None]]:
    return [(p.kind, p.options.get("encoder")) for p in hybrid_parts(spec)]


def test_rrf_over_several_encoders_with_weights():
    label, spec = hybrid_column(["use", "e5"], rrf_k=20, weights=[1, 0.5, 2])
    assert label == "Hybride RRF k=20 w=1,0.5,2 (use + e5)"
    assert parts_of(spec) == [("bm25", None), ("dense", "use"), ("dense", "e5")]
    assert spec.options == {**spec.options, "method": "rrf", "rrf_k": 20.0, "weights": [1.0, 0.5, 2.0]}


def test_default_weights_are_the_cli_default_and_all_one_is_plain_fusion():
    """No weights: the product's default hybrid (hybrid_spec), the spec the CLI's ``run
    --retriever hybrid --encoder …`` builds; weights all 1: plain RRF, labelled without them."""
    label, spec = hybrid_column(["use"])
    assert label == "Hybride RRF k=60 w=1,0.5 (use)" and spec == hybrid_spec()
    label, spec = hybrid_column(["use", "e5"])
    assert label == "Hybride RRF k=60 w=1,0.5,0.5 (use + e5)" and spec == hybrid_spec("use,e5")
    label, spec = hybrid_column(["use", "mine"], targets={"mine": "/models/mine"})
    assert label == "Hybride RRF k=60 w=1,0.5,1 (use + mine)" and spec.options["weights"] == [1.0, 0.5, 1.0]
    label, spec = hybrid_column(["use", "e5"], weights=[1, 1, 1])
    assert label == "Hybride RRF k=60 (use + e5)" and spec.options["weights"] == [1.0, 1.0, 1.0]


def test_the_weighted_fusion_takes_alpha_for_two_systems_and_weights_beyond():
    label, spec = hybrid_column(["e5"], fusion="weighted", alpha=0.3)
    assert label == "Hybride pondéré α=0.3 (e5)" and spec.options["alpha"] == 0.3 and "weights" not in spec.options
    label, spec = hybrid_column(["use", "e5"], fusion="weighted")
    assert label == "Hybride pondéré w=1,1,1 (use + e5)" and "alpha" not in spec.options
    label, spec = hybrid_column(["use", "e5"], fusion="weighted", weights=[2, 1, 0])
    assert label == "Hybride pondéré w=2,1,0 (use + e5)" and spec.options["weights"] == [2.0, 1.0, 0.0]


def test_targets_repeats_and_bad_settings():
    _, spec = hybrid_column(["use", "mine", "use"], targets={"mine": "/models/mine"})
    assert parts_of(spec) == [("bm25", None), ("dense", "use"), ("dense", "/models/mine")]
    with pytest.raises(ValueError, match="at least one"):
        hybrid_column([])
    with pytest.raises(ValueError, match="2 weights for 3 systems"):
        hybrid_column(["use", "e5"], weights=[1, 2])
    with pytest.raises(ValueError, match="unknown fusion"):
        hybrid_column(["use"], fusion="max")
    assert list(column_specs(["hybrid"], encoder="e5", hybrid_encoders=["use"])) == ["Hybride RRF k=60 w=1,0.5 (use)"]
    assert list(column_specs(["hybrid"], encoder="e5")) == ["Hybride RRF k=60 w=1,0.5 (e5)"]


class Fixed:
    """A retriever returning a fixed ranking."""

    def __init__(self, name, hits):
        self.name, self.hits = name, hits

    def search_many(self, questions, k=100):
        return [self.hits[:k] for _ in questions]


RANKINGS = [[Hit("a", 9.0), Hit("b", 5.0), Hit("c", 1.0)], [Hit("c", 0.9), Hit("a", 0.2), Hit("d", 0.1)],
            [Hit("d", 3.0), Hit("b", 2.0)]]


@pytest.mark.parametrize("kwargs,reference", [
    ({"rrf_k": 1, "weights": [1, 0.5, 2]}, lambda r: reciprocal_rank_fusion(r, 1, weights=[1, 0.5, 2])),
    ({"fusion": "weighted", "weights": [0.2, 1, 3]}, lambda r: weighted_fusion(r, [0.2, 1, 3])),
    ({"fusion": "weighted"}, lambda r: weighted_fusion(r, [1, 1, 1])),
])
def test_the_column_ranks_like_the_librarys_fusion(kwargs, reference):
    _, spec = hybrid_column(["use", "e5"], **kwargs)
    retriever = make_hybrid(spec, [Fixed(str(i), r) for i, r in enumerate(RANKINGS)], corpus_size=4)
    assert retriever.search("q", 4) == reference(RANKINGS)[:4]
