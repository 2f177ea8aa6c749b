"""Fusing the rankings of several retrievers into one (:class:`HybridRetriever`): :func:`reciprocal_rank_fusion`
(Cormack et al., 2009) or :func:`weighted_fusion` of normalised scores, any number of rankings with one weight each;
scores are exactly rounded sums and ties follow the run convention (:func:`order_hits`), so a fused ranking is the
same in every process. :class:`FusionConfig` declares a fusion apart from who runs it: its
:meth:`~FusionConfig.validate` is the one check, its :meth:`~FusionConfig.label` the one label.

The parts of one search run together (:func:`run_together`: numpy, FAISS and onnxruntime release the GIL) and a
part's ranking for a question is kept a little while (:func:`part_search`), so the columns of one page that share a
part (BM25 and ``use`` in a hybrid and in a learned ranker) search and encode the question once.

The formulas, defaults and ordering: docs/design.md, 'bsard_demo/retrievers/hybrid.py'.
"""
from __future__ import annotations

import math
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence, TypeVar

import numpy as np

from ..build_once import BuildOnce
from .base import DEFAULT_DEPTH, Hit, Retriever, clip_k, ranked_hits

FUSION_METHODS = ("rrf", "weighted")
NORMALISATIONS = ("minmax", "none")
#: The default fusion (:class:`FusionConfig`, :func:`~bsard_demo.retrievers.hybrid_specs.hybrid_spec`):
#: reciprocal rank fusion with Cormack et al.'s k = 60 (2009; it also gave the best or tied
#: recall@100 of k in 10..200 in every check of docs/effectiveness.md); a weighted fusion of two
#: systems weighs the first α = 0.5 and the second 1 - α; min-max normalised scores.
DEFAULT_FUSION = "rrf"
DEFAULT_RRF_K = 60.0
DEFAULT_ALPHA = 0.5
DEFAULT_NORMALISATION = "minmax"
#: How :meth:`FusionConfig.label` words a fusion (a front end passes its own words).
LABEL_WORDS = {"rrf": "rrf", "weighted": "weighted {normalisation}", "alpha": "alpha"}


T = TypeVar("T")
#: Threads that run the parts of one search together, shared by every search of the process: a
#: hybrid has 2-4 parts; more threads would only queue behind the GIL.
PART_THREADS = 4
#: Part rankings kept (:func:`part_search`): a page's columns share parts within one visit, so a
#: few pages' worth is enough (each entry is one part's ranking of one question, <= depth hits).
PART_MEMO_ENTRIES = 64
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_worker = threading.local()
_memo: BuildOnce = BuildOnce(entries=PART_MEMO_ENTRIES)  # a second column asking for a part being searched waits


def _run_in_pool(call: Callable[[], T]) -> T:
    _worker.busy = True  # a part that is itself a hybrid runs its own parts in this thread (no pool deadlock)
    try:
        return call()
    finally:
        _worker.busy = False


def run_together(calls: Sequence[Callable[[], T]]) -> list[T]:
    """``[call() for call in calls]``, the calls running at once: the first in this thread, the
    others on a small shared pool (:data:`PART_THREADS`); the results in order, each the same as
    run alone. Inside a pool thread the calls run one after another (never waiting on the pool)."""
    global _pool
    if len(calls) < 2 or getattr(_worker, "busy", False):
        return [call() for call in calls]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(PART_THREADS, thread_name_prefix="bsard-parts")
    futures = [_pool.submit(_run_in_pool, call) for call in calls[1:]]
    first = calls[0]()
    return [first, *(f.result() for f in futures)]


def part_search(retriever: Retriever, question: str, depth: int) -> list[Hit]:
    """``retriever``'s ranking of ``question`` to ``depth``, computed once for the last
    :data:`PART_MEMO_ENTRIES` (retriever, question, depth): a page whose columns share a part
    searches it (and encodes the question) once, a column asking while it is searched waiting for that
    search (:class:`~bsard_demo.build_once.BuildOnce`). Keyed by the retriever object (weakly: a
    retriever dropped by the app is not kept alive); a fresh list each call."""
    found = _memoised(retriever, question, depth)
    return ranked_hits(*found, retriever.article_ids) if hasattr(retriever, "search_rows") else list(found)


