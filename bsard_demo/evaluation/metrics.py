"""The BSARD metrics of one question (Louis & Spanakis, ACL 2022), exactly as defined there: recall@k,
AP@k, RR@k, and beside them nDCG@k with binary gains as MTEB quotes it (``trec_eval -m ndcg_cut.k``)
and R-Precision as QABISAR and G-DSR report it (``trec_eval -m Rprec``);
:data:`bsard_demo.evaluation.measures.FAMILIES` declares which computes each family.

Definitions: docs/design.md, 'bsard_demo/evaluation/metrics.py'.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence


def gold_positions(relevant: Iterable[str], ranking: Sequence[str]) -> list[int]:
    """1-based ranks at which the relevant docs appear in ``ranking`` (first occurrence), sorted."""
    rel = set(relevant)
    found: dict[str, int] = {}
    for i, doc in enumerate(ranking, start=1):
        if doc in rel and doc not in found:
            found[doc] = i
            if len(found) == len(rel):
                break
    return sorted(found.values())


def recall_from_positions(positions: Sequence[int], n_relevant: int, k: int) -> float:
    """recall@k from the sorted ranks of the relevant docs found (any depth), as above."""
    return len([p for p in positions if p <= k]) / n_relevant if n_relevant else 0.0


def ap_from_positions(positions: Sequence[int], n_relevant: int, k: int) -> float:
    """AP@k from the sorted ranks of the relevant docs found (any depth), as above."""
    inside = [p for p in positions if p <= k]
    return sum(j / p for j, p in enumerate(inside, start=1)) / n_relevant if n_relevant else 0.0


def rr_from_positions(positions: Sequence[int], n_relevant: int, k: int) -> float:
    """RR@k from the sorted ranks of the relevant docs found (any depth), as above."""
    first = next((p for p in positions if p <= k), None)
    return 1.0 / first if n_relevant and first is not None else 0.0


def metrics_from_positions(positions: Sequence[int], n_relevant: int, k: int) -> tuple[float, float, float]:
    """``(recall@k, AP@k, RR@k)`` from the sorted ranks of the relevant docs found (any depth):
    the recipe above, written on positions so that one pass serves every cutoff."""
    return (recall_from_positions(positions, n_relevant, k), ap_from_positions(positions, n_relevant, k),
            rr_from_positions(positions, n_relevant, k))


def ndcg_from_positions(positions: Sequence[int], n_relevant: int, k: int = 10) -> float:
    """nDCG@k with binary gains from the sorted ranks of the relevant docs found (any depth), as
    trec_eval's ``ndcg_cut_k`` computes it: discount ``1 / log2(rank + 1)``, ideal ranking = all
    relevant docs first. A question with no relevant doc scores 0."""
    if k < 1:
        raise ValueError("k must be at least 1")
    if n_relevant == 0:
        return 0.0
    dcg = sum(1.0 / math.log2(p + 1) for p in positions if p <= k)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(n_relevant, k) + 1))
    return dcg / idcg


def graded_ndcg(ranking: Sequence[str], gains: Mapping[str, float], k: int = 10) -> float:
    """nDCG@k with graded gains (``gains``: a question's judged articles and their relevance), as trec_eval's
    ``ndcg_cut_k`` computes it on graded qrels: gain = relevance (0 for an article not judged or judged 0 or
    below), discount ``1 / log2(rank + 1)``, an article counted at its first rank, ideal ranking = the gains
    sorted. 0 when no article has a positive gain."""
    if k < 1:
        raise ValueError("k must be at least 1")
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    seen: set[str] = set()
    dcg, rank = 0.0, 0
    for doc in ranking:
        if doc in seen:
            continue
        seen.add(doc)
        rank += 1
        if rank > k:
            break
        g = gains.get(doc, 0)
        if g > 0:
            dcg += g / math.log2(rank + 1)
    return dcg / sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))


def rprec_from_positions(positions: Sequence[int], n_relevant: int, k: int | None = None) -> float:
    """R-Precision, trec_eval's ``Rprec``: the share of the top R that is relevant, R = ``n_relevant``
    (the question's number of distinct relevant docs), from the sorted ranks of the relevant docs
    found. It has no cut-off (``k`` is ignored, kept for the families' one signature); a ranking
    shorter than R counts its missing ranks as misses. A question with no relevant doc scores 0."""
    if n_relevant == 0:
        return 0.0
    return sum(1 for p in positions if p <= n_relevant) / n_relevant


def compute_metrics(relevant_docs: Iterable[str], ranked_docs: Sequence[str],
                    k: int = 100) -> tuple[float, float, float]:
    """Return ``(recall@k, AP@k, RR@k)`` for one question."""
    if k < 1:
        raise ValueError("k must be at least 1")
    rel = set(relevant_docs)
    return metrics_from_positions(gold_positions(rel, ranked_docs[:k]), len(rel), k)


