"""Columns -> :class:`~bsard_demo.runs.run.Run`, and the warnings of a usable run.

The parsers (:mod:`.text_formats`, :mod:`.json_formats`) hand over the usable lines as
:class:`Columns`; :func:`build_run` orders them exactly as
:func:`bsard_demo.runs.run.order_entries` does and warns about repeated articles and rank
orders that contradict the scores; :func:`add_warnings` adds the warnings that need the dataset
(unknown questions and articles, short rankings) and the run tags.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby, islice
from operator import gt, lt
from typing import Collection, Sequence

import numpy as np

from .problems import ProblemList
from .run import Run

_EXAMPLES = 5  # ids listed in a summary warning


@dataclass
class Columns:
    """Usable run lines as parallel columns; ``lines`` None when the format has no lines."""

    qids: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    scores: list[float] | None = None
    ranks: list[int] | None = None
    lines: Sequence[int] | None = None

    def line(self, i: int) -> int | None:
        return self.lines[i] if self.lines is not None else None

    def drop(self, bad: set[int]) -> None:
        """Remove the rows of index ``bad``."""
        if not bad:
            return
        keep = [i for i in range(len(self.qids)) if i not in bad]
        for name in ("qids", "docs", "scores", "ranks", "lines"):
            col = getattr(self, name)
            if col is not None:
                setattr(self, name, [col[i] for i in keep])


def build_run(cols: Columns, by: str, problems: ProblemList, *, name: str, tags: tuple[str, ...],
           check_ranks: bool) -> Run:
    """The :class:`Run` of ``cols`` (in file order), ordered exactly as
    :func:`bsard_demo.runs.run.order_entries` orders entries; warns about repeats and rank order."""
    blocks: dict[str, list[range]] = {}
    pos = 0
    for qid, block in groupby(cols.qids):  # questions usually come in blocks of lines
        n = len(list(block))
        spans = blocks.get(qid)
        if spans is None:
            blocks[qid] = [range(pos, pos + n)]
        else:
            spans.append(range(pos, pos + n))
        pos += n
    descending = by == "score"
    strictly = gt if descending else lt
    key_col = cols.scores if by == "score" else cols.ranks
    rankings: dict[str, tuple[str, ...]] = {}
    scores: dict[str, tuple[float, ...]] | None = {} if by == "score" else None
    repeats: list[tuple] = []
    contradictions: list[tuple] = []
    tie_questions: list[str] = []

    for qid, spans in blocks.items():
        if len(spans) == 1:
            idx: Sequence[int] = spans[0]

            def take(col, r=spans[0]):
                return col[r.start:r.stop]
        else:
            idx = [i for r in spans for i in r]

            def take(col, idx=idx):
                return list(map(col.__getitem__, idx))
        docs, keys = take(cols.docs), take(key_col)
        n = len(docs)
        if all(map(strictly, keys, islice(keys, 1, None))):  # already in order, no ties
            order: list[int] | range = range(n)
        elif len(set(keys)) == n:
            order = sorted(range(n), key=keys.__getitem__, reverse=descending)
        else:  # ties: article id descending first (stable sorts, as order_entries)
            order = sorted(range(n), key=docs.__getitem__, reverse=True)
            order.sort(key=keys.__getitem__, reverse=descending)
        if check_ranks:
            _check_rank_order(qid, order, keys, take(cols.ranks), idx, cols, contradictions, tie_questions)
        ranked = docs if isinstance(order, range) else list(map(docs.__getitem__, order))
        if len(set(ranked)) != n:
            seen: dict[str, int] = {}
            kept = []
            for j in order:
                first = seen.get(docs[j])
                if first is None:
                    seen[docs[j]] = j
                    kept.append(j)
                else:
                    repeats.append((cols.line(idx[j]), qid, docs[j], cols.line(idx[first])))
            order = kept
            ranked = list(map(docs.__getitem__, order))
        rankings[qid] = tuple(ranked)
        if scores is not None:
            scores[qid] = tuple(keys) if isinstance(order, range) else tuple(map(keys.__getitem__, order))

    repeats.sort(key=lambda r: (r[0] is not None, r[0] or 0))
    for line, qid, docid, first_line in repeats:
        copy = f"line {first_line}" if first_line is not None else "the first"
        problems.warning("duplicate_article", f"article {docid!r} is listed again for question {qid!r}; its better-ranked copy "
                         f"({copy}) is kept", line=line, kind="article listed twice for a question")
    contradictions.sort(key=lambda c: c[0])
    for line, message in contradictions:
        problems.warning("rank_score_order", message, line=line, kind="rank order contradicts score order")
    if tie_questions:
        problems.warning("tie_order",
            f"{len(tie_questions)} question(s) have tied scores whose ranks are in another order than "
            f"trec_eval's tie-break (article id descending), e.g. {_examples(tie_questions)}; "
            "tied articles are ordered by article id, as trec_eval does")
    return Run(rankings, scores, name=name, tags=tags)


def _check_rank_order(qid: str, order: list[int], scores: list[float], ranks: list[int], idx: Sequence[int],
                      cols: Columns, contradictions: list, tie_questions: list) -> None:
    """Warn when ranks disagree with the score order ``order`` of one question: strictly (a
    higher score with a worse rank) or only among tied scores."""
    r_sorted = list(map(ranks.__getitem__, order))
    if r_sorted == sorted(r_sorted):
        return
    o = np.asarray(order)
    s = np.asarray(scores, dtype=float)[o]
    r = np.asarray(ranks)[o]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))  # blocks of tied scores, best first
    block_min = np.minimum.reduceat(r, starts)
    block_max = np.maximum.reduceat(r, starts)
    before_max = np.maximum.accumulate(block_max)  # largest rank among strictly higher scores
    bad = np.flatnonzero(block_min[1:] < before_max[:-1])
    found = None
    if bad.size:
        b = bad[0] + 1
        stop = starts[b + 1] if b + 1 < len(starts) else len(o)
        low = int(o[starts[b] + int(np.argmin(r[starts[b]:stop]))])
        high_block = int(np.argmax(block_max[:b] == before_max[b - 1]))  # first block holding that rank
        stop_h = starts[high_block + 1]
        high = int(o[starts[high_block] + int(np.argmax(r[starts[high_block]:stop_h]))])
        found = (low, high)
    same = s[1:] == s[:-1]
    tie_bad = bool(np.any(same & (r[:-1] > r[1:])))
    if found is not None:
        low, high = found
        l_low, l_high = cols.line(idx[low]), cols.line(idx[high])
        contradictions.append((
            max(l_low or 0, l_high or 0) or None,
            f"question {qid!r}: rank {ranks[low]} (line {l_low}, score {scores[low]:g}) has a lower score than "
            f"rank {ranks[high]} (line {l_high}, score {scores[high]:g}); articles are ordered by score, "
            "as trec_eval does",
        ))
    if tie_bad:
        tie_questions.append(qid)


def _examples(ids) -> str:
    ids = list(ids)
    shown = ", ".join(repr(i) for i in ids[:_EXAMPLES])
    return shown + (", ..." if len(ids) > _EXAMPLES else "")


def _as_set(ids: Collection) -> set[str] | frozenset[str]:
    if isinstance(ids, (set, frozenset)) and all(isinstance(i, str) for i in islice(ids, 100)):
        return ids
    return {str(i) for i in ids}


def add_warnings(run: Run, result, qids, corpus_ids, k: int) -> None:
    problems = result.problems
    if len(result.tags) > 1:
        problems.warning("several_tags", f"the file has {len(result.tags)} run tags ({_examples(result.tags)}); "
                         "all its lines are read as one run")
    if qids is not None:
        known = _as_set(qids)
        unknown = [q for q in run if q not in known]
        if unknown and len(unknown) == len(run):
            problems.warning("unknown_questions", f"none of the run's {len(run)} question ids is a question of the dataset "
                             f"(e.g. {_examples(unknown)}); is this a run for these questions?")
        elif unknown:
            problems.warning("unknown_questions", f"{len(unknown)} of the run's {len(run)} question ids are not questions of the "
                             f"dataset (e.g. {_examples(unknown)}); they are ignored when scoring")
    if corpus_ids is not None:
        corpus = _as_set(corpus_ids)
        outside: dict[str, None] = {}
        n_entries = 0
        for docs in run.rankings.values():
            if corpus.issuperset(docs):
                continue
            missing = [d for d in docs if d not in corpus]
            if missing:
                n_entries += len(missing)
                outside.update(dict.fromkeys(missing))
        if outside:
            problems.warning("unknown_articles", f"{len(outside)} article id(s) ({n_entries} entries) are not in the corpus "
                             f"(e.g. {_examples(outside)}); they can never be relevant")
    if corpus_ids is not None and k:
        k = min(k, len(corpus))  # a complete ranking of a small corpus is not short
    if k and k > 0:
        short = [(len(docs), q) for q, docs in run.rankings.items() if len(docs) < k]
        if short:
            fewest, fewest_q = min(short)
            problems.warning("short_rankings", f"{len(short)} of {len(run)} questions have fewer than {k} articles "
                             f"(fewest: {fewest}, question {fewest_q!r}); metrics at {k} count the missing "
                             "ones as not found")
