"""Where a :class:`~bsard_demo.dataset.Dataset` comes from: the hub, a local folder, or the sample.

``load_dataset(spec)`` takes ``"hub"``, ``"sample"`` or a folder path (the CLI's ``--data`` and the
``BSARD_DATA`` setting use the same words). Loading never silently falls back to another dataset:
an unreachable hub raises :class:`DataUnavailable`, and the caller decides; what the user may do
instead is the error's ``advice`` code, which each front end words (the CLI names ``--data``).
"""
from __future__ import annotations

import os
import re
import threading
import time
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Callable, TypeVar

import pandas as pd

from . import settings
from .dataset import DataError, Dataset, first_line, normalize_articles, normalize_questions, read_csv_table

HUB_REPO_ID = "maastrichtlawtech/bsard"
HUB_FILES = ("articles.csv", "questions_train.csv", "questions_test.csv")
#: Files the hub's dataset may hold besides :data:`HUB_FILES`, read as a split when there and never required:
#: ``questions_synthetic.csv`` (split ``synthetic``, 8.25 MB), the generated questions the G-DSR line of work
#: trained on (``train --train-splits train,synthetic``).
HUB_OPTIONAL_FILES = ("questions_synthetic.csv",)
SAMPLE_PACKAGE = "bsard_demo.sample_data"
#: Largest CSV read from a local folder; BSARD's articles.csv is ~30 MB.
MAX_CSV_BYTES = 512 * 1024 * 1024
_SPLIT_FILE = re.compile(r"^questions_(?P<split>[A-Za-z0-9_-]+)\.csv$")

Downloader = Callable[..., str]
T = TypeVar("T")


class DataUnavailable(DataError):
    """The requested dataset cannot be had right now.

    ``cause`` says why, for callers that explain it in their own words: ``"offline"`` (hub
    unreachable and no cached copy), ``"timeout"`` (no answer in time), ``"damaged"`` (partial or
    corrupt files) or ``"error"`` (anything else). ``detail`` is the message (``str(exc)``);
    ``advice`` is ``"other_source"``: another dataset may be used instead.
    """

    CAUSES = ("offline", "timeout", "damaged", "error")

    def __init__(self, detail: str, cause: str = "error"):
        super().__init__(detail, advice="other_source")
        self.detail = detail
        self.cause = cause if cause in self.CAUSES else "error"


def default_spec() -> str:
    """The dataset named by ``BSARD_DATA``, else ``"hub"`` (:attr:`bsard_demo.settings.Settings.data_spec`)."""
    return settings.current().data_spec


def load_dataset(spec: str | os.PathLike | None = None, *, need_corpus: bool = True,
                 download: Downloader | None = None, optional_splits: bool = True) -> Dataset:
    """Load ``"hub"``, ``"sample"`` or a local folder. ``need_corpus=False`` allows a folder
    without ``articles.csv`` (enough for scoring) and skips the corpus download from the hub;
    ``optional_splits=False`` skips the hub's :data:`HUB_OPTIONAL_FILES` (a folder reads every
    ``questions_<split>.csv`` it holds)."""
    spec = default_spec() if spec is None else spec
    text = str(spec)
    if text == "hub":
        return load_hub(need_corpus=need_corpus, download=download, optional=optional_splits)
    if text == "sample":
        return load_sample()
    return load_folder(Path(text), need_corpus=need_corpus)


def load_sample() -> Dataset:
    """The small fictional French dataset shipped in the package (splits ``train`` and ``test``)."""
    root = resources.files(SAMPLE_PACKAGE)
    articles = normalize_articles(read_csv_table(root.joinpath("articles.csv").read_bytes(),
                                                 source="sample articles.csv"))
    splits = {
        split: normalize_questions(read_csv_table(root.joinpath(f"questions_{split}.csv").read_bytes(),
                                                  source=f"sample questions_{split}.csv"))
        for split in ("train", "test")
    }
    files = {name: str(root.joinpath(name)) for name in ("articles.csv", *(f"questions_{s}.csv" for s in splits))}
    return Dataset(name="sample (fictional articles)", kind="sample", articles=articles, splits=splits, fictional=True,
                   files=files)


