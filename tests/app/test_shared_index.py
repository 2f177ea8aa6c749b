"""An index is built once per server process and shared by every browser session and page.

Two ``AppTest`` sessions run in this process (as two visitors of one ``streamlit run``): the first
searches, the second scores the built-in BM25 run on the other page. The dataset is a fresh local
folder (a copy of the sample), so no index of it exists in the process-wide registry yet.
"""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import bsard_demo.app.state as app_state
import bsard_demo.app.ui as ui
from bsard_demo.app.state import data_key
from bsard_demo.retrievers import RetrieverSpec
from bsard_demo.sources import load_sample

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 120


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A local copy of the sample (articles + test questions), made the app's default dataset."""
    ds = load_sample()
    data = tmp_path / "corpus"
    data.mkdir()
    ds.articles.to_csv(data / "articles.csv", index=False)
    q = ds.questions("test").copy()
    q["article_ids"] = [",".join(ids) for ids in q["article_ids"]]
    q.to_csv(data / "questions_test.csv", index=False)
    monkeypatch.setenv("BSARD_DATA", str(data))
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(REPO)
    return data


def test_two_sessions_share_one_bm25_index(folder, monkeypatch, caplog):
    built, handed_out = [], []
    real_build, real_get = app_state.build_retriever, ui.get_retriever

    def counting_build(spec, dataset, **kwargs):
        retriever = real_build(spec, dataset, **kwargs)
        built.append((spec.kind, retriever))
        return retriever

    def recording_get(registry, data, spec, **kwargs):
        retriever = real_get(registry, data, spec, **kwargs)
        handed_out.append((spec.kind, retriever))
        return retriever

    monkeypatch.setattr(app_state, "build_retriever", counting_build)
    monkeypatch.setattr(ui, "get_retriever", recording_get)
    caplog.set_level(logging.INFO, logger="bsard_demo.app.state")

    first = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    first.run()
    first.text_area(key="question").input("Mon propriétaire peut-il garder ma garantie locative ?").run()
    assert not first.exception and not first.error
    assert sum(h.value.startswith('<div class="bsard-hit') for h in first.html) == 10

    second = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)  # another visitor
    second.run()
    second.switch_page("pages/score.py").run()
    second.button(key="builtin").click().run()
    assert not second.exception and not second.error
    assert any("R@100" in d.value.columns for d in second.dataframe)  # the built-in run was scored

    assert [kind for kind, _ in built] == ["bm25"]  # one build for two sessions and two pages
    bm25 = built[0][1]
    assert len(handed_out) >= 2 and all(r is bm25 for _, r in handed_out)
    key = (data_key(str(folder)), RetrieverSpec("bm25").key())
    assert key in ui.index_registry()
    building = [r.getMessage() for r in caplog.records if r.getMessage().startswith("building ")]
    assert building == [f"building bm25 index over {folder}"]
