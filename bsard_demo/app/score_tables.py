"""The Score page's tables and chart data: the measures table (as shown and as downloaded), the
per-question table, the bootstrap intervals and the recall curve, each from the service's
:class:`~bsard_demo.evaluation.scoring.Scoreboard` (the figures of ``evaluate``).

The tables are computed once per board (:func:`score_tables`, kept by
:meth:`~bsard_demo.evaluation.scoring.Scoreboard.memo`): a board is kept per process, and every visitor
who scores the same files reads the same frames, which nobody changes. On 10 runs of BSARD's 222 test
questions the per-question table is the page's largest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from ..evaluation import recall_curve
from ..evaluation.measures import is_measure_column
from ..evaluation.report import (
    csv_text,
    display_columns,
    extra_columns,
    metric_label,
    metrics_table,
    per_question_table,
)
from ..evaluation.scoring import Scoreboard
from ..evaluation.stats import metric_table_with_ci
from . import french

SHORT_NAMES = {"missing_questions": "manquantes", "unknown_questions": "inconnues", "source": "source"}
#: What the page says about nDCG@10 and MTEB's figures (behind a help icon).
NDCG_HELP = ("nDCG@10 : gains binaires, les 10 premiers articles, chaque question comptée "
             "(`trec_eval -m ndcg_cut.10`) : le chiffre que rapporte MTEB.\n\n"
             "Attention en comparant avec MTEB : BSARDRetrieval v1 n'y gardait qu'un seul article pertinent par "
             "question, si bien que son « recall@100 » est un taux de réussite (au moins un article trouvé) ; la v2 "
             "(2025) a corrigé cela. MTEB interroge avec la question suivie de sa description (extra_description) ; "
             "l'article BSARD, et les runs intégrés par défaut, avec la question seule.")


#: What the page says about R-Precision (behind a help icon).
RPREC_HELP = ("R-Précision : la précision au rang R, où R est le nombre d'articles pertinents de la question "
              "(`trec_eval -m Rprec`) ; la moyenne est le « MRP » que rapportent G-DSR et QABISAR. Le MRR, qui ne "
              "voit que le premier article pertinent alors qu'une question en a jusqu'à 57, vient en dernier.")


def measure_headers(shown: pd.DataFrame) -> list[str]:
    """The measure columns of a :func:`display_metrics` table (its other columns are counts and the source)."""
    return [c for c in shown.columns if c not in SHORT_NAMES.values()]


def metrics_frame(board: Scoreboard) -> pd.DataFrame:
    """:func:`bsard_demo.evaluation.report.metrics_table` of the usable runs (published rows on BSARD test)."""
    return metrics_table(board.evaluations, published=board.published)


def display_metrics(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (fractions) as shown: metric columns in % rounded to two decimals, headers
    ``R@100 … MAP@100 MRR@100 manquantes inconnues source``, index ``système``."""
    out = pd.DataFrame(index=table.index.astype(str))
    for col in table.columns:
        if is_measure_column(col):
            out[metric_label(col)] = [None if pd.isna(v) else round(100 * float(v), 2) for v in table[col]]
        elif col.endswith("_questions"):
            out[SHORT_NAMES[col]] = table[col].astype("Int64")
        else:
            out[SHORT_NAMES.get(col, col)] = table[col].astype(str).str.replace("this run", "ce run", regex=False) \
                .str.replace("published", "publié", regex=False)
    out.index.name = "système"
    return out


def shown_metrics(board: Scoreboard) -> list[str]:
    """The measures the page shows and offers (the CLI table's columns): recalls, MAP, MRR, nDCG@10."""
    return display_columns(board.ks, extra_columns(board.evaluations))


def ci_frame(board: Scoreboard, metrics: Sequence[str] | None = None, *, n_resamples: int = 2000,
             seed: int = 0) -> pd.DataFrame:
    """Per run and metric: mean and bootstrap 95 % interval (input of :func:`charts.metric_bars`)."""
    metrics = list(metrics or shown_metrics(board))
    return board.memo(("ci", tuple(metrics), n_resamples, seed), lambda: metric_table_with_ci(
        {n: ev.per_question for n, ev in board.evaluations.items()}, metrics, n_resamples=n_resamples, seed=seed))


