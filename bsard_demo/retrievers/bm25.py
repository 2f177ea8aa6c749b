"""BM25 over the French analyzer, on ``bm25s`` (default) or ``rank_bm25`` (reference engine).

Defaults (:class:`BM25Settings`): ``k1=1.0, b=0.6`` (the values the BSARD paper tuned on its train questions), headers
indexed (:data:`~bsard_demo.analyzer.DEFAULT_FIELDS`), Snowball stemming on, ``method`` ``"lucene"`` on bm25s
(``rank_bm25`` supports ``"robertson"`` only). Weights: :mod:`bsard_demo.retrievers.bm25_weights`; figures:
docs/effectiveness.md; speed: docs/benchmarks.md, "Retrieval".

Conventions (hits, scores, tokens, reproducibility, cache) and speed: docs/design.md, 'bsard_demo/retrievers/bm25.py'.
"""
from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from .. import cache
from ..analyzer import DEFAULT_FIELDS, Analyzer, article_texts
from ..frame_memo import frame_memo
from .base import Hit, Progress, Step, clip_k, id_ranks, rank_rows, ranked_hits, report_progress
from .bm25_weights import TermCounts, analyse, query_counts, sorted_vocabulary

ENGINES = ("bm25s", "rank_bm25")
METHODS = ("lucene", "robertson")
CACHE_KIND = "bm25s"
#: 2: terms numbered in sorted order (:func:`sorted_vocabulary`), not in hash order.
_CACHE_FORMAT = 2
_QUERY_BATCH = 64


@dataclass(frozen=True)
class BM25Settings:
    """Everything that shapes a BM25 index. ``method=None`` means ``"lucene"`` on bm25s and
    ``"robertson"`` (the only one it has) on rank_bm25."""

    k1: float = 1.0
    b: float = 0.6
    method: str | None = None
    engine: str = "bm25s"
    fields: tuple[str, ...] = DEFAULT_FIELDS
    stem: bool = True
    stopwords: bool = True
    keep_numbers: bool = True

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown BM25 engine {self.engine!r}; choose {' or '.join(ENGINES)}")
        method = self.method or ("lucene" if self.engine == "bm25s" else "robertson")
        if method not in METHODS:
            raise ValueError(f"unknown BM25 method {method!r}; choose {' or '.join(METHODS)}")
        if self.engine == "rank_bm25" and method != "robertson":
            raise ValueError("the rank_bm25 engine implements method 'robertson' only")
        if not (self.k1 >= 0):
            raise ValueError(f"k1 must be >= 0, not {self.k1}")
        if not (0 <= self.b <= 1):
            raise ValueError(f"b must be between 0 and 1, not {self.b}")
        fields = (self.fields,) if isinstance(self.fields, str) else tuple(self.fields)
        if not fields:
            raise ValueError("index at least one article field")
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "k1", float(self.k1))
        object.__setattr__(self, "b", float(self.b))

    def analyzer(self) -> Analyzer:
        return Analyzer(stem=self.stem, stopwords=self.stopwords, keep_numbers=self.keep_numbers)

    @property
    def label(self) -> str:
        """e.g. ``"bm25 k1=1 b=0.6 lucene"``; non-default analysis/fields are appended."""
        parts = [f"bm25 k1={self.k1:g} b={self.b:g} {self.method}"]
        if self.engine != "bm25s":
            parts.append(self.engine)
        if self.fields != DEFAULT_FIELDS:
            parts.append("fields=" + "+".join(self.fields))
        parts += [flag for flag, on in (("nostem", not self.stem), ("nostop", not self.stopwords),
                                        ("nonumbers", not self.keep_numbers)) if on]
        return " ".join(parts)


