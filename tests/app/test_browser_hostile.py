"""Hostile data in a real browser: ``streamlit run app.py`` over the hostile local dataset of
``tests/_hostile_data.py`` (``BSARD_DATA`` = a folder whose very name is markup), driven by
Debian's Chromium through Playwright (helpers in ``tests/_browser.py``).

Every payload would set ``window.__xss`` if it ran; the tests read that variable in the page,
look for elements a payload would create, check that the payloads are visible as text and that
5,000-character words wrap instead of widening the page. Also: a run file above
``server.maxUploadSize`` (50 MB), refused by Streamlit in the browser, gets a visible message and
the page keeps working. Screenshots go to ``test-artifacts/hostile-*.png``.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser import ARTIFACTS

from _browser import (
    QUESTION_SHOWN_JS,
    RUNS_INPUT,
    STEP_MS,
    ask,
    browser_context,
    choose,
    runs_asked,
    scroll_to,
    serve_app,
    table_cells,
    wait_cells,
    wait_idle,
)
from _hostile_data import (
    BOLD_MD,
    CATEGORY,
    IMG,
    LONG,
    QUESTION,
    RUN_IMG,
    RUN_MD,
    SCRIPT,
    SVG,
    articles,
    questions,
    run_trec,
    write_dataset,
)

#: Elements or attributes that exist only if a payload was parsed as markup (the one script of the
#: app's own, render.COPY_SCRIPT, is marked ``data-bsard="copy"``).
LIVE_MARKUP = ("img[src='x'], [data-testid='stApp'] script:not([data-bsard='copy']), svg[onload], "
               "a[href^='javascript'], [onerror], [onload], #vg-tooltip-element script")
#: JavaScript: [scrollWidth, clientWidth] of the page and of every card or question box.
WIDTHS_JS = """() => [[document.documentElement.scrollWidth, document.documentElement.clientWidth],
  ...[...document.querySelectorAll('.bsard-hit, .bsard-question, [data-testid="stAlert"]')]
     .map(e => [e.scrollWidth, e.clientWidth])]"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("hostile") / f"données {IMG} {BOLD_MD}")


@pytest.fixture(scope="module")
def server(hostile, tmp_path_factory):
    yield from serve_app(str(hostile), tmp_path_factory)


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    yield from browser_context(tmp_path_factory)


@pytest.fixture
def page(browser, request):
    """A new tab; a screenshot of it when the test failed."""
    failed = request.session.testsfailed
    page = browser.new_page()
    yield page
    if request.session.testsfailed > failed:
        shot(page, f"{request.node.name}-failure")
    page.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"hostile-{name}.png"))


def assert_inert(page) -> None:
    """No payload ran, none became an element, nothing overflows sideways."""
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator(LIVE_MARKUP).count() == 0
    assert page.locator("[data-testid='stException']").count() == 0
    (page_w, page_cw), *boxes = page.evaluate(WIDTHS_JS)
    assert page_w <= page_cw
    assert all(w <= cw + 1 for w, cw in boxes), boxes


def pick_question(page, text: str) -> None:
    """Choose the drill-down's question whose label holds ``text`` (the selectbox named exactly
    "Question": the scatter's points have accessible names holding that word too)."""
    page.get_by_role("combobox", name="Question", exact=True).click()
    page.keyboard.type(text)
    page.get_by_role("option").filter(has_text=text).first.click()
    page.mouse.click(900, 12)
    wait_idle(page)


