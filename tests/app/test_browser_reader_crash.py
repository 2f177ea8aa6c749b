"""A parquet upload that aborts pyarrow, in Chromium against a real ``streamlit run`` (issue 21 item
4): the server stays up, the Score page names the problem on that file's row, the other file is
scored, and a new visitor still gets search results. ``BSARD_APP_PYTHON`` names the interpreter that
runs Streamlit (the torch-free hosted venv, docs/reliability.md); default: this one. Screenshots:
test-artifacts/reader-crash-*.png."""
from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

import pytest
from test_browser import ARTIFACTS

from _app_helpers import sample_run_trec
from _browser import (
    RUNS_INPUT,
    STEP_MS,
    AppServer,
    ServerError,
    alive,
    app_env,
    browser_context,
    require_browser,
    scroll_to,
    table_cells,
    wait_cells,
    wait_idle,
)
from bsard_demo.sources import load_sample

HOSTILE = Path(__file__).resolve().parents[1] / "runs" / "hostile"


@pytest.fixture(scope="module")
def app(request, tmp_path_factory):
    """The session's server on the sample (tests/conftest.py's ``sample_app``), or, with ``BSARD_APP_PYTHON``, a
    server of that interpreter for this file alone."""
    if not os.environ.get("BSARD_APP_PYTHON"):
        yield alive(request.getfixturevalue("sample_app"))
        return
    require_browser()
    server = AppServer(app_env("sample", tmp_path_factory.mktemp("cache")),
                       tmp_path_factory.mktemp("log") / "streamlit.log",
                       python=os.environ.get("BSARD_APP_PYTHON") or sys.executable)
    try:
        with server:
            yield server
    except ServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def browser(app, tmp_path_factory):
    yield from browser_context(tmp_path_factory)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"reader-crash-{name}.png"))


def test_the_server_survives_a_file_that_aborts_the_reader(app, browser, tmp_path):
    crash = sorted(HOSTILE.glob("abort-*.parquet"))[0]
    good = tmp_path / "bon.trec"
    good.write_text(sample_run_trec(seed=3))
    page = browser.new_page()
    try:
        page.goto(f"{app.url}/score", wait_until="domcontentloaded", timeout=STEP_MS)
        page.get_by_text("Évaluer des runs").first.wait_for(timeout=STEP_MS)
        page.locator(RUNS_INPUT).set_input_files([str(crash), str(good)])
        page.get_by_role("heading", name="Mesures", exact=True).wait_for(timeout=STEP_MS)
        wait_idle(page)
        alerts = page.locator("[data-testid='stAlert']").all_inner_texts()
        assert any(a.startswith(f"{crash.name} : 1 erreur(s)") for a in alerts), alerts
        # the French problem, then the reader's own message in the technical details
        page.get_by_text(f"Détails techniques des problèmes de {crash.name} (messages du lecteur)", exact=True).click()
        problems = page.locator("[data-testid='stExpander']").filter(
            has_text=f"Détails techniques des problèmes de {crash.name}").locator("[data-testid='stDataFrame']")
        problems.wait_for(timeout=STEP_MS)
        scroll_to(page, problems)
        wait_cells(page, problems)
        cells = table_cells(problems)
        assert "reader_crashed" in cells and any(crash.name in c and "damaged or hostile" in c for c in cells), cells
        scroll_to(page, page.get_by_role("heading", name="Validation des fichiers"))
        shot(page, "score")
        metrics = page.locator("[data-testid='stDataFrame']").filter(has_text="R@100").first
        wait_cells(page, metrics)
        assert "bon.trec" in table_cells(metrics)
        assert page.locator("[data-testid='stException']").count() == 0
    finally:
        page.close()
    assert app.proc.poll() is None, app.log_text()[-2000:]
    with urllib.request.urlopen(f"{app.url}/_stcore/health", timeout=10) as r:
        assert r.status == 200
    # a new visitor still gets search results from the same server
    question = load_sample().questions("test").iloc[0]["question"]
    visitor = browser.new_page()
    try:
        visitor.goto(f"{app.url}/?q={urllib.request.quote(question)}", wait_until="domcontentloaded",
                     timeout=STEP_MS)
        visitor.locator(".bsard-hit").first.wait_for(timeout=STEP_MS)
        wait_idle(visitor)
        assert visitor.locator(".bsard-hit").count() >= 1
        shot(visitor, "search-after")
    finally:
        visitor.close()
    assert app.proc.poll() is None
