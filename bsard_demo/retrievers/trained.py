"""Trained models as the retrievers find them: the record every model folder carries (:data:`METADATA_FILE`, read by
:func:`read_metadata`), the corpus it was fitted on (:func:`articles_fingerprint`), the folder the app lists
(:func:`models_folder`, ``$BSARD_MODELS``) and the query adapters and learned rankers fitted on a corpus
(:func:`trained_for_corpus`). Written by :mod:`bsard_demo.training`; here, below it, so that the first visitor's
system (:mod:`.defaults`) reads them without loading the training code (30 modules, ~0.27 s).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

from .. import cache, settings
from ..analyzer import DEFAULT_FIELDS, article_texts
from ..dataset import frame_memo
from .adapter import KIND as ADAPTER
from .encoder_base import read_json_record
from .ranker import KIND as RANKER

#: The record written into every trained model's folder.
METADATA_FILE = "bsard_training.json"
#: The record kinds :func:`trained_for_corpus` finds, in its answer's order.
FOUND_KINDS = (ADAPTER, RANKER)
_MAX_METADATA_BYTES = 1 << 20


def articles_fingerprint(articles, fields: Sequence[str] = DEFAULT_FIELDS) -> str:
    """sha256 of the corpus as the encoder sees it: every id with its embedded text, in order
    (memoised per frame: :func:`~bsard_demo.dataset.frame_memo`)."""
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
    (:func:`articles_fingerprint`), as ``--encoder`` takes them, by record kind (:data:`FOUND_KINDS`):
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