def test_search_with_hostile_question_and_articles(server, page, hostile):
    page.goto(server, wait_until="domcontentloaded", timeout=STEP_MS)
    box = page.get_by_label("Votre question")
    box.wait_for(timeout=STEP_MS)
    sidebar = page.locator("[data-testid='stSidebar']").inner_text()
    # the server's folder is named by its last part (hostile markup as text), never by the machine's path
    assert hostile.name in sidebar and str(hostile.parent) not in sidebar
    wait_idle(page)  # the first run over: a late rerun of it must not reset what is typed below (seen on loaded cores)
    slider = page.get_by_role("slider").first
    for _ in range(3):  # top-k 100: every article is shown (a key press during a late rerun is lost)
        asked = runs_asked(page)
        slider.focus()
        page.keyboard.press("End")
        try:  # the slider asks for its run a moment after the key (~40 ms here): wait_idle then waits for that run
            page.wait_for_function("n => window.__bsardRuns.asked > n", arg=asked, timeout=5_000)
        except PlaywrightTimeout:  # the key press was lost: the value says so below
            pass
        wait_idle(page)
        if slider.get_attribute("aria-valuenow") == slider.get_attribute("aria-valuemax"):
            break
    assert slider.get_attribute("aria-valuenow") == slider.get_attribute("aria-valuemax")
    ask(page, QUESTION)
    page.locator(".bsard-hit").nth(11).wait_for(timeout=STEP_MS)
    wait_idle(page)
    assert page.locator(".bsard-question").inner_text() == QUESTION
    cards = page.locator(".bsard-hit")
    assert cards.count() == 12
    text = "\n".join(cards.all_inner_texts())
    for art in articles():
        assert art["reference"] in text and art["code"] in text and art["book"] in text and art["chapter"] in text
    assert_inert(page)
    scroll_to(page, page.locator(".bsard-question"))
    shot(page, "search")

    # the full text of the article holding a 5,000-letter word, opened: it wraps inside its card
    card = cards.filter(has_text="ZZZZ").first
    card.locator("summary", has_text="Texte complet").click()
    full = card.locator(".bsard-full")
    full.wait_for(timeout=STEP_MS)
    assert LONG in full.inner_text()
    assert_inert(page)
    scroll_to(page, card.locator("summary"))
    shot(page, "search-long-text")

    # an example whose id, category and text are markup, with a long word in the question
    choose(page, "Exemple de question", "q9")
    q = next(r for r in questions() if "q9" in r["id"])
    page.wait_for_function(QUESTION_SHOWN_JS, arg=q["question"], timeout=STEP_MS)
    wait_idle(page)
    assert page.get_by_text(f"catégorie {q['category']}", exact=False).count() == 1
    assert_inert(page)
    scroll_to(page, page.locator(".bsard-question"))
    shot(page, "search-long-question")


def test_score_page_with_hostile_runs(server, page, tmp_path):
    runs = [tmp_path / RUN_IMG, tmp_path / RUN_MD]
    runs[0].write_bytes(run_trec())
    runs[1].write_bytes(run_trec(reverse=True))
    page.goto(f"{server}/score", wait_until="domcontentloaded", timeout=STEP_MS)
    page.get_by_text("Évaluer des runs").first.wait_for(timeout=STEP_MS)
    page.locator(RUNS_INPUT).set_input_files([str(r) for r in runs])
    page.get_by_role("heading", name="Comparaison deux à deux").wait_for(timeout=STEP_MS)
    wait_idle(page)
    alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
    for name in (RUN_IMG, RUN_MD):
        assert any(a.startswith(f"{name} : format trec") for a in alerts), (name, alerts)
        assert page.get_by_text(f"Problèmes de {name}", exact=True).count() == 1
    assert_inert(page)

    # the problems of the first file list its run tags and unknown article id, as text
    page.get_by_text(f"Détails techniques des problèmes de {RUN_IMG} (messages du lecteur)", exact=True).click()
    problems = page.locator("[data-testid='stExpander']").filter(
        has_text=f"Détails techniques des problèmes de {RUN_IMG}").locator("[data-testid='stDataFrame']")
    problems.wait_for(timeout=STEP_MS)
    scroll_to(page, problems)
    wait_cells(page, problems)
    cells = " ".join(table_cells(problems))
    assert SCRIPT in cells and SVG in cells
    table = page.locator("[data-testid='stDataFrame']").filter(has_text="R@100").first
    scroll_to(page, table)
    wait_cells(page, table)
    assert {RUN_IMG, RUN_MD} <= set(table_cells(table))

    # a chart tooltip shows the run name as text
    scroll_to(page, page.get_by_role("heading", name="Graphiques"))
    chart = page.locator("[data-testid='stVegaLiteChart']").first
    chart.locator("canvas, svg.marks").first.wait_for(timeout=STEP_MS)  # Vega has drawn
    bb = chart.bounding_box()
    tooltip = page.locator("#vg-tooltip-element")
    for attempt in range(30):  # sweep the first bars (the first run's) until a tooltip shows
        fx = 0.08 + 0.02 * (attempt % 10)
        page.mouse.move(bb["x"] + bb["width"] * fx, bb["y"] + bb["height"] * 0.6)
        page.wait_for_timeout(200)
        if tooltip.count() and tooltip.is_visible():
            break
    assert tooltip.is_visible()
    assert RUN_IMG in tooltip.inner_text() or RUN_MD in tooltip.inner_text()
    assert tooltip.locator("img, script, svg, a, b").count() == 0
    shot(page, "score-tooltip")
    assert_inert(page)

    # the A-vs-B scatter (the three questions score alike: one point on top of the others): its tooltip
    # shows the markup question text as text, and a click opens that question in the drill-down
    scroll_to(page, page.get_by_role("heading", name="Run A contre run B, question par question"))
    ab = page.locator("[class*='st-key-ab_chart_']").first
    point = ab.locator("path[role='graphics-symbol'][aria-roledescription='circle']").last
    point.wait_for(timeout=STEP_MS)
    box = point.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    tooltip.wait_for(state="visible", timeout=STEP_MS)
    shown = tooltip.inner_text()
    (top,) = [q for q in questions() if q["question"] in shown]
    assert RUN_IMG in shown and RUN_MD in shown and top["category"] in shown, shown
    assert tooltip.locator("img, script, svg, a, b").count() == 0
    shot(page, "score-ab-tooltip")
    assert_inert(page)
    scroll_to(page, page.get_by_role("heading", name="Examiner une question"))  # show another
    pick_question(page, "n° 1 ·" if top["id"] != "1" else "q9")
    scroll_to(page, page.get_by_role("heading", name="Run A contre run B, question par question"))
    box = ab.locator("path[role='graphics-symbol'][aria-roledescription='circle']").last.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_function(QUESTION_SHOWN_JS, arg=top["question"], timeout=STEP_MS)
    wait_idle(page)
    assert_inert(page)

    # drill-down of question 1 (its text and category are markup), its gold articles' text as text
    pick_question(page, "n° 1 ·")
    page.wait_for_function(QUESTION_SHOWN_JS, arg=QUESTION, timeout=STEP_MS)
    wait_idle(page)
    scroll_to(page, page.get_by_role("heading", name="Examiner une question"))
    assert page.locator(".bsard-question").inner_text() == QUESTION
    assert page.get_by_text(f"Catégorie : {CATEGORY}", exact=True).count() == 1
    first = next(a for a in articles() if a["id"] == "1")
    texts = page.locator(".bsard-text").all_inner_texts()
    assert any(t.strip() == first["article"] for t in texts), texts[:3]
    shot(page, "score-drill-down")
    assert_inert(page)


