"""bsard_demo.settings: one snapshot of the configuration, read at call time (so a test's
monkeypatch is always seen), the app's secrets first; and no change of the environment on import."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bsard_demo import settings
from bsard_demo.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def test_defaults_and_parsing():
    empty = Settings.from_env({})
    assert empty == Settings() and empty.data_spec == "hub" and empty.index == "" and empty.hf_token is None
    assert empty.cache == Path.home() / ".cache" / "bsard_demo" and empty.models == empty.cache / "models"
    assert empty.hf_endpoint == "https://huggingface.co" and not empty.hf_offline and not empty.allow_folders
    env = {"BSARD_DATA": " sample ", "BSARD_ALLOW_FOLDERS": "Yes", "BSARD_INDEX": " hf://o/n ", "BSARD_CACHE": "~/c",
           "BSARD_MODELS": "/m", "BSARD_LARGE_UPLOADS": " 3 ", "HF_TOKEN": " t ", "HF_HUB_OFFLINE": "on",
           "HF_ENDPOINT": "http://hub.local/"}
    got = Settings.from_env(env)
    assert (got.data, got.data_spec, got.allow_folders, got.index) == ("sample", "sample", True, "hf://o/n")
    assert got.cache == Path("~/c").expanduser() and got.models == Path("/m") and got.large_uploads == " 3 "
    assert (got.hf_token, got.hf_offline, got.hf_endpoint) == ("t", True, "http://hub.local/")
    # "on" is huggingface_hub's true, not the folders switch's; blanks are unset
    assert not Settings.from_env({"BSARD_ALLOW_FOLDERS": "on"}).allow_folders
    assert Settings.from_env({"BSARD_DATA": "  ", "HF_TOKEN": " "}) == Settings()
    with pytest.raises(AttributeError):
        got.data = "x"  # frozen


def test_secrets_come_first_and_blank_secrets_are_unset():
    env = {"BSARD_INDEX": "/from/env", "HF_TOKEN": "env-token", "BSARD_DATA": "sample"}
    secrets = {"BSARD_INDEX": "/from/secrets", "HF_TOKEN": "  ", "BSARD_LARGE_UPLOADS": 2}
    got = Settings.from_env(env, secrets)
    assert (got.index, got.hf_token, got.data, got.large_uploads) == ("/from/secrets", "env-token", "sample", "2")


def test_current_reads_the_environment_at_each_call(monkeypatch, tmp_path):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "a"))
    assert settings.current().cache == tmp_path / "a"
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "b"))
    assert settings.current().cache == tmp_path / "b"
    from bsard_demo import cache, sources

    assert cache.cache_root() == tmp_path / "b"
    monkeypatch.setenv("BSARD_DATA", "sample")
    assert sources.default_spec() == "sample"
    monkeypatch.delenv("BSARD_DATA")
    assert sources.default_spec() == "hub"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert sources.hub_reachable() is False  # offline: no probe at all


def test_restoring_env(monkeypatch):
    monkeypatch.delenv("BSARD_TEST_X", raising=False)
    with settings.restoring_env("BSARD_TEST_X"):
        os.environ["BSARD_TEST_X"] = "1"
    assert "BSARD_TEST_X" not in os.environ
    monkeypatch.setenv("BSARD_TEST_X", "keep")
    with settings.restoring_env("BSARD_TEST_X"):
        os.environ["BSARD_TEST_X"] = "changed"
    assert os.environ["BSARD_TEST_X"] == "keep"


_PROBE = """
import json, os, sys
before = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "TOKENIZERS_PARALLELISM")}
import bsard_demo, bsard_demo.cli.main, bsard_demo.training, bsard_demo.retrievers.dense, bsard_demo.app.state
imported = {k: os.environ.get(k) for k in before}
from bsard_demo.cli.main import main
main(["data", "--data", "sample"])
print(json.dumps({"imported": imported, "cli": {k: os.environ.get(k) for k in before}}))
"""


def test_importing_changes_no_variable_and_the_cli_sets_the_runtime_defaults():
    env = {k: v for k, v in os.environ.items() if k not in settings.RUNTIME_DEFAULTS}
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["imported"] == {"OMP_WAIT_POLICY": None, "TOKENIZERS_PARALLELISM": None}
    assert got["cli"] == settings.RUNTIME_DEFAULTS
    mine = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
                          capture_output=True, text=True, timeout=300)
    assert json.loads(mine.stdout.strip().splitlines()[-1])["cli"]["OMP_WAIT_POLICY"] == \
        "ACTIVE"  # a user's own value wins


# --------------------------------------------------------------------------- OpenBLAS's threads

def test_a_deployers_blas_threads_are_left_alone():
    assert not settings.blas_threads_configured({})
    assert not settings.blas_threads_configured({"OPENBLAS_NUM_THREADS": ""})
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        assert settings.blas_threads_configured({name: "2"})


def test_one_blas_thread_leaves_a_deployers_setting_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(settings, "limit_blas_threads", lambda threads=1: calls.append(threads) or 1)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert settings.one_blas_thread() is None and calls == []
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert settings.one_blas_thread() == 1 and calls == [1]


def test_the_cli_searches_on_one_blas_thread_as_the_app(monkeypatch, capsys):
    """Every command: the learned ranker searches its inputs in threads, and OpenBLAS's idle pool spun on the
    cores they needed (14 against 7.5 CPU s for frlaw-dev's test questions)."""
    from bsard_demo.cli.main import main

    calls = []
    monkeypatch.setattr(settings, "one_blas_thread", lambda: calls.append(1))
    assert main(["data", "--data", "sample"]) == 0
    assert calls == [1]


def test_no_openblas_in_the_maps_sets_nothing(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 00:00 0    /usr/lib/libc.so.6\n"
                    "7f02-7f03 r-xp 00000000 00:00 0    /nowhere/libopenblas.so\n")  # named but not loadable
    assert settings.limit_blas_threads(1, maps=str(maps)) == 0
    assert settings.limit_blas_threads(1, maps=str(tmp_path / "absent")) == 0


def test_numpys_openblas_gets_one_thread():
    import subprocess

    # in a child: the setting is the whole process's, and the suite's workers keep theirs
    code = """
import ctypes, numpy
from bsard_demo import settings
n = settings.limit_blas_threads(1)
paths = {l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l.lower() and ' /' in l}
got = [getattr(ctypes.CDLL(p), g)() for p in paths for g in ('openblas_get_num_threads',
       'scipy_openblas_get_num_threads64_', 'scipy_openblas_get_num_threads') if hasattr(ctypes.CDLL(p), g)]
print(n, got)
"""
    if not Path("/proc/self/maps").exists():
        pytest.skip("no /proc: the limit is a no-op here")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    n, got = out.stdout.split(" ", 1)
    if n == "0":
        pytest.skip("this numpy is not built on OpenBLAS")
    assert got.strip() == "[1]"
