"""The suite passes in any order (issue 40 item 7): each test starts from an empty process state
(tests/conftest.py's ``fresh_process_state``), and CI runs one shuffled order, the README's command."""
from __future__ import annotations

import re
from pathlib import Path

from conftest import reset_process_state

REPO = Path(__file__).resolve().parents[1]


def command_of(text: str) -> str:
    """The test command of a shell text: its last line that runs ``pytest``, with ``pip -q`` left out."""
    line = [ln for ln in text.splitlines() if "-m pytest" in ln and not ln.lstrip().startswith("#")][-1]
    return re.sub(r"pip install -q ", "pip install ", line.strip())


def test_ci_runs_the_readmes_command_in_a_shuffled_order():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = command_of((REPO / ".ci" / "run").read_text(encoding="utf-8"))
    assert "--random-order-seed=$RANDOM" in command and "--random-order-bucket=" in command
    assert f"\n{command}\n" in readme, "keep the README's test command and .ci/run's in step"

def test_the_command_check_can_fail():
    assert command_of("# .venv/bin/python -m pytest -x\npip install -q x && python -m pytest -q\n") == \
        "pip install x && python -m pytest -q"

def test_the_reset_empties_streamlits_caches_and_the_kept_builds():
    import streamlit as st

    from bsard_demo.app import score_ui  # noqa: F401 - holds a module-level BuildOnce of built-in runs
    from bsard_demo.retrievers import encoders

    calls = []

    @st.cache_resource
    def kept(x):
        calls.append(x)
        return x

    kept(1), kept(1)
    encoders.USE_QUERIES.get(("a question",), lambda: 1)
    assert calls == [1] and ("a question",) in encoders.USE_QUERIES
    reset_process_state()
    kept(1)
    assert calls == [1, 1] and ("a question",) not in encoders.USE_QUERIES
