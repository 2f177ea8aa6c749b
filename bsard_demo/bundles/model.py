"""Index bundles, the model: what a bundle is (:class:`Bundle`, read from ``bundle.json``), which
corpus it was built for (:class:`CorpusId`), and :func:`open_bundle`. See :mod:`bsard_demo.bundles`."""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import cache
from ..dataset import ARTICLE_COLUMNS, DataError
from ..frame_memo import frame_memo
from ..retrievers.encoder_base import EncoderUnavailable
from ..retrievers.onnx_encoder import OnnxEncoder
from ..retrievers.trained import FINETUNE_MODEL, trained_kind_of

BUNDLE_FILE = "bundle.json"
README_FILE = "README.md"
FORMAT = "bsard-demo-index-bundle"
FORMAT_VERSION = 1
_CORPUS_FORMAT = 1


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
    text, header or id gets another fingerprint (memoised per frame:
    :func:`~bsard_demo.frame_memo.frame_memo`)."""
    def digest() -> str:
        columns = [c for c in ARTICLE_COLUMNS if c in articles.columns]
        values = zip(*(articles[c].tolist() for c in columns))
        rows = ("\x1f".join("" if v is None else str(v) for v in row) for row in values)
        return cache.fingerprint(rows, {"columns": columns, "format": _CORPUS_FORMAT})

    return CorpusId(frame_memo(articles, ("corpus_id", _CORPUS_FORMAT), digest), int(len(articles)), str(dataset))


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


@dataclass(frozen=True)
class BundleModel:
    """A model an index bundle carries: the ONNX export of a model folder, under
    ``models/<name>/`` (``model.onnx``, ``tokenizer.json``, ``onnx_export.json``, and the
    folder's ``bsard_training.json`` when it had one). ``name`` is what ``--encoder NAME``
    selects where the bundle is active; ``version`` the encoder version its embeddings are keyed
    on; ``training``: what it was trained on (``dataset``, ``split``, ``articles_sha256``: the
    corpus fingerprint of :func:`bsard_demo.training.articles_fingerprint`, ``created``, ...)
    or ``None`` for a model not trained here; ``test``: a recorded test figure, if any."""

    name: str
    path: str
    files: Mapping[str, Mapping[str, Any]]  # names relative to the model folder
    version: str = ""
    dim: int = 0
    base_model: str = ""
    int8: bool = False
    training: Mapping[str, Any] | None = None
    test: Mapping[str, Any] | None = None

    @property
    def size(self) -> int:
        return sum(int(m["size"]) for m in self.files.values())

    @property
    def trained_on(self) -> str:
        """e.g. ``"bsard train, 2026-12-01"`` (empty for a model not trained here)."""
        t = self.training or {}
        if not t:
            return ""
        return f"{t.get('dataset', '?')} {t.get('split', '?')}, {str(t.get('created', ''))[:10]}".strip(", ")

    def describe(self) -> str:
        """One line: name, base, what it was trained on, size."""
        kind = trained_kind_of(self.training) or FINETUNE_MODEL  # a record without a kind: a fine-tuned model
        trained = f", {kind.verb} on {self.trained_on}" if self.trained_on else ""
        served = kind.served or f"ONNX{' int8' if self.int8 else ''}"
        return f"{self.name} ({self.base_model or 'model'}{trained}; {served}, {self.size / 1e6:.1f} MB)"


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
    models: dict = field(init=False, repr=False)
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
            entries[(kind, key)] = BundleEntry(kind, key, str(item.get("what", kind)), dict(item.get("describe") or {}),
                                               own)
        self.entries = entries
        models = {}
        for item in self.manifest.get("models") or []:
            name, path = str(item["name"]), str(item["path"]).rstrip("/")
            own = {n[len(path) + 1:]: meta for n, meta in files.items() if n.startswith(path + "/")}
            models[name] = BundleModel(name, path, own, str(item.get("version", "")), int(item.get("dim", 0) or 0),
                                       str(item.get("base_model", "")), bool(item.get("int8", False)),
                                       item.get("training") or None, item.get("test") or None)
        self.models = models

    def model_list(self) -> list[BundleModel]:
        """The models the bundle carries, in its order (for a menu: :meth:`BundleModel.describe`)."""
        return list(self.models.values())

    def model_folder(self, name: str) -> tuple[Path | None, str | None]:
        """``(folder, None)`` for the sound model ``name``; ``(None, note)`` when its files do
        not match their record (one line: it is refused); ``(None, None)`` when the bundle has
        no such model. Checksums are memoised on the files' sizes and times."""
        model = self.models.get(str(name).strip())
        if model is None:
            return None, None
        problem = self._check_files(model.path, model.files)
        if problem:
            return None, f"index bundle {self.label}: its model {model.name} is damaged ({problem}); it is not used"
        return self.root / model.path, None

    def encoder(self, name: str):
        """The :class:`~bsard_demo.retrievers.onnx_encoder.OnnxEncoder` of the bundled model
        ``name``. Raises :class:`~bsard_demo.retrievers.encoders.EncoderUnavailable` (missing or
        damaged model)."""
        folder, problem = self.model_folder(name)
        if folder is None:
            raise EncoderUnavailable(problem or f"index bundle {self.label} carries no model {name!r} "
                                     f"(it carries: {', '.join(self.models) or 'none'})")
        return OnnxEncoder(folder, name=str(name).strip(), model_name=str(name).strip())

    @property
    def corpus(self) -> CorpusId:
        return CorpusId.from_json(self.manifest["corpus"])

    @property
    def total_size(self) -> int:
        return int(self.manifest.get("total_size", 0))

    def summary(self) -> str:
        """e.g. ``"BM25 index + embeddings (use) for 22,633 articles of X (61.2 MB)"``."""
        whats = " + ".join([e.what for e in self.entries.values()] + [f"model {m}" for m in self.models]) or "no index"
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
        for model in self.models.values():
            problem = self._check_files(model.path, model.files, use_memo=False)
            if problem:
                problems.append(f"{model.path}: {problem}")
        return problems

    def _check_entry(self, entry: BundleEntry, *, use_memo: bool = True) -> str | None:
        if not entry.files:
            return "no file listed"
        if cache.MANIFEST not in entry.files:
            return f"no {cache.MANIFEST} listed"
        return self._check_files(f"{entry.kind}/{entry.key}", entry.files, use_memo=use_memo)

    def _check_files(self, path: str, files: Mapping[str, Mapping[str, Any]], *, use_memo: bool = True) -> str | None:
        folder = self.root / path
        if not files:
            return "no file listed"
        try:
            stamp = tuple((n, (folder / n).stat().st_size, (folder / n).stat().st_mtime_ns) for n in sorted(files))
        except OSError:
            stamp = None
        with self._lock:
            if use_memo and stamp is not None and self._sound.get(path) == stamp:
                return None
        problem = cache.check_files(folder, files, follow_links=True)
        if problem is None and stamp is not None:
            with self._lock:
                self._sound[path] = stamp
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


def _unsafe_name(manifest: Mapping[str, Any]) -> str | None:
    """What names a place outside the bundle (an absolute path, a ``..``, a separator in an entry's ``kind`` or
    ``key``, an empty part, a NUL) among the entries, ``models[].path`` and file names, else ``None``: the folders
    :class:`Bundle` joins to its root stay inside it whatever ``bundle.json`` says (checksums come from the
    same file, so they catch corruption, not tampering)."""
    def bad(value: Any, *, one_part: bool) -> bool:
        text = str(value)
        parts = text.replace("\\", "/").split("/")
        return (not text or "\x00" in text or text.startswith(("/", "\\")) or Path(text).is_absolute()
                or ":" in parts[0] or any(p in ("", ".", "..") for p in parts) or (one_part and len(parts) > 1))

    for item in manifest["entries"]:
        for field_name in ("kind", "key"):
            if bad(item[field_name], one_part=True):
                return f"entry {field_name} {str(item[field_name])[:80]!r}"
    for item in manifest.get("models") or []:
        if bad(str(item["path"]).rstrip("/"), one_part=False):
            return f"model path {str(item['path'])[:80]!r}"
    for name in manifest["files"]:
        if bad(name, one_part=False):
            return f"file name {str(name)[:80]!r}"
    return None


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
        if not isinstance(manifest.get("models", []), list):
            raise ValueError("models must be a list")
        unsafe = _unsafe_name(manifest)
        if unsafe:
            raise BundleError(f"index bundle {name}: {BUNDLE_FILE} names a place outside the bundle ({unsafe}: "
                              "an absolute path or '..'); it is not used", "damaged")
        return Bundle(root, manifest, label=name)
    except BundleError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed manifest is a damaged bundle
        raise BundleError(f"index bundle {name}: unreadable {BUNDLE_FILE} ({type(exc).__name__}: {exc})",
                          "damaged") from None
