"""The structure of a code, derived from the corpus itself (:class:`ArticleGraph`: each article's section, position,
siblings and cross-references), and a re-scoring that follows it (:func:`rescore`, :class:`StructureRetriever`): an
answer is usually a run of neighbouring articles of one section (frlaw-dev: 67 % of the gold articles of
multi-article answers have another gold article right next to them in corpus order, 75 % share their section with
another). :class:`StructureSettings` holds the weights, decided on frlaw-dev's train split (docs/effectiveness.md,
"Structure re-scoring"). Pure numpy: no model, no torch.

The graph and the re-scoring formula: docs/design.md, 'bsard_demo/retrievers/structure.py'.
"""
from __future__ import annotations

import re
import threading
import weakref
from dataclasses import asdict, dataclass
from typing import Callable, Hashable, Mapping, Sequence, TypeVar

import numpy as np

from .. import cache
from ..frame_memo import frame_memo
from .base import Hit, clip_k, id_ranks, rank_rows

T = TypeVar("T")

#: The header columns of the schema, from the widest to the narrowest.
HEADER_COLUMNS = ("code", "book", "part", "act", "chapter", "section", "subsection")
#: The widest sibling window the graph precomputes.
MAX_WINDOW = 4
#: A cited article in a text: "article 12", "articles L. 2242-1" (its number in group 1).
MENTION = re.compile(r"\barticles?\s+((?:[A-Z]{1,2}\.?\s?\*{0,2}\s?)?\d+(?:[-‑]\d+)*)", re.IGNORECASE)
_REFERENCE = re.compile(r"^\s*art(?:icle)?\.?\s*([^,]+)", re.IGNORECASE)
#: Where a mention can start: every match of :data:`MENTION` begins with this word (no two overlap).
_ARTICLE = re.compile("article", re.IGNORECASE)


def article_number(text: str) -> str:
    """A cited or referenced article number in one form: ``"L. 2242-1"`` -> ``"L2242-1"``."""
    return re.sub(r"[\s.*]", "", str(text or "")).replace("‑", "-").upper()


def section_keys(articles) -> list[tuple[str, ...]]:
    """Each article's header path (the :data:`HEADER_COLUMNS` the frame has, blanks stripped)."""
    columns = [c for c in HEADER_COLUMNS if c in articles.columns]
    if not columns:
        return [("",)] * len(articles)
    values = articles[columns].fillna("").astype(str)
    lists = [values.iloc[:, k].tolist() for k in range(values.shape[1])]  # itertuples' rows, 2.5x faster
    return [tuple(v.strip() for v in row) for row in zip(*lists)]


@dataclass(frozen=True)
class StructureSettings:
    """The weights of :func:`rescore` (docs/design.md, 'bsard_demo/retrievers/structure.py'); all 0 leaves a
    ranking unchanged. The defaults are the best of 312 grid points on frlaw-dev train by R@100 + MAP@100 over BM25 +
    adapter + neighbours (bench/structure_cv.py at 545f377; 5-fold cross-validation of that choice: held-out
    R@100 67.70, MAP@100 23.74 against 62.19 / 22.04 without it; docs/effectiveness.md,
    "Structure re-scoring")."""

    sibling: float = 0.3
    section: float = 0.3
    refs: float = 0.5
    window: int = 1
    decay: float = 0.5
    depth: int = 1000

    def check(self) -> "StructureSettings":
        for name in ("sibling", "section", "refs"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 <= value < float("inf")):
                raise ValueError(f"structure: {name} must be a finite number >= 0, not {value!r}")
        if not (isinstance(self.window, int) and 1 <= self.window <= MAX_WINDOW):
            raise ValueError(f"structure: window must be a whole number from 1 to {MAX_WINDOW}, not {self.window!r}")
        if not (isinstance(self.decay, (int, float)) and 0 <= self.decay <= 1):
            raise ValueError(f"structure: decay must be a number from 0 to 1, not {self.decay!r}")
        if not (isinstance(self.depth, int) and self.depth >= 1):
            raise ValueError(f"structure: depth must be a whole number >= 1, not {self.depth!r}")
        return self

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_options(cls, options: Mapping[str, object] | None) -> "StructureSettings":
        """From a spec's ``structure`` options (unknown keys refused in one line)."""
        options = dict(options or {})
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"structure: unknown option(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(cls.__dataclass_fields__)}")
        return cls(**options).check()

    def label(self) -> str:
        parts = [f"sibling={self.sibling:g}"]
        if self.sibling and self.window != 1:
            parts.append(f"window={self.window}")
        if self.section:
            parts.append(f"section={self.section:g}")
        if self.refs:
            parts.append(f"refs={self.refs:g}")
        return "structure " + " ".join(parts)


