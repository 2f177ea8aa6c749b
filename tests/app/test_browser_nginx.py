"""deploy/nginx.conf.template run for real (issue 37): ``deploy/run.sh nginx`` in front of a ``streamlit run``
on the sample. Streamlit's ``/_stcore/metrics`` stops at nginx (404, however the path is spelled); three cold
page loads in a row (111 requests each, their websocket included) pass; a burst beyond the rate, or more
connections than the limit, from one client address get 429, while another client and this machine still get
through. The client address is the one a TLS front passes in X-Forwarded-For (trusted from 127.0.0.1)."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from _browser import REPO, alive, chromium_options, free_port
from _ws_client import Visitor

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
#: The template's limits (deploy/nginx.conf.template).
BURST, CONNECTIONS = 400, 20


def require_nginx() -> None:
    """Skip without nginx, or fail when ``BSARD_REQUIRE_BROWSER=1`` (CI, which installs it) asks for it."""
    if os.access(NGINX, os.X_OK):
        return
    reason = "nginx not found (apt-get install -y nginx)"
    if os.environ.get("BSARD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"BSARD_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def servers(sample_app, tmp_path_factory):
    """``(nginx URL, streamlit URL)``: deploy/run.sh's nginx in front of the session's app on the sample
    (tests/conftest.py's ``sample_app``)."""
    require_nginx()
    app = alive(sample_app)
    run = tmp_path_factory.mktemp("nginx-run")
    port = free_port()
    env = {**os.environ, "NGINX_PORT": str(port), "APP_PORTS": str(app.port), "RUN_DIR": str(run),
           "PYTHON": sys.executable, "PATH": f"{os.path.dirname(NGINX)}:{os.environ.get('PATH', '')}"}
    nginx = subprocess.Popen(["bash", str(REPO / "deploy" / "run.sh"), "nginx"], env=env,
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while status(url + "/_stcore/health") != 200:
            if nginx.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"nginx did not start: {nginx.stderr.read().decode(errors='replace')[-1000:]}")
            time.sleep(0.1)
        yield url, app.url
    finally:
        os.killpg(nginx.pid, signal.SIGTERM)
        nginx.wait(timeout=15)


def status(url: str, client: str | None = None) -> int:
    """The HTTP status of a GET of ``url``, as a visitor at address ``client`` behind the TLS front."""
    request = urllib.request.Request(url, headers={"X-Forwarded-For": client} if client else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def test_metrics_stop_at_nginx(servers):
    url, direct = servers
    assert status(direct + "/_stcore/metrics") == 200  # Streamlit serves them (no option turns them off)
    for path in ("/_stcore/metrics", "//_stcore/metrics", "/_stcore/%6detrics", "/_stcore/metrics?families=x",
                 "/_stcore/metrics/"):
        assert status(url + path, "198.51.100.1") == 404, path
    assert status(url + "/_stcore/health", "198.51.100.1") == 200


def test_cold_page_loads_pass_and_a_burst_beyond_the_rate_gets_429(servers):
    url, _ = servers
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(**chromium_options())
        try:
            for _ in range(3):  # a visitor reloading twice, nothing cached: 111 requests each, the websocket too
                context = browser.new_context(extra_http_headers={"X-Forwarded-For": "198.51.100.2"})
                page = context.new_page()
                codes: list[int] = []
                page.on("response", lambda r, seen=codes: seen.append(r.status))
                page.goto(url + "/", wait_until="networkidle", timeout=120_000)
                page.get_by_text("Rechercher des articles de loi").first.wait_for(timeout=120_000)
                assert codes and max(codes) < 400, sorted(set(codes))
                context.close()
        finally:
            browser.close()
    # one client's flood: the burst passes, the rest is refused at once
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: status(url + "/_stcore/health", "198.51.100.3"), range(2 * BURST)))
    assert set(codes) == {200, 429} and codes.count(200) >= BURST and codes.count(429) >= BURST // 2
    # another visitor, and this machine (no X-Forwarded-For), are not slowed by it
    assert status(url + "/_stcore/health", "198.51.100.4") == 200 and status(url + "/_stcore/health") == 200


def test_connections_beyond_the_limit_get_429(servers):
    url, _ = servers

    async def open_many(client: str, n: int) -> tuple[int, list[str]]:
        visitors = [Visitor(url, timeout=30, headers={"X-Forwarded-For": client}) for _ in range(n)]
        results = await asyncio.gather(*(v.connect() for v in visitors), return_exceptions=True)
        refused = [str(r) for r in results if isinstance(r, BaseException)]
        try:
            other = await Visitor(url, timeout=30, headers={"X-Forwarded-For": "198.51.100.6"}).connect()
            await other.close()
        finally:
            for v in visitors:
                await v.close()
        return n - len(refused), refused

    opened, refused = asyncio.run(open_many("198.51.100.5", CONNECTIONS + 5))
    assert opened == CONNECTIONS and len(refused) == 5 and all("429" in r for r in refused), refused
