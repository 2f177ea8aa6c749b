"""Training models on a split, in one home; each method is one module, all write one kind of folder:
``finetune`` (``train --finetune``: :func:`train`; e5's, ``--base e5``: ``e5_finetune``'s :func:`train_e5` on
``e5_torch``, both behind :func:`fine_tune`), ``adapter`` (``train``'s default: :func:`train_adapter`), ``dev`` (the
dev figure every method records: its model scored on the test split) and ``folders`` (the model folder: its
record :data:`METADATA_FILE`, :func:`prepare_out`, :class:`TrainResult`, and the folders the app lists,
:func:`list_trained_models`, which lists as encoders only the kinds of :data:`ENCODER_KINDS`).

The modules, and what a new method needs: docs/design.md, 'bsard_demo/training/__init__.py'.
"""
from ..retrievers.trained import METADATA_FILE, articles_fingerprint, models_folder, read_metadata, trained_for_corpus
from .adapter import AdapterOptions, train_adapter
from .dev import dev_evaluation
from .e5_finetune import fine_tune, train_e5
from .finetune import TrainingPairs, TrainOptions, load_base, train, training_pairs
from .folders import (
    ENCODER_KINDS,
    MODELS_ENV,
    TrainedModel,
    TrainResult,
    list_trained_models,
    prepare_out,
    questions_fingerprint,
)

__all__ = [
    "AdapterOptions", "train_adapter", "dev_evaluation", "TrainingPairs", "TrainOptions", "load_base", "train",
    "training_pairs", "fine_tune", "train_e5", "ENCODER_KINDS", "METADATA_FILE", "MODELS_ENV", "TrainedModel",
    "TrainResult",
    "articles_fingerprint", "list_trained_models", "models_folder", "prepare_out", "questions_fingerprint",
    "read_metadata", "trained_for_corpus",
]
