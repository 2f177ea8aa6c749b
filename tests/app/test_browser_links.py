"""Shareable Search links in a real browser: ``streamlit run app.py`` driven by Debian's Chromium.

A link with ``q``, ``systems`` (comma form) and ``k`` shows the library's own top k; a new search
typed on the page rewrites the address bar and the copyable link; reopening that address in a
new tab (a new session) gives the same hits. Skipped without Chromium unless
``BSARD_REQUIRE_BROWSER=1``. Never run ``playwright install``: the system Chromium is used.
"""
from __future__ import annotations

import urllib.parse

import pytest

from _browser import (
    HIT_IDS_JS,
    RESULTS_READY_JS,
    STEP_MS,
    AppServer,
    ServerError,
    app_env,
    ask,
    browser_context,
    require_browser,
    wait_idle,
)
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.sources import load_sample

FIRST = "Mon propriétaire peut-il garder ma garantie locative ?"
SECOND = "divorce & pension alimentaire <b>enfants</b>"


@pytest.fixture(scope="module")
def cache(tmp_path_factory, sample_use_index):
    from _small_sample import cache_copy

    return cache_copy(sample_use_index, tmp_path_factory.mktemp("links-cache"))


@pytest.fixture(scope="module")
def server(cache, tmp_path_factory):
    """The app on the sample, its index cache shared with the test (the expected rankings load
    the embeddings the server built instead of encoding the corpus again)."""
    require_browser()
    app = AppServer(app_env("sample", cache), tmp_path_factory.mktemp("links-log") / "streamlit.log")
    try:
        with app:
            yield app.url
    except ServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    yield from browser_context(tmp_path_factory)


def library_top(cache, question: str, k: int) -> list[str]:
    """BM25 then the link's hybrid (BM25 + USE + neighbours, RRF k=60, weights 1, 0.5, 0.5, with the
    structure re-scoring the page adds by default: the CLI's ``run --retriever hybrid --encoder
    use,neighbours --structure``): the library's top k, column after column."""
    ds = load_sample()
    bm25 = RetrieverSpec("bm25")
    hybrid = hybrid_spec("use,neighbours", structure=True)
    return [h.article_id for spec in (bm25, hybrid)
            for h in build_retriever(spec, ds, cache_root=cache).search(question, k)]


def query(url: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query, keep_blank_values=True)


#: JavaScript: what RESULTS_READY_JS looks at, for the message of a wait that timed out.
PAGE_STATE_JS = """() => ({question: document.querySelector('.bsard-question')?.innerText,
  stale: document.querySelectorAll("[data-stale='true']").length,
  running: !!document.querySelector("[data-testid='stStatusWidget']"),
  times: [...document.querySelectorAll("[data-testid='stCaptionContainer']")]
    .filter(e => /\\(serveur\\)/.test(e.innerText)).length,
  hits: document.querySelectorAll('.bsard-hit').length,
  errors: [...document.querySelectorAll("[data-testid='stException'], [data-testid='stAlert']")]
    .map(e => e.innerText.slice(0, 200))})"""


def wait_results(page, question: str, columns: int, hits: int) -> list[str]:
    try:
        page.wait_for_function(RESULTS_READY_JS, arg=[question, columns, hits], timeout=STEP_MS * 3)
    except Exception as exc:  # once in a loaded full run (never alone): say what the page showed instead
        raise AssertionError(f"results for {question!r} not ready: {page.evaluate(PAGE_STATE_JS)}") from exc
    wait_idle(page)
    return page.evaluate(HIT_IDS_JS)


def test_a_link_opens_the_search_and_follows_the_next_one(server, browser, cache):
    link = f"{server}/?" + urllib.parse.urlencode({"q": FIRST, "systems": "bm25,hybrid", "henc": "use,neighbours",
                                                   "k": 6})
    expected = library_top(cache, FIRST, 6)  # first: use's embeddings stored, so the link needs no first build
    page = browser.new_page()
    try:
        page.goto(link, wait_until="domcontentloaded", timeout=STEP_MS)
        shown = wait_results(page, FIRST, 2, 12)
        assert shown == expected
        assert page.get_by_label("Votre question").input_value() == FIRST
        assert page.locator("[data-testid='stException']").count() == 0
        # the address bar holds the search in its written form (systems repeated, hybrid settings)
        page.wait_for_function("() => location.search.includes('henc=')", timeout=STEP_MS)
        assert query(page.url) == {"q": [FIRST], "systems": ["bm25", "hybrid"], "k": ["6"],
                                   "henc": ["use", "neighbours"], "struct": ["1"], "fusion": ["rrf"], "rrfk": ["60"],
                                   "w": ["1", "0.5", "0.5"]}

        # a new search typed on the page: the address bar and the copyable link follow
        ask(page, SECOND)
        second = wait_results(page, SECOND, 2, 12)
        assert second == library_top(cache, SECOND, 6)
        page.wait_for_function("(q) => new URLSearchParams(location.search).get('q') === q", arg=SECOND,
                               timeout=STEP_MS)
        address = page.url
        assert query(address)["q"] == [SECOND] and query(address)["systems"] == ["bm25", "hybrid"]
        page.get_by_text("Partager cette recherche", exact=True).click()  # the link, one tap away
        code = page.locator("[data-testid='stCode']").first
        code.wait_for(timeout=STEP_MS)
        shared = code.inner_text().strip()
        assert shared.startswith(server) and query(shared) == query(address)

        # the copy button puts that link on the clipboard
        browser.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
        wait_idle(page)
        code.scroll_into_view_if_needed()
        for attempt in range(3):  # the button shows on hover only: hover again if the view moved meanwhile
            code.hover()
            try:
                page.locator("[data-testid='stCode'] button").first.click(timeout=5_000)
                break
            except Exception:
                if attempt == 2:
                    raise
        assert page.evaluate("() => navigator.clipboard.readText()").strip() == shared

        # reopening the address (a new tab: a new session) gives the same hits
        other = browser.new_page()
        try:
            other.goto(shared, wait_until="domcontentloaded", timeout=STEP_MS)
            assert wait_results(other, SECOND, 2, 12) == second
            assert query(other.url) == query(address)
        finally:
            other.close()
    finally:
        page.close()


def test_a_hostile_link_runs_nothing(server, browser):
    """``q`` and the other values of a link are shown as text, and the note on the invalid ones too."""
    script, img = "<script>window.__xss=1</script>", "<img src=x onerror=window.__xss=1>"
    link = f"{server}/?" + urllib.parse.urlencode([("q", f"{script} garantie"), ("systems", f"bm25,{img}"), (img, "1")])
    page = browser.new_page()
    try:
        page.goto(link, wait_until="domcontentloaded", timeout=STEP_MS)
        wait_results(page, f"{script} garantie", 1, 1)
        assert page.locator(".bsard-question").inner_text().strip() == f"{script} garantie"
        note = page.get_by_text("Lien corrigé").first
        note.wait_for(timeout=STEP_MS)
        assert img in note.inner_text()
        assert page.evaluate("() => window.__xss") is None
        assert page.locator("img[src='x']").count() == 0
        assert page.evaluate("() => [...document.scripts].every(s => !s.textContent.includes('__xss'))")
        assert query(page.url) == {"q": [f"{script} garantie"], "systems": ["bm25"], "k": ["10"]}
    finally:
        page.close()
