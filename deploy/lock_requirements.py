"""Write requirements.txt, the pinned install the demo is deployed from, out of requirements.in.

    python deploy/lock_requirements.py [--check]

requirements.in holds the ranges (what the library needs; edit it, never requirements.txt).
requirements.txt is then every package of the hosted install (Streamlit Community Cloud, Linux
x86-64, no torch) pinned by ``uv pip compile`` for Python 3.11 and up (so the same pins install on
Cloud's 3.12, on CI's and local 3.11, and in a torch-free venv made here: numpy 2.5, say, would
need 3.12), followed by requirements.in's ``python_version < "3.12"`` lines as they stand (the torch
stack of local installs and CI, resolved by pip against those pins). The hosted install is
requirements.txt without those lines. ``--check`` only says whether requirements.txt is what this
writes from its own pins (tests/test_requirements_lock.py checks the pins against the ranges).
Refresh the pins only once the fuzz harness passes on the new versions (README, "Deploys you can
reproduce").
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE, LOCK = REPO / "requirements.in", REPO / "requirements.txt"
LOCAL_ONLY = re.compile(r"""python_version\s*<\s*["']3\.12["']""")
HEADER = """\
# The install the demo is deployed from: written by `python deploy/lock_requirements.py` out of
# requirements.in (the ranges: edit that file, then run the script; README, "Deploys you can reproduce").
# Every package of the hosted install (no torch) pinned by `uv pip compile requirements.in
# --python-version 3.11 --python-platform x86_64-manylinux_2_28`: the same pins on Cloud's Python 3.12
# and on 3.11 (CI, local installs).
"""
LOCAL_HEADER = """\
# Python < 3.12 only (local installs and CI): requirements.in's torch 2.13.0 CPU and training stack.
"""


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of ``text``, comments and blanks dropped."""
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def pins(text: str) -> list[str]:
    """The ``name==version`` requirements of a lock (or of requirements.txt's pinned part)."""
    return [line for line in requirement_lines(text) if "==" in line and ";" not in line]


def compose(pinned: list[str], source: str) -> str:
    local = [line for line in requirement_lines(source) if LOCAL_ONLY.search(line)]
    return HEADER + "\n".join(pinned) + "\n" + LOCAL_HEADER + "\n".join(local) + "\n"


def compile_pins() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        out, hosted = Path(tmp) / "lock.txt", Path(tmp) / "hosted.in"  # the hosted install: no torch stack
        hosted.write_text("\n".join(line for line in requirement_lines(SOURCE.read_text())
                                    if not LOCAL_ONLY.search(line)) + "\n")
        subprocess.run([sys.executable, "-m", "uv", "--no-python-downloads", "pip", "compile", str(hosted),
                        "--python-version", "3.11",
                        "--python-platform", "x86_64-manylinux_2_28", "--no-annotate", "--no-header", "-o", str(out)],
                       check=True, cwd=REPO)
        return pins(out.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare requirements.txt with its pins and the .in's lines")
    args = ap.parse_args(argv)
    source = SOURCE.read_text()
    if args.check:
        current = LOCK.read_text()
        ok = current == compose(pins(current), source)
        print("requirements.txt is up to date with requirements.in" if ok else
              "requirements.txt differs from what deploy/lock_requirements.py writes: run it")
        return 0 if ok else 1
    LOCK.write_text(compose(compile_pins(), source))
    print(f"wrote {LOCK.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
