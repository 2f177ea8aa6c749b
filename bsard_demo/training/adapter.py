"""``train`` (its default, or ``train --adapter``): fit a query-side adapter (:mod:`bsard_demo.retrievers.adapter`) on a
split's labelled questions, over a built-in encoder's article embeddings (loaded from an index bundle or the cache,
else built once), and write an adapter folder usable as ``--encoder DIR``.

The folder, the questions, determinism and the dev figure: docs/design.md, 'bsard_demo/training/adapter.py'.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import settings
from ..analyzer import DEFAULT_FIELDS
from ..dataset import DataError, Dataset
from ..retrievers.adapter import BASES, KIND, MATRIX_FILE, RECORD_FILE, AdapterSettings, base_backend, fit_adapter
from ..retrievers.base import Progress
from ..retrievers.dense import DenseRetriever
from ..retrievers.encoder_base import normalize_rows
from ..retrievers.encoders import resolve_encoder
from ..retrievers.neighbours import labelled_questions
from . import folders
from .dev import dev_asked, dev_evaluation, fitted_on_dev
from .folders import TrainResult, prepare_out

DEFAULT_ADAPTER_BASE = "use"


@dataclass
class AdapterOptions:
    out: str | Path
    base: str = DEFAULT_ADAPTER_BASE
    split: str = "train"
    settings: AdapterSettings = AdapterSettings()
    evaluate: bool | None = None
    overwrite: bool = False
    data: str | None = None
    cache_root: Path | None = None


def train_adapter(options: AdapterOptions, dataset: Dataset, progress: Progress | None = None) -> TrainResult:
    """Fit and write the adapter folder ``options.out`` (docs/design.md, 'bsard_demo/training/adapter.py'). Raises
    :class:`ValueError` (bad settings or base) and :class:`~bsard_demo.dataset.DataError` (data,
    output folder)."""
    t0 = time.perf_counter()
    settings.prepare_runtime()
    options.settings.check()
    base = str(options.base).strip().lower()
    if base not in BASES:
        raise ValueError(f"--adapter sits on a built-in encoder ({', '.join(BASES)}), not {options.base!r}")
    # "train,synthetic": fitted on their union
    options.split = folders.check_fit_data(dataset, options.split, "an adapter is fitted over the corpus' embeddings")
    texts, gold = labelled_questions(dataset, options.split)
    questions = dataset.questions_of(options.split)
    if not texts:
        raise DataError(f"no question of split '{options.split}' of {dataset.name} cites an article of its corpus")
    out = Path(options.out).expanduser().resolve()
    prepare_out(out, options.overwrite)
    backend = base_backend(base)  # e5: through ONNX Runtime, the e5 embeddings the learned ranker reads
    encoder = resolve_encoder(base, backend)
    dense = DenseRetriever.build(dataset.articles, encoder=encoder, cache_root=options.cache_root, progress=progress)
    # one question at a time, as DenseRetriever.search_many encodes them
    queries = np.vstack([normalize_rows(encoder.encode_queries([t], batch_size=1)) for t in texts])
    t_fit = time.perf_counter()
    matrix, history = fit_adapter(queries, gold, dense.embeddings, options.settings, progress, name=base)
    fit_seconds = time.perf_counter() - t_fit
    notes = []
    if fitted_on_dev(options.split):
        notes.append("fitted on the test split: its scores on that split are no longer held out")
    if len(texts) < len(questions):
        notes.append(f"{len(questions) - len(texts)} question(s) of the split(s) cite no article of the corpus "
                     "and were skipped")
    with folders.assembling(out) as tmp:
        np.save(tmp / MATRIX_FILE, matrix, allow_pickle=False)
        metadata = folders.base_record(KIND, dataset, spec=options.data, split=options.split,
                                       questions_used=len(texts))
        metadata["dataset"].update({"articles_in_pairs": len({int(r) for rows in gold for r in rows}),
                                    "fields": list(DEFAULT_FIELDS), "with_description": False})
        metadata |= {
            "base": {"name": base, "version": getattr(encoder, "version", ""), "backend": backend},
            "settings": {**options.settings.as_dict(), "loss": "softmax over the whole corpus, multi-positive "
                         "(bsard_demo.retrievers.adapter)", "optimizer": "full-batch Adam from the identity"},
            "pairs": int(sum(len(rows) for rows in gold)), "steps": int(options.settings.steps),
            "loss": {"first": history[0], "last": history[-1], "history": [[i + 1, v] for i, v in enumerate(history)]},
            "seconds": {"training": round(fit_seconds, 2), "total": None},
            "versions": folders.library_versions(),
        }
        dev = (lambda: dev_evaluation(tmp, dataset, cache_root=options.cache_root, progress=progress)) \
            if dev_asked(options, dataset) else None
        folders.finish_folder(tmp, out, metadata, t0, weights=[MATRIX_FILE], record_file=RECORD_FILE, dev=dev)
    return TrainResult(out, metadata, time.perf_counter() - t0, data=options.data, notes=notes)

