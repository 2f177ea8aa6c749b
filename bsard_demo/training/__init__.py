"""Training models on a split, in one home; each method is one module, all write one kind of folder.

============== ========================================================================
``finetune``   fine-tune a sentence-transformers bi-encoder (``train --finetune``: :func:`train`)
``adapter``    fit a query adapter over a built-in encoder (``train``'s default: :func:`train_adapter`)
``dev``        the dev figure every method records (its model scored on the test split)
``folders``    the model folder: its record (:data:`METADATA_FILE`, a ``"kind"``), :func:`prepare_out`,
               :class:`TrainResult`, and the folders the app lists (:func:`list_trained_models`)
============== ========================================================================

A new method (a learned ranker, say) is a module here that writes its folder through
:mod:`.folders` (:func:`prepare_out`, a :data:`METADATA_FILE` with its own ``"kind"``) and
returns a :class:`TrainResult`; its public names are added below. Only the kinds of
:data:`ENCODER_KINDS` are listed as encoders by :func:`list_trained_models`.
"""
from .adapter import AdapterOptions, train_adapter
from .dev import dev_evaluation
from .finetune import TrainingPairs, TrainOptions, load_base, train, training_pairs
from .folders import (
    ENCODER_KINDS,
    METADATA_FILE,
    MODELS_ENV,
    TrainedModel,
    TrainResult,
    articles_fingerprint,
    list_trained_models,
    models_folder,
    prepare_out,
    questions_fingerprint,
    read_metadata,
)

__all__ = [
    "AdapterOptions", "train_adapter", "dev_evaluation", "TrainingPairs", "TrainOptions", "load_base", "train",
    "training_pairs", "ENCODER_KINDS", "METADATA_FILE", "MODELS_ENV", "TrainedModel", "TrainResult",
    "articles_fingerprint", "list_trained_models", "models_folder", "prepare_out", "questions_fingerprint",
    "read_metadata",
]
