"""Where the misses of a run land in the corpus hierarchy (:func:`where_misses_land`): for each question and
cut-off k, each missed gold article (relevant, not in the top k) is classed by the closest article the run did
retrieve in its top k, from the nearest to the farthest (:data:`CLASSES`):

- ``section``: a retrieved article of its section, at most :data:`WINDOW` articles away in corpus order;
- ``chapter``: one of its chapter (same code, book, part, act and chapter);
- ``book``: one of its book or act (same code, book, part and act);
- ``code``: one of its code;
- ``elsewhere``: none of these (also every miss of a question absent from the run);
- ``unknown``: the gold article is not in the corpus, so it cannot be placed.

The hierarchy is the structure re-scoring's (:func:`bsard_demo.retrievers.structure.graph_of`: a section is
an article's whole header path, so an article without section columns has its chapter, or in the 2021
layout its code, as its section; an article without any header is a section of its own; positions count in
corpus order within the section), so it works for any corpus of the schema: a level whose columns are
blank for the gold article (a corpus without chapters, the 2021 layout with its code only) is skipped, never
matched on blanks. The nearest retrieved article is the best-ranked one of the closest class, so a miss's
class can only narrow as k grows.

:data:`WINDOW` = 3: on frlaw-dev train, of the gold articles that share their section with another gold
article of the same question, 97.2 % sit right next to it, 98.9 % within 3 articles, 99.1 % within 4.

Vectorised: one merge per level over the (question, retrieved article) pairs of the deepest k, not a loop
over questions; every k is then read from the best rank per class.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..dataset import DataError
from ..retrievers.structure import HEADER_COLUMNS, ArticleGraph, graph_of
from .scoring import Scoreboard

#: How many articles away in corpus order, within one section, a retrieved article makes a miss a near one.
WINDOW = 3
#: The classes of a miss, nearest first.
CLASSES: tuple[str, ...] = ("section", "chapter", "book", "code", "elsewhere", "unknown")
#: English labels of :data:`CLASSES` (the CLI's tables; the Score page words them in French, app/score_misses.py).
CLASS_LABELS: dict[str, str] = {
    "section": f"same section (within {WINDOW} articles)", "chapter": "same chapter", "book": "same book/act",
    "code": "same code", "elsewhere": "elsewhere", "unknown": "not in the corpus"}
#: The header columns each level of :data:`CLASSES` compares (``section`` is the graph's whole path).
LEVELS: dict[str, tuple[str, ...]] = {
    "chapter": ("code", "book", "part", "act", "chapter"),
    "book": ("code", "book", "part", "act"),
    "code": ("code",),
}
#: The columns that must not all be blank in the gold article for its level to count.
_OWN: dict[str, tuple[str, ...]] = {"chapter": ("chapter",), "book": ("book", "part", "act"), "code": ("code",)}
#: Columns of :attr:`Misses.lines` (the per-question file).
LINE_COLUMNS = ("qid", "k", "article_id", "class", "nearest_id", "nearest_rank")


class Hierarchy:
    """The levels of a corpus (``articles`` in the dataset schema): for each corpus row its section and
    position (:class:`~bsard_demo.retrievers.structure.ArticleGraph`) and an integer key per level of
    :data:`LEVELS` (-1 where the level is blank for that article)."""

    def __init__(self, articles: pd.DataFrame, graph: ArticleGraph | None = None):
        self.graph = graph if graph is not None else graph_of(articles)
        present = [c for c in HEADER_COLUMNS if c in articles.columns]
        paths = self.graph.section_paths  # per section: the present header columns, blanks stripped
        self.keys: dict[str, np.ndarray] = {}
        for level, columns in LEVELS.items():
            take = [present.index(c) for c in columns if c in present]
            own = [present.index(c) for c in _OWN[level] if c in present]
            prefixes = ["\x1f".join([p[i] for i in take]) if any(p[i] for i in own) else None for p in paths]
            codes, _ = pd.factorize(pd.Series(prefixes, dtype=object), use_na_sentinel=True)
            self.keys[level] = codes.astype(np.int64)[self.graph.section]  # an article's: its section's

    @property
    def article_ids(self) -> list[str]:
        return self.graph.article_ids


def hierarchy_of(articles: pd.DataFrame) -> Hierarchy:
    """The :class:`Hierarchy` of ``articles``, built once per corpus: kept with its graph, in :func:`graph_of`'s
    cache."""
    graph = graph_of(articles)
    return graph.memo("hierarchy", lambda: Hierarchy(articles, graph))


@dataclass
class Misses:
    """Where one run's misses land: :attr:`lines` has one row per question, k and missed gold article
    (:data:`LINE_COLUMNS`; ``nearest_id`` / ``nearest_rank`` empty for ``elsewhere`` and ``unknown``),
    in question (split order), k, then corpus order (gold articles outside the corpus last, by id);
    :attr:`questions` counts the questions with gold articles."""

    lines: pd.DataFrame
    ks: tuple[int, ...]
    questions: int

    def counts(self) -> pd.DataFrame:
        """Missed gold articles per k (index) and class (columns, :data:`CLASSES` order), with ``missed``."""
        table = pd.crosstab(pd.Categorical(self.lines["k"], categories=self.ks),
                            pd.Categorical(self.lines["class"], categories=CLASSES), dropna=False)
        table = table.reindex(index=list(self.ks), columns=list(CLASSES), fill_value=0).astype(int)
        table.index.name, table.columns.name = "k", None
        table.insert(0, "missed", table.sum(axis=1))
        return table

    def shares(self) -> pd.DataFrame:
        """:meth:`counts` as fractions of the misses at each k (0 where nothing was missed)."""
        counts = self.counts()
        missed = counts.pop("missed").replace(0, np.nan)
        return counts.div(missed, axis=0).fillna(0.0)

    def question_lines(self, qid: str, k: int | None = None) -> pd.DataFrame:
        """:attr:`lines` of question ``qid`` (at ``k`` only, when given): the drill-down's line."""
        at = self.lines["qid"] == str(qid)
        if k is not None:
            at &= self.lines["k"] == int(k)
        return self.lines[at].reset_index(drop=True)


