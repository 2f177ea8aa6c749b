"""Columns -> :class:`~bsard_demo.runs.run.Run`, and the warnings of a usable run: the parsers hand over a
:class:`~bsard_demo.runs.columns.Parsed`, :func:`build_run` orders its columns exactly as
:func:`bsard_demo.runs.run.order_entries` does and warns; :func:`add_warnings` adds the warnings that need the
dataset and the run tags.

How: docs/design.md, 'bsard_demo/runs/validate.py'.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Collection

import numpy as np

from .columns import Columns, Parsed
from .problems import ProblemList, percent as _pct, quote
from .run import Run, ScoreTable

_EXAMPLES = 5  # ids listed in a summary warning
_BITMAP_LIMIT = 64 * 2**20  # questions x articles up to which repeats are found with a bitmap


def _group_order(q: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Positions sorted by (question code, ``key``), file order among equals (stable)."""
    n = len(q)
    if key.dtype == object:
        return np.array(sorted(range(n), key=lambda i: (q[i], key[i])), dtype=np.int64)
    if n < 2 or bool(np.all((q[1:] > q[:-1]) | ((q[1:] == q[:-1]) & (key[1:] >= key[:-1])))):
        return np.arange(n)
    p = np.argsort(key, kind="stable")
    return p[np.argsort(q[p], kind="stable")]


def order_rows(cols: Columns, key: np.ndarray) -> np.ndarray:
    """The positions of ``cols``' rows in run order: by question (first appearance), ``key``
    ascending, ties by article id descending as strings, then file order."""
    p = _group_order(cols.q, key)
    qo, ko = cols.q[p], key[p]
    eq = (qo[1:] == qo[:-1]) & (ko[1:] == ko[:-1])
    if eq.any():  # tied keys: reorder only the tied rows, by article id descending
        doc_rank = np.empty(len(cols.dnames), dtype=np.int64)
        doc_rank[sorted(range(len(cols.dnames)), key=cols.dnames.__getitem__)] = np.arange(len(cols.dnames))
        in_tie = np.zeros(len(p), dtype=bool)
        in_tie[:-1] |= eq
        in_tie[1:] |= eq
        idx = np.flatnonzero(in_tie)
        tie_id = np.cumsum(np.concatenate(([True], ~eq)))[idx]
        sub = np.lexsort((-doc_rank[cols.d[p[idx]]], tie_id))  # stable: file order among equal ids
        p[idx] = p[idx][sub]
    return p


def _renumber_questions(cols: Columns) -> None:
    """Make question codes follow the questions' first appearance among the usable rows (codes
    are given on first sight of an id, also on rows dropped later for a bad field)."""
    q = cols.q
    if not len(q):
        return
    top = np.maximum.accumulate(q)
    if int(q[0]) == 0 and bool(np.all(np.diff(top) <= 1)):
        return  # each new code is one above the largest so far: already in order of appearance
    used, first = np.unique(q, return_index=True)
    used = used[np.argsort(first, kind="stable")]
    new_code = np.zeros(len(cols.qnames), dtype=np.int32)
    new_code[used] = np.arange(len(used), dtype=np.int32)
    cols.q = new_code[q]
    cols.qnames = [cols.qnames[c] for c in used.tolist()]


def _starts(q: np.ndarray) -> np.ndarray:
    """Start of each run of equal question codes, plus the end."""
    return np.concatenate(([0], np.flatnonzero(q[1:] != q[:-1]) + 1, [len(q)])) if len(q) else np.zeros(1, np.int64)


@dataclass
class Built:
    """The run's rows after ordering and dropping repeats: ``rows`` (positions in the columns)
    and ``bounds`` (each question's slice of them, in the run's question order)."""

    cols: Columns
    rows: np.ndarray
    bounds: np.ndarray


