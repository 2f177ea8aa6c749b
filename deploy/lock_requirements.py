"""Write requirements.txt, the pinned install the demo is deployed from, out of requirements.in.

    python deploy/lock_requirements.py [--check]

requirements.in holds the ranges (what the library needs; edit it, never requirements.txt).
requirements.txt is then two halves that never meet: every package of the hosted install
(Streamlit Community Cloud, Python 3.12, Linux x86-64) pinned by ``uv pip compile --python-version
3.12``, marked ``python_version >= "3.12"``; and requirements.in's lines marked ``python_version <
"3.12"`` (local installs and CI on Python 3.10/3.11 resolve the ranges, torch 2.13.0 CPU among
them, as before: 3.12 pins such as numpy 2.5 do not install there). ``--check`` only says whether
requirements.txt is what this writes from its own pins (tests/test_requirements_lock.py checks
the pins against the ranges).
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
HOSTED, LOCAL = 'python_version >= "3.12"', 'python_version < "3.12"'
HEADER = """\
# The install the demo is deployed from: written by `python deploy/lock_requirements.py` out of
# requirements.in (the ranges: edit that file, then run the script; README, "Deploys you can reproduce").
# Python >= 3.12 (the hosted demo, no torch): every package pinned by
# `uv pip compile requirements.in --python-version 3.12 --python-platform x86_64-manylinux_2_28`.
"""
LOCAL_HEADER = """\
# Python < 3.12 (local installs and CI): requirements.in's ranges, torch 2.13.0 CPU and the training stack.
"""


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of ``text``, comments and blanks dropped."""
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def with_marker(requirement: str, marker: str) -> str:
    """``requirement`` installed only where ``marker`` holds (and its own marker, if any)."""
    spec, sep, own = requirement.partition(";")
    if not sep:
        return f"{spec.strip()}; {marker}"
    own = own.strip()
    return f"{spec.strip()}; {own}" if own == marker or marker in own else f"{spec.strip()}; ({own}) and {marker}"


def pins(text: str) -> list[str]:
    """The ``name==version`` requirements of a lock or of requirements.txt's hosted half, unmarked."""
    return [line.split(";", 1)[0].strip() for line in requirement_lines(text)
            if "==" in line and (";" not in line or HOSTED in line)]


def compose(pinned: list[str], source: str) -> str:
    hosted = [with_marker(p, HOSTED) for p in pinned]
    local = [with_marker(r, LOCAL) for r in requirement_lines(source)]
    return HEADER + "\n".join(hosted) + "\n" + LOCAL_HEADER + "\n".join(local) + "\n"


def compile_pins() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lock.txt"
        subprocess.run([sys.executable, "-m", "uv", "--no-python-downloads", "pip", "compile", str(SOURCE),
                        "--python-version", "3.12",
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