def where_misses_land(hierarchy: Hierarchy, qrels: Mapping[str, Iterable[str]], run: Mapping[str, Sequence[str]],
                      ks: Sequence[int], *, window: int = WINDOW) -> Misses:
    """Class each missed gold article of ``run`` against ``qrels`` at each k of ``ks`` (module docstring).
    Questions without gold articles are left out, as in :func:`bsard_demo.evaluation.evaluate`;
    questions of the run absent from ``qrels`` are ignored; a repeated article keeps its best rank."""
    ks = tuple(sorted({int(k) for k in ks}))
    if not ks or ks[0] < 1:
        raise ValueError("cutoffs must be positive integers")
    if window < 0:
        raise ValueError("window must be >= 0")
    depth = ks[-1]
    row_of = hierarchy.graph.row_of
    unplaced = len(row_of)
    gold_q, gold_id, gold_rank = [], [], []
    ret_q, ret_row = [], []
    qids = []
    for qid, relevant in qrels.items():
        rel = sorted(set(relevant), key=lambda doc: (row_of.get(doc, unplaced), doc))  # corpus order
        if not rel:
            continue
        q = len(qids)
        qids.append(qid)
        ranking = list(dict.fromkeys(run.get(qid, ())))[:depth]
        rank_of = {doc: rank for rank, doc in enumerate(ranking, start=1)}
        gold_q += [q] * len(rel)
        gold_id += rel
        gold_rank += [rank_of.get(doc, depth + 1) for doc in rel]
        rows = [row_of.get(doc, -1) for doc in ranking]
        ret_q.append(np.full(len(rows), q, dtype=np.int64))
        ret_row.append(np.asarray(rows, dtype=np.int64))
    ret_q = np.concatenate(ret_q) if ret_q else np.zeros(0, dtype=np.int64)
    ret_row = np.concatenate(ret_row) if ret_row else np.zeros(0, dtype=np.int64)
    ret_rank = np.concatenate([np.arange(1, n + 1) for n in np.bincount(ret_q, minlength=len(qids))]) \
        if len(qids) else np.zeros(0, dtype=np.int64)
    inside = ret_row >= 0  # retrieved articles outside the corpus cannot be placed
    ret_q, ret_row, ret_rank = ret_q[inside], ret_row[inside], ret_rank[inside]
    g_q = np.asarray(gold_q, dtype=np.int64)
    g_row = np.asarray([row_of.get(doc, -1) for doc in gold_id], dtype=np.int64)
    located = g_row >= 0
    # a gold article's own rank never makes it its own nearest: wherever it is missed (rank > k), an
    # article of a class hit at k ranks above it
    best = {c: _best(hierarchy, c, window, g_q, g_row, ret_q, ret_row, ret_rank) for c in CLASSES[:4]}
    own = np.asarray(gold_rank, dtype=np.int64)
    ids = np.asarray(hierarchy.article_ids + [""], dtype=object)  # row -1: no nearest article
    gold_ids = np.asarray(gold_id, dtype=object)
    frames = []
    for k in ks:
        missed = own > k
        cls = np.where(located, "elsewhere", "unknown").astype(object)
        nearest = np.full(len(own), -1, dtype=np.int64)
        for c in reversed(CLASSES[:4]):  # widest first, so the nearest class wins
            rank, row = best[c]
            hit = rank <= k
            cls[hit], nearest[hit] = c, row[hit]
        near_rank = np.where(nearest >= 0, np.select([cls == c for c in CLASSES[:4]],
                                                     [best[c][0] for c in CLASSES[:4]], 0), 0)
        frames.append(pd.DataFrame({
            "qid": np.asarray(qids, dtype=object)[g_q[missed]], "k": k, "article_id": gold_ids[missed],
            "class": cls[missed], "nearest_id": ids[nearest[missed]],
            "nearest_rank": pd.array(np.where(nearest[missed] >= 0, near_rank[missed], np.nan), dtype="Int64"),
            "_q": g_q[missed]}))
    lines = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*LINE_COLUMNS, "_q"])
    lines = lines.sort_values(["_q", "k"], kind="stable").drop(columns="_q").reset_index(drop=True)
    return Misses(lines[list(LINE_COLUMNS)], ks, len(qids))


