"""requirements.txt, the install the demo is deployed from (issue 21 item 5): it pins every package of
the hosted install within requirements.in's ranges, adds requirements.in's Python < 3.12 torch stack
as it stands, and is what deploy/lock_requirements.py writes; no file names an index or a URL."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("lock_requirements", REPO / "deploy" / "lock_requirements.py")
lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock)

HOSTED = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.8",
          "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}


def requirements(path: Path, env: dict) -> list[Requirement]:
    out = [Requirement(line) for line in lock.requirement_lines(path.read_text())]
    return [r for r in out if r.marker is None or r.marker.evaluate(env)]


def test_the_hosted_pins_satisfy_the_ranges_and_cover_every_package():
    pinned = {canonicalize_name(r.name): r for r in requirements(REPO / "requirements.txt", HOSTED)}
    assert pinned and all(str(r.specifier).startswith("==") for r in pinned.values())
    for wanted in requirements(REPO / "requirements.in", HOSTED):
        name = canonicalize_name(wanted.name)
        assert name in pinned, f"{wanted.name} is not pinned for the hosted install"
        version = next(iter(pinned[name].specifier)).version
        assert wanted.specifier.contains(version, prereleases=True), f"{name}=={version} is outside {wanted}"
    assert "torch" not in pinned and "sentence-transformers" not in pinned


def test_below_3_12_the_same_pins_and_requirements_in_s_torch_stack():
    local = {**HOSTED, "python_version": "3.11", "python_full_version": "3.11.7"}
    txt = requirements(REPO / "requirements.txt", local)
    pinned = {canonicalize_name(r.name): r for r in txt if r.marker is None}
    stack = [(r.name, str(r.specifier)) for r in txt if r.marker is not None]
    wanted = requirements(REPO / "requirements.in", local)
    assert stack == [(r.name, str(r.specifier)) for r in wanted if r.marker is not None]
    assert ("torch", "==2.13.0") in stack
    for r in wanted:
        if r.marker is None:
            assert canonicalize_name(r.name) in pinned


def test_requirements_txt_is_what_the_script_writes():
    text = (REPO / "requirements.txt").read_text()
    assert text == lock.compose(lock.pins(text), (REPO / "requirements.in").read_text())


def test_no_file_names_an_index_or_a_url():
    for name in ("requirements.in", "requirements.txt", "requirements-dev.txt"):
        for line in lock.requirement_lines((REPO / name).read_text()):
            assert not line.startswith(("-i", "--index", "--extra-index", "-f", "--find-links")), (name, line)
            assert "://" not in line, (name, line)


def test_the_check_fails_on_a_hand_edit(tmp_path, monkeypatch):
    edited = tmp_path / "requirements.txt"
    text = (REPO / "requirements.txt").read_text()
    assert "sentence-transformers>=3.0" in text
    edited.write_text(text.replace("sentence-transformers>=3.0", "sentence-transformers>=2.0"))
    monkeypatch.setattr(lock, "LOCK", edited)
    assert lock.main(["--check"]) == 1
    monkeypatch.setattr(lock, "LOCK", REPO / "requirements.txt")
    assert lock.main(["--check"]) == 0