def load_folder(folder: Path, *, need_corpus: bool = True) -> Dataset:
    """A folder holding ``articles.csv`` (optional when ``need_corpus`` is false) and
    ``questions_<split>.csv`` files. Raises :class:`DataError` with a clear message."""
    if not folder.exists():
        raise DataError(f"{folder}: no such folder", advice="other_source_or")
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder", advice="data_words")
    split_files = {}
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise DataError(f"{folder}: cannot list the folder ({exc.strerror or exc})") from None
    for entry in entries:
        m = _SPLIT_FILE.match(entry.name)
        if m:
            _require_regular(entry)
            split_files[m.group("split")] = entry
    if not split_files:
        raise DataError(f"{folder}: no questions_<split>.csv file (e.g. questions_test.csv)")
    articles_path = folder / "articles.csv"
    articles = None
    if articles_path.exists() or articles_path.is_symlink():
        _require_regular(articles_path)
    if articles_path.is_file():
        articles = normalize_articles(_read(articles_path), source=str(articles_path))
    elif need_corpus:
        raise DataError(f"{folder}: no articles.csv (needed to search; scoring works without it)")
    splits = {name: normalize_questions(_read(path), source=str(path)) for name, path in split_files.items()}
    read = ([articles_path] if articles is not None else []) + list(split_files.values())
    files = {path.name: str(path) for path in read}
    return Dataset(name=str(folder), kind="local", articles=articles, splits=splits, files=files)


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when the hub endpoint (``HF_ENDPOINT`` or https://huggingface.co) answers an HTTP
    ``HEAD`` request (any status) within about ``timeout`` seconds, name lookup included, and
    offline mode (``HF_HUB_OFFLINE``) is not set. Proxies come from the environment, as for
    huggingface_hub. A cheap probe: without it, huggingface_hub retries an unreachable or silent
    host for minutes (2.x retries a failed metadata request with a 60 s timeout)."""
    config = settings.current()
    if config.hf_offline:
        return False
    url = config.hf_endpoint

    def probe() -> bool:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
                return True
        except urllib.error.HTTPError:
            return True  # the server answered, if only with an error status
        except Exception:  # noqa: BLE001 - refused, timed out, bad URL, garbled answer: not reachable
            return False

    try:
        return call_with_deadline(probe, timeout + 1.0)
    except TimeoutError:
        return False


def call_with_deadline(fn: Callable[[], T], seconds: float | None) -> T:
    """``fn()``, or :class:`TimeoutError` when it has not returned within ``seconds`` (``None``:
    no limit). A late call goes on in a daemon thread (a blocked socket read cannot be
    interrupted) and its result is dropped."""
    if seconds is None:
        return fn()
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="bsard-hub-call", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise TimeoutError(f"no answer within {seconds:.3g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def load_hub(*, need_corpus: bool = True, download: Downloader | None = None, timeout: float = 10.0,
             reachable: Callable[[], bool] = hub_reachable, deadline: float | None = 120.0,
             optional: bool = True) -> Dataset:
    """The real BSARD from the Hugging Face hub (``maastrichtlawtech/bsard``), cached in the
    usual HF cache. When the hub is unreachable (``reachable()`` false) the cached copy is used if
    there is one. ``download`` defaults to :func:`huggingface_hub.hf_hub_download` and is
    replaceable for tests. ``timeout`` is the hub's metadata timeout; ``deadline`` (seconds, all
    files together) bounds the whole download, since huggingface_hub retries a silent hub for
    minutes. Raises :class:`DataUnavailable` when a file cannot be had, or when the files look
    truncated (an empty split, a question without relevant article, a relevant article missing
    from the corpus: none happens in BSARD). With ``optional`` and the corpus, each of
    :data:`HUB_OPTIONAL_FILES` the hub holds becomes a split (``questions_synthetic.csv``:
    ``synthetic``); one it lacks (or cannot give in time, or gives damaged) is left out, never an
    error (:func:`_optional_splits`)."""
    if download is None:
        from huggingface_hub import hf_hub_download as download  # imported late: heavy
    online = reachable()
    files = HUB_FILES if need_corpus else HUB_FILES[1:]
    end = None if deadline is None else time.monotonic() + deadline
    paths = {}
    for name in files:
        try:
            paths[name] = _hub_file(download, name, online, timeout, end)
        except Exception as exc:  # noqa: BLE001 - any failure of the hub is "unavailable" to the user
            if not online:
                reason, cause = "the hub is unreachable and the file is not in the local cache", "offline"
            else:
                timed_out = isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower()
                reason, cause = first_line(exc), "timeout" if timed_out else "error"
            raise DataUnavailable(f"cannot download {name} from the Hugging Face hub ({HUB_REPO_ID}): {reason}",
                                  cause) from None
    try:
        articles = normalize_articles(_read(paths["articles.csv"]), source="hub articles.csv") if need_corpus else None
        splits = {
            name[len("questions_"):-len(".csv")]: normalize_questions(_read(paths[name]), source=f"hub {name}")
            for name in HUB_FILES[1:]
        }
        _check_complete(articles, splits)
    except DataError as exc:
        raise DataUnavailable(f"the hub files look damaged or partly downloaded ({exc})", "damaged") from None
    if optional and need_corpus:  # the optional splits serve training, which needs the corpus
        splits.update(_optional_splits(download, online, timeout, end, articles, paths))
    return Dataset(name="BSARD (Hugging Face hub)", kind="hub", articles=articles, splits=splits,
                   files={name: str(path) for name, path in paths.items()})


def _hub_file(download: Downloader, name: str, online: bool, timeout: float, end: float | None) -> Path:
    """The local path of the hub file ``name`` (from the local cache only when not ``online``), given
    by the ``end`` of the download's deadline (:func:`time.monotonic`; at least 0.5 s left for each
    file) or :class:`TimeoutError`; ``download``'s own failures are raised as they come."""
    def fetch() -> str:
        return download(repo_id=HUB_REPO_ID, filename=name, repo_type="dataset",
                        etag_timeout=timeout, local_files_only=not online)
    left = None if end is None else max(0.5, end - time.monotonic())
    return Path(call_with_deadline(fetch, left))


