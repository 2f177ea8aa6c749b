"""Scoring a run, in one home; the public API is re-exported here and from :mod:`bsard_demo`.
:mod:`.measures`: what a measure is (:class:`Measure`); :mod:`.metrics`: the measures of one question;
:mod:`.aggregate`: a run against a split (:func:`evaluate`); :mod:`.checks`: BSARD-aware checks of a run;
:mod:`.scoring`: the one scoring service of the CLI and the Score page (:func:`score_runs`); :mod:`.misses`:
where a run's misses land in the corpus hierarchy (:func:`~.misses.board_misses`); :mod:`.stats`:
intervals and paired tests (:func:`compare_measure`); :mod:`.report`: tables, labels and output formats.
The reader's own problems with a file (format, ranks, scores) are in :mod:`bsard_demo.runs`.
"""
from .aggregate import DEFAULT_KS, Evaluation, evaluate, gold_ranks, recall_curve
from .checks import Finding, SplitContext, check_run, check_run_file
from .measures import EXTRA_COLUMNS, FAMILIES, Measure, column_label, cutoff_columns, is_measure_column
from .metrics import compute_metrics, ndcg_from_positions, rprec_from_positions
from .report import FORMATS, json_report, metrics_table, per_question_table, render_comparison, render_table
from .scoring import Limits, RunSource, Scoreboard, score_runs, unique_names
from .stats import STATS, Comparison, StatsSettings, compare_measure, compare_runs

__all__ = [
    "DEFAULT_KS", "Evaluation", "evaluate", "gold_ranks", "recall_curve",
    "Finding", "SplitContext", "check_run", "check_run_file",
    "EXTRA_COLUMNS", "FAMILIES", "Measure", "column_label", "cutoff_columns", "is_measure_column",
    "compute_metrics", "ndcg_from_positions", "rprec_from_positions",
    "FORMATS", "json_report", "metrics_table", "per_question_table", "render_comparison", "render_table",
    "Limits", "RunSource", "Scoreboard", "score_runs", "unique_names",
    "STATS", "Comparison", "StatsSettings", "compare_measure", "compare_runs",
]
