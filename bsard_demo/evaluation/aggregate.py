"""Score a run against a split's labels (:func:`evaluate`): per-question values and macro averages, equal to
``trec_eval -c -M k`` on the run cut to its top k, and R-Precision to ``trec_eval -c -m Rprec`` on the whole
run (the tests check both with pytrec_eval); used by
:mod:`bsard_demo.evaluation.scoring`, tuning and the Search page's scores.

Conventions: docs/design.md, 'bsard_demo/evaluation/aggregate.py'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .measures import FAMILIES, Measure, cutoff_columns, cutoff_families, extra_columns, extra_measures
from .metrics import gold_positions, graded_ndcg

DEFAULT_KS: tuple[int, ...] = (100, 200, 500)


def gold_ranks(relevant: Iterable[str], ranking: Sequence[str]) -> dict[str, int | None]:
    """Rank of each relevant doc in ``ranking`` (``None`` when absent), in the order given."""
    index: dict[str, int] = {}
    for i, doc in enumerate(ranking, start=1):
        index.setdefault(doc, i)
    return {doc: index.get(doc) for doc in dict.fromkeys(relevant)}


@dataclass
class Evaluation:
    """Result of :func:`evaluate`.

    ``per_question`` is indexed by question id (split order) with one column per metric
    (``recall@100``, ``map@100``, ``mrr@100``, …, then ``rprec``, ``ndcg@10``) plus ``n_relevant``, ``n_retrieved`` and
    ``missing`` (question absent from the run). ``means`` are macro averages over all questions.
    """

    per_question: pd.DataFrame
    means: dict[str, float]
    ks: tuple[int, ...]
    missing_questions: int
    unknown_questions: int
    unlabelled_questions: int = 0

    @property
    def questions(self) -> int:
        return len(self.per_question)

    def summary(self) -> dict[str, float | int]:
        """Means plus the missing/unknown counts: one row of a metrics table."""
        return {**self.means, "missing_questions": self.missing_questions, "unknown_questions": self.unknown_questions}


def _extra_measures(extra: Sequence[str] | None) -> list[Measure]:
    known = extra_columns()
    chosen = known if extra is None else tuple(extra)
    unknown = [m for m in chosen if m not in known]
    if unknown:
        raise ValueError(f"unknown extra measure(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return [m for m in extra_measures() if m.column in chosen]


def evaluate(qrels: Mapping[str, Iterable[str]], run: Mapping[str, Sequence[str]], ks: Sequence[int] = DEFAULT_KS,
             *, extra: Sequence[str] | None = None, gains: Mapping[str, Mapping[str, float]] | None = None
             ) -> Evaluation:
    """Score ``run`` (question id → ranked article ids) against ``qrels`` at each cutoff in ``ks``,
    plus the ``extra`` measures (names from :func:`~.measures.extra_columns`: ``rprec``, ``ndcg@10``;
    default: all of them), whose columns follow the cutoff metrics in that order. ``gains``: graded labels
    (question → article → relevance, from a qrels file); nDCG then uses them as gains, as trec_eval does,
    while the other measures count ``qrels``' articles (relevance > 0) as relevant."""
    ks = tuple(sorted({int(k) for k in ks}))
    if not ks or ks[0] < 1:
        raise ValueError("cutoffs must be positive integers")
    extras = _extra_measures(extra)
    cols = cutoff_columns(ks) + [m.column for m in extras]
    families = cutoff_families()
    rows = []
    index = []
    missing = 0
    unlabelled = 0
    for qid, relevant in qrels.items():
        rel = set(relevant)
        if not rel:
            unlabelled += 1
            continue
        ranking = run.get(qid)
        if ranking is None:
            missing += 1
            ranking = ()
        pos = gold_positions(rel, ranking)
        vals = {f"{family}@{k}": FAMILIES[family].value(pos, len(rel), k) for k in ks for family in families}
        for m in extras:
            graded = gains is not None and m.family == "ndcg" and qid in gains
            vals[m.column] = (graded_ndcg(ranking, gains[qid], m.k) if graded
                              else FAMILIES[m.family].value(pos, len(rel), m.k))
        vals.update(n_relevant=len(rel), n_retrieved=len(ranking), missing=qid not in run)
        rows.append(vals)
        index.append(qid)
    per_q = pd.DataFrame(rows, index=pd.Index(index, name="qid"),
                         columns=cols + ["n_relevant", "n_retrieved", "missing"])
    means = {c: float(per_q[c].mean()) if len(per_q) else 0.0 for c in cols}
    unknown = sum(1 for qid in run if qid not in qrels)
    return Evaluation(per_q, means, ks, missing, unknown, unlabelled)


def recall_curve(qrels: Mapping[str, Iterable[str]], run: Mapping[str, Sequence[str]],
                 max_k: int = 500) -> pd.DataFrame:
    """Macro-averaged recall@k for k = 1 … ``max_k`` (columns ``k``, ``recall``), all questions counted."""
    curve = np.zeros(max_k)
    n = 0
    for qid, relevant in qrels.items():
        rel = set(relevant)
        if not rel:
            continue  # unscorable, left out as in evaluate()
        n += 1
        hits = np.zeros(max_k)
        for p in gold_positions(rel, run.get(qid, ())):
            if p <= max_k:
                hits[p - 1] += 1
        curve += np.cumsum(hits) / len(rel)
    return pd.DataFrame({"k": np.arange(1, max_k + 1), "recall": curve / max(n, 1)})