class ArticleGraph:
    """Sections, positions, siblings and cross-references of a corpus (docs/design.md,
    'bsard_demo/retrievers/structure.py'), over the corpus positions ``0 … n-1`` of ``articles`` (a DataFrame
    in the dataset schema)."""

    def __init__(self, articles, *, cross_references: bool = True):
        self.article_ids = [str(a) for a in articles["id"]]
        n = len(self.article_ids)
        keys = section_keys(articles)
        index: dict[tuple[str, ...], int] = {}
        #: each section's header path (:func:`section_keys`), by section number; blank for a headerless article's
        self.section_paths: list[tuple[str, ...]] = []
        self.section = np.empty(n, dtype=np.int64)
        for i, key in enumerate(keys):
            # an article without any header is a section of its own
            self.section[i] = s = index.setdefault(key if any(key) else ("\x00", str(i)), len(index))
            if s == len(self.section_paths):
                self.section_paths.append(key)
        self.n_sections = len(index)
        self.section_size = np.bincount(self.section, minlength=self.n_sections)
        self.position = np.zeros(n, dtype=np.int64)
        members: list[list[int]] = [[] for _ in range(self.n_sections)]
        for i, s in enumerate(self.section):
            self.position[i] = len(members[s])
            members[s].append(i)
        self.members = [np.asarray(m, dtype=np.int64) for m in members]
        # siblings[i, d - 1] / siblings[i, MAX_WINDOW + d - 1]: the article d before / after i in its section
        self.siblings = np.full((n, 2 * MAX_WINDOW), -1, dtype=np.int64)
        for rows in self.members:
            for d in range(1, MAX_WINDOW + 1):
                if len(rows) > d:
                    self.siblings[rows[d:], d - 1] = rows[:-d]
                    self.siblings[rows[:-d], MAX_WINDOW + d - 1] = rows[d:]
        self.cites = _cross_references(articles) if cross_references else [np.zeros(0, dtype=np.int64)] * n
        lengths = np.array([len(c) for c in self.cites], dtype=np.int64)
        self._cite_end = np.cumsum(lengths)
        self._cite_start = self._cite_end - lengths
        self._cite_flat = np.concatenate(self.cites).astype(np.int64) if lengths.sum() else np.zeros(0, dtype=np.int64)
        self._id_rank = id_ranks(self.article_ids)
        self.row_of = {a: i for i, a in enumerate(self.article_ids)}
        self._memo: dict = {}

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per graph and ``key``: what other modules derive from the corpus' structure
        (:func:`bsard_demo.evaluation.misses.hierarchy_of`) lives as long as the graph in :func:`graph_of`'s
        cache, without a cache of its own."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def __len__(self) -> int:
        return len(self.article_ids)

    def neighbours_within(self, row: int, window: int) -> list[int]:
        """The articles at distance 1 … ``window`` of ``row`` in its section, nearest first."""
        out = []
        for d in range(1, min(window, MAX_WINDOW) + 1):
            out += [int(r) for r in (self.siblings[row, d - 1], self.siblings[row, MAX_WINDOW + d - 1]) if r >= 0]
        return out

    def propagate(self, rows: np.ndarray, scores: np.ndarray, window: int = 1, decay: float = 0.5):
        """The propagated terms of :func:`rescore` for candidates ``rows`` with normalised scores
        ``scores`` (non-negative): ``(sib, sec, ref)``, dense arrays over the corpus (``sec`` is
        0 for articles not among ``rows``)."""
        rows = np.asarray(rows, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        n = len(self)
        sib = np.zeros(n)
        for d in range(1, window + 1):
            value = scores * decay ** (d - 1)
            for column in (d - 1, MAX_WINDOW + d - 1):
                targets = self.siblings[rows, column]
                ok = targets >= 0
                np.maximum.at(sib, targets[ok], value[ok])
        sec = np.zeros(n)
        if len(rows):
            order = np.argsort(-scores, kind="stable")
            sections = self.section[rows[order]]
            _, first = np.unique(sections, return_index=True)
            best = np.zeros(self.n_sections)
            best[sections[first]] = scores[order][first]
            rest = np.ones(len(order), dtype=bool)
            rest[first] = False
            second = np.zeros(self.n_sections)
            _, again = np.unique(sections[rest], return_index=True)
            second[sections[rest][again]] = scores[order][rest][again]
            is_first = ~rest
            own = np.where(is_first, second[sections], best[sections])
            sec[rows[order]] = own
        ref = np.zeros(n)
        counts = self._cite_end[rows] - self._cite_start[rows]
        if counts.sum():
            starts = np.repeat(self._cite_start[rows] - np.cumsum(counts) + counts, counts)
            targets = self._cite_flat[np.arange(counts.sum()) + starts]
            np.maximum.at(ref, targets, np.repeat(scores, counts))
        return sib, sec, ref


def mentions(text: str) -> list[str]:
    """The cited numbers of ``text``: ``MENTION.findall(text)``, the pattern tried only where the
    word "article" starts (where every match starts; ``match`` at a position reads the character
    before it for ``\\b`` as ``findall`` does), in order and without overlap: a third of the
    time over 29k articles, whose words ``findall`` would each try."""
    out, end = [], 0
    for word in _ARTICLE.finditer(text):
        if word.start() < end:
            continue
        found = MENTION.match(text, word.start())
        if found:
            out.append(found.group(1))
            end = found.end()
    return out


def _cross_references(articles) -> list[np.ndarray]:
    """For each article, the corpus positions of the articles of its code its text cites."""
    n = len(articles)
    if "reference" not in articles.columns or "article" not in articles.columns:
        return [np.zeros(0, dtype=np.int64)] * n
    codes = articles["code"].fillna("").astype(str).tolist() if "code" in articles.columns else [""] * n
    where: dict[tuple[str, str], int] = {}
    for i, (reference, code) in enumerate(zip(articles["reference"].fillna("").astype(str), codes)):
        match = _REFERENCE.match(reference)
        if match:
            where.setdefault((code, article_number(match.group(1))), i)
    out, numbers = [], {}  # numbers: each cited form's article_number, once (the same few recur)
    for i, (text, code) in enumerate(zip(articles["article"].fillna("").astype(str).tolist(), codes)):
        cited = {where.get((code, numbers.get(m) or numbers.setdefault(m, article_number(m)))) for m in mentions(text)}
        cited.discard(None)
        cited.discard(i)
        out.append(np.array(sorted(cited), dtype=np.int64))
    return out


def rescore_rows(graph: ArticleGraph, rows: np.ndarray, scores: np.ndarray, settings: StructureSettings,
                 k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rescore` over corpus rows: ``rows`` (distinct, best first) with their ``scores``
    give the ``k`` best rows and their new scores (ties by article id descending)."""
    rows = np.asarray(rows, dtype=np.int64)[:settings.depth]
    values = np.asarray(scores, dtype=np.float64)[:settings.depth]
    top = values.max() if len(values) else 0.0
    if not (top > 0) or not (settings.sibling or settings.section or settings.refs):
        return rows[:k], values[:k]
    base = np.clip(values / top, 0.0, None)
    sib, sec, ref = graph.propagate(rows, base, window=settings.window, decay=settings.decay)
    total = settings.sibling * sib + settings.section * sec + settings.refs * ref
    total[rows] += base
    candidates = np.union1d(rows, np.flatnonzero(total > 0))
    chosen = rank_rows(total[candidates], graph._id_rank, k, rows=candidates)[0]
    return chosen, total[chosen]


def rescore(graph: ArticleGraph, hits: Sequence[Hit], settings: StructureSettings, k: int) -> list[Hit]:
    """``hits`` (one question's ranking, best first) re-scored along ``graph`` by ``settings``
    (docs/design.md, 'bsard_demo/retrievers/structure.py'), cut to ``k``. Hits of articles outside the graph
    are dropped; an empty or all-zero ranking is returned as it is (cut to ``k``)."""
    if not (settings.sibling or settings.section or settings.refs):
        return list(hits[:k])
    rows, scores, seen = [], [], set()
    for hit in hits[:settings.depth]:
        row = graph.row_of.get(hit.article_id)
        if row is not None and row not in seen:
            seen.add(row)
            rows.append(row)
            scores.append(float(hit.score))
    if not scores or not max(scores) > 0:
        return list(hits[:k])
    chosen, values = rescore_rows(graph, np.asarray(rows, dtype=np.int64), np.asarray(scores), settings, k)
    return [Hit(graph.article_ids[r], float(v)) for r, v in zip(chosen, values)]


class StructureRetriever:
    """``inner`` (any retriever, typically a hybrid) with its ranking re-scored along ``graph``
    (:func:`rescore`): ``inner`` is searched :attr:`StructureSettings.depth` deep (at least
    ``k``), then re-scored and cut to ``k``."""

    def __init__(self, inner, graph: ArticleGraph, settings: StructureSettings):
        self.inner, self.graph, self.settings = inner, graph, settings.check()
        self.name = f"{inner.name} + {settings.label()}"
        self.retrievers = getattr(inner, "retrievers", [inner])

    @property
    def size(self) -> int:
        return len(self.graph)

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def search_parts(self, question: str, k: int = 100):
        """:meth:`search` with the inner hybrid's parts' rankings (``None`` for another inner)."""
        k = clip_k(k, len(self.graph))
        if not hasattr(self.inner, "search_parts"):
            return self.search(question, k), None
        hits, parts = self.inner.search_parts(question, max(k, min(self.settings.depth, len(self.graph))))
        return rescore(self.graph, hits, self.settings, k), parts

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        k = clip_k(k, len(self.graph))
        runs = self.inner.search_many(list(questions), max(k, min(self.settings.depth, len(self.graph))))
        return [rescore(self.graph, hits, self.settings, k) for hits in runs]


_GRAPHS: dict = {}
#: The process' first graph, its frame not fingerprinted yet: ``(weak reference, shape and columns, graph)``.
_FIRST: list = []
_graphs_lock = threading.Lock()


def graph_of(articles) -> ArticleGraph:
    """The :class:`ArticleGraph` of ``articles``, built once per process and corpus: once per frame
    (:func:`~bsard_demo.frame_memo.frame_memo`), and a frame of the same content as one seen before
    (the ids, the header columns and the texts fingerprinted) reuses its graph, so a page rerun,
    a second run or the ranker beside a hybrid reuses it. The process' first frame is
    fingerprinted only when a second one comes (a cold start has nothing to compare it with)."""
    return frame_memo(articles, "graph", lambda: _graph_by_content(articles))


def _frame_shape(frame) -> tuple:
    return tuple(frame.shape), tuple(str(c) for c in frame.columns)


def _content_key(articles) -> str:
    def fingerprint() -> str:
        columns = [c for c in ("id", "reference", "article", *HEADER_COLUMNS) if c in articles.columns]
        rows = zip(*(articles[c].tolist() for c in columns))  # the values itertuples gives, a column at a time
        return cache.fingerprint(("\x1f".join(map(str, row)) for row in rows), {"graph": 1, "columns": columns})

    return frame_memo(articles, "graph_key", fingerprint)


def _graph_by_content(articles) -> ArticleGraph:
    with _graphs_lock:
        if not _GRAPHS and not _FIRST:
            graph = ArticleGraph(articles)
            try:
                _FIRST.append((weakref.ref(articles), _frame_shape(articles), graph))
            except TypeError:  # not a frame that can be weakly referenced: keyed now
                _GRAPHS[_content_key(articles)] = graph
            return graph
        while _FIRST:  # another frame: the first one's graph is keyed now, if its frame is still as it was
            ref, shape, first = _FIRST.pop()
            frame = ref()
            if frame is not None and _frame_shape(frame) == shape:
                _GRAPHS.setdefault(_content_key(frame), first)
        key = _content_key(articles)
        graph = _GRAPHS.get(key)
        if graph is None:
            while len(_GRAPHS) >= 4:
                _GRAPHS.pop(next(iter(_GRAPHS)))
            graph = _GRAPHS[key] = ArticleGraph(articles)
        return graph
