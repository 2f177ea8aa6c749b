"""The learned ranker on the Search page (``AppTest``) and ``run --retriever default``: with a ranker
fitted on the corpus in ``$BSARD_MODELS`` and ``use``'s embeddings stored, a first visitor gets BM25
and the ranker, whose hits are the library's; ``run --retriever default`` ranks exactly as that
column; without the stored embeddings the first visitor gets the hybrid of the neighbours instead
(nothing to build), and the CLI says the same; a damaged ranker folder is one error on its column;
the ranker's hits carry why-lines from its input systems' ranks; the Score page runs it as a built-in."""
from __future__ import annotations

import shutil

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from _app_helpers import REPO, TIMEOUT, assert_clean, column_names, set_app_env
from bsard_demo.cli.main import main

QUESTION = "Mon propriétaire peut-il garder ma garantie locative ?"


@pytest.fixture
def server(sample_ranker, monkeypatch, tmp_path):
    root, ranker, cache_dir = sample_ranker
    app_cache = tmp_path / "app-cache"
    shutil.copytree(cache_dir, app_cache)  # the sample's BM25 and use embeddings: stored
    set_app_env(monkeypatch, app_cache, "sample", stored_hybrid=True)
    monkeypatch.setenv("BSARD_MODELS", str(ranker.parent))
    monkeypatch.delenv("BSARD_INDEX", raising=False)
    st.cache_resource.clear()
    yield ranker, app_cache
    st.cache_resource.clear()


def visit(params: dict | None = None, clean: bool = True) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    if clean:
        assert_clean(at)
    return at


def columns(at: AppTest) -> list[str]:
    return [h.replace("\\", "") for h in column_names(at)]


def hit_ids(at: AppTest, column: int) -> list[str]:
    hits = [h.value.split('data-article="')[1].split('"')[0] for h in at.html
            if h.value.startswith('<div class="bsard-hit')]
    k = len(hits) // len(columns(at))
    return hits[column * k:(column + 1) * k]


def default_run(tmp_path, cache, capsys) -> tuple[list[str], str]:
    out = tmp_path / "default.trec"
    capsys.readouterr()
    assert main(["run", "--retriever", "default", "--data", "sample", "--split", "test", "--cache-dir", str(cache),
                 "--index", "", "--out", str(out), "--no-progress"]) == 0
    return out.read_text().splitlines(), capsys.readouterr().err


def test_a_first_visitor_gets_the_ranker_and_run_default_ranks_as_its_column(server, tmp_path, capsys):
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.sources import load_dataset

    ranker, cache = server
    at = visit()
    assert at.multiselect(key="kinds").value == ["bm25", "ranker"]
    at.text_area(key="question").input(QUESTION).run()
    assert_clean(at)
    assert columns(at) == ["BM25", "Classement appris (sample-ranker)"]
    ds = load_dataset("sample")
    library = build_retriever(RetrieverSpec("ranker", {"model": str(ranker)}), ds, cache_root=cache)
    k = at.slider(key="top_k").value
    assert hit_ids(at, 1) == [h.article_id for h in library.search(QUESTION, k)]
    # each hit says where its input systems ranked it
    ranker_hits = [h.value for h in at.html if h.value.startswith('<div class="bsard-hit')][k:]
    assert sum('class="bsard-why"' in h and "BM25 n°" in h for h in ranker_hits) >= k // 2
    lines, err = default_run(tmp_path, cache, capsys)
    assert '"kind": "ranker"' in err and str(ranker) in err
    first = str(ds.questions("test")["id"].iloc[0])
    text = ds.questions("test")["question"].iloc[0]
    assert [line.split()[2] for line in lines if line.split()[0] == first][:10] == \
        [h.article_id for h in library.search(text, 10)]


def test_without_stored_embeddings_the_first_visitor_gets_bm25_and_the_neighbours(server, tmp_path, capsys):
    _, cache = server
    shutil.rmtree(cache / "dense")  # use's embeddings gone: neither the ranker nor use answers at once
    at = visit()
    assert at.multiselect(key="kinds").value == ["bm25", "hybrid"]
    assert at.multiselect(key="hybrid_encoders").value == ["neighbours"]
    assert at.checkbox(key="hybrid_structure").value
    at.text_area(key="question").input(QUESTION).run()
    assert_clean(at)
    assert columns(at) == ["BM25", "Hybride RRF k=60 w=1,0.5 (neighbours) + structure du code"]
    _, err = default_run(tmp_path, cache, capsys)
    assert '"kind": "neighbours"' in err and '"structure"' in err and '"kind": "ranker"' not in err


def test_a_damaged_ranker_is_one_error_on_its_column(server, tmp_path):
    ranker, _ = server
    trees = ranker / "trees.json"
    saved = trees.read_bytes()
    try:
        trees.write_bytes(saved[:-10])
        at = visit({"q": QUESTION, "systems": ["bm25", "ranker"]}, clean=False)
        assert not at.exception
        errors = [e.value.replace("\\", "") for e in at.error]  # the page escapes Markdown
        assert len(errors) == 1 and errors[0].startswith("« Classement appris » est indisponible")  # in French
        details = [c.value.replace("\\", "") for e in at.main.expander if e.label == "Détails techniques de l'erreur"
                   for c in e.caption]
        assert any("trees.json" in d for d in details) and not any("Traceback" in d for d in details)
        assert columns(at) == ["BM25"]
    finally:
        trees.write_bytes(saved)


def test_the_score_page_runs_the_ranker_as_a_builtin(server):
    at = visit()
    at.switch_page("pages/score.py").run()
    assert_clean(at)
    label = "Classement appris (sample-ranker)"
    assert at.selectbox(key="builtin_system").options[-1] == label
    at.selectbox(key="builtin_system").select(label).run()
    at.button(key="builtin").click().run()
    assert_clean(at)
    names = [str(i) for d in at.dataframe if "R@100" in d.value.columns for i in d.value.index]
    assert f"{label} intégré" in names



def test_the_score_page_describes_the_ranker_by_its_own_record(server):
    """The built-in « Classement appris » is captioned with the ranker's record (its name, fingerprint and own
    dev figure), not with the record of the adapter it uses, and no caption names a folder of this machine."""
    import json

    from bsard_demo.app.builds import recorded_figure
    from bsard_demo.app.naming import digests_fingerprint

    ranker, _ = server
    root = ranker.parent.parent
    record = json.loads((ranker / "bsard_training.json").read_text(encoding="utf-8"))
    at = visit()
    at.switch_page("pages/score.py").run()
    at.selectbox(key="builtin_system").select("Classement appris (sample-ranker)").run()
    assert_clean(at)
    captions = [c.value.replace("\\", "") for c in at.caption]
    (line,) = [c for c in captions if c.startswith("sample-ranker — classement appris")]
    assert f"empreinte {digests_fingerprint(record['weights_sha256'])}" in line
    figure = recorded_figure(record["evaluation"])
    assert figure and figure in line
    assert not any("adaptateur" in c for c in captions)
    assert not any(str(root) in c for c in captions + [m.value for m in at.sidebar.markdown])
