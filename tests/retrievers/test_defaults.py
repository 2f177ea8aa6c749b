"""The first visitor's rule (bsard_demo/retrievers/defaults.py): the best system decided on frlaw-dev train
among those that answer at once, and its spec as ``run --retriever default`` builds it."""
from __future__ import annotations

from bsard_demo.retrievers import RetrieverSpec
from bsard_demo.retrievers.defaults import FirstVisitor, first_visitor
from bsard_demo.retrievers.registry import hybrid_spec


def test_the_rule_prefers_the_ranker_then_the_adapter_then_use_then_the_neighbours():
    assert first_visitor(rankers=["r1", "r2"], dense=["a"], use_stored=True, neighbours=True) == \
        FirstVisitor(("bm25", "ranker"), ranker="r1")
    assert first_visitor(dense=["a", "use"], use_stored=True, neighbours=True) == \
        FirstVisitor(("bm25", "hybrid"), ("a", "neighbours"), structure=True)
    assert first_visitor(dense=["use"], use_stored=True, neighbours=False) == \
        FirstVisitor(("bm25", "hybrid"), ("use",), structure=True)
    assert first_visitor(neighbours=True) == FirstVisitor(("bm25", "hybrid"), ("neighbours",), structure=True)
    assert first_visitor() == FirstVisitor(("bm25",))


def test_a_ranker_is_never_chosen_when_its_inputs_would_have_to_be_built():
    got = first_visitor(rankers=["r"], use_stored=False, neighbours=True)
    assert got.best == "hybrid" and got.ranker is None


def test_the_spec_is_the_registry_s_for_each_case():
    assert first_visitor(rankers=["r"], use_stored=True).spec() == RetrieverSpec("ranker", {"model": "r"})
    assert first_visitor(rankers=["r"], use_stored=True).spec({"r": "/m/r"}.get) == \
        RetrieverSpec("ranker", {"model": "/m/r"})
    assert first_visitor(dense=["use"], use_stored=True, neighbours=True).spec() == \
        hybrid_spec("use,neighbours", structure=True)
    assert first_visitor().spec() == RetrieverSpec("bm25")
