"""Fusing the rankings of several retrievers into one.

- :func:`reciprocal_rank_fusion` (Cormack et al., 2009): ``score(d) = sum_i w_i / (k + rank_i(d))``
  over the rankings holding ``d`` (ranks 1-based; ``w_i = 1`` unless weights are given).
- :func:`weighted_fusion`: ``score(d) = sum_i w_i * norm_i(d)`` where ``norm_i`` rescales ranking
  ``i``'s scores (``"minmax"``: to [0, 1] within that ranking, all-equal scores give 1;
  ``"none"``: raw scores) and a document missing from ranking ``i`` gets 0 from it. With two
  rankings, ``alpha`` is the weight of the first and ``1 - alpha`` that of the second.

Any number of rankings can be fused, with one weight per ranking (``w_i >= 0``, finite, not all
0). Sums use :func:`math.fsum` (exactly rounded), so a document's score does not depend on the
order of the rankings or of their contributions, and equal contributions give exactly equal
scores; results are ordered by score descending, ties by article id descending as strings
(:func:`order_hits`, the run convention), so a fused ranking is the same in every process.
"""
from __future__ import annotations

import math
from typing import Sequence

from .base import DEFAULT_DEPTH, Hit, Retriever, clip_k

FUSION_METHODS = ("rrf", "weighted")
NORMALISATIONS = ("minmax", "none")


def order_hits(scores: dict[str, float], limit: int | None = None) -> list[Hit]:
    """Hits from ``{article id: score}``: score descending, ties by id descending."""
    ordered = sorted(scores.items(), key=lambda kv: kv[0], reverse=True)
    ordered.sort(key=lambda kv: kv[1], reverse=True)  # stable: ties keep id-descending order
    if limit is not None:
        ordered = ordered[:limit]
    return [Hit(doc, score) for doc, score in ordered]


def _weights(n: int, weights: Sequence[float] | None, alpha: float | None) -> list[float]:
    if weights is not None and alpha is not None:
        raise ValueError("give weights or alpha, not both")
    if alpha is not None:
        if n != 2:
            raise ValueError(f"alpha fuses exactly two rankings, not {n}")
        if not 0 <= alpha <= 1:
            raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
        return [float(alpha), 1.0 - float(alpha)]
    if weights is None:
        return [1.0] * n
    if isinstance(weights, (str, bytes)) or len(weights) != n:
        raise ValueError(f"{len(weights)} weights for {n} rankings (one per system, in order)")
    try:
        w = [float(x) for x in weights]
    except (TypeError, ValueError):
        raise ValueError(f"weights must be numbers, not {list(weights)!r}") from None
    if any(not (0 <= x < math.inf) for x in w):
        raise ValueError(f"weights must be finite and >= 0, not {','.join(f'{x:g}' for x in w)}")
    if n and not any(x > 0 for x in w):
        raise ValueError("at least one weight must be above 0")
    return w


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], k: float = 60, *,
                           weights: Sequence[float] | None = None, limit: int | None = None) -> list[Hit]:
    """Reciprocal rank fusion of ``rankings`` (each best first; a repeated id counts at its first
    rank). ``k`` must be >= 0."""
    if not 0 <= k < math.inf:
        raise ValueError(f"the RRF constant k must be finite and >= 0, not {k}")
    w = _weights(len(rankings), weights, None)
    parts: dict[str, list[float]] = {}
    for wi, ranking in zip(w, rankings):
        seen: set[str] = set()
        for rank, hit in enumerate(ranking, start=1):
            if hit.article_id in seen:
                continue
            seen.add(hit.article_id)
            parts.setdefault(hit.article_id, []).append(wi / (k + rank))
    return order_hits({doc: math.fsum(p) for doc, p in parts.items()}, limit)


