"""Kept for scripts that still import ``_browser`` by name: the driver lives in ``bench/browser.py``
(import it as ``bench.browser``)."""
from bench.browser import *  # noqa: F401,F403
from bench.browser import REPO, STEP_MS  # noqa: F401
