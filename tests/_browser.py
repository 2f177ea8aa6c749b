"""Run ``streamlit run app.py`` on 127.0.0.1 and drive it with Debian's Chromium through Playwright.

Test support: the browser tests (``tests/app/test_browser*.py``) and the ``bench/`` app scripts
import it by name (``from _browser import AppServer``); nothing here depends on pytest at import
time, nothing imports ``bench/``.
Everything stays on the loopback interface. Never run ``playwright install``: the system Chromium
(``/usr/bin/chromium``) is used.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Mapping

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_S = 90
#: The Score page's runs uploader's file input (the labels uploader beside it takes one file, not several).
RUNS_INPUT = "[data-testid='stFileUploaderDropzoneInput'][multiple]"
STEP_MS = 60_000


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (``None`` when Chromium and playwright are present)."""
    if not CHROMIUM.exists() or not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} not found (install Debian's chromium: apt-get install -y chromium)"
    try:
        import playwright.async_api  # noqa: F401 - only checks that it is installed
    except ImportError:
        return "the playwright Python package is not installed"
    return None


def chromium_options() -> dict:
    """Keyword arguments for Playwright's ``chromium.launch``/``launch_persistent_context``."""
    return {"executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS, "headless": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(data: str, cache: Path, **extra: str) -> dict[str, str]:
    """The server's environment: dataset ``data`` (``BSARD_DATA``), index cache ``cache``, offline hub."""
    return {**os.environ, "BSARD_DATA": str(data), "BSARD_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
            "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", **extra}


class ServerError(RuntimeError):
    """The server did not start; the message ends with the tail of its log."""


class AppServer:
    """A ``streamlit run app.py`` on 127.0.0.1 and a free port; use as a context manager.

    ``started`` is the ``time.perf_counter()`` of the process start; ``log`` gets its output;
    ``python`` is the interpreter that runs Streamlit (default: this one; bench_onnx_hosted passes
    the torch-free venv's)."""

    def __init__(self, env: Mapping[str, str], log: Path, *, port: int | None = None, cwd: Path = REPO,
                 python: str = sys.executable) -> None:
        self.env, self.log, self.cwd, self.python = dict(env), Path(log), cwd, python
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.started = 0.0

    def start(self) -> "AppServer":
        cmd = [self.python, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
               "--server.port", str(self.port), "--server.headless", "true", "--server.fileWatcherType", "none"]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(cmd, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    def wait_healthy(self, timeout: float = SERVER_START_S) -> float:
        """Wait for ``/_stcore/health``; returns the seconds since the process started."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - self.started
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise ServerError(f"streamlit did not start (exit {self.proc.poll()}): {self.log_text()[-2000:]}")
            time.sleep(0.05)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def __enter__(self) -> "AppServer":
        if self.proc is None:
            self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- page helpers (sync API)

#: Streamlit's app root once a script run has ended (the attribute its own e2e tests read; it is
#: ``initial`` before the session's first run and ``running`` during one).
IDLE_APP = "[data-testid='stApp'][data-test-script-state='notRunning']"
#: Streamlit's "running" indicator, present while a script runs.
STATUS_WIDGET = "[data-testid='stStatusWidget']"


#: Init script of every page the tests open (:func:`track_runs`): counts, in ``window.__bsardRuns``, the script
#: runs the page asked for (``asked``: BackMsg ``rerun_script`` frames sent on Streamlit's websocket, field 11
#: so first byte 0x5a) and how many of them have ended: a ``new_session`` ForwardMsg (field 4, a run started)
#: received after a request covers the requests sent so far (``started``); the next ``script_finished``
#: (field 6) ends them (``finished``), counted two animation frames later, when the page has drawn that message.
RUNS_JS = r"""(() => {
  if (window.__bsardRuns) return;
  const T = window.__bsardRuns = {asked: 0, started: 0, finished: 0};
  const bytes = d => d instanceof ArrayBuffer ? new Uint8Array(d)
    : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : null;
  const varint = (b, i) => { let v = 0, s = 0, x; do { x = b[i++]; v += (x & 0x7f) * 2 ** s; s += 7; } while (x & 0x80);
    return [v, i]; };
  const kind = b => {  // the field number of a ForwardMsg's type: the first field after hash (1) and metadata (2)
    let i = 0;
    while (i < b.length) {
      let tag, n; [tag, i] = varint(b, i);
      if (tag >> 3 > 2) return tag >> 3;
      if ((tag & 7) !== 2) return -1;
      [n, i] = varint(b, i); i += n;
    }
    return -1;
  };
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    const b = bytes(data);
    if (b && b[0] === 0x5a) T.asked += 1;
    if (!this.__bsardRuns) {
      this.__bsardRuns = true;
      this.addEventListener('message', e => {
        const m = bytes(e.data), k = m ? kind(m) : -1;
        if (k === 4) T.started = T.asked;
        if (k === 6) { const n = T.started; requestAnimationFrame(() => requestAnimationFrame(() => {
          T.finished = Math.max(T.finished, n); })); }
      });
    }
    return send.apply(this, arguments);
  };
})();"""

#: JavaScript: every run the page asked for has ended and been drawn, and Streamlit says it runs nothing.
IDLE_JS = f"""() => {{ const T = window.__bsardRuns;
  return T.finished >= T.asked && !!document.querySelector("{IDLE_APP}")
    && !document.querySelector("{STATUS_WIDGET}"); }}"""


def track_runs(context) -> None:
    """Give every page of the Playwright ``context`` :data:`RUNS_JS`, which :func:`wait_idle` reads."""
    context.add_init_script(RUNS_JS)


def runs_asked(page) -> int:
    """How many script runs the page has asked for (:data:`RUNS_JS`)."""
    return page.evaluate("() => window.__bsardRuns.asked")


def wait_idle(page, timeout_ms: int = STEP_MS) -> None:
    """Wait until Streamlit's script is not running: every run the page asked for has ended and been drawn,
    its app root says notRunning and its status widget is gone.

    A page without :func:`track_runs` waits 300 ms first (the widget alone can be still absent when a run
    has only just started); with it, the wait ends when the runs end (those 300 ms were ~80 waits of the
    browser files, ~24 s, and still too short for a request on loaded cores)."""
    if page.evaluate("() => !window.__bsardRuns"):
        page.wait_for_timeout(300)
        page.wait_for_selector(IDLE_APP, state="attached", timeout=timeout_ms)
        page.wait_for_selector(STATUS_WIDGET, state="detached", timeout=timeout_ms)
        return
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)


QUESTION_SHOWN_JS = "q => document.querySelector('.bsard-question')?.innerText === q"


#: How long an attempt of :func:`ask` waits for its question before it looks whether a search still runs.
ASK_MS = 15_000


def ask(page, question: str, attempts: int = 3, *, hits: bool = False) -> None:
    """Type ``question`` into the Search page's box and press « Rechercher » once the page is
    idle, until the page shows that question (on loaded cores a late rerun can reset the box
    or swallow the click). An attempt waits :data:`ASK_MS` for the question, then for a search
    still running (up to :data:`STEP_MS`) before it looks again: a swallowed click cost a whole
    minute when each attempt waited :data:`STEP_MS` (one test went from 10 s to 70 s).

    ``hits``: the search must also show hits. A page that shows the question but, once idle, no hit
    after :data:`ASK_MS` is asked again, with a warning quoting what it showed. Two runs out of five
    on 7 December (CI included) ended like that once, never when a file ran alone; the cause is not
    known (docs/benchmarks.md, "The suite"). The warning keeps each case in the run's output."""
    box = page.get_by_label("Votre question")
    for attempt in range(attempts):
        wait_idle(page)
        box.fill(question)
        page.get_by_role("button", name="Rechercher").click()
        try:
            page.wait_for_function(QUESTION_SHOWN_JS, arg=question, timeout=ASK_MS)
            shown = True
        except Exception:
            wait_idle(page)
            shown = page.evaluate(QUESTION_SHOWN_JS, question)
        if shown and (not hits or _hits_come(page)):
            return
        if attempt == attempts - 1:
            what = "ended without hits" if shown else "never showed its question"
            raise AssertionError(f"the search of {question[:80]!r} {what}: {page_says(page)}")


def _hits_come(page) -> bool:
    """Whether the page shows a hit within :data:`ASK_MS`, or has one once idle; warns when it does not."""
    try:
        page.locator(".bsard-hit").first.wait_for(state="attached", timeout=ASK_MS)
    except Exception:  # noqa: BLE001 - looked at again once idle
        pass
    wait_idle(page)
    if page.locator(".bsard-hit").count():
        return True
    warnings.warn(f"a search showed its question but no hit once idle; asked again. {page_says(page, chars=600)}",
                  stacklevel=3)
    return False


#: JavaScript: resolves once the browser has drawn two frames (what was just scrolled or changed is on screen).
FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


#: JavaScript: every shown Vega chart of the page has drawn its marks (a canvas or an SVG of marks; the charts
#: of a tab not chosen have no size and draw nothing).
CHARTS_DRAWN_JS = """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
  .filter(c => c.getBoundingClientRect().width > 0).every(c => c.querySelector('canvas, svg.marks'))"""
#: JavaScript, argument an element: it holds table cells (Glide's accessible mirror of a dataframe has filled in).
HAS_CELLS_JS = "e => e.querySelectorAll('td, [role=gridcell]').length > 0"


def wait_drawn(page) -> None:
    """Wait until the browser has drawn what the page just changed (two animation frames)."""
    page.evaluate(FRAMES_JS)


def wait_charts(page, timeout_ms: int = 10_000) -> None:
    """Wait until every Vega chart of the page has drawn, before a screenshot (one that has not after
    ``timeout_ms`` is left as it is: a screenshot checks nothing)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(CHARTS_DRAWN_JS, timeout=timeout_ms)
    except PlaywrightTimeout:
        pass
    wait_drawn(page)


def wait_cells(page, table) -> None:
    """Wait until the dataframe ``table`` (a locator) holds cells in its accessible mirror."""
    page.wait_for_function(HAS_CELLS_JS, arg=table.element_handle(timeout=STEP_MS), timeout=STEP_MS)


def scroll_to(page, locator, attempts: int = 5) -> None:
    """Scroll ``locator``'s first element to the top of the view once the page is idle, again if
    a late rerun replaced the element meanwhile (Playwright's own scroll fails on a detached node
    instead of finding the new one); returns once the scrolled view is drawn (a fixed 300 ms before)."""
    for attempt in range(attempts):
        wait_idle(page)
        try:
            locator.first.evaluate("e => e.scrollIntoView({block: 'start'})", timeout=STEP_MS)
            wait_drawn(page)
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            page.wait_for_timeout(500)


def into_view(page, locator) -> None:
    """Scroll ``locator`` to the middle of the view and wait until that is drawn, before a click on it: when
    Playwright's click scrolls it there itself, the scroll event can come after the click has opened a menu,
    and Streamlit's menus close on a scroll (a phone's built-in menu closed so at every first click, 5 s lost)."""
    locator.evaluate("e => e.scrollIntoView({block: 'center'})", timeout=STEP_MS)
    wait_drawn(page)


def choose(page, label: str, option_text: str) -> None:
    """Pick an option of a Streamlit selectbox/multiselect by typing part of it, then close the
    list by clicking an empty spot (Escape would clear a selectbox)."""
    page.get_by_label(label).click()
    page.keyboard.type(option_text)
    page.get_by_role("option").filter(has_text=option_text).first.click()
    page.mouse.click(900, 12)
    wait_idle(page)


#: JavaScript predicate, argument ``[question, n, hits]``: the search results for ``question`` are
#: drawn and current — the question box shows it, ``n`` server-time captions and at least ``hits``
#: hit cards are there, nothing is stale and the script is idle.
RESULTS_READY_JS = """([question, n, hits]) => {
  const box = document.querySelector('.bsard-question');
  if (!box || box.innerText.trim() !== question.trim()) return false;
  if (document.querySelector("[data-stale='true']")) return false;
  if (document.querySelector("[data-testid='stStatusWidget']")) return false;
  const times = [...document.querySelectorAll("[data-testid='stCaptionContainer']")]
      .filter(e => /\\(serveur\\)/.test(e.innerText));
  return times.length === n && document.querySelectorAll('.bsard-hit').length >= Math.max(1, hits || 0);
}"""

#: JavaScript: the server times (ms) shown on the Search page (in French: « 1 234,5 »), one per column, left to right.
SERVER_TIMES_JS = """() => [...document.querySelectorAll("[data-testid='stCaptionContainer']")]
  .map(e => e.innerText.match(/recherche : ([0-9\u202f]+(?:,[0-9]+)?) ms \\(serveur\\)/)).filter(m => m)
  .map(m => parseFloat(m[1].replace(/\u202f/g, '').replace(',', '.')))"""

#: JavaScript: the article ids of the hit cards, in page order.
HIT_IDS_JS = """() => [...document.querySelectorAll('.bsard-hit')].map(e => e.dataset.article)"""

#: The Search page as the bench scripts drive it: its question box, systems menu, default top-k,
#: and the browser window of every context.
VIEWPORT = {"width": 1440, "height": 1000}
QUESTION_BOX = "Votre question"
SYSTEMS = "Systèmes (côte à côte)"
TOP_K = 10  # the page's default top-k

#: JavaScript: the Score page has settled (script idle, nothing stale).
SETTLED_JS = """() => !document.querySelector("[data-testid='stStatusWidget']")
  && !document.querySelector("[data-stale='true']")"""
#: the metrics table: the dataframe with a column header exactly "R@100" (not "MRR@100")
METRICS_TABLE_JS = """[...document.querySelectorAll("[data-testid='stDataFrame']")].find(e =>
  [...e.querySelectorAll("th, [role='columnheader']")].some(c => c.textContent.trim() === 'R@100'))"""
#: JavaScript: the Score page has settled and shows its metrics table.
SCORED_JS = f"""() => !document.querySelector("[data-testid='stStatusWidget']")
  && !document.querySelector("[data-stale='true']") && !!{METRICS_TABLE_JS}"""
#: JavaScript: ``[header cells, body cells]`` of the metrics table.
TABLE_JS = f"""() => {{ const e = {METRICS_TABLE_JS};
  return [[...e.querySelectorAll("th, [role='columnheader']")].map(c => c.textContent.trim()),
          [...e.querySelectorAll("td, [role='gridcell']")].map(c => c.textContent.trim())]; }}"""
#: JavaScript: the texts of the error elements on the page.
ERRORS_JS = """() => [...document.querySelectorAll("[data-testid='stException'], [data-testid='stAlertContentError']")]
  .map(e => e.innerText.slice(0, 200))"""


def first_row_cell(header: list[str], cells: list[str], name: str) -> str | None:
    """The first row's cell under column ``name`` of :data:`TABLE_JS`'s answer (the mirror lists
    the index column too)."""
    if name not in header or len(cells) < len(header):
        return None
    return cells[header.index(name)]


def table_cells(table) -> list[str]:
    """The cell texts of a Streamlit dataframe (Glide draws on a canvas; its accessible table
    mirror holds the text)."""
    return [c.inner_text().strip() for c in table.locator("td, [role='gridcell']").all()]


# -- pytest fixtures' bodies, shared by the browser test files (pytest imported lazily: the
# -- bench scripts use this module without it) ---------------------------------------------

def require_browser() -> None:
    """Skip without Chromium, or fail when ``BSARD_REQUIRE_BROWSER=1`` (CI) asks for it."""
    import pytest

    reason = browser_missing()
    if reason is None:
        return
    if os.environ.get("BSARD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"BSARD_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def serve_app(data: str, tmp_path_factory, *, browser: bool = True):
    """Generator for a module fixture: the URL of ``streamlit run app.py`` on ``data`` with a
    fresh cache; the server is always stopped, a server that fails to start fails the test.
    ``browser=False``: for a client without Chromium (``tests/_ws_client.py``)."""
    import pytest

    if browser:
        require_browser()
    app = AppServer(app_env(data, tmp_path_factory.mktemp("cache")), tmp_path_factory.mktemp("log") / "streamlit.log")
    try:
        with app:
            yield app.url
    except ServerError as exc:
        pytest.fail(str(exc))


def shared_app(tmp_path_factory):
    """Generator for the session fixture ``sample_app`` (tests/conftest.py): one ``streamlit run app.py``
    on the sample with a fresh cache, for the browser files that only visit it (each start and first run
    cost ~5-7 s of a loaded 2-core machine, once per file before). Every test opens its own pages, so its
    own Streamlit sessions; what the process keeps (built indexes, built-in runs' boards) only makes a later
    visit faster. A server that fails to start fails the tests that use it."""
    import pytest

    require_browser()
    app = AppServer(app_env("sample", tmp_path_factory.mktemp("shared-cache")),
                    tmp_path_factory.mktemp("shared-log") / "streamlit.log")
    try:
        with app:
            yield app
    except ServerError as exc:
        pytest.fail(str(exc))


def page_says(page, app: AppServer | None = None, chars: int = 1500) -> str:
    """For a failed check: what the page's main area shows (its first ``chars`` characters) and the end of
    ``app``'s log (a French error the page drew instead of hits, or the server's traceback)."""
    try:
        text = page.locator("[data-testid='stMain']").inner_text(timeout=5_000)[:chars]
    except Exception as exc:  # noqa: BLE001 - a diagnostic: say why it could not be read
        text = f"(page text unreadable: {type(exc).__name__})"
    log = app.log_text()[-chars:] if app is not None else ""
    return f"page shows:\n{text}\n--- server log (end):\n{log}"


def alive(app: AppServer) -> AppServer:
    """``app``, once checked still running (a shared server that an earlier test ended fails here, with its log)."""
    import pytest

    if app.proc is None or app.proc.poll() is not None:
        pytest.fail(f"the shared streamlit server has ended (exit {app.proc and app.proc.poll()}): "
                    f"{app.log_text()[-2000:]}")
    return app


def browser_context(tmp_path_factory):
    """Generator for a module fixture: a Chromium context with a fresh profile (1440×1000, fr-BE)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), **chromium_options(),
            viewport={"width": 1440, "height": 1000}, locale="fr-BE")
        track_runs(context)
        try:
            yield context
        finally:
            context.close()