def part_rows(retriever, question: str, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`part_search` as arrays, for a retriever with ``search_rows`` (BM25, dense, neighbours):
    ``(corpus rows, scores)`` of :func:`~.base.rank_rows`, from the same memo (read-only arrays)."""
    if not hasattr(retriever, "search_rows"):
        raise TypeError(f"{type(retriever).__name__} has no search_rows: use part_search")
    return _memoised(retriever, question, depth)


def _memoised(retriever, question: str, depth: int):
    """The memo's entry of (retriever, question, depth), searched when absent: ``(rows, scores)``
    arrays from a retriever's ``search_rows``, else a tuple of hits from its ``search_many``."""
    def search():
        if hasattr(retriever, "search_rows"):
            rows, scores = retriever.search_rows([question], depth)[0]
            rows.flags.writeable = scores.flags.writeable = False  # shared by the memo's readers
            return rows, scores
        return tuple(retriever.search_many([question], depth)[0])

    try:
        key = (weakref.ref(retriever), str(question), int(depth))
        hash(key)
    except TypeError:  # a retriever that cannot be weakly referenced or hashed: not kept
        return search()
    return _memo.get(key, search)


def order_hits(scores: dict[str, float], limit: int | None = None) -> list[Hit]:
    """Hits from ``{article id: score}``: score descending, ties by id descending."""
    ordered = sorted(scores.items(), key=lambda kv: kv[0], reverse=True)
    ordered.sort(key=lambda kv: kv[1], reverse=True)  # stable: ties keep id-descending order
    if limit is not None:
        ordered = ordered[:limit]
    return [Hit(doc, score) for doc, score in ordered]


class FusionError(ValueError):
    """A fusion setting that :meth:`FusionConfig.validate` refuses: ``code`` names the rule
    (``method``, ``normalisation``, ``weight_count``, ``weight_type``, ``alpha_method``,
    ``alpha_and_weights``, ``alpha_count``, ``alpha_range``, ``weight_range``, ``weights_zero``,
    ``rrf_k``, ``depth``) and ``params`` its values, so that a front end can word it; the message
    is the English one."""

    def __init__(self, code: str, message: str, **params):
        super().__init__(message)
        self.code = code
        self.params = params


@dataclass(frozen=True)
class FusionConfig:
    """How a hybrid fuses its rankings, whatever the front end: ``method`` (:data:`FUSION_METHODS`),
    ``rrf_k`` (RRF only), ``weights`` (one per ranking, in order; ``None``: all 1), ``alpha`` (a
    weighted fusion of exactly two rankings without weights: ``[alpha, 1 - alpha]``; ``None``:
    not set), ``normalisation`` (weighted only, :data:`NORMALISATIONS`) and ``depth`` (how deep
    each part is searched). :meth:`validate` is the one check, :meth:`label` the one label."""

    method: str = DEFAULT_FUSION
    rrf_k: float = DEFAULT_RRF_K
    weights: Sequence[float] | None = None
    alpha: float | None = None
    normalisation: str = DEFAULT_NORMALISATION
    depth: int = DEFAULT_DEPTH

    @classmethod
    def from_options(cls, options: Mapping[str, object], n: int) -> "FusionConfig":
        """The fusion a hybrid :class:`~bsard_demo.retrievers.registry.RetrieverSpec`'s options
        (or :class:`HybridRetriever`'s arguments) describe for ``n`` systems, absent ones at
        their defaults; ``alpha`` kept only where it applies (:meth:`takes_alpha`), 0.5 there
        when absent. Not checked: see :meth:`validate`."""
        config = cls(method=options.get("method", DEFAULT_FUSION), rrf_k=options.get("rrf_k", DEFAULT_RRF_K),
                     weights=options.get("weights"), alpha=options.get("alpha"),
                     normalisation=options.get("normalisation", DEFAULT_NORMALISATION),
                     depth=options.get("depth", DEFAULT_DEPTH))
        if not config.takes_alpha(n):
            return replace(config, alpha=None)
        return config if config.alpha is not None else replace(config, alpha=DEFAULT_ALPHA)

    def takes_alpha(self, n: int) -> bool:
        """A weighted fusion of two rankings without weights is set by ``alpha``."""
        return self.method == "weighted" and self.weights is None and n == 2

    def validate(self, n: int, systems: Sequence[str] | None = None) -> "FusionConfig":
        """This fusion for ``n`` rankings, checked, with numbers as floats (``weights`` a tuple,
        ``depth`` an int); raises :class:`FusionError`, naming ``systems`` (names of the ``n``
        systems, in order) when given."""
        named = ", ".join(map(str, systems)) if systems is not None else None
        if self.method not in FUSION_METHODS:
            raise FusionError("method", f"unknown fusion method {self.method!r}; choose {' or '.join(FUSION_METHODS)}",
                              method=self.method)
        if self.normalisation not in NORMALISATIONS:
            raise FusionError("normalisation", f"unknown normalisation {self.normalisation!r}; choose "
                              f"{' or '.join(NORMALISATIONS)}", normalisation=self.normalisation)
        w = None
        if self.weights is not None:
            if isinstance(self.weights, (str, bytes)) or len(self.weights) != n:
                given = len(self.weights)
                raise FusionError("weight_count", f"{given} weight(s) for {n} systems ({named}): give one per system, "
                                  "in that order" if named is not None else
                                  f"{given} weights for {n} rankings (one per system, in order)", given=given, needed=n)
            try:
                w = tuple(float(x) for x in self.weights)
            except (TypeError, ValueError):
                raise FusionError("weight_type", f"weights must be numbers, not {list(self.weights)!r}") from None
        alpha = None
        if self.alpha is not None:
            if self.method != "weighted":
                raise FusionError("alpha_method", "alpha applies to the weighted fusion only (method 'weighted'); "
                                  "RRF takes weights")
            if w is not None:
                raise FusionError("alpha_and_weights", "give weights or alpha, not both")
            if n != 2:
                raise FusionError("alpha_count",
                                  f"alpha weighs exactly two systems, here there are {n} ({named}); give weights "
                                  "instead" if named is not None else f"alpha fuses exactly two rankings, not {n}",
                                  n=n)
            alpha = _number(self.alpha)
            if not 0 <= alpha <= 1:
                raise FusionError("alpha_range", f"alpha must be between 0 and 1, not {self.alpha}", alpha=self.alpha)
        if w is not None:
            if any(not (0 <= x < math.inf) for x in w):
                raise FusionError("weight_range",
                                  f"weights must be finite and >= 0, not {','.join(f'{x:g}' for x in w)}", weights=w)
            if n and not any(x > 0 for x in w):
                raise FusionError("weights_zero", "at least one weight must be above 0")
        rrf_k = self.rrf_k
        if self.method == "rrf":
            rrf_k = _number(self.rrf_k)
            if not 0 <= rrf_k < math.inf:
                raise FusionError("rrf_k", f"the RRF constant k must be finite and >= 0, not {self.rrf_k}",
                                  rrf_k=self.rrf_k)
        try:
            depth = int(self.depth)
        except (TypeError, ValueError):
            depth = 0
        if depth < 1:
            raise FusionError("depth", f"depth must be at least 1, not {self.depth}", depth=self.depth)
        return replace(self, rrf_k=rrf_k, weights=w, alpha=alpha, depth=depth)

    def weights_for(self, n: int) -> list[float]:
        """The weight of each of ``n`` rankings: ``[alpha, 1 - alpha]``, the weights, or all 1."""
        if self.alpha is not None:
            return [float(self.alpha), 1.0 - float(self.alpha)]
        return [1.0] * n if self.weights is None else [float(x) for x in self.weights]

    def spec_options(self) -> dict:
        """The hybrid spec options of this fusion: ``method``, ``rrf_k`` (RRF), ``weights`` and
        ``alpha`` when set (normalisation and depth are the caller's to write)."""
        options: dict = {"method": self.method}
        if self.method == "rrf":
            options["rrf_k"] = self.rrf_k
        if self.weights is not None:
            options["weights"] = [float(x) for x in self.weights]
        if self.alpha is not None:
            options["alpha"] = self.alpha
        return options

    def label(self, n: int, words: Mapping[str, str] = LABEL_WORDS) -> str:
        """``rrf k=60 w=1,0.5``, ``weighted minmax alpha=0.7``, ``weighted none w=2,1,1`` (RRF's
        weights shown unless all 1); ``words`` gives the words (:data:`LABEL_WORDS`), e.g. the
        Search page's ``RRF``, ``pondéré``, ``α``."""
        weights = self.weights_for(n)
        shown = ",".join(f"{x:g}" for x in weights)
        if self.method == "rrf":
            return f"{words['rrf']} k={self.rrf_k:g}" + ("" if all(x == 1 for x in weights) else f" w={shown}")
        head = words["weighted"].format(normalisation=self.normalisation)
        if self.alpha is not None:
            return f"{head} {words['alpha']}={self.alpha:g}"
        return f"{head} w={shown}"

    def fuse(self, rankings: Sequence[Sequence[Hit]], limit: int | None = None) -> list[Hit]:
        """Fuse ``rankings`` (one per system, in order) by this fusion, which :meth:`validate`
        has checked for that many rankings."""
        weights = self.weights_for(len(rankings))
        if self.method == "rrf":
            return _rrf(rankings, self.rrf_k, weights, limit)
        return _weighted(rankings, weights, self.normalisation, limit)


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], k: float = 60, *,
                           weights: Sequence[float] | None = None, limit: int | None = None) -> list[Hit]:
    """Reciprocal rank fusion of ``rankings`` (each best first; a repeated id counts at its first
    rank). ``k`` must be >= 0."""
    return FusionConfig("rrf", rrf_k=k, weights=weights).validate(len(rankings)).fuse(rankings, limit)