def build_run(parsed: Parsed, problems: ProblemList, *, name: str, lower_is_better: bool = False) -> tuple[Run, Built]:
    """The :class:`Run` of ``parsed``'s columns, ordered exactly as :func:`bsard_demo.runs.run.order_entries`
    orders entries (scores descending, or ascending when ``lower_is_better``, as their negation
    descending); warns about repeats, rank order and the scores' direction."""
    cols, by, check_ranks, tags = parsed.columns, parsed.by, parsed.check_ranks, parsed.tags
    cols.finish()
    _renumber_questions(cols)
    if by == "score":
        key = cols.score if lower_is_better else -cols.score
    else:
        key = cols.rank
    p = order_rows(cols, key)
    del key
    if len(p) < 2**31:
        p = p.astype(np.int32)  # positions: half the memory of the argsort's int64
    qo = cols.q[p]
    starts = _starts(qo)
    contradictions, tie_questions = _rank_order(cols, p, starts, lower_is_better) if check_ranks else ([], [])
    rows = _drop_repeats(cols, p, qo, problems)
    del qo
    for line, message in contradictions:
        problems.warning("rank_score_order", message, line=line, kind="rank order contradicts score order")
    bounds = _starts(cols.q[rows]) if len(rows) != len(p) else starts
    del p
    _check_direction(cols, problems, lower_is_better)
    names = np.array(cols.dnames, dtype=object)
    d_rows = cols.d[rows]
    rankings: dict[str, tuple[str, ...]] = {}
    spans: dict[str, tuple[int, int]] = {}
    q_rows = cols.q[rows]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        qid = cols.qnames[q_rows[a]]
        rankings[qid] = tuple(names[d_rows[a:b]].tolist())
        spans[qid] = (a, b)
    scores = ScoreTable(cols.score[rows], spans) if by == "score" else None
    # tied scores ranked otherwise by the file: its own order kept aside; the scorer, which knows the labels,
    # warns (tie_order) only when that order would change a figure (bsard_demo.evaluation.ties)
    file_order = {qid: _file_order(cols, rows[slice(*spans[qid])], names) for qid in tie_questions}
    run = Run(rankings, scores, name=name, tags=tags, lower_is_better=lower_is_better and by == "score",
              file_order=file_order or None)
    return run, Built(cols, rows, bounds)


def _file_order(cols: Columns, rows: np.ndarray, names: np.ndarray) -> tuple[str, ...]:
    """A question's articles (``rows``: one per article) in the file's own rank order, line order among equal
    ranks."""
    keys = (cols.line[rows],) if cols.line is not None else ()
    order = np.lexsort((*keys, cols.rank[rows].astype(float)))
    return tuple(names[cols.d[rows[order]]].tolist())


def _drop_repeats(cols: Columns, p: np.ndarray, qo: np.ndarray, problems: ProblemList) -> np.ndarray:
    """``p`` without the later copies of an article already listed for the question (one
    warning each, in line order)."""
    n, nd = len(p), max(1, len(cols.dnames))
    flat = qo.astype(np.int64) * nd + cols.d[p]
    if len(cols.qnames) * nd <= _BITMAP_LIMIT:
        seen = np.zeros(len(cols.qnames) * nd, dtype=bool)
        seen[flat] = True
        repeated = int(np.count_nonzero(seen)) != n
        del seen
    else:
        repeated = len(np.unique(flat)) != n
    if not repeated:
        return p
    _, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    keep = np.zeros(n, dtype=bool)
    keep[first] = True
    again = np.flatnonzero(~keep)
    first_of = first[inverse[again]]
    if cols.line is not None:
        by_line = np.argsort(cols.line[p[again]], kind="stable")
        again, first_of = again[by_line], first_of[by_line]
    kind = "article listed twice for a question"
    shown = max(0, problems.cap - problems.totals[kind])
    for j, f in zip(again[:shown].tolist(), first_of[:shown].tolist()):
        line = None if cols.line is None else int(cols.line[p[j]])
        copy = f"line {int(cols.line[p[f]])}" if cols.line is not None else "the first"
        problems.warning("duplicate_article",
                         f"article {quote(cols.dnames[cols.d[p[j]]])} is listed again for question "
                         f"{quote(cols.qnames[qo[j]])}; its better-ranked copy ({copy}) is kept", line=line, kind=kind)
    problems.add_counted("warning", "duplicate_article", kind, len(again) - shown)
    return p[keep]


