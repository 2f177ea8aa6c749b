"""The ``export-onnx`` command: add an ONNX export to a sentence-transformers model folder, so that
a torch-free install (the hosted demo) encodes with it (:mod:`bsard_demo.retrievers.onnx_export`).

``export-onnx MODEL_DIR`` writes ``MODEL_DIR/onnx/``; ``--out DIR`` writes the export to a folder
of its own (required for the packaged ``minilm``, whose files live inside an installed package),
which ``--encoder DIR`` then takes like a model folder. A sound export of the same weights is left
as it is and the command says so; ``--refresh`` rewrites it. Errors are one line on stderr and
exit code 2.
"""
from __future__ import annotations

import argparse

from ..retrievers.encoders import EncoderUnavailable, torch_available
from ..retrievers.onnx_export import export_onnx
from .common import fail


def add_export_onnx_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``export-onnx``."""
    p = subparsers.add_parser(
        "export-onnx", help="add an ONNX export to a model folder (torch-free serving)",
        description="Export a sentence-transformers model folder (e.g. one written by train) or minilm to ONNX: "
                    "the graph, tokenizer.json and a record of pooling, window, prefixes and checksums, so that "
                    "onnxruntime + tokenizers reproduce its embeddings without torch. Needs torch (and onnx for "
                    "--int8).")
    p.add_argument("model", metavar="MODEL_DIR|minilm", help="a sentence-transformers model folder, or minilm")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write the export into DIR (a new or empty folder) instead of MODEL_DIR/onnx; "
                        "required for minilm; --encoder DIR then uses it")
    p.add_argument("--refresh", action="store_true", help="rewrite an export that is already there and sound")
    p.add_argument("--int8", action="store_true",
                   help="quantise the weights to int8 (onnxruntime dynamic quantisation): ~4x smaller, "
                        "slightly different vectors (the cosine with the original is recorded)")
    p.set_defaults(func=cmd_export_onnx)
    return p


def cmd_export_onnx(args: argparse.Namespace) -> int:
    """Handler of ``export-onnx``; returns the exit code."""
    if not torch_available():
        return fail("export-onnx", "exporting needs torch and sentence-transformers, which this install lacks: "
                                   "run it where torch is installed (Python 3.10 or 3.11 with requirements.txt)")

    try:
        result = export_onnx(args.model, args.out, refresh=args.refresh, int8=args.int8)
    except (EncoderUnavailable, ValueError) as exc:
        return fail("export-onnx", str(exc))
    print(f"bsard_demo export-onnx: {result.summary()}")
    if result.status != "kept":
        target = args.model if args.out is None else args.out
        print(f"bsard_demo export-onnx: serve it with --encoder {target} (onnxruntime, no torch needed)")
    return 0
