"""The ``compare`` command: the Score page's pairwise comparison of runs, from the command line.

Run files are read, checked and scored exactly as ``evaluate`` does it (the same function,
:func:`bsard_demo.cli.evaluate.score_run_paths` over :func:`bsard_demo.evaluation.scoring.score_runs`: every
problem one line on stderr, unusable files not scored, exit code 2), then compared on one measure
by :func:`bsard_demo.evaluation.stats.compare_measure` with :data:`bsard_demo.evaluation.stats.STATS`, the function and
settings the Score page uses.
"""
from __future__ import annotations

import argparse

from ..evaluation.aggregate import DEFAULT_KS
from ..evaluation.measures import EXTRA_COLUMNS, Measure
from ..evaluation.report import FORMATS, render_comparison
from ..evaluation.stats import STATS, compare_measure
from .common import fail
from .evaluate import add_run_arguments, report_unusable, score_run_paths

DEFAULT_MEASURE = "recall@100"
TESTS = f"""\
tests (the Score page's, same numbers):
  For each pair of runs (A, B) over every question of the split: mean_a, mean_b, diff = mean_a -
  mean_b; wins / ties / losses = questions where A is above / equal to (within 1e-12) / below B.
  p_ttest: scipy.stats.ttest_rel, two-sided.
  p_permutation: two-sided paired sign-flip randomization test of the sum of the per-question
  differences, zero differences dropped; exact (all 2**m sign vectors) when 2**m <= {STATS.resamples:,},
  otherwise {STATS.resamples:,} random sign vectors from numpy.random.default_rng(seed={STATS.seed}), the same
  for every pair, with p = (1 + #{{|T*| >= |T|}}) / (1 + {STATS.resamples:,}).
  *_holm: Holm-Bonferroni over all pairs, per test. significant: p_permutation_holm < {STATS.alpha}.
"""


def measure_type(text: str) -> str:
    """An ``evaluate`` column (:meth:`bsard_demo.evaluation.measures.Measure.parse`): ``recall@K``,
    ``map@K``, ``mrr@K`` (K a positive integer) or an extra measure (``rprec``, ``ndcg@10``);
    argparse's type check (a bad one is a one-line usage error)."""
    try:
        return Measure.parse(text).column
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"unknown measure {text!r}: use recall@K, map@K, mrr@K (K a positive integer), "
            f"{', '.join(EXTRA_COLUMNS)}") from None


def add_compare_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``compare``: pairwise significance tests of run files on one measure."""
    p = subparsers.add_parser(
        "compare", help="compare run files pairwise on one measure (significance tests)", epilog=TESTS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Score two or more run files as evaluate does and compare every pair on one measure: means, "
                    "wins/ties/losses, paired t-test and paired permutation test, Holm-corrected over all pairs.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="two or more run files")
    add_run_arguments(p)
    p.add_argument("--measure", type=measure_type, default=DEFAULT_MEASURE,
                   help=f"measure compared: recall@K, map@K, mrr@K, rprec (R-Precision) or ndcg@10 "
                        f"(default: {DEFAULT_MEASURE})")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.set_defaults(func=cmd_compare)
    return p


def cmd_compare(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        return fail("compare", f"needs at least two run files, got {len(args.runs)}")
    measure = Measure.parse(args.measure)
    # an extra measure has its own cutoff (ndcg@10) or none (rprec): score the others at the usual smallest one
    ks = (min(DEFAULT_KS),) if measure.is_extra else (measure.k,)
    scored = score_run_paths("compare", args.runs, args, ks)
    board = scored.board
    if len(board.evaluations) < 2:  # the unusable files were just named, one line each when they have one problem
        report_unusable("compare", scored)
        return 2
    comparison = compare_measure({name: ev.per_question for name, ev in board.evaluations.items()}, args.measure,
                                 n_resamples=STATS.resamples, seed=STATS.seed, alpha=STATS.alpha)
    if args.format == "table":
        print(f"{board.dataset.name} · split {args.split} · {comparison.questions} questions · {args.measure} "
              "· values in %")
    print(render_comparison(comparison, args.format, dataset=board.dataset.name, split=args.split), end="")
    if args.format == "table":
        print(f"p permutation: paired sign-flip test, {STATS.resamples:,} resamples (exact when 2**m <= "
              f"{STATS.resamples:,}), seed {STATS.seed}, p = (1 + #{{|T*| >= |T|}}) / (1 + n); significant: "
              f"Holm-adjusted p permutation < {STATS.alpha}")
    report_unusable("compare", scored)
    return scored.exit_code
