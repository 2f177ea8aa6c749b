"""The ``anchors`` command: the published BSARD test results with their provenance
(:mod:`bsard_demo.evaluation.anchors`); ``evaluate --anchors`` prints the same table after the runs'
(:func:`anchors_text`). The ``table`` is one block per source (its provenance wrapped, then one row per system,
one column per measure it has) so that it fits :data:`WIDTH` columns; ``markdown``, ``csv`` and ``json`` carry
every field of every figure.
"""
from __future__ import annotations

import argparse
import json
import textwrap

from ..evaluation.anchors import ANCHORS, LABELS, MEASURES, NOTES, SHORT_LABELS, Anchor, anchors_report, figures_frame
from ..evaluation.report import csv_text, render_rows

FORMATS = ("table", "json", "csv", "markdown", "latex")
HEADER = ("system", "measure", "value %", "authors", "venue", "trained on", "read", "read in")
#: The terminal width the ``table`` fits (the issue's 100 columns).
WIDTH = 100
#: Printed for a figure listed but not read.
NOT_SHOWN = "not shown"


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
    if fmt == "table":
        return _blocks() + "\n".join(_wrap(f"note: {n}") for n in NOTES) + "\n"
    rows = [[a.system, LABELS.get(a.measure, a.measure), f"{a.value:.2f}" if a.shown else NOT_SHOWN,
             a.paper[:a.paper.index(")") + 1], a.venue, a.trained_on, a.read,
             a.read_in + (f"; {a.note}" if a.note else "")]
            for a in ANCHORS]
    return render_rows(HEADER, rows, fmt, left=2, right=(2,))


def _wrap(text: str, indent: str = "") -> str:
    return "\n".join(textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                    break_on_hyphens=False, break_long_words=True))


def _shared(anchors: list[Anchor], field: str) -> str:
    values = list(dict.fromkeys(getattr(a, field) for a in anchors))
    return values[0] if len(values) == 1 else "one per system (--format markdown)"


def _blocks() -> str:
    """One block per paper: its provenance (wrapped to :data:`WIDTH`: where and how the shown figures were read,
    why the others are not shown), then a system x measure table (values in %, :data:`NOT_SHOWN` for a figure
    listed but not read)."""
    papers: dict[str, list[Anchor]] = {}
    for a in ANCHORS:
        papers.setdefault(a.paper, []).append(a)
    out = []
    for paper, anchors in papers.items():
        lines = [_wrap(f"{paper}, {anchors[0].venue}, {_shared(anchors, 'url')}")]
        shown = [a for a in anchors if a.shown]
        hidden = [a for a in anchors if not a.shown]
        if shown:
            lines.append(_wrap(f"where: {_shared(shown, 'where')}", "  "))
            lines.append(_wrap(f"read ({_shared(shown, 'read')}) in: {_shared(shown, 'read_in')}", "  "))
        if hidden:
            lines.append(_wrap(f"not shown ({', '.join(dict.fromkeys(LABELS[a.measure] for a in hidden))}): "
                               f"{_shared(hidden, 'read_in')}", "  "))
        measures = [m for m in MEASURES if any(a.measure == m for a in anchors)]
        systems = list(dict.fromkeys(a.system for a in anchors))
        figure = {(a.system, a.measure): a for a in anchors}
        rows = [[s] + [("" if (s, m) not in figure else f"{figure[s, m].value:.2f}" if figure[s, m].shown
                        else NOT_SHOWN) for m in measures] for s in systems]
        lines.append(render_rows(["system"] + [SHORT_LABELS[m] for m in measures], rows, "table").rstrip("\n"))
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n\n" + _wrap(
        "Values in %. * MAP with no stated cut-off. \u2020 MTEB v1: one gold article per question. What each "
        "system was trained on and each figure's own provenance: --format markdown or json.") + "\n"


def cmd_anchors(args: argparse.Namespace) -> int:
    print(anchors_text(args.format), end="")
    return 0