def _normalise(ranking: Sequence[Hit], normalisation: str) -> dict[str, float]:
    best: dict[str, float] = {}
    for hit in ranking:
        if hit.article_id not in best:
            best[hit.article_id] = float(hit.score)
    if normalisation == "none" or not best:
        return best
    lo, hi = min(best.values()), max(best.values())
    if hi == lo:
        return {d: 1.0 for d in best}
    return {d: (s - lo) / (hi - lo) for d, s in best.items()}


def weighted_fusion(rankings_with_scores: Sequence[Sequence[Hit]], weights: Sequence[float] | None = None, *,
                    alpha: float | None = None, normalisation: str = "minmax", limit: int | None = None) -> list[Hit]:
    """Weighted sum of normalised scores (see the module docstring)."""
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {normalisation!r}; choose {' or '.join(NORMALISATIONS)}")
    w = _weights(len(rankings_with_scores), weights, alpha)
    parts: dict[str, list[float]] = {}
    for wi, ranking in zip(w, rankings_with_scores):
        for doc, s in _normalise(ranking, normalisation).items():
            parts.setdefault(doc, []).append(wi * s)
    return order_hits({doc: math.fsum(p) for doc, p in parts.items()}, limit)


class HybridRetriever:
    """Fuses two or more retrievers. Each is searched to ``max(k, depth)`` (capped at
    ``corpus_size`` when known), then fused by ``method`` and cut to ``k``."""

    def __init__(self, retrievers: Sequence[Retriever], method: str = "rrf", rrf_k: float = 60,
                 alpha: float = 0.5, depth: int = DEFAULT_DEPTH, *, weights: Sequence[float] | None = None,
                 normalisation: str = "minmax", corpus_size: int | None = None):
        if len(retrievers) < 2:
            raise ValueError("a hybrid retriever needs at least two retrievers")
        if method not in FUSION_METHODS:
            raise ValueError(f"unknown fusion method {method!r}; choose {' or '.join(FUSION_METHODS)}")
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self.retrievers = list(retrievers)
        self.method = method
        self.rrf_k = rrf_k
        self.alpha = alpha
        self.weights = list(weights) if weights is not None else None
        self.normalisation = normalisation
        self.depth = int(depth)
        self.corpus_size = corpus_size
        # Validate the fusion settings now rather than at the first search.
        if method == "rrf":
            reciprocal_rank_fusion([[] for _ in self.retrievers], rrf_k, weights=self.weights)
        else:
            weighted_fusion([[] for _ in self.retrievers], self.weights,
                            alpha=None if self.weights is not None or len(self.retrievers) != 2 else alpha,
                            normalisation=normalisation)
        inner = " + ".join(r.name for r in self.retrievers)
        if method == "rrf":
            how = f"rrf k={rrf_k:g}"
            if self.weights is not None and any(w != 1 for w in self.weights):
                how += " w=" + ",".join(f"{w:g}" for w in self.weights)
        elif self.weights is not None or len(self.retrievers) != 2:
            how = f"weighted {normalisation} w=" + ",".join(f"{w:g}" for w in (self.weights or [1.0] * len(self.retrievers)))
        else:
            how = f"weighted {normalisation} alpha={alpha:g}"
        self.name = f"hybrid {how} ({inner})"

    def _depth(self, k: int) -> int:
        depth = max(k, self.depth)
        return min(depth, self.corpus_size) if self.corpus_size else depth

    def fuse(self, rankings: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
        """Fuse one question's rankings (one per retriever, in order) and cut to ``k``."""
        if self.method == "rrf":
            return reciprocal_rank_fusion(rankings, self.rrf_k, weights=self.weights, limit=k)
        alpha = None if self.weights is not None or len(rankings) != 2 else self.alpha
        return weighted_fusion(rankings, self.weights, alpha=alpha, normalisation=self.normalisation, limit=k)

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        k = clip_k(k, self.corpus_size)
        depth = self._depth(k)
        per_retriever = [r.search_many(list(questions), depth) for r in self.retrievers]
        return [self.fuse([runs[i] for runs in per_retriever], k) for i in range(len(questions))]
