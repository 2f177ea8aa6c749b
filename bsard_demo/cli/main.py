"""Command line: ``python -m bsard_demo {data,evaluate,compare,run,index,tune,train,export-onnx} ...``: the
parser (:func:`build_parser`) and :func:`main`. Each command lives in its own module, which adds its subparser
and handler: ``data`` and ``evaluate`` in :mod:`.evaluate`, ``compare`` in :mod:`.compare`, ``run`` and
``index`` in :mod:`.retrieval`, ``tune`` in :mod:`.tune`, ``train`` in :mod:`.train`, ``export-onnx`` in
:mod:`.export_onnx`; a new command gets a new module, registered in :func:`build_parser` (a test checks it).
Exit codes: 0 success (warnings allowed), 2 unusable input, data or usage (one line on stderr), 1 a bug;
docs/design.md, 'bsard_demo/cli/main.py'.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .. import settings
from ..dataset import DataError
from .anchors import add_anchors_parser
from .common import OneLineParser, error_text, one_line
from .compare import add_compare_parser
from .evaluate import add_data_parser, add_evaluate_parser
from .exchange import add_export_qrels_parser, add_export_run_parser
from .export_onnx import add_export_onnx_parser
from .retrieval import add_index_parser, add_run_parser
from .stamps import add_stamps_parser
from .train import add_train_parser
from .tune import add_tune_parser

COMMANDS = ("data", "evaluate", "compare", "run", "index", "tune", "train", "export-onnx", "anchors", "stamps",
            "export-qrels", "export-run")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m bsard_demo",
                           description="Search and score BSARD (Belgian Statutory Article Retrieval Dataset).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for add in (add_data_parser, add_evaluate_parser, add_compare_parser, add_run_parser, add_index_parser,
                add_tune_parser, add_train_parser, add_export_onnx_parser, add_anchors_parser, add_stamps_parser,
                add_export_qrels_parser, add_export_run_parser):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    settings.prepare_runtime()  # before any command loads faiss, torch or tokenizers
    parser = build_parser()
    args = parser.parse_args(argv)
    settings.one_blas_thread()  # as the app: a search's small products on OpenBLAS's pool only spin
    try:
        return args.func(args)
    except DataError as exc:
        print(one_line(f"bsard_demo {args.command}: {error_text(exc)}"), file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(one_line(f"bsard_demo {args.command}: {where}{exc.strerror or exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: never show a traceback
        print(one_line(f"bsard_demo {args.command}: internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return 1
