"""BM25's weights as pure functions (idf :data:`IDF`, :func:`length_norm`, :func:`tf_saturation`,
:func:`term_weights`), bit-identical to what bm25s 0.3 computes itself, and the term counts of a tokenised corpus they
apply to (:class:`TermCounts`, whose :meth:`~TermCounts.weights` is the score matrix of the BM25 retriever,
:mod:`bsard_demo.retrievers.bm25`, and of the tuning grid, :class:`bsard_demo.tuning.TermMatrix`, for any
``(k1, b)``). :func:`analyse` is the one tokenising path of both, and :func:`query_counts` the one query side.

The formulas: docs/design.md, 'bsard_demo/retrievers/bm25_weights.py'.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from .base import Progress, Step, report_progress

_ANALYSE_STEP = 1000


def idf_lucene(df: int, n_docs: int) -> float:
    """Lucene's idf (bm25s ``_score_idf_lucene``): ``log(1 + (N - df + .5) / (df + .5))``."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def idf_robertson(df: int, n_docs: int) -> float:
    """Robertson's idf floored at 0 (bm25s ``_score_idf_robertson``): ``log((N - df + .5) / (df + .5))``."""
    return math.log(max((n_docs - df + 0.5) / (df + 0.5), 1))


#: The idf of each BM25 method (:data:`bsard_demo.retrievers.bm25.METHODS`).
IDF: dict[str, Callable[[int, int], float]] = {"lucene": idf_lucene, "robertson": idf_robertson}


def idf(doc_freqs: Sequence[int], n_docs: int, method: str = "lucene") -> np.ndarray:
    """The idf of every term (float64), from its document frequency."""
    if method not in IDF:
        raise ValueError(f"unknown BM25 method {method!r}")
    f = IDF[method]
    return np.array([f(d, n_docs) for d in np.asarray(doc_freqs).tolist()], dtype=np.float64)


def length_norm(doc_len, avg_doc_len: float, k1: float, b: float):
    """``k1 * ((1 - b) + b * len / avg_len)``: the denominator term of the tf saturation."""
    return k1 * ((1 - b) + b * doc_len / avg_doc_len)


def tf_saturation(tf, norm):
    """``tf / (norm + tf)`` (bm25s's Robertson/Lucene term-frequency component, ``norm`` from
    :func:`length_norm`)."""
    return tf / (norm + tf)


def term_weights(idf_values, tf, norm):
    """The BM25 weight of (term, article) pairs: ``idf * tf_saturation(tf, norm)``."""
    return idf_values * tf_saturation(tf, norm)


def analyse(texts: Sequence[str], analyzer, progress: Progress | None = None) -> list[list[str]]:
    """The terms of every text by ``analyzer`` (:class:`~bsard_demo.analyzer.Analyzer`), with
    "analysing articles" progress; raises :class:`ValueError` when no text holds a term."""
    out: list[list[str]] = []
    for start in range(0, len(texts), _ANALYSE_STEP):
        report_progress(progress, start, len(texts), Step("analysing_articles"))
        out.extend(analyzer.tokens(t) for t in texts[start:start + _ANALYSE_STEP])
    report_progress(progress, len(texts), len(texts), Step("analysing_articles"))
    if not any(out):
        raise ValueError("the articles hold no indexable word")
    return out


def sorted_vocabulary(tokens: Sequence[Sequence[str]]) -> dict[str, int]:
    """``{term: id}`` over every term of ``tokens``, ids in ascending code-point order of the terms.

    bm25s would number terms in the iteration order of a ``set`` of strings, i.e. by Python's
    per-process hash seed (``PYTHONHASHSEED``): the term ids, hence the column order of the score
    matrix and the order in which a query's term scores are summed, changed from one process to
    the next, and so did the last bits of the scores (near-ties flipped between a CLI run, a rerun
    and the Search page). Sorted terms give every process the same ids, matrix and sums."""
    vocabulary: set[str] = set()
    for doc in tokens:
        vocabulary.update(doc)
    return {term: i for i, term in enumerate(sorted(vocabulary))}


def query_counts(query_tokens: Sequence[Sequence[str]], vocab: Mapping[str, int], n_terms: int,
                 dtype=np.float64) -> sp.csr_matrix:
    """Questions × terms counts (a term repeated in a question counts each time; a term outside
    the vocabulary, or numbered ``>= n_terms`` such as bm25s's empty term, is dropped)."""
    rows, cols = [], []
    for i, q in enumerate(query_tokens):
        for t in q:
            j = vocab.get(t)
            if j is not None and j < n_terms:
                rows.append(i)
                cols.append(j)
    return sp.csr_matrix((np.ones(len(rows), dtype=dtype), (rows, cols)), shape=(len(query_tokens), n_terms))


class TermCounts:
    """Term frequencies of a corpus given as term ids (``token_ids[d]``: the ids of article
    ``d``'s terms, each in ``0 … n_terms - 1``): one entry per distinct (term, article) pair,
    sorted by term then article (CSR order of a terms × articles matrix, which is bm25s's docs ×
    terms CSC order), document frequencies ``df``, article lengths and their mean."""

    def __init__(self, token_ids: Sequence[Sequence[int]], n_terms: int):
        n_docs = len(token_ids)
        lengths = np.fromiter((len(t) for t in token_ids), dtype=np.int64, count=n_docs)
        total = int(lengths.sum())
        term_of = np.fromiter((t for doc in token_ids for t in doc), dtype=np.int64, count=total)
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        pairs, tf = np.unique(term_of * n_docs + doc_of, return_counts=True)
        self.n_docs, self.n_terms = n_docs, int(n_terms)
        self._terms = pairs // n_docs
        self._docs = (pairs % n_docs).astype(np.int32)
        self._tf = tf.astype(np.float64)
        self._indptr = np.concatenate([[0],
                                       np.cumsum(np.bincount(self._terms, minlength=self.n_terms))]).astype(np.int64)
        self.df = np.diff(self._indptr)
        self.doc_len = lengths.astype(np.float64)
        # exactly bm25s's: np.array([len(doc_ids) for doc_ids in corpus_token_ids]).mean()
        self.avg_doc_len = np.array([len(t) for t in token_ids]).mean()
        self._idf: dict[str, np.ndarray] = {}

    def idf(self, method: str = "lucene") -> np.ndarray:
        """Per term: :func:`idf` (cached per method)."""
        if method not in self._idf:
            self._idf[method] = idf(self.df, self.n_docs, method)
        return self._idf[method]

    def weight_arrays(self, k1: float, b: float, method: str = "lucene") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(data, indices, indptr)`` of :meth:`weights` (float64, int32 article positions, int64
        offsets: the arrays and dtypes of a bm25s index's ``scores``)."""
        k1, b = float(k1), float(b)
        norm = length_norm(self.doc_len, self.avg_doc_len, k1, b)
        data = term_weights(np.repeat(self.idf(method), self.df), self._tf, norm[self._docs])
        return data, self._docs, self._indptr

    def weights(self, k1: float, b: float, method: str = "lucene") -> sp.csr_matrix:
        """The BM25 weight of every (term, article) pair, terms × articles: :func:`term_weights`
        with :func:`length_norm` per article."""
        return sp.csr_matrix(self.weight_arrays(k1, b, method), shape=(self.n_terms, self.n_docs))
