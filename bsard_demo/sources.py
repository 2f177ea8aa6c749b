"""Where a :class:`~bsard_demo.dataset.Dataset` comes from: the hub, a local folder, or the sample.

``load_dataset(spec)`` takes ``"hub"``, ``"sample"`` or a folder path (the CLI's ``--data`` and the
``BSARD_DATA`` environment variable use the same words). Loading never silently falls back to
another dataset: an unreachable hub raises :class:`DataUnavailable`, and the caller decides.
"""
from __future__ import annotations

import os
import re
import socket
from importlib import resources
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

import pandas as pd

from .dataset import DataError, Dataset, normalize_articles, normalize_questions, read_csv_table

HUB_REPO_ID = "maastrichtlawtech/bsard"
HUB_FILES = ("articles.csv", "questions_train.csv", "questions_test.csv")
SAMPLE_PACKAGE = "bsard_demo.sample_data"
#: Largest CSV read from a local folder; BSARD's articles.csv is ~30 MB.
MAX_CSV_BYTES = 512 * 1024 * 1024
_SPLIT_FILE = re.compile(r"^questions_(?P<split>[A-Za-z0-9_-]+)\.csv$")

Downloader = Callable[..., str]


class DataUnavailable(DataError):
    """The requested dataset cannot be had right now (e.g. the hub is unreachable)."""


ALTERNATIVES = "use --data sample (the bundled fictional demo) or --data PATH (a folder with articles.csv and questions_<split>.csv)"


def default_spec() -> str:
    """The dataset named by ``BSARD_DATA``, else ``"hub"``."""
    return os.environ.get("BSARD_DATA", "").strip() or "hub"


def load_dataset(spec: str | os.PathLike | None = None, *, need_corpus: bool = True,
                 download: Downloader | None = None) -> Dataset:
    """Load ``"hub"``, ``"sample"`` or a local folder. ``need_corpus=False`` allows a folder
    without ``articles.csv`` (enough for scoring) and skips the corpus download from the hub."""
    spec = default_spec() if spec is None else spec
    text = str(spec)
    if text == "hub":
        return load_hub(need_corpus=need_corpus, download=download)
    if text == "sample":
        return load_sample()
    return load_folder(Path(text), need_corpus=need_corpus)


def load_sample() -> Dataset:
    """The small fictional French dataset shipped in the package (splits ``train`` and ``test``)."""
    root = resources.files(SAMPLE_PACKAGE)
    articles = normalize_articles(read_csv_table(root.joinpath("articles.csv").read_bytes(), source="sample articles.csv"))
    splits = {
        split: normalize_questions(read_csv_table(root.joinpath(f"questions_{split}.csv").read_bytes(), source=f"sample questions_{split}.csv"))
        for split in ("train", "test")
    }
    return Dataset(name="sample (fictional articles)", kind="sample", articles=articles, splits=splits, fictional=True)


def load_folder(folder: Path, *, need_corpus: bool = True) -> Dataset:
    """A folder holding ``articles.csv`` (optional when ``need_corpus`` is false) and
    ``questions_<split>.csv`` files. Raises :class:`DataError` with a clear message."""
    if not folder.exists():
        raise DataError(f"{folder}: no such folder ({ALTERNATIVES.replace('use ', 'or ')})")
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder; --data takes hub, sample or a folder with articles.csv and questions_<split>.csv")
    split_files = {}
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise DataError(f"{folder}: cannot list the folder ({exc.strerror or exc})") from None
    for entry in entries:
        m = _SPLIT_FILE.match(entry.name)
        if m and entry.is_file():
            split_files[m.group("split")] = entry
    if not split_files:
        raise DataError(f"{folder}: no questions_<split>.csv file (e.g. questions_test.csv)")
    articles_path = folder / "articles.csv"
    articles = None
    if articles_path.is_file():
        articles = normalize_articles(_read(articles_path), source=str(articles_path))
    elif need_corpus:
        raise DataError(f"{folder}: no articles.csv (needed to search; scoring works without it)")
    splits = {name: normalize_questions(_read(path), source=str(path)) for name, path in split_files.items()}
    return Dataset(name=str(folder), kind="local", articles=articles, splits=splits)


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when a TCP connection to the hub endpoint (``HF_ENDPOINT`` or huggingface.co) opens
    within ``timeout`` seconds and offline mode (``HF_HUB_OFFLINE``) is not set. A cheap probe:
    without it, huggingface_hub retries an unreachable host for ~25 s before giving up."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co")
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def load_hub(*, need_corpus: bool = True, download: Downloader | None = None, timeout: float = 10.0,
             reachable: Callable[[], bool] = hub_reachable) -> Dataset:
    """The real BSARD from the Hugging Face hub (``maastrichtlawtech/bsard``), cached in the
    usual HF cache. When the hub is unreachable (``reachable()`` false) the cached copy is used if
    there is one. ``download`` defaults to :func:`huggingface_hub.hf_hub_download` and is
    replaceable for tests. Raises :class:`DataUnavailable` when a file cannot be had."""
    if download is None:
        from huggingface_hub import hf_hub_download as download  # imported late: heavy
    online = reachable()
    files = HUB_FILES if need_corpus else HUB_FILES[1:]
    paths = {}
    for name in files:
        try:
            paths[name] = Path(download(repo_id=HUB_REPO_ID, filename=name, repo_type="dataset",
                                        etag_timeout=timeout, local_files_only=not online))
        except Exception as exc:  # noqa: BLE001 - any failure of the hub is "unavailable" to the user
            reason = "the hub is unreachable and the file is not in the local cache" if not online else _first_line(exc)
            raise DataUnavailable(f"cannot download {name} from the Hugging Face hub ({HUB_REPO_ID}): {reason}; {ALTERNATIVES}") from None
    try:
        articles = normalize_articles(_read(paths["articles.csv"]), source="hub articles.csv") if need_corpus else None
        splits = {
            name[len("questions_"):-len(".csv")]: normalize_questions(_read(paths[name]), source=f"hub {name}")
            for name in HUB_FILES[1:]
        }
    except DataError as exc:
        raise DataUnavailable(f"the hub files look damaged or partly downloaded ({exc}); {ALTERNATIVES}") from None
    return Dataset(name="BSARD (Hugging Face hub)", kind="hub", articles=articles, splits=splits)


def _read(path: Path) -> pd.DataFrame:
    try:
        size = path.stat().st_size
        if size > MAX_CSV_BYTES:
            raise DataError(f"{path}: {size / 1e6:.0f} MB is larger than the {MAX_CSV_BYTES // 2**20} MiB limit")
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return read_csv_table(data, source=str(path))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text.splitlines()[0][:300]}" if text else name