def curve_frame(board: Scoreboard, max_k: int = 500) -> pd.DataFrame:
    """Macro recall@k for k = 1 … ``max_k`` of every usable run: columns ``run, k, recall``."""
    frames = []
    for r in board.runs:
        if r.usable:
            df = recall_curve(board.qrels, r.file.run, max_k)
            df.insert(0, "run", r.name)
            frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "k", "recall"])


def per_question_frame(board: Scoreboard, questions: pd.DataFrame) -> pd.DataFrame:
    """:func:`bsard_demo.evaluation.report.per_question_table` of the usable runs plus the question text."""
    df = per_question_table(board.evaluations, questions)
    if len(df):
        text = questions.set_index("id")["question"]
        df.insert(3 if "category" in df.columns else 2, "question", df["qid"].map(text).fillna(""))
    return df


def filter_categories(df: pd.DataFrame, categories: Sequence[str] | None) -> pd.DataFrame:
    """Rows of the chosen categories (all rows when none are chosen)."""
    if not categories or "category" not in df.columns:
        return df
    return df[df["category"].isin(list(categories))]


@dataclass(frozen=True)
class ScoreTables:
    """The tables of one board, each computed once: ``metrics`` (the CLI's rows, no published rows:
    the downloads), ``shown`` (:func:`display_metrics` of :func:`metrics_frame`: the measures table as
    the page shows it), ``per_question`` (:func:`bsard_demo.evaluation.report.per_question_table`: the
    charts and the per-question download) and ``per_question_text`` (the same plus the question text:
    the per-question table and the drill-down). Read them, never change them: they are shared."""

    metrics: pd.DataFrame
    shown: pd.DataFrame
    per_question: pd.DataFrame
    per_question_text: pd.DataFrame


def score_tables(board: Scoreboard) -> ScoreTables:
    """:class:`ScoreTables` of the usable runs of ``board`` (the questions of its split), made once per
    board (:meth:`~bsard_demo.evaluation.scoring.Scoreboard.memo`): a second visitor who scores the same
    board, or a rerun of the page, reads the kept frames (docs/benchmarks.md, "Per-visit cost")."""
    return board.memo(("tables",), lambda: _tables(board))


def _tables(board: Scoreboard) -> ScoreTables:
    with_text = per_question_frame(board, board.dataset.questions(board.split))
    plain = with_text.drop(columns=["question"]) if "question" in with_text.columns else with_text
    return ScoreTables(metrics_table(board.evaluations), display_metrics(metrics_frame(board)), plain, with_text)


def french_view(frame: pd.DataFrame, *, fractions: Sequence[str] = (), percents: Sequence[str] = (),
                decimals: Sequence[str] = (), digits: int = 1):
    """``frame`` as the page shows it, in French numbers (a pandas Styler: the values stay numbers, so a click on a
    header still sorts): ``fractions`` (0–1) as « 12,5 % », ``percents`` (already ×100) as « 12,50 » (two
    decimals), ``decimals`` (p-values) as « 0,0123 »; every empty cell empty (never "None")."""
    def shown(fn):
        return lambda v: "" if v is None or pd.isna(v) else fn(float(v))

    formats = {c: shown(lambda v: french.percent(v, digits)) for c in fractions if c in frame.columns}
    formats.update({c: shown(lambda v: french.decimal(v, 2)) for c in percents if c in frame.columns})
    formats.update({c: shown(lambda v: french.decimal(v, 4)) for c in decimals if c in frame.columns})
    frame = frame.copy()
    for c in frame.columns:  # the grid draws a missing value as "None", whatever its display text
        if c in formats and frame[c].isna().any():
            frame[c] = [formats[c](v) for v in frame[c]]  # a column with holes is shown as its French text
        elif frame[c].isna().any() and not pd.api.types.is_float_dtype(frame[c]):
            frame[c] = frame[c].astype(object).where(frame[c].notna(), "")
    numeric = {c: f for c, f in formats.items() if pd.api.types.is_numeric_dtype(frame[c])}
    return frame.style.format(na_rep="").format(numeric)


def to_csv_bytes(df: pd.DataFrame, *, index: bool = False) -> bytes:
    """UTF-8 CSV of ``df`` with six-decimal floats (the CLI's ``--per-query`` layout), formula-safe
    (:func:`~bsard_demo.evaluation.report.csv_text`)."""
    return csv_text(df, index=index, float_format="%.6f").encode("utf-8")