def _rank_order(cols: Columns, p: np.ndarray, starts: np.ndarray, lower_is_better: bool) -> tuple[list, list]:
    """Where ranks disagree with the score order ``p``: ``(contradictions, tie questions)``, the
    first pair of each question with a better score and a worse rank as ``(line, message)`` in
    line order, and the questions whose ranks disagree only among tied scores."""
    ro = cols.rank[p]
    qo = cols.q[p]
    backwards = (qo[1:] == qo[:-1]) & (ro[1:] < ro[:-1])
    if not backwards.any():
        return [], []
    pos = np.flatnonzero(backwards)
    groups = np.unique(np.searchsorted(starts, pos, side="right") - 1)
    contradictions: list[tuple] = []
    tie_questions: list[str] = []
    for g in groups.tolist():
        a, b = int(starts[g]), int(starts[g + 1])
        rows = p[a:b]
        s, r = cols.score[rows], cols.rank[rows]
        lines = cols.line[rows] if cols.line is not None else None
        qid = cols.qnames[cols.q[rows[0]]]
        blocks = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))  # tied scores, best first
        block_min = np.minimum.reduceat(r, blocks)
        block_max = np.maximum.reduceat(r, blocks)
        before_max = np.maximum.accumulate(block_max)  # largest rank among strictly better scores
        bad = np.flatnonzero(block_min[1:] < before_max[:-1])
        if bad.size:
            k = int(bad[0]) + 1
            stop = blocks[k + 1] if k + 1 < len(blocks) else len(rows)
            low = int(blocks[k] + np.argmin(r[blocks[k]:stop]))
            high_block = int(np.argmax(block_max[:k] == before_max[k - 1]))  # first block holding that rank
            high = int(blocks[high_block] + np.argmax(r[blocks[high_block]:blocks[high_block + 1]]))
            l_low = None if lines is None else int(lines[low])
            l_high = None if lines is None else int(lines[high])
            worse = "a higher score" if lower_is_better else "a lower score"
            order = "ascending (lower is better)" if lower_is_better else "as trec_eval does"
            contradictions.append((
                max(l_low or 0, l_high or 0) or None,
                f"question {quote(qid)}: rank {quote(r[low], marks=False)} (line {l_low}, score {s[low]:g}) has "
                f"{worse} than rank {quote(r[high], marks=False)} (line {l_high}, score {s[high]:g}); articles are "
                f"ordered by score, {order}",
            ))
        if bool(np.any((s[1:] == s[:-1]) & (r[:-1] > r[1:]))):
            tie_questions.append(qid)
    contradictions.sort(key=lambda c: c[0])
    return contradictions, tie_questions


def direction_counts(q: np.ndarray, score: np.ndarray, rank: np.ndarray | None) -> tuple[int, int, int]:
    """``(counted, ascending, descending)`` questions: whether each question's scores go up or
    down more often along its file rank order (ranks, else line order), a question counting when
    some step changes the score (the ``scores_ascending`` rule of the README): a question's scores
    are ascending when more consecutive steps go up than down along the rank
    order, a step between two equal ranks being no step (a file whose ranks are all equal gives
    no order to read)."""
    if rank is not None:
        p = _group_order(q, rank)
    else:
        p = _group_order(q, np.zeros(len(q), dtype=np.int8))
    qo, so = q[p], score[p]
    same = qo[1:] == qo[:-1]
    if rank is not None:
        ro = rank[p]
        same &= ro[1:] != ro[:-1]
    n_q = int(qo.max()) + 1 if len(qo) else 0
    up = np.bincount(qo[:-1][same & (so[1:] > so[:-1])], minlength=n_q)
    down = np.bincount(qo[:-1][same & (so[1:] < so[:-1])], minlength=n_q)
    counted = (up + down) > 0
    return int(np.count_nonzero(counted)), int(np.count_nonzero(up > down)), int(np.count_nonzero(down > up))


