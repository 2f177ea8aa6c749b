"""Sentence-transformers models served without torch: an ONNX export run by onnxruntime, tokenised
by ``tokenizers`` (:class:`OnnxEncoder`). Needs only numpy, onnxruntime and tokenizers, the
hosted install's packages; :mod:`.onnx_export` writes the exports (where torch is). Vectors match
sentence-transformers' (unit rows, same windows); loading checks the files against :data:`RECORD_FILE`, and
:func:`export_identity` keys the dense cache on content, so a copied export (an index bundle) keeps its cache keys.

The export folder, its record, checks and identity: docs/design.md, 'bsard_demo/retrievers/onnx_encoder.py'.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .. import settings
from ..dataset import first_line
from .base import Progress, Step
from .encoder_base import EXPORT_DIRNAME, EncoderUnavailable, embed_batched, file_sha256, folder_digest, normalize_rows

RECORD_FILE = "onnx_export.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
RECORD_FORMAT = "bsard-demo-onnx-export"
RECORD_VERSION = 1
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len_tokens")
#: Texts per onnxruntime call when embedding documents: 16 windows of 256 tokens keep MiniLM's
#: attention buffers near 50 MB (64 would need ~200 MB), at the same throughput.
DOC_MICRO_BATCH = 16
#: The fields of the record that shape the vectors (with the files' sha256): :func:`export_identity`.
_SHAPING = ("dim", "max_seq_length", "pooling", "query_prefix", "passage_prefix", "inputs", "pad_id",
            "pad_type_id", "padding_side", "truncation_side", "int8")


def find_export(folder: str | Path) -> Path | None:
    """The export of a model folder: the folder itself when it holds :data:`RECORD_FILE` (an
    export of its own), else its ``onnx/`` sub-folder when present; ``None`` without either."""
    folder = Path(folder)
    if (folder / RECORD_FILE).is_file():
        return folder
    sub = folder / EXPORT_DIRNAME
    return sub if sub.is_dir() else None


def read_record(folder: str | Path) -> dict:
    """The export record of ``folder``; :class:`ValueError` when missing or malformed."""
    path = Path(folder) / RECORD_FILE
    if not path.is_file():
        raise ValueError(f"no {RECORD_FILE}")
    if path.stat().st_size > 1 << 20:
        raise ValueError(f"{RECORD_FILE} is larger than 1 MiB")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{RECORD_FILE} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        raise ValueError(f"{RECORD_FILE} is not a bsard-demo ONNX export record")
    if int(record.get("format_version", 0)) > RECORD_VERSION:
        raise ValueError(f"{RECORD_FILE} was written by a newer bsard-demo (format {record['format_version']})")
    missing = [k for k in (*_SHAPING, "files") if k not in record]
    if missing:
        raise ValueError(f"{RECORD_FILE} lacks {', '.join(missing)}")
    files = record["files"]
    if not isinstance(files, Mapping) or set(files) != {MODEL_FILE, TOKENIZER_FILE}:
        raise ValueError(f"{RECORD_FILE} must list exactly {MODEL_FILE} and {TOKENIZER_FILE}")
    bad = [m for m in record["pooling"] if m not in POOLING_MODES] if isinstance(record["pooling"], list) else ["?"]
    if bad or not record["pooling"]:
        raise ValueError(f"{RECORD_FILE}: unsupported pooling {record['pooling']!r}")
    return record


def check_files(folder: str | Path, record: Mapping[str, Any]) -> str | None:
    """``None`` when both files match the record (sizes first, then sha256), else the problem."""
    folder = Path(folder)
    try:
        for name, meta in record["files"].items():
            path = folder / name
            if not path.is_file():
                return f"missing file {name}"
            if path.stat().st_size != int(meta["size"]):
                return f"{name} is {path.stat().st_size} bytes, {int(meta['size'])} recorded (truncated or replaced)"
        for name, meta in record["files"].items():
            if file_sha256(folder / name) != str(meta["sha256"]):
                return f"{name} does not match its recorded sha256 (altered or replaced)"
    except (OSError, KeyError, TypeError, ValueError) as exc:
        return f"cannot check the files ({first_line(exc, limit=120)})"
    return None


def export_identity(record: Mapping[str, Any]) -> str:
    """24 hex digits identifying what an export computes: its files' sha256 and shaping settings."""
    shaping = {k: record.get(k) for k in _SHAPING}
    shaping["files"] = {n: str(m["sha256"]) for n, m in sorted(record["files"].items())}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode("utf-8")).hexdigest()[:24]


