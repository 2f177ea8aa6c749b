"""BM25 tuning: one tokenised corpus (:class:`TermMatrix`), BM25 weights for any ``(k1, b)`` in
one vectorised pass, and the paper's grid search (:func:`tune_bm25`). See :mod:`bsard_demo.tuning`."""
from __future__ import annotations

import time
from dataclasses import replace
from itertools import product
from typing import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..analyzer import article_texts
from ..dataset import Dataset
from ..retrievers.base import Hit, Progress, id_ranks, report_progress
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION
from ..retrievers.bm25 import BM25Settings
from ..retrievers.bm25_weights import TermCounts, analyse, query_counts, sorted_vocabulary
from ..retrievers.kinds import BM25
from ..retrievers.registry import RetrieverSpec
from .result import DEFAULT_MEASURE, TuneResult, TuneTarget, as_measure, pick_best, run_command, split_questions

#: The BSARD paper's grid (Louis & Spanakis, 2022, section 5.1): k1 from 0 to 8 by 0.5, b from 0
#: to 1 by 0.1. Written as exact quotients so that ``--b 0.3`` on a command line is the same float.
K1_GRID: tuple[float, ...] = tuple(i / 2 for i in range(17))
B_GRID: tuple[float, ...] = tuple(i / 10 for i in range(11))
#: Questions scored per sparse product (bounds memory: this many × the corpus size in float64).
_QUERY_BATCH = 128