def _best(hierarchy: Hierarchy, cls: str, window: int, g_q: np.ndarray, g_row: np.ndarray, ret_q: np.ndarray,
          ret_row: np.ndarray, ret_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each gold line (question ``g_q``, corpus row ``g_row``, -1 outside the corpus), the best rank
    (a float, ``inf`` if none) and the corpus row of a retrieved article of class ``cls`` with it: one
    integer key per (question, place), the retrieved keys sorted once, the gold keys looked up."""
    graph = hierarchy.graph
    located = g_row >= 0
    if cls == "section":
        span = int(graph.section_size.max(initial=0)) + 2 * window + 1
        offsets = np.arange(-window, window + 1)
        place_r = (graph.section[ret_row] * span + graph.position[ret_row] + window)[:, None] + offsets[None, :]
        r_q, r_rank = np.repeat(ret_q, len(offsets)), np.repeat(ret_rank, len(offsets))
        r_row, place_r = np.repeat(ret_row, len(offsets)), place_r.ravel()
        g_place = np.where(located, graph.section[g_row] * span + graph.position[g_row] + window, -1)
        n_places = graph.n_sections * span
    else:
        key = hierarchy.keys[cls]
        place_r, r_q, r_rank, r_row = key[ret_row], ret_q, ret_rank, ret_row
        keep = place_r >= 0
        place_r, r_q, r_rank, r_row = place_r[keep], r_q[keep], r_rank[keep], r_row[keep]
        g_place = np.where(located, key[np.maximum(g_row, 0)], -1)
        n_places = int(key.max(initial=-1)) + 1
    r_key = r_q * max(n_places, 1) + place_r
    order = np.lexsort((r_rank, r_key))
    r_key, r_rank, r_row = r_key[order], r_rank[order], r_row[order]
    first = np.ones(len(r_key), dtype=bool)
    first[1:] = r_key[1:] != r_key[:-1]
    u_key, u_rank, u_row = r_key[first], r_rank[first], r_row[first]
    g_key = g_q * max(n_places, 1) + g_place
    at = np.minimum(np.searchsorted(u_key, g_key), max(len(u_key) - 1, 0))
    found = (g_place >= 0) & (len(u_key) > 0)
    if len(u_key):
        found &= u_key[at] == g_key
    rank = np.where(found, u_rank[at] if len(u_key) else 0, np.inf).astype(float)
    row = np.where(found, u_row[at] if len(u_key) else -1, -1).astype(np.int64)
    return rank, row


def misses_table(misses: Mapping[str, Misses]) -> pd.DataFrame:
    """One row per run and k (index ``run, k``): ``missed``, then each class's count and share
    (``section``, ``section_share``, …) — the CLI's table and the Score page's chart data."""
    frames = []
    for name, m in misses.items():
        counts, shares = m.counts(), m.shares().add_suffix("_share")
        table = counts.join(shares)
        table = table[["missed"] + [c for cls in CLASSES for c in (cls, f"{cls}_share")]]
        frames.append(table.assign(run=name).reset_index().set_index(["run", "k"]))
    return pd.concat(frames) if frames else pd.DataFrame()


def board_misses(board: Scoreboard) -> dict[str, Misses]:
    """Where each usable run of ``board`` misses (:func:`where_misses_land` at the board's cut-offs), by
    run name: the CLI's ``evaluate --misses`` and the Score page. The board must keep its runs
    (``score_runs(..., keep_runs=True)``, the default) and its dataset have articles, else
    :class:`~bsard_demo.dataset.DataError` says which is lacking."""
    articles = board.dataset.articles
    if articles is None:
        raise DataError("placing the misses needs the articles (articles.csv) of the dataset")
    usable = [r for r in board.runs if r.usable]
    if any(r.file.run is None for r in usable):
        raise DataError("placing the misses needs the runs: score them with keep_runs=True")
    hierarchy = hierarchy_of(articles)
    return {r.name: where_misses_land(hierarchy, board.qrels, r.file.run, board.ks) for r in usable}
