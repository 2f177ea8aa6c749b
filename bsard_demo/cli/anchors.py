"""The ``anchors`` command: the published BSARD test results with their provenance
(:mod:`bsard_demo.evaluation.anchors`), one line per figure, then the notes (MTEB v1's hit rate, ties,
reproducibility); ``evaluate --anchors`` prints the same table after the runs' (:func:`anchors_text`).
"""
from __future__ import annotations

import argparse
import json

from ..evaluation.anchors import ANCHORS, LABELS, NOTES, anchors_report, figures_frame
from ..evaluation.report import csv_text, render_rows

FORMATS = ("table", "json", "csv", "markdown", "latex")
HEADER = ("system", "measure", "value %", "authors", "venue", "trained on", "read", "read in")


def add_anchors_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``anchors``."""
    p = subparsers.add_parser("anchors", help="published BSARD test results, with where each figure was read",
                              description="Print the published results on BSARD's test split that a run can be put "
                                          "beside: system, measure, value, paper and venue, what it was trained on, "
                                          "and where and how each figure was read. Figures that could not be read "
                                          "are listed as 'not shown'. MTEB's BSARDRetrieval v1 figures are hit "
                                          "rates (one gold article per question), never recall.")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.set_defaults(func=cmd_anchors)
    return p


def anchors_text(fmt: str = "table") -> str:
    """The table in ``fmt``: ``json`` (the records and the notes), ``csv`` (every field, values in %),
    ``table`` / ``markdown`` / ``latex`` (:data:`HEADER`, the paper by its authors; the notes follow the
    ``table``)."""
    if fmt == "json":
        return json.dumps(anchors_report(), ensure_ascii=False, indent=2) + "\n"
    if fmt == "csv":
        return csv_text(figures_frame(), index=False)
    rows = [[a.system, LABELS.get(a.measure, a.measure), f"{a.value:.2f}" if a.shown else "not shown",
             a.paper[:a.paper.index(")") + 1], a.venue, a.trained_on, a.read,
             a.read_in + (f"; {a.note}" if a.note else "")]
            for a in ANCHORS]
    out = render_rows(HEADER, rows, fmt, left=2)
    if fmt == "table":
        out += "\n".join(f"note: {n}" for n in NOTES) + "\n"
    return out


def cmd_anchors(args: argparse.Namespace) -> int:
    print(anchors_text(args.format), end="")
    return 0