class TermMatrix(TermCounts):
    """One tokenised corpus (:class:`~bsard_demo.retrievers.bm25_weights.TermCounts`, the BM25
    retriever's own term counts and formulas): BM25 weights for any ``(k1, b)`` and method in one
    vectorised pass (:meth:`weights`), questions as term counts (:meth:`query_matrix`) and their
    top articles in the retriever's order (:meth:`top`).

    ``settings`` fixes the analysis and the fields (its ``k1``/``b`` are not used)."""

    def __init__(self, article_ids: Sequence[str], tokens: Sequence[Sequence[str]], settings: BM25Settings):
        if not len(article_ids):
            raise ValueError("no articles to index")
        if len(tokens) != len(article_ids):
            raise ValueError(f"{len(tokens)} token lists for {len(article_ids)} articles")
        if not any(tokens):
            raise ValueError("the articles hold no indexable word")
        self.settings = settings
        self.analyzer = settings.analyzer()
        self.article_ids = [str(a) for a in article_ids]
        self.id_rank = id_ranks(self.article_ids)
        self.vocab = sorted_vocabulary(tokens)  # the retriever's numbering: same summation order
        vocab = self.vocab
        super().__init__([[vocab[t] for t in doc] for doc in tokens], len(vocab))

    @classmethod
    def build(cls, articles, settings: BM25Settings | None = None, *, progress: Progress | None = None) -> "TermMatrix":
        """Analyse ``articles`` (a DataFrame in the dataset schema) once, as BM25 does."""
        settings = settings or BM25Settings()
        if articles is None or len(articles) == 0:
            raise ValueError("no articles to index")
        tokens = analyse(article_texts(articles, settings.fields), settings.analyzer(), progress)
        return cls([str(a) for a in articles["id"]], tokens, settings)

    @property
    def size(self) -> int:
        return len(self.article_ids)

    def weights(self, k1: float, b: float, method: str = "lucene") -> sp.csr_matrix:
        """The BM25 weight of every (term, article) pair, terms × articles (the retriever's,
        :meth:`TermCounts.weights`), after the product's validation of the values."""
        BM25Settings(k1=k1, b=b, method=method)
        return super().weights(k1, b, method)

    def query_matrix(self, query_tokens: Sequence[Sequence[str]]) -> sp.csr_matrix:
        """Questions × terms counts, as the BM25 retriever builds them (:func:`query_counts`)."""
        return query_counts(query_tokens, self.vocab, len(self.vocab))

    def top(self, queries: sp.csr_matrix, weights: sp.csr_matrix, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(article positions, scores)`` of the top ``k`` of each question row, in the BM25
        retriever's order (score descending, ties by article id descending as strings; articles
        sharing no term with the question score 0 and come last).

        Same result as :func:`~bsard_demo.retrievers.base.rank_all` over the dense score row,
        computed on the sparse one: only articles with a positive score are partitioned, and the
        zero-score tail is the id-descending order of the others (BM25 scores are never negative)."""
        k = min(int(k), self.size)
        by_id_desc = self._by_id_desc()
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, queries.shape[0], _QUERY_BATCH):
            scores = queries[start:start + _QUERY_BATCH] @ weights  # csr, summed in term order
            for i in range(scores.shape[0]):
                lo, hi = scores.indptr[i], scores.indptr[i + 1]
                values, docs = scores.data[lo:hi], scores.indices[lo:hi]
                positive = values > 0
                values, docs = values[positive], docs[positive].astype(np.int64)
                if len(values) > k:
                    kth = np.partition(values, len(values) - k)[len(values) - k]
                    keep = values >= kth
                    values, docs = values[keep], docs[keep]
                order = np.lexsort((-self.id_rank[docs], -values))[:k]
                docs, values = docs[order], values[order]
                if len(docs) < k:  # the tail: zero scores, ids descending, minus those above
                    tail = by_id_desc[:k]
                    tail = tail[~np.isin(tail, docs)][:k - len(docs)]
                    docs = np.concatenate([docs, tail])
                    values = np.concatenate([values, np.zeros(len(tail))])
                out.append((docs, values))
        return out

    def rankings(self, queries: sp.csr_matrix, weights: sp.csr_matrix, k: int) -> list[list[Hit]]:
        """:meth:`top` as :class:`~bsard_demo.retrievers.base.Hit` lists (the retriever's output)."""
        ids = self.article_ids
        return [[Hit(ids[d], float(s)) for d, s in zip(docs.tolist(), values.tolist())]
                for docs, values in self.top(queries, weights, k)]

    def _by_id_desc(self) -> np.ndarray:
        if not hasattr(self, "_id_desc"):
            self._id_desc = np.argsort(-self.id_rank, kind="stable")
        return self._id_desc


def tune_bm25(dataset: Dataset, split: str = "train", *, measure: str | TuneTarget = DEFAULT_MEASURE,
              settings: BM25Settings | None = None, k1_grid: Sequence[float] = K1_GRID,
              b_grid: Sequence[float] = B_GRID, with_description: bool = DEFAULT_WITH_DESCRIPTION,
              data: str | None = None, progress: Progress | None = None,
              matrix: TermMatrix | None = None) -> TuneResult:
    """Grid search of BM25's ``k1`` × ``b`` on ``split`` (conventions: docs/design.md, 'bsard_demo/tuning/__init__.py').

    ``settings``: the starting BM25 (analysis, fields, method; its k1 and b are the "start"
    point, scored too when off the grid). ``data``: the dataset spec written into the command
    line. ``matrix``: a :class:`TermMatrix` of the same corpus and settings, to reuse.
    Raises :class:`~bsard_demo.dataset.DataError` (no corpus, unknown split, nothing labelled)
    and :class:`ValueError` (bad measure or grid values)."""
    t0 = time.perf_counter()
    m = as_measure(measure)
    start = settings or BM25Settings()
    if start.engine != "bm25s":
        raise ValueError("tuning reproduces the bm25s engine (the default); rank_bm25 ranks the same")
    k1_grid = sorted({float(k) for k in k1_grid})
    b_grid = sorted({float(b) for b in b_grid})
    if not k1_grid or not b_grid:
        raise ValueError("give at least one k1 and one b")
    for k1, b in product(k1_grid, b_grid):
        BM25Settings(k1=k1, b=b)  # raises on out-of-range values
    qids, texts, qrels = split_questions(dataset, split, with_description)
    stages: dict[str, float] = {}
    if matrix is None:
        matrix = TermMatrix.build(dataset.articles, start, progress=progress)
    elif (matrix.settings.fields, matrix.analyzer.settings()) != (start.fields, start.analyzer().settings()) \
            or matrix.article_ids != [str(a) for a in dataset.articles["id"]]:
        raise ValueError("the term matrix was built with other fields/analysis or over another corpus")
    stages["tokenise corpus"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    queries = matrix.query_matrix([matrix.analyzer.tokens(t) for t in texts])
    depth = min(m.k, matrix.size)
    points = list(product(k1_grid, b_grid))
    if (start.k1, start.b) not in points:
        points.append((start.k1, start.b))
    rows = []
    for i, (k1, b) in enumerate(points):
        report_progress(progress, i, len(points), f"BM25 grid ({len(points)} settings)")
        ids = matrix.article_ids
        top = matrix.top(queries, matrix.weights(k1, b, start.method), depth)
        run = {q: [ids[d] for d in docs.tolist()] for q, (docs, _) in zip(qids, top)}
        rows.append({"k1": k1, "b": b, **m.evaluate(qrels, run)})
    report_progress(progress, len(points), len(points), f"BM25 grid ({len(points)} settings)")
    stages["grid"] = time.perf_counter() - t1
    grid_rows = rows[:len(k1_grid) * len(b_grid)]
    grid = pd.DataFrame(grid_rows)
    start_row = next(r for r in rows if (r["k1"], r["b"]) == (start.k1, start.b))
    best = pick_best(grid_rows, m.name,
                      lambda r: (((r["k1"] - start.k1) / 0.5) ** 2 + ((r["b"] - start.b) / 0.1) ** 2, r["k1"], r["b"]))
    if start_row[m.name] > best[m.name]:  # an off-grid start that beats the whole grid
        best = start_row
    best_settings = replace(start, k1=best["k1"], b=best["b"])
    spec = RetrieverSpec(BM25.name, _bm25_options(best_settings))
    command, notes = run_command(spec, data, with_description=with_description)
    return TuneResult(kind=BM25.name, measure=m.name, dataset=dataset.name, split=split, questions=len(qids), grid=grid,
                      setting_columns=("k1", "b"), best={"k1": best["k1"], "b": best["b"]}, best_value=best[m.name],
                      start={"k1": start.k1, "b": start.b}, start_value=start_row[m.name], spec=spec, command=command,
                      seconds=time.perf_counter() - t0, notes=notes, stages=stages)


def _bm25_options(s: BM25Settings) -> dict:
    """The non-default fields of ``s`` as RetrieverSpec options."""
    default = BM25Settings()
    return {name: getattr(s, name) for name in BM25Settings.__dataclass_fields__
            if getattr(s, name) != getattr(default, name)}

