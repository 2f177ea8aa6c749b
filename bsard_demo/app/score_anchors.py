"""The published state of the art beside the visitor's runs (BSARD test split only): the runs' recall
next to :func:`bsard_demo.evaluation.anchors.anchors_frame` (every published system, with where and how
each figure was read), in French; MTEB v1's one-gold figures stay in their own columns, never in a recall
column (mteb#2906). Systems whose figures could not be read are listed without a figure.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..evaluation.anchors import MTEB_V1_MEASURES, NOT_READ, READ_LISTING, READ_SOURCE, anchors_frame
from ..evaluation.measures import is_measure_column
from ..evaluation.report import metric_label

#: The headers of MTEB v1's one-gold figures.
MTEB_LABELS = {"hit@100": "Hit@100 (MTEB v1)", "ndcg@10 (one gold)": "nDCG@10 (MTEB v1, 1 pertinent)"}
#: How each figure was read, in French.
READ_FR = {READ_SOURCE: "dans sa source", READ_LISTING: "dans une fiche qui cite l'article (Papers with Code)",
           NOT_READ: "non lu : aucun chiffre affiché"}
#: The column headers of :func:`beside_frame` after the figures.
INFO_COLUMNS = {"source": "source", "paper": "publication", "venue": "lieu", "trained_on": "entraîné sur",
                "read": "chiffre lu", "read_in": "lu dans"}
#: The notes said under the table (:data:`bsard_demo.evaluation.anchors.NOTES`, in French).
NOTES_FR = (
    "R@k : rappel sur tous les articles pertinents des questions de test de BSARD, calculé comme `evaluate`.",
    "Hit@100 (MTEB v1) : BSARDRetrieval v1 de MTEB ne gardait qu'un article pertinent par question ; son "
    "« recall_at_100 » est donc un taux de réussite, pas un rappel (mteb#2906, corrigé par BSARDRetrieval.v2, "
    "pour lequel aucun résultat n'était publié). Son nDCG@10 ne compte lui aussi qu'un article pertinent.",
    "Les chiffres BSARD du classement MTEB ont été signalés non reproductibles (mteb#1314) ; les outils départagent "
    "les égalités de score différemment (mteb#5092, pytrec_eval#56) : comparez avec un seul outil.",
    "R-Précision : le « MRP » (R-Précision moyenne) du tableau 1 de QABISAR (COLING 2025), pas un MRR. G-DSR "
    "(EACL 2023) est listé sans chiffre : son tableau n'a pas pu être lu ici.",
)
THIS_RUN = "ce run (calculé ici)"
PUBLISHED = "publié"


def beside_frame(metrics: pd.DataFrame, ks: Sequence[int] = (100, 200, 500)) -> pd.DataFrame:
    """The visitor's runs (``metrics``: :func:`bsard_demo.evaluation.report.metrics_table`'s rows, fractions)
    then every published system, one row each (index ``système``): recall at ``ks`` in % (two decimals,
    empty where not published), MTEB v1's figures in their own columns, then where each row comes from."""
    published = anchors_frame(ks, shown_only=False)
    figures = [c for c in published.columns if is_measure_column(c) or c in MTEB_V1_MEASURES]
    runs = metrics.reindex(columns=figures).assign(source=THIS_RUN)
    rows = published.assign(source=PUBLISHED)
    rows["read"] = rows["read"].map(READ_FR).fillna(rows["read"])
    table = pd.concat([runs, rows])
    out = pd.DataFrame(index=table.index.astype(str))
    for c in figures:
        values = [None if pd.isna(v) else round(100 * float(v), 2) for v in table[c]]
        out[MTEB_LABELS.get(c) or metric_label(c)] = values
    for c, header in INFO_COLUMNS.items():
        out[header] = table[c].fillna("").astype(str) if c in table else ""
    out.index.name = "système"
    return out


def figure_columns(table: pd.DataFrame) -> list[str]:
    """The figure columns of a :func:`beside_frame` (in %)."""
    return [c for c in table.columns if c not in INFO_COLUMNS.values()]
