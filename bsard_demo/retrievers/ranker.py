"""The learned ranker's features: every system's view of a question's candidates, in one matrix (columns
:data:`FEATURES`). A question's candidates are the union of the top :data:`CANDIDATES` articles of each input system
(:data:`SYSTEMS`: whichever are given) and of the structure-rescored fusion (:mod:`.structure`). Everything here is
numpy; :mod:`lightgbm` is only needed to fit and to predict. Today only ``bench/ranker_cv.py`` (the decision on
train, docs/effectiveness.md, "Learned ranker") calls it: the serving retriever, ``train --ranker`` and its folder
are to come.

The candidates and every feature: docs/design.md, 'bsard_demo/retrievers/ranker.py'.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

SYSTEMS = ("bm25", "use", "adapter", "neighbours")
#: RRF weights of the fused score (the product's defaults: BM25 1, a zero-shot encoder or an
#: adapter 0.5, neighbours 0.5) and its k.
FUSION_WEIGHTS = {"bm25": 1.0, "use": 0.5, "adapter": 0.5, "neighbours": 0.5}
FUSION_K = 60.0
#: Articles taken from each system (and from the structure-rescored fusion) as candidates.
CANDIDATES = 200
#: Depth each system is searched to (the hybrid's depth): ranks beyond it count as missing.
DEPTH = 1000
_PER_SYSTEM = ("score", "rank", "norm", "gap")
_STRUCTURE = ("sibling", "section_best", "cited_by", "position", "section_size", "relative_position")


def feature_names(systems: Sequence[str] = SYSTEMS) -> list[str]:
    return ([f"{s}_{f}" for s in systems for f in _PER_SYSTEM] + ["votes", "votes_sim", "prior", "fused_score",
                                                                   "fused_rank", *_STRUCTURE, "length"])


FEATURES = feature_names()


def rrf_rows(runs: Mapping[str, tuple[np.ndarray, np.ndarray]], n_articles: int) -> tuple[np.ndarray, np.ndarray]:
    """The RRF (:data:`FUSION_K`, :data:`FUSION_WEIGHTS`) of ``runs`` (system -> (rows, scores),
    best first, rows -1 padded): fused rows best first (ties by row, stable) and their scores."""
    total = np.zeros(n_articles)
    for name, (rows, _) in runs.items():
        rows = np.asarray(rows)
        rows = rows[rows >= 0]
        total[rows] += FUSION_WEIGHTS.get(name, 1.0) / (FUSION_K + np.arange(1, len(rows) + 1))
    ranked = np.flatnonzero(total > 0)
    ranked = ranked[np.argsort(-total[ranked], kind="stable")]
    return ranked, total[ranked]


def question_features(runs: Mapping[str, tuple[np.ndarray, np.ndarray]], *, graph, structure, prior: np.ndarray,
                      lengths: np.ndarray, votes: np.ndarray | None = None, votes_sim: np.ndarray | None = None,
                      systems: Sequence[str] = SYSTEMS, candidates: int = CANDIDATES,
                      depth: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, X)``: one question's candidate corpus rows (ascending) and their feature matrix
    (columns :func:`feature_names` of ``systems``). ``runs``: system -> (rows, scores), best
    first (-1 padded); a system of ``systems`` absent from ``runs`` gives missing values.
    ``graph``: the corpus' :class:`~.structure.ArticleGraph`; ``structure``: the
    :class:`~.structure.StructureSettings` whose re-scoring of the fusion adds candidates;
    ``prior``, ``lengths`` (and ``votes``, ``votes_sim`` when given): arrays over the corpus."""
    from .structure import rescore_rows

    n = len(graph)
    fused_rows, fused_scores = rrf_rows(runs, n)
    pool = [np.asarray(r)[np.asarray(r) >= 0][:candidates] for r, _ in runs.values()]
    pool.append(fused_rows[:candidates])
    top = fused_scores[0] if len(fused_scores) else 1.0
    head, head_scores = fused_rows[:structure.depth], fused_scores[:structure.depth] / top
    if len(head):
        pool.append(rescore_rows(graph, head, head_scores, structure, candidates)[0])
    rows = np.unique(np.concatenate(pool)).astype(np.int64) if pool else np.zeros(0, dtype=np.int64)
    columns = []
    for name in systems:
        score = np.full(n, np.nan)
        rank = np.full(n, float(depth + 1))
        best = np.nan
        if name in runs:
            r, v = (np.asarray(a) for a in runs[name])
            ok = r >= 0
            r, v = r[ok][:depth], v[ok][:depth].astype(np.float64)
            score[r] = v
            rank[r] = np.arange(1, len(r) + 1)
            best = v[0] if len(v) else np.nan
        sc = score[rows]
        columns += [sc, rank[rows], sc / best if best and np.isfinite(best) else np.full(len(rows), np.nan), best - sc]
    zeros = np.zeros(len(rows))
    columns.append(votes[rows] if votes is not None else zeros)
    columns.append(votes_sim[rows] if votes_sim is not None else zeros)
    columns.append(np.log1p(prior[rows]))
    fused = np.zeros(n)
    fused[fused_rows] = fused_scores / top
    fused_rank = np.full(n, float(len(fused_rows) + 1))
    fused_rank[fused_rows] = np.arange(1, len(fused_rows) + 1)
    columns += [fused[rows], fused_rank[rows]]
    sib, _, ref = graph.propagate(head, head_scores, window=1, decay=1.0)
    size = graph.section_size[graph.section[rows]]
    position = graph.position[rows]
    columns += [sib[rows], section_best(graph, head, head_scores, rows), ref[rows], position, size,
                position / np.maximum(size - 1, 1), lengths[rows]]
    return rows, np.column_stack(columns).astype(np.float64)


def section_best(graph, head: np.ndarray, scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the best of ``scores`` of another article of its section among
    ``head`` (0 when none)."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    sections = graph.section[np.asarray(head)[order]]
    values = np.asarray(scores)[order]
    _, first = np.unique(sections, return_index=True)
    best = np.zeros(graph.n_sections)
    holder = np.full(graph.n_sections, -1)
    best[sections[first]] = values[first]
    holder[sections[first]] = np.asarray(head)[order][first]
    rest = np.ones(len(order), dtype=bool)
    rest[first] = False
    second = np.zeros(graph.n_sections)
    _, again = np.unique(sections[rest], return_index=True)
    second[sections[rest][again]] = values[rest][again]
    sec = graph.section[rows]
    return np.where(holder[sec] == rows, second[sec], best[sec])


def citation_counts(labels: Sequence[np.ndarray], n_articles: int) -> np.ndarray:
    """How many of the questions (``labels``: each one's distinct corpus rows) cite each article."""
    counts = np.zeros(n_articles)
    for rows in labels:
        np.add.at(counts, np.unique(np.asarray(rows, dtype=np.int64)), 1.0)
    return counts
