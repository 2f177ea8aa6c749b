"""The process's configuration, and the one module that reads or changes the environment (a layout test
checks it): :class:`Settings`, a frozen snapshot of every ``BSARD_*`` / ``HF_*`` setting, read at call time by
:func:`current` (the app passes its ``st.secrets``, read first); :func:`prepare_runtime`, called by the entry
points, sets the native libraries' defaults (nothing changes at import time); :func:`restoring_env`.

The variables and the rules: docs/design.md, 'bsard_demo/settings.py'.
"""
from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Protocol

DATA, ALLOW_FOLDERS, INDEX, CACHE, MODELS, LARGE_UPLOADS, UPLOAD_BUDGET = (
    "BSARD_DATA", "BSARD_ALLOW_FOLDERS", "BSARD_INDEX", "BSARD_CACHE", "BSARD_MODELS", "BSARD_LARGE_UPLOADS",
    "BSARD_UPLOAD_BUDGET_MB")
HF_TOKEN, HF_HUB_OFFLINE, HF_ENDPOINT = "HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT"
#: Every setting :class:`Settings` reads.
NAMES = (DATA, ALLOW_FOLDERS, INDEX, CACHE, MODELS, LARGE_UPLOADS, UPLOAD_BUDGET, HF_TOKEN, HF_HUB_OFFLINE, HF_ENDPOINT)
DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = ("1", "true", "yes")
_TRUE_HF = ("1", "true", "yes", "on")  # huggingface_hub's own reading of a boolean variable

#: Set by :func:`prepare_runtime` unless already set. faiss and torch each bundle their own OpenMP
#: runtime, whose idle threads spin after every parallel region and starve the other one (and
#: numpy's BLAS) on a small machine: one question's encode + search measured 200-500 ms with
#: spinning threads, ~20 ms with PASSIVE waits (bench/bench_retrieval.py); the runtime reads the
#: variable once, when loaded, so this must run before anything loads faiss or torch. HF tokenizers
#: warn on every fork without ``TOKENIZERS_PARALLELISM``.
RUNTIME_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false"}


class Secrets(Protocol):
    def get(self, name: str, default=None): ...


def _home_cache() -> Path:
    return Path.home() / ".cache" / "bsard_demo"


@dataclass(frozen=True)
class Settings:
    """Every setting, read once (the table: docs/design.md, 'bsard_demo/settings.py'). Strings are stripped;
    ``""`` is unset."""

    data: str = ""
    allow_folders: bool = False
    index: str = ""
    cache: Path = _home_cache()
    models: Path = _home_cache() / "models"
    large_uploads: str | None = None
    upload_budget: str | None = None
    hf_token: str | None = None
    hf_offline: bool = False
    hf_endpoint: str = DEFAULT_ENDPOINT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, secrets: Secrets | None = None) -> "Settings":
        """The settings of ``environ`` (default: the process environment, read now), each taken
        from ``secrets`` (the app's ``st.secrets``) first when it sets it."""
        raw = read(environ, secrets)
        cache, models = raw.get(CACHE, "").strip(), raw.get(MODELS, "").strip()
        return cls(
            data=raw.get(DATA, "").strip(),
            allow_folders=raw.get(ALLOW_FOLDERS, "").strip().lower() in _TRUE,
            index=raw.get(INDEX, "").strip(),
            cache=Path(cache).expanduser() if cache else _home_cache(),
            models=Path(models).expanduser() if models else _home_cache() / "models",
            large_uploads=raw.get(LARGE_UPLOADS),
            upload_budget=raw.get(UPLOAD_BUDGET),
            hf_token=raw.get(HF_TOKEN, "").strip() or None,
            hf_offline=raw.get(HF_HUB_OFFLINE, "").strip().lower() in _TRUE_HF,
            hf_endpoint=raw.get(HF_ENDPOINT, "").strip() or DEFAULT_ENDPOINT,
        )

    @property
    def data_spec(self) -> str:
        """The default dataset: :attr:`data`, else ``"hub"``."""
        return self.data or "hub"


