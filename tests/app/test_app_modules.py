"""bsard_demo/app/__init__.py's docstring names every module of the app (issue 22: it listed 7 of 11)."""
from __future__ import annotations

import re
from pathlib import Path

import bsard_demo.app

APP = Path(bsard_demo.app.__file__).parent


def documented(doc: str) -> set[str]:
    return set(re.findall(r":mod:`\.(\w+)`", doc))


def test_the_app_docstring_names_every_module():
    modules = {p.stem for p in APP.glob("*.py") if p.name != "__init__.py"}
    assert len(modules) >= 11 and documented(bsard_demo.app.__doc__) == modules


def test_the_check_can_fail():
    assert documented("the models :mod:`.state` and :mod:`.ui`, not bsard_demo.app.render") == {"state", "ui"}
