"""The app in a real browser: ``streamlit run app.py`` driven by Debian's Chromium via Playwright.

Skipped when /usr/bin/chromium is missing, unless ``BSARD_REQUIRE_BROWSER=1`` (CI), which turns
the skip into a failure. Screenshots go to ``test-artifacts/``; with ``BSARD_UPDATE_SCREENSHOTS=1``
they are also copied to ``docs/screenshots/`` (referenced by the README).
Never run ``playwright install``: the system Chromium is used.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from _app_helpers import CLI_ENV, sample_run_trec

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
SCREENSHOTS = REPO / "docs" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 90
STEP_MS = 60_000


def _require_browser() -> None:
    if not CHROMIUM.exists() or not os.access(CHROMIUM, os.X_OK):
        reason = f"{CHROMIUM} not found (install Debian's chromium: apt-get install -y chromium)"
        if os.environ.get("BSARD_REQUIRE_BROWSER") == "1":
            pytest.fail(f"BSARD_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    try:
        import playwright.sync_api  # noqa: F401 - only checks that it is installed
    except ImportError:
        if os.environ.get("BSARD_REQUIRE_BROWSER") == "1":
            pytest.fail("BSARD_REQUIRE_BROWSER=1 but the playwright package is not installed")
        pytest.skip("the playwright Python package is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A ``streamlit run app.py`` on a free port with the sample and a fresh cache; always stopped."""
    _require_browser()
    port = _free_port()
    cache = tmp_path_factory.mktemp("cache")
    log = tmp_path_factory.mktemp("log") / "streamlit.log"
    env = {**os.environ, "BSARD_DATA": "sample", "BSARD_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start (exit {proc.poll()}): {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1440, "height": 1000}, locale="fr-BE")
        try:
            yield context
        finally:
            context.close()


def _screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    if os.environ.get("BSARD_UPDATE_SCREENSHOTS") == "1" and not name.endswith("-failure"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / f"{name}.png")
    return path


def _wait_idle(page) -> None:
    """Wait until Streamlit's script is not running (its status widget gone)."""
    page.wait_for_timeout(300)
    page.wait_for_selector("[data-testid='stStatusWidget']", state="detached", timeout=STEP_MS)


def _choose(page, label: str, option_text: str) -> None:
    """Pick an option of a Streamlit selectbox/multiselect by typing part of it, then close the
    list by clicking an empty spot (Escape would clear a selectbox)."""
    page.get_by_label(label).click()
    page.keyboard.type(option_text)
    page.get_by_role("option").filter(has_text=option_text).first.click()
    page.mouse.click(900, 12)
    _wait_idle(page)


def test_search_page_shows_hits(server, browser):
    page = browser.new_page()
    try:
        page.goto(server, wait_until="domcontentloaded", timeout=STEP_MS)
        box = page.get_by_label("Votre question")
        box.wait_for(timeout=STEP_MS)
        expect_text = "FICTIFS"
        page.get_by_text(expect_text, exact=False).first.wait_for(timeout=STEP_MS)
        box.fill("Mon propriétaire peut-il garder ma garantie locative ?")
        page.get_by_role("button", name="Rechercher").click()
        page.locator(".bsard-hit").first.wait_for(timeout=STEP_MS)
        _wait_idle(page)
        hits = page.locator(".bsard-hit")
        assert hits.count() == 10
        assert page.locator(".bsard-hit mark").count() > 0  # the question's terms are highlighted
        # the script never ran into an error or exception element
        assert page.locator("[data-testid='stException']").count() == 0

        # For the screenshot: an example question (gold marks) with BM25 and the hybrid side by side.
        _choose(page, "Exemple de question", "n° 4 ·")
        _choose(page, "Systèmes (côte à côte)", "Hybride")
        page.get_by_role("heading", name=re.compile("^Hybride")).wait_for(timeout=STEP_MS)
        page.locator(".bsard-missed").nth(1).wait_for(timeout=STEP_MS)
        _wait_idle(page)
        assert page.locator(".bsard-badge.gold").count() >= 1
        assert page.locator(".bsard-badge.up, .bsard-badge.down, .bsard-badge.same, .bsard-badge.new").count() >= 1
        page.get_by_text("Exemple de question").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        _screenshot(page, "search")
    except Exception:
        _screenshot(page, "search-failure")
        raise
    finally:
        page.close()


def test_score_page_upload_matches_cli(server, browser, tmp_path):
    run_file = tmp_path / "systeme_a.trec"
    run_file.write_text(sample_run_trec(seed=3))
    other = tmp_path / "systeme_b.trec"
    other.write_text(sample_run_trec(seed=4, drop=2))
    cli = subprocess.run([sys.executable, "-m", "bsard_demo", "evaluate", "--data", "sample", "--format", "json",
                          str(run_file)], cwd=REPO, env={**os.environ, **CLI_ENV}, capture_output=True, text=True,
                         timeout=120)
    assert cli.returncode == 0, cli.stderr
    expected = f"{100 * json.loads(cli.stdout)['runs']['systeme_a.trec']['recall@100']:.2f}"

    page = browser.new_page()
    try:
        page.goto(f"{server}/score", wait_until="domcontentloaded", timeout=STEP_MS)
        page.get_by_text("Évaluer des runs").first.wait_for(timeout=STEP_MS)
        page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files([str(run_file), str(other)])
        page.get_by_text("Validation des fichiers").wait_for(timeout=STEP_MS)
        _wait_idle(page)
        table = page.locator("[data-testid='stDataFrame']").filter(has_text="R@100").first
        table.wait_for(timeout=STEP_MS)
        table.scroll_into_view_if_needed()
        # Glide data grid draws on a canvas; its accessible table mirror holds the cell text.
        cells = table.locator("td, [role='gridcell']")
        texts = [c.inner_text() for c in cells.all()]
        assert expected in [t.strip() for t in texts], (expected, texts)
        assert page.locator("[data-testid='stException']").count() == 0
        page.get_by_text("Comparaison deux à deux").wait_for(timeout=STEP_MS)
        page.get_by_role("heading", name="Mesures", exact=True).evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(1000)  # let the Vega charts draw
        _screenshot(page, "score")
    except Exception:
        _screenshot(page, "score-failure")
        raise
    finally:
        page.close()