def test_upload_above_the_limit_is_refused_with_a_message(server, page, tmp_path):
    big = tmp_path / "enorme.trec"
    with open(big, "wb") as f:
        f.truncate(51 * 2**20)  # 51 MiB (sparse): above server.maxUploadSize = 50
    ok = tmp_path / RUN_IMG
    ok.write_bytes(run_trec())
    page.goto(f"{server}/score", wait_until="domcontentloaded", timeout=STEP_MS)
    notice = page.locator(".bsard-upload-refused")
    notice.wait_for(state="attached", timeout=STEP_MS)  # drawn hidden with the page
    wait_idle(page)
    assert notice.count() == 1 and not notice.is_visible()
    dropzone = page.locator(RUNS_INPUT)
    dropzone.set_input_files(str(big))
    notice.wait_for(state="visible", timeout=STEP_MS)
    assert "Fichier refusé" in notice.inner_text() and "limite de 50 Mo" in notice.inner_text()
    chip = page.locator("[data-testid='stFileChip']").filter(has_text="enorme.trec")
    assert chip.get_attribute("aria-invalid") == "true"
    assert "File must be 50.0MB or smaller" in chip.inner_text()  # Streamlit's own message (on hover)
    wait_idle(page)
    assert page.get_by_text("Validation des fichiers").count() == 0  # nothing reached the server
    shot(page, "upload-too-large")

    # the page still works: a normal file next to it is scored; removing the big one hides the notice
    dropzone.set_input_files(str(ok))
    page.get_by_text("Validation des fichiers").wait_for(timeout=STEP_MS)
    wait_idle(page)
    alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
    assert any(a.startswith(f"{RUN_IMG} : format trec") for a in alerts)
    assert not any("enorme" in a for a in alerts)
    page.get_by_role("button", name="Remove enorme.trec").click()
    notice.wait_for(state="hidden", timeout=STEP_MS)
    assert_inert(page)