def _rrf(rankings: Sequence[Sequence[Hit]], k: float, weights: Sequence[float], limit: int | None) -> list[Hit]:
    parts: dict[str, list[float]] = {}
    for wi, ranking in zip(weights, rankings):
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
                    alpha: float | None = None, normalisation: str = DEFAULT_NORMALISATION,
                    limit: int | None = None) -> list[Hit]:
    """Weighted sum of normalised scores (docs/design.md, 'bsard_demo/retrievers/hybrid.py')."""
    config = FusionConfig("weighted", weights=weights, alpha=alpha, normalisation=normalisation)
    return config.validate(len(rankings_with_scores)).fuse(rankings_with_scores, limit)


def _weighted(rankings: Sequence[Sequence[Hit]], weights: Sequence[float], normalisation: str,
              limit: int | None) -> list[Hit]:
    parts: dict[str, list[float]] = {}
    for wi, ranking in zip(weights, rankings):
        for doc, s in _normalise(ranking, normalisation).items():
            parts.setdefault(doc, []).append(wi * s)
    return order_hits({doc: math.fsum(p) for doc, p in parts.items()}, limit)


def first_ranks(ranking: Sequence[Hit]) -> dict[str, int]:
    """``{article id: 1-based rank}`` of a ranking, an id listed twice at its first rank (as the
    fusion counts it)."""
    ranks: dict[str, int] = {}
    for rank, hit in enumerate(ranking, start=1):
        ranks.setdefault(hit.article_id, rank)
    return ranks


