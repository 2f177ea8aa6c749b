"""Export a sentence-transformers model to ONNX (:func:`export_onnx`), so that
:class:`~.onnx_encoder.OnnxEncoder` serves it without torch. Needs torch and sentence-transformers
(imported when called); ``int8`` also needs the ``onnx`` package. The export is checked against
sentence-transformers on probe texts (an fp32 export below cosine :data:`MIN_COSINE` is refused) and written
atomically. Measured: docs/benchmarks.md, "Trained encoders through ONNX (issue 14)".

What is exported, the check, and where: docs/design.md, 'bsard_demo/retrievers/onnx_export.py'.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import logging
import os
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import cache
from ..dataset import first_line
from .encoder_base import EXPORT_DIRNAME, EncoderUnavailable, file_sha256, folder_digest
from .encoders import SentenceTransformerEncoder, minilm_encoder, pick_prefixes
from .onnx_encoder import (
    MODEL_FILE,
    RECORD_FILE,
    RECORD_FORMAT,
    RECORD_VERSION,
    TOKENIZER_FILE,
    OnnxEncoder,
    check_files,
    export_identity,
    read_record,
)

OPSET = 17
#: An fp32 export must reproduce sentence-transformers to this cosine on every probe text.
MIN_COSINE = 0.9999
#: An int8 export is refused below this cosine (it is recorded whatever it is).
MIN_COSINE_INT8 = 0.95
PROBES = ("Mon propriétaire peut-il garder ma garantie locative ?", "divorce", "",
          "Art. 3. Le bail de résidence principale est conclu pour une durée de neuf ans. " * 40,
          "The tenant may terminate the lease at any time with three months' notice.")
_ST_MODULES = ("Transformer", "Pooling", "Normalize")


@dataclass
class ExportResult:
    """``status``: ``"written"`` (new), ``"replaced"`` (a damaged, stale or refreshed export was
    rewritten) or ``"kept"`` (a sound export was left as it is)."""

    folder: Path
    record: dict
    status: str
    seconds: float
    reason: str = ""

    def summary(self) -> str:
        r = self.record
        kind = "int8" if r.get("int8") else "fp32"
        if self.status == "kept":
            return (f"{self.folder}: holds a sound ONNX export ({kind}, made {r.get('created', '?')}) of these "
                    "weights; left as it is (--refresh rewrites it)")
        size = r["files"][MODEL_FILE]["size"] / 1e6
        check = r.get("check", {})
        verb = "written" if self.status == "written" else f"replaced ({self.reason})" if self.reason else "replaced"
        return (f"ONNX export {verb}: {self.folder} ({kind} {MODEL_FILE} {size:.1f} MB, {TOKENIZER_FILE}, "
                f"{RECORD_FILE}) in {self.seconds:.1f} s; min cosine with sentence-transformers "
                f"{check.get('min_cosine', float('nan')):.7f} on {check.get('texts', 0)} texts")


def _versions() -> dict:
    out = {}
    for dist in ("torch", "onnx", "onnxruntime", "tokenizers", "transformers", "sentence-transformers"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _source(model: str) -> tuple[Path, object, str, str | None]:
    """``(folder, SentenceTransformerEncoder, name, version)`` of ``model``: ``"minilm"`` or a folder."""
    if str(model).strip().lower() == "minilm":
        enc = minilm_encoder()
        return Path(enc.model_folder), enc, "minilm", enc.version
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise EncoderUnavailable(f"{model}: no such model folder (export-onnx takes a sentence-transformers folder or "
                                 "minilm)")
    if (folder / RECORD_FILE).is_file():
        raise EncoderUnavailable(f"{model}: this folder is an ONNX export already, not a sentence-transformers model")
    if not (folder / "modules.json").is_file():
        raise EncoderUnavailable(f"{model}: not a sentence-transformers folder (no modules.json)")
    return folder.resolve(), SentenceTransformerEncoder(str(folder.resolve()), name=str(model)), str(model), None


def _layout(st_model) -> tuple[list[str], bool]:
    """(pooling modes, has Normalize) of a Transformer → Pooling (→ Normalize) model."""
    kinds = [type(m).__name__ for m in st_model]
    if len(kinds) < 2 or kinds[0] != "Transformer" or kinds[1] != "Pooling" \
            or any(k not in _ST_MODULES for k in kinds) \
            or kinds.count("Normalize") > 1 or (len(kinds) == 3 and kinds[2] != "Normalize") or len(kinds) > 3:
        raise EncoderUnavailable("only Transformer → Pooling (→ Normalize) models can be exported, not "
                                 f"{' → '.join(kinds)}")
    pooling = st_model[1]
    modes = pooling.pooling_mode
    modes = [modes] if isinstance(modes, str) else list(modes)
    if not getattr(pooling, "include_prompt", True) or getattr(st_model, "default_prompt_name", None):
        raise EncoderUnavailable("models with a default prompt or prompt-excluding pooling cannot be exported")
    unsupported = [m for m in modes if m not in ("mean", "cls", "max", "mean_sqrt_len_tokens")]
    if unsupported:
        raise EncoderUnavailable(f"pooling {', '.join(unsupported)} is not supported by the ONNX backend")
    return modes, len(kinds) == 3


def _export_graph(st_model, path: Path, inputs: list[str]) -> None:
    import torch  # optional: exporting needs torch, absent from the hosted install

    hf = st_model[0].auto_model.eval()

    class Wrapper(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kwargs["token_type_ids"] = token_type_ids
            return self.model(**kwargs).last_hidden_state

    dummy = torch.ones((2, 8), dtype=torch.long)
    args = tuple(dummy if n != "token_type_ids" else torch.zeros_like(dummy) for n in inputs)
    axes = {n: {0: "batch", 1: "tokens"} for n in [*inputs, "token_embeddings"]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Wrapper(hf), args, str(path), input_names=inputs, output_names=["token_embeddings"],
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False, do_constant_folding=True)


def _quantize(path: Path) -> None:
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic  # optional: --int8 only (needs onnx)
    except ImportError as exc:
        raise EncoderUnavailable(f"--int8 needs the packages onnx and onnxruntime ({exc})") from None

    fp32 = path.with_name("model-fp32.onnx")
    os.replace(path, fp32)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser logs a "consider pre-processing" warning on the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # per channel: min cosine with fp32 0.982 on sample texts for MiniLM, 0.880 per tensor
            quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)
    fp32.unlink()


def _target_state(target: Path, digest: str) -> tuple[str, str]:
    """("absent" | "sound" | "unsound" | "foreign", why) of an export target."""
    if not os.path.lexists(target):
        return "absent", ""
    if not target.is_dir() or target.is_symlink():
        return "foreign", "exists and is not a folder"
    if not (target / RECORD_FILE).is_file():
        if not any(target.iterdir()):
            return "absent", ""
        return "foreign", "exists, is not empty and holds no ONNX export"
    try:
        record = read_record(target)
    except (OSError, ValueError) as exc:
        return "unsound", f"its record is unusable: {exc}"
    problem = check_files(target, record)
    if problem:
        return "unsound", f"damaged: {problem}"
    if record.get("source", {}).get("digest") != digest:
        return "unsound", "stale: made from other weights"
    return "sound", ""


def export_onnx(model: str, out: str | os.PathLike | None = None, *, refresh: bool = False, int8: bool = False,
                prefix_name: str | None = None, model_name: str | None = None,
                base_model: str | None = None) -> ExportResult:
    """Export ``model`` (a sentence-transformers folder, or ``"minilm"``) to ``out`` (default
    ``MODEL/onnx``; required for ``minilm``). ``prefix_name``: the name whose model family picks
    the query/passage prefixes (default: the model's own, as
    :class:`~.encoders.SentenceTransformerEncoder` does); ``model_name``: the name the record
    gives the model (default ``model``; ``train`` exports under a temporary name), ``base_model``
    the model it was fine-tuned from (default: from its training record or config). Raises :class:`EncoderUnavailable`
    (cannot load or export: one line) and :class:`ValueError` (a target in the way)."""
    t0 = time.perf_counter()
    if out is None and str(model).strip().lower() == "minilm":
        raise ValueError("minilm's files live inside an installed package: give --out DIR "
                         "(then serve it with --encoder DIR)")
    folder, enc, name, version = _source(model)
    target = Path(out).expanduser() if out is not None else folder / EXPORT_DIRNAME
    digest = folder_digest(folder)
    state, why = _target_state(target, digest)
    if state == "foreign":
        raise ValueError(f"{target}: {why}; choose a new folder for the export")
    if state == "sound":
        record = read_record(target)
        if not refresh and bool(record.get("int8")) == bool(int8):
            return ExportResult(target, record, "kept", time.perf_counter() - t0)
        if not refresh:
            raise ValueError(f"{target} holds a sound {'int8' if record.get('int8') else 'fp32'} export already; "
                             f"add --refresh to replace it with an {'int8' if int8 else 'fp32'} one")
        why = "--refresh"
    st_model = enc.model
    modes, normalize = _layout(st_model)
    if prefix_name is not None:
        query_prefix, passage_prefix = pick_prefixes(st_model, prefix_name)
    else:
        query_prefix, passage_prefix = enc.query_prefix, enc.passage_prefix
    tok = st_model.tokenizer
    if not getattr(tok, "is_fast", False):
        raise EncoderUnavailable(f"{name}: its tokenizer has no fast (tokenizers) version, which the ONNX backend "
                                 "needs")
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in tok.model_input_names else [])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        try:
            _export_graph(st_model, tmp / MODEL_FILE, inputs)
        except Exception as exc:  # noqa: BLE001 - e.g. onnx missing, an operator the exporter lacks
            raise EncoderUnavailable(f"torch.onnx.export failed for {name} ({first_line(exc, limit=200)}); "
                                     "the export needs the onnx package where torch is") from None
        if int8:
            _quantize(tmp / MODEL_FILE)
        from tokenizers import Tokenizer  # optional: ONNX models only

        backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
        backend.no_padding()
        backend.no_truncation()
        backend.save(str(tmp / TOKENIZER_FILE))
        record = {
            "format": RECORD_FORMAT, "format_version": RECORD_VERSION,
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            "model": model_name or name, "base_model": base_model or _base_model(folder, st_model, name),
            "source": {"digest": digest, "version": version},
            "dim": int(enc.dim), "max_seq_length": int(enc.max_tokens), "pooling": modes, "normalize": normalize,
            "query_prefix": query_prefix, "passage_prefix": passage_prefix, "inputs": inputs,
            "pad_id": int(tok.pad_token_id or 0), "pad_token": str(tok.pad_token or ""),
            "pad_type_id": int(getattr(tok, "pad_token_type_id", 0) or 0), "padding_side": str(tok.padding_side),
            "truncation_side": str(getattr(tok, "truncation_side", "right")), "opset": OPSET, "int8": bool(int8),
            "files": {n: {"size": (tmp / n).stat().st_size, "sha256": file_sha256(tmp / n)}
                      for n in (MODEL_FILE, TOKENIZER_FILE)},
            "versions": _versions(),
        }
        _write_record(tmp, record)
        record["check"] = _check(OnnxEncoder(tmp, name=name), st_model, int8)
        record["seconds"] = round(time.perf_counter() - t0, 2)
        _write_record(tmp, record)
        if (folder / "bsard_training.json").is_file() and out is not None:
            shutil.copy2(folder / "bsard_training.json", tmp / "bsard_training.json")
        cache.replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(target, record, "written" if state == "absent" else "replaced", time.perf_counter() - t0,
                        reason=why if state != "absent" else "")


def _base_model(folder: Path, st_model, name: str) -> str:
    try:
        training = json.loads((folder / "bsard_training.json").read_text(encoding="utf-8"))
        return str(training["base"]["name"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    config = getattr(st_model[0].auto_model, "config", None)
    origin = str(getattr(config, "_name_or_path", "") or "")
    return name if name == "minilm" else "" if not origin or os.path.isabs(origin) else origin


def _check(onnx: OnnxEncoder, st_model, int8: bool) -> dict:
    """Cosine of the export's vectors with sentence-transformers' on :data:`PROBES` (one at a time
    and as one batch); raises :class:`EncoderUnavailable` below the threshold."""
    texts = [onnx.passage_prefix + t for t in PROBES]
    ours = np.concatenate([onnx.embed([t]) for t in texts] + [onnx.embed(texts)])
    ref = st_model.encode(texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    ref = np.concatenate([ref, ref]).astype(np.float32)
    cosine = float(np.min(np.sum(ours * ref, axis=1)))
    floor = MIN_COSINE_INT8 if int8 else MIN_COSINE
    if not cosine >= floor:
        raise EncoderUnavailable(f"the ONNX export does not reproduce sentence-transformers (min cosine {cosine:.6f} "
                                 f"< {floor}); it was not written")
    return {"texts": len(ours), "min_cosine": round(cosine, 9), "identity": export_identity(onnx.record)}


def _write_record(folder: Path, record: dict) -> None:
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
