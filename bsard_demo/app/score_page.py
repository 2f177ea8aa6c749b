"""The Score page's model (``pages/score.py`` draws it): what the page decides, testable without
Streamlit. Which split is offered first, which uploads are read, what the page says of each file read
and when there is nothing to score, which sections it shows, and every file it offers for download.

Its sections live in their own modules: :mod:`.score_uploads` (reading and scoring the files),
:mod:`.score_tables` (tables and chart data), :mod:`.score_compare` (A against B, pairwise tests),
:mod:`.score_drill` (one question), :mod:`.score_builtins` / :mod:`.score_builtin_runs` (built-in
systems and their runs). At most :data:`~.score_uploads.MAX_FILES` uploads are read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence, TypeVar

import pandas as pd

from ..evaluation import render_table
from ..evaluation.scoring import Scoreboard
from ..evaluation.stamp import stamp_export
from ..runs import Run
from .highlight import md_escape
from .score_tables import ScoreTables, score_tables, to_csv_bytes
from .score_uploads import MAX_FILES

T = TypeVar("T")


def default_split(splits: Sequence[str]) -> int:
    """The index of the split offered first: ``test`` when there is one, else the first."""
    return list(splits).index("test") if "test" in splits else 0


def split_uploads(uploads: Sequence[T], limit: int = MAX_FILES, budget: int | None = None) -> tuple[list[T], list[T]]:
    """The uploads read (the first ``limit``, in order, while their ``size`` adds up to at most ``budget``
    bytes: a visitor's upload budget, which the server enforces before storing a file where Streamlit lets it,
    :mod:`bsard_demo.app.visitor_limits`) and those left unread (their bytes untouched)."""
    read, left, total = [], [], 0
    for upload in uploads:
        size = int(getattr(upload, "size", 0) or 0)
        if len(read) < limit and (budget is None or total + size <= budget):
            read.append(upload)
            total += size
        else:
            left.append(upload)
    return read, left


@dataclass(frozen=True)
class Download:
    """One download button: its label, the file's bytes, its name and MIME type, its widget key."""

    label: str
    data: bytes
    file_name: str
    mime: str
    key: str | None = None


def table_downloads(tables: ScoreTables, split: str, stamp: Mapping | None = None) -> list[Download]:
    """The measures (CSV, Markdown, LaTeX: the CLI's rows, no published rows) and the per-question
    table (CSV, the CLI's ``--per-query`` layout) of ``split``, each with the reproducibility
    ``stamp`` (:func:`bsard_demo.evaluation.stamp.board_stamp`: comment lines on top, as ``evaluate``
    writes them; none when ``stamp`` is None)."""
    def stamped(text: str, fmt: str) -> str:
        return text if stamp is None else stamp_export(text, fmt, stamp)

    plain = tables.metrics
    per_question = to_csv_bytes(tables.per_question).decode("utf-8")
    return [Download("Mesures (CSV)", stamped(render_table(plain, "csv"), "csv"), f"mesures_{split}.csv", "text/csv"),
            Download("Mesures (Markdown)", stamped(render_table(plain, "markdown"), "markdown"), f"mesures_{split}.md",
                     "text/markdown"),
            Download("Mesures (LaTeX)", stamped(render_table(plain, "latex"), "latex"), f"mesures_{split}.tex",
                     "application/x-tex"),
            Download("Par question (CSV)", stamped(per_question, "csv").encode("utf-8"), f"par_question_{split}.csv",
                     "text/csv")]


def board_downloads(board: Scoreboard, stamp: Mapping | None = None) -> tuple[Download, ...]:
    """:func:`table_downloads` of ``board``'s split and tables (:func:`.score_tables`), made once per board
    and ``stamp`` (:meth:`~bsard_demo.evaluation.scoring.Scoreboard.memo`): the CSV, Markdown and LaTeX
    texts are the same for every visitor who scores the same board."""
    key = ("downloads", None if stamp is None else json.dumps(stamp, sort_keys=True, default=str))
    return board.memo(key, lambda: tuple(table_downloads(score_tables(board), board.split, stamp)))


def builtin_downloads(built: Sequence[tuple[str, Run, bytes]], split: str) -> list[Download]:
    """The TREC file of each built-in run (``(name, run, bytes)``, as :meth:`.BuiltinRun.built`)."""
    return [Download(f"Télécharger le run intégré « {md_escape(name)} » (TREC)", blob, f"integre_{i + 1}_{split}.trec",
                     "text/plain", f"dl_builtin_{i}") for i, (name, _, blob) in enumerate(built)]


def compares(board: Scoreboard) -> bool:
    """Whether the page shows A against B and the pairwise tests: two usable runs or more."""
    return len(board.evaluations) >= 2


def metrics_caption(dataset_name: str, split: str, board: Scoreboard) -> str:
    """The line above the measures table (Markdown, data escaped)."""
    return (f"{md_escape(dataset_name)} · split {md_escape(split)} · {len(board.qrels)} questions · "
            "valeurs en %, identiques à `python -m bsard_demo evaluate`"
            + (" · lignes « published » : résultats publiés (Louis & Spanakis, ACL 2022)" if board.published else ""))


def categories(table: pd.DataFrame) -> list[str]:
    """The categories the per-question filter offers (sorted; none without a category column)."""
    return sorted(c for c in table["category"].unique() if c) if "category" in table else []


def validation_verdict(run) -> tuple[str, str]:
    """``(level, line)`` of a read file in the page's validation: ``error`` (not scored), ``warning`` (scored
    anyway) or ``success``, and its French line."""
    problems = run.file.problems
    n_err, n_warn = problems.count("error"), problems.count("warning")
    name = f"**{md_escape(run.name)}**"
    fmt = md_escape(run.file.format) + (" (gzip)" if run.file.compressed else "")
    if n_err:
        return "error", f"{name} : {n_err} erreur(s), {n_warn} avertissement(s) — ce run n'est pas évalué."
    if n_warn:
        return "warning", f"{name} : format {fmt}, {n_warn} avertissement(s) — le run est évalué quand même."
    return "success", f"{name} : format {fmt}, {len(run.file.run)} questions, aucun problème."