class BM25Retriever:
    """BM25 over a corpus of articles. Build with :meth:`build`; implements the Retriever protocol."""

    def __init__(self, article_ids: Sequence[str], settings: BM25Settings, *, bm25s_index=None, okapi=None):
        self.article_ids = [str(a) for a in article_ids]
        self.settings = settings
        self.analyzer = settings.analyzer()
        self.name = settings.label
        self._bm25s = bm25s_index
        self._okapi = okapi
        self._id_rank = id_ranks(self.article_ids)
        self._matrix_t = None
        if bm25s_index is not None:
            s = bm25s_index.scores
            n_terms = len(s["indptr"]) - 1
            # bm25s stores a docs × terms CSC matrix of per-term scores; its transpose is CSR.
            self._matrix_t = sp.csr_matrix((s["data"], s["indices"], s["indptr"]), shape=(n_terms, s["num_docs"]))

    @property
    def size(self) -> int:
        return len(self.article_ids)

    # -- building ---------------------------------------------------------------------------
    @classmethod
    def build(cls, articles, settings: BM25Settings | None = None, *, cache_root: Path | None = None,
              use_cache: bool = True, progress: Progress | None = None,
              notice: Callable[[str], None] | None = None, **overrides) -> "BM25Retriever":
        """Index ``articles`` (a DataFrame in the dataset schema). ``overrides`` replace fields of
        ``settings`` (e.g. ``k1=1.2``). The bm25s engine is loaded from / stored in the cache
        unless ``use_cache`` is false."""
        settings = _settings(settings, overrides)
        if articles is None or len(articles) == 0:
            raise ValueError("no articles to index")
        ids = [str(a) for a in articles["id"]]
        if settings.engine == "rank_bm25":
            return cls._build_okapi(ids, article_texts(articles, settings.fields), settings, progress)
        key = stored_key(articles, ids, settings)
        return cache.load_or_build(
            CACHE_KIND, key, read=lambda folder: cls._read(folder, ids, settings),
            build=lambda: cls(ids, settings, bm25s_index=_bm25s_index(
                cls._tokenize(article_texts(articles, settings.fields), settings, progress), settings, progress)),
            write=lambda retriever, folder: retriever._write(folder), what="BM25 index",
            use_cache=use_cache, root=cache_root, notice=notice, progress=progress)

    @classmethod
    def is_stored(cls, articles, settings: BM25Settings | None = None, *, cache_root: Path | None = None,
                  **overrides) -> bool:
        """Whether :meth:`build` with these settings would only load the index (from an active
        index bundle or the cache); ``False`` for rank_bm25, which is never stored. Never raises."""
        try:
            settings = _settings(settings, overrides)
        except (TypeError, ValueError):
            return False
        if settings.engine == "rank_bm25" or articles is None or len(articles) == 0:
            return False
        key = stored_key(articles, [str(a) for a in articles["id"]], settings)
        return cache.is_stored(CACHE_KIND, key, cache_root, what="BM25 index")

    @staticmethod
    def _tokenize(texts: Sequence[str], settings: BM25Settings, progress: Progress | None) -> list[list[str]]:
        return analyse(texts, settings.analyzer(), progress)

    @classmethod
    def _build_okapi(cls, ids, texts, settings, progress) -> "BM25Retriever":
        from rank_bm25 import BM25Okapi  # the reference engine only (never the product's default)

        tokens = cls._tokenize(texts, settings, progress)
        report_progress(progress, 0, 1, Step("indexing", engine="rank_bm25"))
        okapi = BM25Okapi(tokens, k1=settings.k1, b=settings.b, epsilon=0.0)
        report_progress(progress, 1, 1, Step("indexing", engine="rank_bm25"))
        return cls(ids, settings, okapi=okapi)

    def _write(self, folder: Path) -> None:
        self._bm25s.save(str(folder / "bm25s"), show_progress=False)
        (folder / "ids.json").write_text(json.dumps(self.article_ids))

    @classmethod
    def _read(cls, folder: Path, ids: list[str], settings: BM25Settings) -> "BM25Retriever":
        bm25s = _bm25s()
        stored_ids = json.loads((folder / "ids.json").read_text())
        if stored_ids != ids:
            raise ValueError("article ids differ from the corpus")
        index = bm25s.BM25.load(str(folder / "bm25s"), show_progress=False)
        if index.scores["num_docs"] != len(ids):
            raise ValueError("document count differs from the corpus")
        return cls(ids, settings, bm25s_index=index)

    # -- searching --------------------------------------------------------------------------
    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        return [ranked_hits(rows, scores, self.article_ids) for rows, scores in self.search_rows(questions, k)]

    def search_rows(self, questions: Sequence[str], k: int = 100) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search_many` as arrays: each question's ``(corpus rows, scores)`` (:func:`~.base.rank_rows`)."""
        k = clip_k(k, self.size)
        tokens = [self.analyzer.tokens(q) for q in questions]
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, len(tokens), _QUERY_BATCH):
            scores = self.score_matrix(tokens[start:start + _QUERY_BATCH])
            out.extend(rank_rows(row, self._id_rank, k) for row in scores)
        return out

    def score_matrix(self, query_tokens: Sequence[Sequence[str]]) -> np.ndarray:
        """Scores of every article (columns, corpus order) for each analyzed query (rows).
        A term repeated in a query counts each time, as in bm25s and rank_bm25."""
        if self._okapi is not None:
            scale = 1.0 / (self.settings.k1 + 1.0)
            rows = [self._okapi.get_scores(list(q)) * scale for q in query_tokens]
            return np.array(rows).reshape(len(query_tokens), self.size)
        # bm25s's extra empty term "" is numbered n_terms: it has no column
        counts = query_counts(query_tokens, self._bm25s.vocab_dict, self._matrix_t.shape[0], self._matrix_t.dtype)
        return (counts @ self._matrix_t).toarray()


def cache_key(ids: Sequence[str], texts: Sequence[str], settings: BM25Settings) -> str:
    """Fingerprint of the ids, the indexed texts, the settings and the analyzer/bm25s versions."""
    return cache.fingerprint((f"{i}\x1f{t}" for i, t in zip(ids, texts)), _key_settings(settings))


def _key_settings(settings: BM25Settings) -> dict:
    return {**asdict(settings), **settings.analyzer().settings(), "bm25s": _bm25s().__version__,
            "format": _CACHE_FORMAT}


def stored_key(articles, ids: Sequence[str], settings: BM25Settings) -> str:
    """:func:`cache_key` of the frame ``articles`` (``ids``: its ids as text), memoised per frame
    and settings (:func:`~bsard_demo.frame_memo.frame_memo`)."""
    meta = json.dumps(_key_settings(settings), sort_keys=True, default=str)
    return frame_memo(articles, ("bm25_cache_key", meta),
                      lambda: cache_key(ids, article_texts(articles, settings.fields), settings))


def _settings(settings: BM25Settings | None, overrides: dict) -> BM25Settings:
    """``settings`` (default :class:`BM25Settings`) with ``overrides``; a new engine without a
    method takes its own default method."""
    if "engine" in overrides and "method" not in overrides:
        overrides = {**overrides, "method": None}  # the new engine's default method
    return replace(settings or BM25Settings(), **overrides) if overrides else (settings or BM25Settings())


def _bm25s():
    """The bm25s module, imported on first use."""
    import bm25s  # ~1.4 s of imports that evaluate and the Score page never need

    return bm25s


def _bm25s_index(tokens: list[list[str]], settings: BM25Settings, progress: Progress | None):
    bm25s = _bm25s()
    report_progress(progress, 0, 1, Step("indexing", engine="bm25s"))
    index = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method, dtype="float64")
    vocab = sorted_vocabulary(tokens)
    token_ids = [[vocab[t] for t in doc] for doc in tokens]
    # (ids, vocabulary): bm25s takes our numbering as it is (no re-tokenising, no set order), and
    # its documented hook build_index_from_ids gets the weights of this package's formulas
    index.build_index_from_ids = functools.partial(_bm25s_scores, index)
    try:
        index.index((token_ids, vocab), show_progress=False)
    finally:
        del index.build_index_from_ids  # a plain bm25s index from here on
    report_progress(progress, 1, 1, Step("indexing", engine="bm25s"))
    return index


def _bm25s_scores(index, unique_token_ids, corpus_token_ids, show_progress=True, leave_progress=False) -> dict:
    """bm25s's ``scores`` of ``index`` from :meth:`TermCounts.weight_arrays`: a terms × docs CSR
    matrix is bm25s's docs × terms CSC one, the same three arrays and dtypes."""
    index.nonoccurrence_array = None  # lucene and robertson have none
    counts = TermCounts(corpus_token_ids, len(unique_token_ids))
    data, indices, indptr = counts.weight_arrays(index.k1, index.b, index.method)
    return {"data": data, "indices": indices, "indptr": indptr, "num_docs": len(corpus_token_ids)}
