"""Bootstrap for ``python bench/NAME.py``: Python puts ``bench/`` first on ``sys.path``, not the
repository, so ``bench`` and ``bsard_demo`` would not import. Each script starts with::

    if __package__ in (None, ""):  # python bench/NAME.py
        import _path  # noqa: F401

and ``bench/__init__.py`` imports it for ``python -m bench.NAME``. It also puts ``tests/`` on the
path, as pytest does (``pythonpath = ["tests"]``), so a bench imports the tests' support modules
by the same bare names (``from _browser import AppServer``); never a test module. The only place
in bench/ that changes ``sys.path``.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(REPO / "tests") not in sys.path:
    sys.path.append(str(REPO / "tests"))