def _optional_splits(download: Downloader, online: bool, timeout: float, end: float | None,
                     articles: pd.DataFrame | None, paths: dict[str, Path]) -> dict[str, pd.DataFrame]:
    """The splits of :data:`HUB_OPTIONAL_FILES` the hub gives: a file absent from the repository
    (``EntryNotFoundError``), absent from the cache offline, not given before the deadline, or
    damaged (:func:`_check_complete`) is left out, the dataset loads without it. Each file read
    goes into ``paths`` (the reproducibility stamp hashes it)."""
    out = {}
    for name in HUB_OPTIONAL_FILES:
        split = name[len("questions_"):-len(".csv")]
        try:
            path = _hub_file(download, name, online, timeout, end)
            frame = normalize_questions(_read(path), source=f"hub {name}")
            _check_complete(articles, {split: frame})
        except Exception:  # noqa: BLE001 - optional: absent, unreachable, late or damaged, it is left out
            continue
        out[split] = frame
        paths[name] = path
    return out


def _check_complete(articles: pd.DataFrame | None, splits: dict[str, pd.DataFrame]) -> None:
    """Signs of a truncated hub file: every BSARD split has questions, every question has
    relevant articles, all in the corpus. A file cut inside its last row loses that row's last
    fields (pandas fills them with "")."""
    known = None if articles is None else set(articles["id"])
    for split, q in splits.items():
        if q.empty:
            raise DataError(f"questions_{split}.csv: no questions")
        empty = q.loc[q["article_ids"].map(len) == 0, "id"].tolist()
        if empty:
            raise DataError(f"questions_{split}.csv: question(s) {', '.join(empty[:5])} have no relevant article")
        if known is not None:
            missing = sorted({a for ids in q["article_ids"] for a in ids} - known)
            if missing:
                raise DataError(f"questions_{split}.csv: relevant article(s) {', '.join(missing[:5])} "
                                f"are not in articles.csv ({len(articles)} articles)")


def _require_regular(path: Path) -> None:
    """:class:`DataError` unless ``path`` is a regular file (not a folder, FIFO, device, dangling link)."""
    if not path.is_file():
        what = ("a folder" if path.is_dir() else "a broken link" if not path.exists()
                else "a special file (FIFO, device)")
        raise DataError(f"{path}: is {what}, not a CSV file")


def _read(path: Path) -> pd.DataFrame:
    try:
        size = path.stat().st_size
        if size > MAX_CSV_BYTES:
            raise DataError(f"{path}: {size / 1e6:.0f} MB is larger than the {MAX_CSV_BYTES // 2**20} MiB limit")
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return read_csv_table(data, source=str(path))
