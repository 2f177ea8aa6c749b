"""The BSARD metrics of one question (Louis & Spanakis, ACL 2022), exactly as defined there.

``rel = set(relevant); top = ranked[:k]``
- recall@k = |rel ∩ top| / |rel|
- AP@k = sum over ranks i <= k holding a relevant doc of (hits so far / i), divided by |rel|
- RR@k = 1 / rank of the first relevant doc in top k, else 0

A relevant doc repeated in ``ranked`` counts at its first rank only (runs read by
:mod:`bsard_demo.run` never repeat a doc). A question with no relevant doc scores 0 everywhere.
"""
from __future__ import annotations

from typing import Iterable, Sequence


def compute_metrics(relevant_docs: Iterable[str], ranked_docs: Sequence[str], k: int = 100) -> tuple[float, float, float]:
    """Return ``(recall@k, AP@k, RR@k)`` for one question."""
    if k < 1:
        raise ValueError("k must be at least 1")
    rel = set(relevant_docs)
    if not rel:
        return 0.0, 0.0, 0.0
    hits = 0
    ap_sum = 0.0
    rr = 0.0
    seen: set = set()
    for i, doc in enumerate(ranked_docs[:k], start=1):
        if doc in rel and doc not in seen:
            seen.add(doc)
            hits += 1
            ap_sum += hits / i
            if hits == 1:
                rr = 1.0 / i
    return hits / len(rel), ap_sum / len(rel), rr
