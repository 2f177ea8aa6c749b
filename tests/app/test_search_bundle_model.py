"""The Search and Score pages with an index bundle that carries a trained model (issue 14 item 4),
through ``AppTest``: a first visitor sees BM25 and the hybrid of the bundled model (its
embeddings are in the bundle), searched with nothing built; the menu labels the model with what
it was trained on and its test figure; a link naming it opens it, one naming a model this server
lacks falls back with a note; the Score page offers its built-in runs. The model is the session's
one ONNX export (tests/_onnx_model.py), the corpus eight articles."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from _app_helpers import REPO, TIMEOUT, assert_clean, column_names, set_app_env
from _onnx_model import exported_model
from _tiny_corpus import articles, make_data, run_cli, without_bundle
from bsard_demo import bundles, cache
from bsard_demo.training import METADATA_FILE, articles_fingerprint

NAME = "statute-minilm"
KEY = "bundle:" + NAME
HYBRID = f"Hybride RRF k=60 ({KEY})"
SEARCH_HYBRID = f"{HYBRID} + structure du code"  # the Search page's hybrid re-scores with the structure by default
ARTICLES = articles(codes=["Code civil"] * 8)
QUESTIONS = pd.DataFrame({
    "id": ["10", "11"], "category": ["Logement", "Famille"], "subcategory": [""] * 2,
    "question": ["Quel est le montant maximal de la garantie locative ?", "Comment obtenir le divorce ?"],
    "extra_description": [""] * 2, "article_ids": ["2", "5"],
})
QUESTION = "Comment résilier mon bail ?"


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """A model trained (by its record) on this corpus, and the hybrid bundle of it and BM25."""
    root = tmp_path_factory.mktemp("bundle-search")
    data = make_data(root / "data", ARTICLES, QUESTIONS)
    from bsard_demo.sources import load_dataset

    sha = articles_fingerprint(load_dataset(str(data)).articles)
    model = shutil.copytree(exported_model(tmp_path_factory), root / "models" / NAME)
    (model / METADATA_FILE).write_text(json.dumps({
        "created": "2026-11-30T10:00:00+00:00", "pairs": 42, "base": {"name": "minilm"}, "settings": {"epochs": 1},
        "dataset": {"name": "frlaw", "split": "train", "articles": 8, "articles_sha256": sha},
        "evaluation": {"split": "test", "measure": "recall@100", "value": 0.748}}))
    bundles.deactivate()
    cache.forget_used()
    dest = root / "bundle"
    assert run_cli("index", "--retriever", "hybrid", "--encoder", str(model), "--data", str(data), "--cache-dir",
                   str(root / "build-cache"), "--export", str(dest), "--no-progress") == 0
    bundles.deactivate()
    cache.forget_used()
    return {"data": data, "bundle": dest}


@pytest.fixture(autouse=True)
def fresh_server(monkeypatch, tmp_path, served):
    """A new server process serving the bundle, its own empty cache, the stored-hybrid rule on."""
    set_app_env(monkeypatch, tmp_path / "app-cache", str(served["data"]), stored_hybrid=True)
    monkeypatch.setenv("BSARD_MODELS", str(tmp_path / "no-models"))
    st.cache_resource.clear()
    with without_bundle(monkeypatch):
        yield
    st.cache_resource.clear()


def app(served, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.secrets["BSARD_INDEX"] = str(served["bundle"])
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    assert_clean(at)
    return at


def columns(at: AppTest) -> list[str]:
    return [h.replace("\\", "") for h in column_names(at)]  # the page escapes Markdown


def test_a_first_visitor_gets_bm25_and_the_bundled_models_hybrid_built_from_nothing(served, monkeypatch):
    from bsard_demo.app import link_policy

    monkeypatch.setattr(link_policy, "PREFER_BUNDLED_MODEL", True)  # the rule when enabled (off by default)
    at = app(served)
    assert at.multiselect(key="kinds").value == ["bm25", "hybrid"]
    assert at.multiselect(key="hybrid_encoders").value == [KEY]
    label = [o for o in at.selectbox(key="encoder").options if o.startswith(NAME)]
    assert label == [f"{NAME} — minilm affiné sur frlaw (split train, 2026-11-30) · index préconstruits · ce corpus"
                     " · Rappel@100 0,748 (split test) · ONNX"]
    at.text_area(key="question").input(QUESTION).run()
    assert_clean(at)
    assert columns(at) == ["BM25", SEARCH_HYBRID]
    assert len([h for h in at.html if h.value.startswith('<div class="bsard-hit')]) == 2 * len(ARTICLES)
    # nothing was built: BM25 and the embeddings come from the bundle, the model encodes the question
    assert {u.source for u in cache.used_entries()} == {"bundle"}
    assert at.number_input(key=f"weight:{KEY}").value == 1.0
    link = at.code[0].value
    assert "systems=bm25&systems=hybrid" in link and "henc=bundle%3Astatute-minilm" in link


def test_a_link_names_the_bundled_model_and_one_this_server_lacks_falls_back(served, monkeypatch):
    from bsard_demo.app import link_policy

    monkeypatch.setattr(link_policy, "PREFER_BUNDLED_MODEL", True)  # the fallback is the default hybrid's encoder
    at = app(served, {"q": QUESTION, "systems": "dense", "enc": KEY})
    assert columns(at) == [f"Dense ({KEY})"]
    # a model this server does not carry: the default hybrid's encoder (the bundled model) instead
    at = app(served, {"q": QUESTION, "systems": "bm25,hybrid", "henc": "bundle:absent"})
    assert columns(at) == ["BM25", SEARCH_HYBRID]
    notes = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "Lien corrigé" in notes and "« bundle:absent »" in notes and f"{KEY} est pris" in notes


def test_the_score_page_offers_the_bundled_models_runs(served):
    at = app(served)
    at.switch_page("pages/score.py").run()
    assert_clean(at)
    options = at.selectbox(key="builtin_system").options
    assert options[-2:] == [f"Dense ({KEY})", HYBRID]  # after the built-in systems (and neighbours when offered)
    at.selectbox(key="builtin_system").select(HYBRID).run()
    # the chosen system is captioned with the model it runs
    assert any(c.value.replace("\\", "").startswith(f"{NAME} — minilm affiné sur frlaw") for c in at.main.caption)
    at.button(key="builtin").click().run()
    assert_clean(at)
    names = [str(i) for d in at.dataframe if "R@100" in d.value.columns for i in d.value.index]
    assert f"{HYBRID} intégré" in names
    assert {u.source for u in cache.used_entries()} == {"bundle"}  # nothing built for it either


def test_without_a_bundle_the_hybrid_of_use_shows_once_its_embeddings_are_in_the_cache(served, tmp_path):
    from bsard_demo.retrievers.dense import DenseRetriever
    from bsard_demo.sources import load_dataset

    def first_visit() -> AppTest:
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
        at.run()
        assert_clean(at)
        return at

    at = first_visit()
    assert at.multiselect(key="kinds").value == ["bm25"]  # nothing stored: no first visitor waits for a build
    assert at.multiselect(key="hybrid_encoders").value == ["use"]
    DenseRetriever.build(load_dataset(str(served["data"])).articles, encoder="use", cache_root=tmp_path / "app-cache")
    st.cache_resource.clear()  # a new process (or a minute later: ui.STORED_RECHECK_S)
    at = first_visit()
    assert at.multiselect(key="kinds").value == ["bm25", "hybrid"]
    assert at.multiselect(key="hybrid_encoders").value == ["use"]


def test_by_default_a_first_visitor_gets_the_zero_shot_hybrid_not_the_bundled_model(served):
    from bsard_demo.app import link_policy

    assert link_policy.PREFER_BUNDLED_MODEL is False  # decided on frlaw-dev (docs/effectiveness.md)
    at = app(served)
    assert at.multiselect(key="hybrid_encoders").value == ["use"]
    assert any(o.startswith(NAME) for o in at.selectbox(key="encoder").options)  # still offered