def pool(token_embeddings: np.ndarray, mask: np.ndarray, modes: Sequence[str]) -> np.ndarray:
    """Sentence vectors from token embeddings (batch × tokens × hidden) and the attention mask, as
    sentence-transformers' Pooling module computes them; several modes are concatenated."""
    emb = np.asarray(token_embeddings, dtype=np.float32)
    m = np.asarray(mask, dtype=np.float32)[..., None]
    out = []
    for mode in modes:
        if mode in ("mean", "mean_sqrt_len_tokens"):
            total = (emb * m).sum(axis=1, dtype=np.float32)
            count = np.clip(m.sum(axis=1, dtype=np.float32), 1e-9, None)
            out.append(total / (count if mode == "mean" else np.sqrt(count)))
        elif mode == "max":
            out.append(np.where(m > 0, emb, -np.inf).max(axis=1))
        elif mode == "cls":
            first = np.asarray(mask).argmax(axis=1)
            out.append(emb[np.arange(len(emb)), first])
        else:
            raise ValueError(f"unsupported pooling mode {mode!r}")
    return np.concatenate(out, axis=1) if len(out) > 1 else out[0]


def _session(path: Path, threads: int | None):
    settings.prepare_runtime()  # TOKENIZERS_PARALLELISM, OMP_WAIT_POLICY: before native libraries load
    import onnxruntime as ort  # optional native runtime, after prepare_runtime: ONNX models only

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no warnings on stderr
    # Idle intra-op threads wait rather than spin, as settings.RUNTIME_DEFAULTS has OpenMP's do: the same
    # vectors (byte for byte), 20-25 % less CPU embedding 40 sample articles and 48 questions on a busy
    # 2-core machine (7.3-7.7 against 9.1-10.2 CPU s) and no longer wall time there.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = int(threads)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """An ONNX export (docs/design.md, 'bsard_demo/retrievers/onnx_encoder.py') as an :class:`~.encoder_base.Encoder`.

    ``folder``: the export folder. ``name``: how the model is named (run tags, messages; default
    the folder's). ``source``: the model folder the export sits in, checked to still hold the
    weights it was exported from (a stale export is refused). ``model_name``: the name an index
    bundle records it under (default: the base name of ``source``, else of ``folder``).
    Raises :class:`EncoderUnavailable` (one line) for a missing, malformed, damaged or stale export,
    or without onnxruntime / tokenizers."""

    normalized = True
    backend = "onnx"
    #: Part of the dense cache key instead of ``name`` (a path would tie the key to a folder).
    cache_name = "folder/onnx"

    def __init__(self, folder: str | Path, *, name: str | None = None, source: str | Path | None = None,
                 model_name: str | None = None, threads: int | None = None) -> None:
        self.folder = Path(folder)
        self.name = name or str(folder)
        where = Path(source or folder).resolve()
        if source is None and where.name == EXPORT_DIRNAME and (where.parent / "modules.json").is_file():
            where = where.parent  # MODEL/onnx given as the folder: the model is MODEL
        self.model_name = model_name or where.name
        fix = f"run python -m bsard_demo export-onnx {source or folder} --refresh where torch is installed"
        try:
            record = read_record(self.folder)
        except (OSError, ValueError) as exc:
            raise EncoderUnavailable(f"{self.name}: no usable ONNX export in {self.folder} "
                                     f"({first_line(exc, with_type=False)}); {fix}") from None
        problem = check_files(self.folder, record)
        if problem:
            raise EncoderUnavailable(f"{self.name}: its ONNX export is damaged ({problem}); {fix}")
        if source is not None and record.get("source", {}).get("digest"):
            if folder_digest(source) != record["source"]["digest"]:
                raise EncoderUnavailable(f"{self.name}: its ONNX export was made from other weights than the folder "
                                         f"holds now (stale); {fix}")
        self.record = record
        self.source = Path(source) if source is not None else None
        self.dim = int(record["dim"])
        self.max_tokens: int | None = int(record["max_seq_length"])
        self.query_prefix = str(record["query_prefix"])
        self.passage_prefix = str(record["passage_prefix"])
        self.pooling = list(record["pooling"])
        self.inputs = list(record["inputs"])
        self.int8 = bool(record["int8"])
        self.version = f"onnx-{export_identity(record)}"
        self.threads = threads
        try:
            from tokenizers import Tokenizer  # optional: ONNX models only
        except ImportError:
            raise EncoderUnavailable(f"{self.name}: the ONNX backend needs the package tokenizers "
                                     "(pip install tokenizers)") from None
        try:
            self._counter = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
            self._counter.no_padding()
            self._counter.no_truncation()
            tok = Tokenizer.from_file(str(self.folder / TOKENIZER_FILE))
            tok.no_padding()
            tok.enable_truncation(self.max_tokens, strategy="longest_first", direction=str(record["truncation_side"]))
            tok.enable_padding(direction=str(record["padding_side"]), pad_id=int(record["pad_id"]),
                               pad_type_id=int(record["pad_type_id"]),
                               pad_token=str(record.get("pad_token") or "[PAD]"))
            self._tokenizer = tok
        except Exception as exc:  # noqa: BLE001 - any tokenizer failure is "unavailable"
            raise EncoderUnavailable(f"{self.name}: cannot load {TOKENIZER_FILE} ({first_line(exc, limit=160)}); "
                                     f"{fix}") from None
        try:
            import onnxruntime  # noqa: F401 - optional native runtime: is it installed?
        except ImportError:
            raise EncoderUnavailable(f"{self.name}: the ONNX backend needs the package onnxruntime "
                                     "(pip install onnxruntime)") from None
        try:
            self._session = _session(self.folder / MODEL_FILE, threads)
        except Exception as exc:  # noqa: BLE001 - a graph onnxruntime cannot load
            raise EncoderUnavailable(f"{self.name}: onnxruntime cannot load {MODEL_FILE} "
                                     f"({first_line(exc, limit=160)}); {fix}") from None
        names = {i.name for i in self._session.get_inputs()}
        if not set(self.inputs) <= names | {"token_type_ids"} or not {"input_ids", "attention_mask"} <= names:
            raise EncoderUnavailable(f"{self.name}: {MODEL_FILE} takes {sorted(names)}, not the recorded inputs "
                                     f"{self.inputs}; {fix}")
        self._feeds = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in names]
        self._lock = threading.Lock()

    # -- encoding ----------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` taken as they are (no prefix added), one onnxruntime call."""
        encodings = self._tokenizer.encode_batch([str(t) for t in texts], add_special_tokens=True)
        arrays = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                  "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                  "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        with self._lock:  # one run at a time per session keeps the thread pool to itself
            (tokens,) = self._session.run(["token_embeddings"], {n: arrays[n] for n in self._feeds})
        return normalize_rows(pool(tokens, arrays["attention_mask"], self.pooling))

    def _encoder(self, prefix: str, micro: int):
        def encode(batch: list[str]) -> np.ndarray:
            texts = [prefix + t for t in batch]
            return np.concatenate([self.embed(texts[i:i + micro]) for i in range(0, len(texts), micro)])
        return encode

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32,
                       progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, self._encoder(self.query_prefix, max(1, int(batch_size))), self.dim,
                             progress, Step("embedding_questions", encoder=self.name))

    def encode_documents(self, texts: Sequence[str], batch_size: int = 32,
                         progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, self._encoder(self.passage_prefix, DOC_MICRO_BATCH), self.dim, progress,
                             Step("embedding_articles", encoder=self.name))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        encodings = self._counter.encode_batch([self.passage_prefix + str(t) for t in texts], add_special_tokens=True)
        return [len(e.ids) for e in encodings]

    # -- what an index bundle copies ---------------------------------------------------------
    def bundle_files(self) -> dict[str, Path]:
        """The files an index bundle carries for this model (relative name → path): the export,
        and the training record of the model folder when there is one."""
        files = {n: self.folder / n for n in (MODEL_FILE, TOKENIZER_FILE, RECORD_FILE)}
        for where in (self.source, self.folder):
            if where is not None and (where / "bsard_training.json").is_file():
                files["bsard_training.json"] = where / "bsard_training.json"
                break
        return files

    def __repr__(self) -> str:
        return f"OnnxEncoder({self.name!r})"