def _check_direction(cols: Columns, problems: ProblemList, lower_is_better: bool) -> None:
    """``scores_ascending`` (or, read with lower-is-better, ``scores_descending``) when most
    questions' scores go the other way than the orientation along the file's ranks."""
    if cols.score is None or not len(cols.q):
        return
    counted, ascending, descending = direction_counts(cols.q, cols.score, cols.rank)
    if not lower_is_better and ascending * 2 > counted:
        problems.warning(
            "scores_ascending",
            f"scores grow with rank for {ascending} of {counted} questions ({_pct(ascending / counted)}): "
            "they look like distances (lower = better)", hint="read_as_distances")
    elif lower_is_better and descending * 2 > counted:
        problems.warning(
            "scores_descending",
            f"scores fall with rank for {descending} of {counted} questions ({_pct(descending / counted)}), "
            "yet they are read as distances (lower is better), which puts each question's best-scored "
            "articles last", hint="read_as_similarities")


def _examples(ids) -> str:
    ids = list(islice(ids, _EXAMPLES + 1))
    shown = ", ".join(quote(i) for i in ids[:_EXAMPLES])
    return shown + (", ..." if len(ids) > _EXAMPLES else "")


def _as_set(ids: Collection) -> set[str] | frozenset[str]:
    if isinstance(ids, (set, frozenset)) and all(isinstance(i, str) for i in islice(ids, 100)):
        return ids
    return {str(i) for i in ids}


def add_warnings(run: Run, problems: ProblemList, tags: tuple[str, ...], qids: Collection[str] | None,
                 corpus_ids: Collection[str] | None, k: int, built: Built | None = None) -> None:
    """The warnings of a usable ``run`` that need its ``tags`` or the dataset (the split's
    ``qids``, the ``corpus_ids``, the deepest cutoff ``k``; None: not checked)."""
    if len(tags) > 1:
        problems.warning("several_tags", f"the file has {len(tags)} run tags ({_examples(tags)}); "
                                         "all its lines are read as one run")
    if qids is not None:
        known = _as_set(qids)
        unknown = [q for q in run if q not in known]
        if unknown and len(unknown) == len(run):
            problems.warning("unknown_questions",
                             f"none of the run's {len(run)} question ids is a question of the split scored "
                             f"(e.g. {_examples(unknown)}); is this a run for these questions?")
        elif unknown:
            problems.warning("unknown_questions",
                             f"{len(unknown)} of the run's {len(run)} question ids are not questions of the split "
                             f"scored (e.g. {_examples(unknown)}); they are ignored when scoring")
    if corpus_ids is not None:
        corpus = _as_set(corpus_ids)
        n_outside, n_entries, examples = _outside(run, corpus, built)
        if n_outside:
            problems.warning("unknown_articles",
                             f"{n_outside} article id(s) ({n_entries} entries) are not in the corpus "
                             f"(e.g. {_examples(examples)}); they can never be relevant")
    if corpus_ids is not None and k:
        k = min(k, len(corpus))  # a complete ranking of a small corpus is not short
    if k and k > 0:
        short = [(len(docs), q) for q, docs in run.rankings.items() if len(docs) < k]
        if short:
            fewest, fewest_q = min(short)
            problems.warning("short_rankings",
                             f"{len(short)} of {len(run)} questions have fewer than {k} articles "
                             f"(fewest: {fewest}, question {quote(fewest_q)}); metrics at {k} count the missing "
                             "ones as not found")


def _outside(run: Run, corpus, built: Built | None) -> tuple[int, int, list[str]]:
    """``(distinct ids, entries, first ids)`` of the run's articles not in ``corpus``, in run order."""
    if built is None:
        outside: dict[str, None] = {}
        n_entries = 0
        for docs in run.rankings.values():
            if not corpus.issuperset(docs):
                missing = [d for d in docs if d not in corpus]
                n_entries += len(missing)
                outside.update(dict.fromkeys(missing))
        return len(outside), n_entries, list(islice(outside, _EXAMPLES + 1))
    names = built.cols.dnames
    if corpus.issuperset(names):
        return 0, 0, []
    inside = np.fromiter((d in corpus for d in names), dtype=bool, count=len(names))
    codes = built.cols.d[built.rows]
    codes = codes[~inside[codes]]
    _, first = np.unique(codes, return_index=True)
    ordered = codes[np.sort(first)]
    return len(ordered), len(codes), [names[c] for c in ordered[:_EXAMPLES + 1].tolist()]
