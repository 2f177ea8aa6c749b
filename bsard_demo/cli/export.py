"""``index --export DIR`` and ``index --push-to-hub OWNER/NAME``: write what a build used as an
index bundle (:mod:`bsard_demo.bundles`) and publish it on the Hugging Face hub.

The export holds exactly the cache entries the command's build handed out (loaded from the
cache, from an active bundle, or built), so a bundle is made by the same code that uses it.
``--push-to-hub`` without ``--export`` exports into a temporary folder, publishes it and removes
it. The token is ``$HF_TOKEN`` (or one saved by ``hf auth login``). Every failure is one line on
stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .. import bundles, cache
from ..retrievers.adapter import is_adapter_folder
from ..retrievers.e5_tuned import is_e5_folder
from ..retrievers.encoders import ENCODER_CHOICES
from ..retrievers.onnx_encoder import find_export
from ..retrievers.ranker import is_ranker_folder
from ..retrievers.registry import retriever_kinds
from .common import fail, say


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("index bundle (for BSARD_INDEX / --index)")
    g.add_argument("--export", default=None, metavar="DIR",
                   help="write the built indexes as an index bundle into DIR (a new or empty folder)")
    g.add_argument("--replace", action="store_true",
                   help="with --export: replace the index bundle already in DIR (never any other folder)")
    g.add_argument("--push-to-hub", default=None, metavar="OWNER/NAME",
                   help="publish the bundle to this Hugging Face repository (a model repository; "
                        "hf://datasets/OWNER/NAME for a dataset one; @REVISION for a branch) with $HF_TOKEN")
    g.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository as private")


def wants_export(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "export", None) or getattr(args, "push_to_hub", None))


def check_export_arguments(args: argparse.Namespace) -> int | None:
    """Refuse, before any build, what the export or the push could not do; an exit code or ``None``.
    Clears the record of used cache entries, so that the export holds this build's alone."""
    if args.replace and not args.export:
        return fail("index", "--replace goes with --export DIR")
    if args.private and not args.push_to_hub:
        return fail("index", "--private goes with --push-to-hub OWNER/NAME")
    if not wants_export(args):
        return None
    refused = _torch_only_models(args)
    if refused:
        return fail("index", refused)
    try:
        if args.export:
            bundles.check_export_target(args.export, args.replace)
        if args.push_to_hub:
            text = args.push_to_hub.strip()
            bundles.parse_hub_ref(text if bundles.is_hub_ref(text) else bundles.HUB_SCHEME + text)
    except bundles.BundleError as exc:
        return fail("index", str(exc))
    cache.forget_used()
    return None


def _torch_only_models(args: argparse.Namespace) -> str | None:
    """Why the bundle could not carry a model folder of ``--encoder`` (before any build), or ``None``."""
    kind = retriever_kinds().get(getattr(args, "retriever", None))
    if (kind is not None and "encoder" not in kind.takes) or not getattr(args, "encoder", None):
        return None  # a kind that reads no --encoder (BM25) carries no model
    for name in (n.strip() for n in str(args.encoder).split(",")):
        folder = Path(name).expanduser()
        if name.lower() in ENCODER_CHOICES or not folder.is_dir() or is_adapter_folder(folder) \
                or is_ranker_folder(folder) or is_e5_folder(folder):
            continue  # an adapter, a tuned e5: their files; a ranker: its folder (numpy, onnxruntime)
        if getattr(args, "backend", "auto") == "torch":
            return (f"--export carries model folders as ONNX exports: {name} cannot go in a bundle with --backend "
                    "torch (use --backend auto)")
        if find_export(folder) is None:
            return (f"--export carries model folders as ONNX exports, and {name} has none: run python -m bsard_demo "
                    f"export-onnx {name} first")
    return None


def _say_models(bundle) -> None:
    for model in bundle.model_list():
        say("index", f"the bundle carries model {model.describe()}: where it is served (--index / BSARD_INDEX), "
                     f"select it with --encoder {model.name}")


def export_and_push(args: argparse.Namespace, dataset, spec, retriever) -> int:
    """After the build: export (``--export``), publish (``--push-to-hub``); the exit code."""
    corpus = bundles.corpus_id(dataset.articles, dataset.name)
    entries = cache.used_entries()
    try:
        if args.export:
            bundle = bundles.export_bundle(args.export, entries, corpus=corpus, specs=[spec], retrievers=[retriever],
                                           replace=args.replace)
            say("index", f"index bundle written to {args.export}: {bundle.summary()}")
            _say_models(bundle)
            return _push(args, bundle.root) if args.push_to_hub else 0
        with tempfile.TemporaryDirectory(prefix="bsard-bundle-") as tmp:
            bundle = bundles.export_bundle(Path(tmp) / "bundle", entries, corpus=corpus, specs=[spec],
                                           retrievers=[retriever])
            say("index", f"index bundle made: {bundle.summary()}")
            _say_models(bundle)
            return _push(args, bundle.root)
    except bundles.BundleError as exc:
        return fail("index", str(exc))
    except OSError as exc:
        return fail("index", f"cannot write the index bundle: {exc.strerror or exc}")


def _push(args: argparse.Namespace, folder: Path) -> int:
    url = bundles.push_bundle(folder, args.push_to_hub, private=True if args.private else None)
    say("index", f"index bundle published to {url}; serve it with BSARD_INDEX={url} "
                 "(the environment, or the app's Streamlit secrets, with HF_TOKEN for a private repository)")
    return 0
