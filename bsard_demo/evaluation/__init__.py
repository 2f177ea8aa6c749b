"""Scoring a run, in one home: what a measure is, how one question and a split are scored, what is
wrong with a run, the service both front ends call, significance, and the tables.

======================= ==================================================================
``measures``            what a measure is (:class:`Measure`: family, cut-off, labels, parser)
``metrics``             the measures of one question (recall@k, AP@k, RR@k, nDCG@k)
``aggregate``           a run against a split: per-question values, macro averages (:func:`evaluate`)
``checks``              BSARD-aware checks of a run (shifted ids, near random, wrong split), wired to a read file
``scoring``             the one scoring service of the CLI and the Score page (:func:`score_runs`)
``stats``               intervals and paired tests (:func:`compare_measure`, :data:`STATS`)
``report``              tables, labels and output formats (:func:`metrics_table`, :func:`render_table`)
======================= ==================================================================

The reader's own problems with a file (format, ranks, scores) are in :mod:`bsard_demo.runs`.
"""
from .aggregate import DEFAULT_KS, Evaluation, evaluate, gold_ranks, recall_curve
from .checks import Finding, SplitContext, check_run, check_run_file
from .measures import EXTRA_COLUMNS, FAMILIES, Measure, column_label, cutoff_columns, is_measure_column
from .metrics import compute_metrics, ndcg_from_positions
from .report import FORMATS, json_report, metrics_table, per_question_table, render_comparison, render_table
from .scoring import Limits, RunSource, Scoreboard, score_runs, unique_names
from .stats import STATS, Comparison, StatsSettings, compare_measure, compare_runs

__all__ = [
    "DEFAULT_KS", "Evaluation", "evaluate", "gold_ranks", "recall_curve",
    "Finding", "SplitContext", "check_run", "check_run_file",
    "EXTRA_COLUMNS", "FAMILIES", "Measure", "column_label", "cutoff_columns", "is_measure_column",
    "compute_metrics", "ndcg_from_positions",
    "FORMATS", "json_report", "metrics_table", "per_question_table", "render_comparison", "render_table",
    "Limits", "RunSource", "Scoreboard", "score_runs", "unique_names",
    "STATS", "Comparison", "StatsSettings", "compare_measure", "compare_runs",
]
