"""The ``tune`` command: grid-search BM25's k1 × b, or a hybrid's fusion, on a train split.

It takes the same retriever options as ``run`` (they give the analysis, the parts and the
starting settings), prints the best settings, their figure against the starting one and the
``run`` command line that uses them; ``--out DIR`` also writes the grid (CSV, Markdown), the
result (JSON) and an Altair heatmap (HTML). Progress bars go to stderr; errors the user can fix
are one line on stderr and exit code 2. See :mod:`bsard_demo.tuning`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..dataset import DataError
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION
from ..retrievers.hybrid import FUSION_METHODS
from ..retrievers.registry import retriever_kinds
from ..sources import load_dataset
from ..tuning import DEFAULT_MEASURE, TuneOptions, fusion_grid, tune
from ..tuning.bm25 import B_GRID, K1_GRID
from ..tuning.fusion import ALPHA_GRID, RRF_KS, WEIGHT_GRID
from ..tuning.result import TuneTarget
from .common import TqdmProgress, activate_index, data_spec, fail, say
from .retrieval import add_retriever_arguments, spec_from_args


def add_tune_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``tune``."""
    p = subparsers.add_parser(
        "tune", help="grid-search BM25 k1/b or a hybrid's fusion on a train split",
        description="Grid-search BM25's k1 x b (the BSARD paper's grid: k1 0..8 step 0.5, b 0..1 step 0.1) or a "
                    "hybrid's fusion (RRF k and weights, weighted alpha) on a split's questions, scored by one measure "
                    "exactly as run + evaluate would; print the best settings and the run command that uses them.")
    add_retriever_arguments(p)
    p.add_argument("--split", default="train", help="question split to tune on (default: train)")
    p.add_argument("--measure", default=DEFAULT_MEASURE,
                   help=f"figure to maximise: recall@K, map@K, mrr@K or ndcg@10 (default {DEFAULT_MEASURE})")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write grid.csv, grid.md, best.json and heatmap.html into DIR")
    p.add_argument("--with-description", action=argparse.BooleanOptionalAction, default=DEFAULT_WITH_DESCRIPTION,
                   help="append each question's extra_description to it, as run --with-description "
                        f"(default: {'on' if DEFAULT_WITH_DESCRIPTION else 'off'})")
    grid = p.add_argument_group("grid (defaults: the values listed)")
    grid.add_argument("--k1-values", type=float, nargs="+", default=list(K1_GRID), metavar="K1",
                      help="BM25 k1 values (default 0 0.5 ... 8)")
    grid.add_argument("--b-values", type=float, nargs="+", default=list(B_GRID), metavar="B",
                      help="BM25 b values (default 0 0.1 ... 1)")
    grid.add_argument("--rrf-k-values", type=float, nargs="+", default=list(RRF_KS), metavar="K",
                      help="hybrid RRF constants (default " + " ".join(f"{k:g}" for k in RRF_KS) + ")")
    grid.add_argument("--weight-values", type=float, nargs="+", default=list(WEIGHT_GRID), metavar="W",
                      help="weights tried for each part after BM25, whose weight stays 1 (default "
                           + " ".join(f"{w:g}" for w in WEIGHT_GRID) + ")")
    grid.add_argument("--alpha-values", type=float, nargs="+", default=list(ALPHA_GRID), metavar="A",
                      help="weighted fusion of two parts: BM25's weight alpha (default 0 0.1 ... 1)")
    grid.add_argument("--fusions", nargs="+", choices=FUSION_METHODS, default=list(FUSION_METHODS),
                      help="fusion methods tried for a hybrid (default both)")
    p.set_defaults(func=cmd_tune)
    return p


def cmd_tune(args: argparse.Namespace) -> int:
    """Handler of ``tune``; returns the exit code."""
    chosen = retriever_kinds().get(args.retriever)
    if chosen is None or not chosen.tunable:
        tunable = " or ".join(k.name for k in retriever_kinds().values() if k.tunable)
        return fail("tune", f"a {args.retriever} retriever has no settings to grid-search; tune --retriever {tunable} "
                            "(fine-tune an encoder with the train command)")
    if getattr(args, "structure", None):
        return fail("tune", "--structure is not searched by tune (its settings were decided on frlaw-dev train: "
                            "docs/effectiveness.md, 'Structure re-scoring'); tune the fusion without it")
    try:
        TuneTarget.parse(args.measure)
        spec = spec_from_args(args)
        fusions = None
        if chosen.parts is not None:  # a fusion of parts: its fusion is searched
            fusions = fusion_grid(len(chosen.parts(spec)), methods=args.fusions, rrf_ks=args.rrf_k_values,
                                  weight_grid=args.weight_values, alphas=args.alpha_values)
        options = TuneOptions(retriever=args.retriever, data=args.data, split=args.split, measure=args.measure,
                              spec=spec, with_description=args.with_description,
                              cache_root=Path(args.cache_dir).expanduser() if args.cache_dir else None,
                              k1_grid=args.k1_values, b_grid=args.b_values, fusion_settings=fusions)
        dataset = load_dataset(data_spec(args))
    except (DataError, ValueError) as exc:
        return fail("tune", exc)
    activate_index(args, "tune", dataset)  # --index / $BSARD_INDEX (from add_retriever_arguments)
    progress = TqdmProgress(enabled=not args.no_progress)
    try:
        result = tune(options, dataset, progress=progress, notice=lambda m: say("tune", f"note: {m}"))
    except (DataError, ValueError) as exc:  # includes EncoderUnavailable
        return fail("tune", exc)
    finally:
        progress.close()
    print(result.summary())
    if args.out:
        try:
            written = result.write(args.out)
        except OSError as exc:
            return fail("tune", f"cannot write into {args.out}: {exc.strerror or exc}")
        say("tune", "wrote " + ", ".join(str(p) for p in written))
    return 0