class HybridRetriever:
    """Fuses two or more retrievers. Each is searched to ``max(k, depth)`` (capped at
    ``corpus_size`` when known), then fused by :attr:`fusion` and cut to ``k``. The fusion is
    ``fusion`` when given, else the one the other arguments describe
    (:meth:`FusionConfig.from_options`); it is validated here, once."""

    def __init__(self, retrievers: Sequence[Retriever], method: str = DEFAULT_FUSION, rrf_k: float = DEFAULT_RRF_K,
                 alpha: float = DEFAULT_ALPHA, depth: int = DEFAULT_DEPTH, *, weights: Sequence[float] | None = None,
                 normalisation: str = DEFAULT_NORMALISATION, corpus_size: int | None = None,
                 fusion: FusionConfig | None = None):
        if len(retrievers) < 2:
            raise ValueError("a hybrid retriever needs at least two retrievers")
        n = len(retrievers)
        if fusion is None:
            fusion = FusionConfig.from_options({"method": method, "rrf_k": rrf_k, "alpha": alpha, "depth": depth,
                                                "weights": weights, "normalisation": normalisation}, n)
        self.fusion = fusion.validate(n)
        self.retrievers = list(retrievers)
        self.corpus_size = corpus_size
        self.name = f"hybrid {self.fusion.label(n)} ({' + '.join(r.name for r in self.retrievers)})"

    method = property(lambda self: self.fusion.method)
    rrf_k = property(lambda self: self.fusion.rrf_k)
    alpha = property(lambda self: self.fusion.alpha)
    weights = property(lambda self: self.fusion.weights)
    normalisation = property(lambda self: self.fusion.normalisation)
    depth = property(lambda self: self.fusion.depth)

    def _depth(self, k: int) -> int:
        depth = max(k, self.depth)
        return min(depth, self.corpus_size) if self.corpus_size else depth

    def fuse(self, rankings: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
        """Fuse one question's rankings (one per retriever, in order) and cut to ``k``."""
        return self.fusion.fuse(rankings, k)

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_parts(self, question: str, k: int = 100) -> tuple[list[Hit], list[list[Hit]]]:
        """:meth:`search` with what it fused: ``(hits, rankings)``, ``rankings[i]`` being part ``i``'s
        own ranking (searched as deep as the fusion searches it), so a front end can say which
        parts put a hit where (:func:`first_ranks`)."""
        k = clip_k(k, self.corpus_size)
        depth = self._depth(k)
        rankings = run_together([lambda r=r: part_search(r, question, depth) for r in self.retrievers])
        return self.fuse(rankings, k), rankings

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        k = clip_k(k, self.corpus_size)
        depth = self._depth(k)
        per_retriever = run_together([lambda r=r: r.search_many(list(questions), depth) for r in self.retrievers])
        return [self.fuse([runs[i] for runs in per_retriever], k) for i in range(len(questions))]
