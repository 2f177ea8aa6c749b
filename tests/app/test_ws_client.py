"""The browserless load client (``tests/_ws_client.py``) against a real ``streamlit run app.py`` on
the bundled sample: it speaks Streamlit's websocket protocol, reads the hit cards and the Score
page's metrics, and its checks catch a wrong answer. No timing is asserted (figures: bench/)."""
from __future__ import annotations

import asyncio
import json

import pytest

from _app_helpers import sample_run_trec
from _browser import free_port, serve_app
from _ws_client import ProtocolError, Visitor, check_columns, check_r100, score_visit, search_visit
from bsard_demo.cli.main import main
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.sources import load_sample


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_app("sample", tmp_path_factory, browser=False)


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    ds = load_sample()
    return ds, build_retriever(RetrieverSpec("bm25"), ds, cache_root=tmp_path_factory.mktemp("lib-cache"))


def test_a_deep_link_shows_the_library_top_k_and_a_wrong_list_is_caught(server, library):
    ds, bm25 = library
    first, second = list(ds.questions("test")["question"])[:2]
    expected = [h.article_id for h in bm25.search(first, 5)]
    visit = asyncio.run(search_visit(server, {"q": first, "systems": "bm25", "k": "5"}, [expected]))
    assert visit.ok, (visit.wrong, visit.errors)
    assert len(visit.server_ms) == 1 and visit.seconds is not None

    async def page():  # no k: the page shows its default 10 and writes k=10 into the address
        async with Visitor(server) as v:
            return await v.open("search", {"q": first, "systems": "bm25"})
    shown = asyncio.run(page())
    expected = [h.article_id for h in bm25.search(first, 10)]
    assert [c.ids for c in shown.columns()] == [expected]
    assert "k=10" in (shown.query_string or "")
    other = [h.article_id for h in bm25.search(second, 10)]
    assert other != expected
    assert check_columns(shown.columns(), [other])  # another question's answer
    assert check_columns(shown.columns(), [expected[::-1]])  # the right ids, wrong order
    assert check_columns(shown.columns(), [expected, expected])  # a column missing


def test_score_page_builtin_run_equals_the_cli_and_a_wrong_figure_is_caught(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "bm25.trec"
    assert main(["run", "--data", "sample", "--no-progress", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--data", "sample", "--format", "json", str(run)]) == 0
    r100 = f"{100 * json.loads(capsys.readouterr().out)['runs'][run.name]['recall@100']:.2f}"
    visit = asyncio.run(score_visit(server, r100))
    assert visit.ok, (visit.wrong, visit.errors)
    off = f"{float(r100) - 0.01:.2f}"
    visit = asyncio.run(score_visit(server, off))
    assert visit.wrong == [f"R@100 shown {r100} vs CLI {off}"] and not visit.errors


def test_protocol_failures_are_reported_not_raised(server):
    async def unknown_page():
        async with Visitor(server) as v:
            await v.open("search", "")
            await v.goto("nowhere")
    with pytest.raises(ProtocolError, match="no page 'nowhere'"):
        asyncio.run(unknown_page())
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    visit = asyncio.run(search_visit(nobody, "q=x", [[]], timeout=5))
    assert not visit.ok and visit.errors and visit.seconds is None


def test_an_uploaded_run_is_scored_as_evaluate_scores_it(server, tmp_path, capsys):
    """A file dropped on the Score page's uploader (upload URLs, PUT with the XSRF token, the uploader's
    state) is scored: the R@100 shown is ``evaluate``'s for the same file."""
    run = tmp_path / "upload.trec"
    run.write_text(sample_run_trec(3, drop=2), encoding="utf-8")
    assert main(["evaluate", "--data", "sample", "--format", "json", str(run)]) == 0
    r100 = f"{100 * json.loads(capsys.readouterr().out)['runs'][run.name]['recall@100']:.2f}"

    async def upload():
        async with Visitor(server) as v:
            page = await v.open("score")
            return await v.upload(page, [(run.name, run.read_bytes())])
    page = asyncio.run(upload())
    assert page.errors() == [] and check_r100(page, r100) == []
    assert any("upload" in a.body and "format trec" in a.body.lower() for _p, a in page.of_type("alert"))  # validated


def test_widget_states_for_widgets_never_drawn_are_ignored(server, library):
    """Issue 37: a client's state for an id no widget has ("bogus", a session key such as "question") ended
    in « Détail : KeyError » for that session (Streamlit 1.67 raised at the page's first widget); it is
    now dropped before the script reads the session, and the page is the one without it."""
    ds, bm25 = library
    question = list(ds.questions("test")["question"])[0]
    expected = [h.article_id for h in bm25.search(question, 5)]

    async def visit() -> list:
        async with Visitor(server) as v:
            page = await v.open("search", {"q": question, "systems": "bm25", "k": "5"})
            pages = [page]
            for forged in ({"bogus": "x"}, {"question": 3}, {"active_data": "x", "_confirmed_builds": "use"},
                           {"$$ID-0123456789abcdef0123456789abcdef-None": 1, "$$ID-deadbeef-question": "x"}):
                pages.append(await v.send_states(page, forged))
            return pages

    for page in asyncio.run(visit()):
        assert page.errors() == [] and [c.ids for c in page.columns()] == [expected]