def read(environ: Mapping[str, str] | None = None, secrets: Secrets | None = None) -> dict[str, str]:
    """``{name: value}`` of the set values of :data:`NAMES`: from ``secrets`` when it sets one
    (a non-blank value), else from ``environ`` (default: the process environment)."""
    env = os.environ if environ is None else environ
    out = {}
    for name in NAMES:
        value = secrets.get(name) if secrets is not None else None
        if value is None or not str(value).strip():
            value = env.get(name)
        if value is not None:
            out[name] = str(value)
    return out


def current(secrets: Secrets | None = None) -> Settings:
    """:meth:`Settings.from_env` of the process environment as it is now (and ``secrets``)."""
    return Settings.from_env(None, secrets)


def prepare_runtime() -> None:
    """Set :data:`RUNTIME_DEFAULTS` where the environment does not (idempotent; see above)."""
    for name, value in RUNTIME_DEFAULTS.items():
        os.environ.setdefault(name, value)


def malloc_arenas_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the deployer set glibc's malloc arena limit (``MALLOC_ARENA_MAX`` or
    ``GLIBC_TUNABLES=glibc.malloc.arena_max=…``): the app's own cap then leaves it alone."""
    return _malloc_configured("MALLOC_ARENA_MAX", "arena_max", environ)


def malloc_mmap_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the deployer set glibc's mmap threshold (``MALLOC_MMAP_THRESHOLD_`` or
    ``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=…``): the app's own then leaves it alone."""
    return _malloc_configured("MALLOC_MMAP_THRESHOLD_", "mmap_threshold", environ)


def _malloc_configured(variable: str, tunable: str, environ: Mapping[str, str] | None) -> bool:
    env = os.environ if environ is None else environ
    return bool(env.get(variable, "").strip()) or f"glibc.malloc.{tunable}" in env.get("GLIBC_TUNABLES", "")


def blas_threads_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the deployer set OpenBLAS's thread count (``OPENBLAS_NUM_THREADS``, or the
    ``GOTO_NUM_THREADS`` / ``OMP_NUM_THREADS`` it falls back to): the app then leaves it alone."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip() for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"))


_SET_THREADS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                "openblas_set_num_threads64_")


def limit_blas_threads(threads: int = 1, *, maps: str = "/proc/self/maps") -> int:
    """Give every OpenBLAS loaded in this process (numpy's, once numpy is imported) ``threads`` threads, by
    ctypes (Linux; elsewhere a no-op). Returns how many libraries were set."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and " /" in line})
    except OSError:
        return 0
    done = 0
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
        except OSError:
            continue
        setter = next((getattr(lib, name) for name in _SET_THREADS if hasattr(lib, name)), None)
        if setter is not None:
            setter(int(threads))
            done += 1
    return done


def one_blas_thread() -> int | None:
    """One thread for every OpenBLAS loaded so far (:func:`limit_blas_threads`: numpy's; one loaded later, scipy's or
    FAISS's, keeps its own count) unless the deployer set their count (:func:`blas_threads_configured`: then
    ``None``); the app and the CLI call it. A search's products are
    small and run in threads of their own (pages, the learned ranker's inputs): OpenBLAS's pool of one thread per
    core only spins after each call, on the core those threads need. The ranker's 149 frlaw-dev test questions took
    14 s of CPU with numpy's default on 2 cores, 7.5 s with one thread, the same vectors to the bit
    (docs/benchmarks.md, "Per-visit cost (issue 29)")."""
    return None if blas_threads_configured() else limit_blas_threads(1)


def child_environment(package_root: str) -> dict[str, str]:
    """The environment of a helper process of ours (:mod:`bsard_demo.runs.sandbox`, e5's graph writer): this one's,
    with ``package_root`` first on ``PYTHONPATH`` (so it imports this very ``bsard_demo``) and
    one thread for the native libraries."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "ARROW_IO_THREADS": "1"})
    return env


@contextmanager
def restoring_env(name: str) -> Iterator[None]:
    """Run the block, then put ``$name`` back as it was before it (unset when it was)."""
    saved = os.environ.get(name)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
