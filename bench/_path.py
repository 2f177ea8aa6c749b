"""Bootstrap for ``python bench/NAME.py``: Python puts ``bench/`` first on ``sys.path``, not the
repository, so ``bench`` and ``bsard_demo`` would not import. Each script starts with::

    if __package__ in (None, ""):  # python bench/NAME.py
        import _path  # noqa: F401

(nothing to do under ``python -m bench.NAME`` or when imported as ``bench.NAME``). The only place
in bench/ that changes ``sys.path``.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
