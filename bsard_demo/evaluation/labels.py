"""Labels from a file instead of a dataset's split: ``evaluate``/``compare --qrels FILE`` and the Score page's
labels upload. :func:`labels_dataset` turns a read labels file (:class:`bsard_demo.runs.qrels_read.QrelsFile`)
into a :class:`~bsard_demo.dataset.Dataset` whose split holds those labels, scored as any split: with ``base``
(``--data``) the corpus and other splits are the base's; without it there is no corpus and the checks that need
one are skipped (:data:`SKIPPED_CHECKS`). Graded labels ride in :data:`GAINS_COLUMN` (nDCG's gains,
:func:`gains_of`); every other measure counts relevance > 0 as relevant, as trec_eval does.
:func:`labels_from_upload` reads and wraps an uploaded file in one step.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from ..dataset import Dataset
from ..runs import QrelsFile, read_qrels_bytes

#: The :attr:`Dataset.kind` of labels without a corpus.
LABELS_KIND = "labels"
#: The split column holding a question's graded labels (``{article: relevance}``) when some grade is not 0/1.
GAINS_COLUMN = "gains"
#: The checks that need a corpus, skipped when the labels come without one (said once by the front ends).
SKIPPED_CHECKS = ("unknown articles", "shifted ids", "near-random", "misses by hierarchy")
#: The line the CLI prints once when they are skipped.
SKIPPED_NOTE = ("note: no corpus (--qrels without --data): the checks that need one are skipped ("
                + ", ".join(SKIPPED_CHECKS) + ")")


def labels_dataset(labels: QrelsFile, split: str = "test", base: Dataset | None = None,
                   path: str | Path | None = None) -> Dataset:
    """A dataset whose ``split`` holds ``labels`` (questions in file order, ``article_ids`` = relevance > 0,
    :data:`GAINS_COLUMN` when graded); the corpus, other splits and files of ``base`` when given. ``path``: the
    labels file on disk, hashed into the reproducibility stamp."""
    if labels.labels is None:
        raise ValueError(f"the labels file {labels.name} has errors")
    relevant = labels.relevant()
    frame = pd.DataFrame({"id": list(relevant), "category": "", "subcategory": "", "question": "",
                          "extra_description": "", "article_ids": [tuple(sorted(v)) for v in relevant.values()]},
                         columns=["id", "category", "subcategory", "question", "extra_description", "article_ids"])
    if labels.graded:
        frame[GAINS_COLUMN] = [dict(labels.labels[q]) for q in relevant]
    splits = dict(base.splits) if base is not None else {}
    splits[split] = frame
    files = {k: v for k, v in (base.files if base is not None else {}).items() if k != f"questions_{split}.csv"}
    if path is not None:
        files["labels"] = str(path)
    if base is None:
        return Dataset(labels.name, LABELS_KIND, None, splits, False, files)
    return Dataset(f"{base.name} + {labels.name}", base.kind, base.articles, splits, base.fictional, files)


def labels_from_upload(data: bytes, name: str, split: str = "test", base: Dataset | None = None,
                       max_bytes: int | None = None) -> tuple[QrelsFile, Dataset | None]:
    """An uploaded labels file read (:func:`bsard_demo.runs.read_qrels_bytes`: every problem, nothing native in
    this process, at most ``max_bytes``, default the reader's) and, when it has no error, its dataset
    (:func:`labels_dataset`); else ``None``."""
    read = read_qrels_bytes(data, name) if max_bytes is None else read_qrels_bytes(data, name, max_bytes=max_bytes)
    return read, (labels_dataset(read, split, base) if read.ok else None)


def has_corpus_checks(dataset: Dataset) -> bool:
    """False for labels without a corpus: the checks of :data:`SKIPPED_CHECKS` do not run."""
    return not (dataset.kind == LABELS_KIND and dataset.articles is None)


def gains_of(dataset: Dataset, split: str) -> Mapping[str, Mapping[str, float]] | None:
    """The graded labels of ``split`` (question -> article -> relevance) when a labels file gave grades; else
    ``None`` (binary labels: nDCG's gains are 1)."""
    frame = dataset.questions(split)
    if GAINS_COLUMN not in frame:
        return None
    return {str(q): g for q, g in zip(frame["id"], frame[GAINS_COLUMN]) if isinstance(g, dict)}
