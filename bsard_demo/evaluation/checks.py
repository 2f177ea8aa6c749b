"""BSARD-aware checks of a run: wrong runs that would otherwise score quietly (shifted ids, near random,
wrong split), as pure functions returning a :class:`Finding` or ``None`` (:func:`check_run` runs them all), and
:func:`check_run_file`, which wires them to a read run file for :mod:`bsard_demo.evaluation.scoring`.
What each check decides and why (depth, thresholds, score orientation): docs/run-formats.md, "BSARD-aware checks".
Inputs: docs/design.md, 'bsard_demo/evaluation/checks.py'.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

from ..dataset import Dataset
from ..runs import Problem, ProblemList, RunFile, percent as _pct
from .labels import has_corpus_checks
from .stats import scipy_stats

#: The finding codes, in the order :func:`check_run` reports them.
CODES = ("wrong_split", "ids_shifted", "near_random")

SHIFT_RATIO = 2.0
SHIFT_MIN_RECALL = 0.05
SHIFT_P = 1e-3
RANDOM_Z = 3.0
MAX_DEPTH = 100
#: A random ranking of the checked depth hits a single gold article with at most this chance.
RANDOM_HIT_CAP = 0.05

_INT = re.compile(r"0|-?[1-9][0-9]*")


@dataclass(frozen=True)
class Finding:
    """One warning about a run: a stable ``code``, a message saying what is wrong, a one-line
    ``hint`` saying what to do, the ``figure`` (a short text with the numbers that show it) and
    the same numbers in ``values`` for JSON output."""

    code: str
    message: str
    hint: str
    figure: str
    values: Mapping[str, float | int | str] = field(default_factory=dict)
    severity: str = "warning"

    def to_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "message": self.message, "hint": self.hint,
                "figure": self.figure, "values": dict(self.values)}


# --- score orientation ------------------------------------------------------------------------

def similarity_score(score: float, lower_is_better: bool) -> float:
    """The score a reader orders by (higher = better): ``-score`` for a distance, else ``score``."""
    return -score if lower_is_better else score


def similarity_scores(scores: Mapping[str, Mapping[str, float]], lower_is_better: bool) -> dict[str, dict[str, float]]:
    """``{qid: {docid: score}}`` with every score turned by :func:`similarity_score`."""
    return {q: {d: similarity_score(s, lower_is_better) for d, s in docs.items()} for q, docs in scores.items()}


# --- helpers ----------------------------------------------------------------------------------

def _is_int(s: str) -> bool:
    return bool(_INT.fullmatch(s))


def corpus_size_from(corpus_size: int | None, corpus_ids: Collection[str] | None,
                     qrels: Mapping[str, Iterable[str]], rankings: Mapping[str, Sequence[str]]) -> int | None:
    """The corpus size: given, or the number of corpus ids, or the span of the numeric ids seen
    in the gold and the run's top 100 (max - min + 1); ``None`` when those are not all numeric."""
    if corpus_size is not None:
        return int(corpus_size)
    if corpus_ids is not None:
        return len(corpus_ids)
    lo, hi = None, None
    for ids in list(qrels.values()) + [r[:MAX_DEPTH] for r in rankings.values()]:
        for d in ids:
            if not _is_int(d):
                return None
            v = int(d)
            lo = v if lo is None or v < lo else lo
            hi = v if hi is None or v > hi else hi
    return None if lo is None else hi - lo + 1


def check_depth(n_docs: int | None) -> int:
    """The depth the checks look at: 100, or N // 20 on a corpus under 2,000 articles."""
    if n_docs is None:
        return MAX_DEPTH
    return max(1, min(MAX_DEPTH, int(n_docs * RANDOM_HIT_CAP)))


def _scored(qrels: Mapping[str, Iterable[str]],
            rankings: Mapping[str, Sequence[str]]) -> list[tuple[frozenset, Sequence[str]]]:
    """``(gold, ranking)`` of the labelled questions of the split that the run answers."""
    out = []
    for qid, gold in qrels.items():
        g = frozenset(gold)
        if g and qid in rankings:
            out.append((g, rankings[qid]))
    return out


def _recall(gold: frozenset, top: Sequence[str]) -> float:
    return sum(1 for d in set(top) if d in gold) / len(gold)


# --- ids_shifted --------------------------------------------------------------------------------

def check_ids_shifted(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]], *,
                      corpus_size: int | None = None, corpus_ids: Collection[str] | None = None) -> Finding | None:
    """``ids_shifted``: the run matches the gold far better with every article id shifted by +1 or
    -1 (the rule: docs/run-formats.md, "BSARD-aware checks"). ``values["shift"]`` is what to add to the run's
    ids; ``values["recall@100_shifted"]`` the R@100 the run would have (all questions counted);
    ``depth_recall*`` are the recalls at the checked depth over the questions the run answers."""
    gold_sets = {q: frozenset(g) for q, g in qrels.items() if g}
    if not gold_sets or not all(_is_int(d) for g in gold_sets.values() for d in g):
        return None
    pairs = _scored(gold_sets, rankings)
    if not pairs:
        return None
    depth = check_depth(corpus_size_from(corpus_size, corpus_ids, gold_sets, rankings))
    shifted = {s: [frozenset(str(int(d) - s) for d in g) for g, _ in pairs] for s in (-1, 1)}
    base = np.array([_recall(g, r[:depth]) for g, r in pairs])
    best = None
    for s in (-1, 1):
        rec = np.array([_recall(g, r[:depth]) for g, (_, r) in zip(shifted[s], pairs)])
        if best is None or rec.mean() > best[1].mean():
            best = (s, rec)
    s, rec = best
    r0, r1 = float(base.mean()), float(rec.mean())
    better, worse = int(np.sum(rec > base)), int(np.sum(rec < base))
    if better == 0 or r1 < SHIFT_MIN_RECALL or r1 < SHIFT_RATIO * r0:
        return None
    p = float(scipy_stats().binomtest(better, better + worse, 0.5, alternative="greater").pvalue)
    if p >= SHIFT_P:
        return None
    # the R@100 the run would have, every labelled question counted (missing ones score 0)
    n = len(gold_sets)
    shift_gold = dict(zip([q for q in gold_sets if q in rankings], shifted[s]))
    r100_0 = sum(_recall(g, rankings[q][:100]) for q, g in gold_sets.items() if q in rankings) / n
    r100_1 = sum(_recall(shift_gold[q], rankings[q][:100]) for q in shift_gold) / n
    sign = f"{s:+d}"
    return Finding(
        code="ids_shifted",
        message=(f"article ids look shifted by one: with {sign} added to every article id, the run would score "
                 f"R@100 {r100_1:.3f} instead of {r100_0:.3f}"),
        hint=("the run's ids look like 0-based row numbers; BSARD article ids are 1-based (id = row + 1)" if s > 0 else
              "the run's ids look one too high (1-based ids where 0-based ones are expected?)")
             + "; rewrite the ids or fix the id mapping of the system",
        figure=f"R@100 {r100_0:.3f} as given, {r100_1:.3f} with ids {sign}",
        values={"shift": s, "recall@100": r100_0, "recall@100_shifted": r100_1, "depth": depth,
                "depth_recall": r0, "depth_recall_shifted": r1, "questions_better": better,
                "questions_worse": worse, "p_sign_test": p},
    )


# --- near_random --------------------------------------------------------------------------------

def random_hit_probability(n_docs: int, n_gold: int, depth: int) -> float:
    """Chance that a uniformly random ranking of ``depth`` of ``n_docs`` articles holds at least
    one of ``n_gold`` gold articles: ``1 - C(N - g, d) / C(N, d)``."""
    if n_docs <= 0 or n_gold <= 0 or depth <= 0:
        return 0.0
    depth = min(depth, n_docs)
    n_gold = min(n_gold, n_docs)
    if depth > n_docs - n_gold:
        return 1.0
    # C(N-g, d) / C(N, d) = C(N-d, g) / C(N, g): a product of min(g, d) factors in (0, 1]
    short, other = (n_gold, depth) if n_gold <= depth else (depth, n_gold)
    miss = 1.0
    for i in range(short):
        miss *= (n_docs - other - i) / (n_docs - i)
    return float(1.0 - miss)


def check_near_random(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]], *,
                      corpus_size: int | None = None, corpus_ids: Collection[str] | None = None) -> Finding | None:
    """``near_random``: the run's hit rate in its top d is not significantly above a random
    ranking's (docs/run-formats.md, "BSARD-aware checks"). Skipped when the corpus size cannot be known."""
    pairs = _scored(qrels, rankings)
    n_docs = corpus_size_from(corpus_size, corpus_ids, qrels, rankings)
    if not pairs or not n_docs:
        return None
    depth = check_depth(n_docs)
    corpus = (None if corpus_ids is None
              else corpus_ids if isinstance(corpus_ids, (set, frozenset)) else set(corpus_ids))
    hits, probs = 0, []
    for gold, ranking in pairs:
        top = ranking[:depth]
        hits += any(d in gold for d in top)
        g = len(gold) if corpus is None else sum(1 for d in gold if d in corpus)
        probs.append(random_hit_probability(n_docs, g, len(set(top))))
    p = np.asarray(probs)
    n = len(pairs)
    expected = float(p.mean())
    if expected <= 0:
        return None  # no gold article can be hit at all: another problem (ids not in the corpus)
    se = float(math.sqrt(float(np.sum(p * (1 - p)))) / n)
    observed = hits / n
    limit = expected + RANDOM_Z * se
    if observed >= min(limit, 1.0):  # above chance, or too few questions to tell (even a perfect run could not pass)
        return None
    return Finding(
        code="near_random",
        message=(f"the run is no better than chance: {hits} of {n} questions ({_pct(observed)}) have a gold article "
                 f"in their top {depth}; a random ranking of the {n_docs:,} articles gets "
                 f"{_pct(expected)} ± {_pct(se)}"),
        hint="check the id space (article ids of this corpus?), the split and the dataset the run was made for",
        figure=f"hit rate@{depth} {_pct(observed)} vs {_pct(expected)} at random",
        values={"depth": depth, "questions": n, "hits": hits, "hit_rate": observed, "random_hit_rate": expected,
                "random_se": se, "corpus_size": n_docs},
    )


# --- wrong_split --------------------------------------------------------------------------------

def check_wrong_split(run_qids: Iterable[str], split: str, split_qids: Collection[str],
                      other_splits: Mapping[str, Collection[str]] | None) -> Finding | None:
    """``wrong_split``: most of the run's questions belong to another split of the dataset."""
    qids = set(run_qids)
    if not qids or not other_splits:
        return None
    here = sum(1 for q in qids if q in split_qids)
    counts = {name: sum(1 for q in qids if q in ids) for name, ids in other_splits.items() if name != split}
    if not counts:
        return None
    name, there = max(counts.items(), key=lambda kv: kv[1])
    if there * 2 <= len(qids) or there <= here or here * 2 >= len(split_qids):
        return None
    return Finding(
        code="wrong_split",
        message=(f"{there} of the run's {len(qids)} questions are {name} questions; only {here} belong to the "
                 f"{split} split being scored"),
        hint=f"score it against the {name} split (--split {name}) or use a run of the {split} questions",
        figure=f"{there}/{len(qids)} {name}, {here}/{len(qids)} {split}",
        values={"split": split, "other_split": name, "in_other_split": there, "in_split": here,
                "run_questions": len(qids)},
    )


# --- all checks ---------------------------------------------------------------------------------

def check_run(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]], *,
              split: str = "test", corpus_size: int | None = None, corpus_ids: Collection[str] | None = None,
              other_splits: Mapping[str, Collection[str]] | None = None, explained: bool = False) -> list[Finding]:
    """Every check, in :data:`CODES` order; ``near_random`` is left out when another finding
    already explains the score, or when ``explained`` (the caller knows of one: the reader's
    own ``scores_ascending`` / ``scores_descending`` warning, a run read the wrong way round).
    ``other_splits`` maps a split name to its question ids."""
    findings = [
        check_wrong_split(rankings.keys(), split, qrels.keys(), other_splits),
        check_ids_shifted(rankings, qrels, corpus_size=corpus_size, corpus_ids=corpus_ids),
    ]
    findings = [f for f in findings if f is not None]
    if not findings and not explained:
        nr = check_near_random(rankings, qrels, corpus_size=corpus_size, corpus_ids=corpus_ids)
        if nr is not None:
            findings.append(nr)
    return findings


# --------------------------------------------------------------- wired to a read run file
# One function for ``python -m bsard_demo evaluate``/``compare`` and the Score page alike.

#: The reader's warnings that a run's scores run the other way than it was read.
ORDER_CODES = ("scores_ascending", "scores_descending")


@dataclass(frozen=True)
class SplitContext:
    """What the checks need to know about the split a run is scored against."""

    split: str
    qrels: Mapping[str, frozenset[str]]
    corpus_ids: frozenset[str] | None
    other_splits: Mapping[str, frozenset[str]]
    corpus_checks: bool = True  # False: labels without a corpus (``--qrels`` alone): no ids_shifted, near_random

    @classmethod
    def of(cls, dataset: Dataset, split: str) -> "SplitContext":
        """The context of ``split`` of ``dataset`` (its other splits' question ids included)."""
        others = {name: frozenset(str(q) for q in dataset.questions(name)["id"])
                  for name in dataset.split_names if name != split}
        return cls(split, dataset.qrels(split), dataset.article_ids, others, has_corpus_checks(dataset))


def finding_text(finding: Finding) -> str:
    """The one-line warning of a finding: its message, then its hint."""
    return f"{finding.message}; {finding.hint}"


def add_finding(problems: ProblemList, finding: Finding) -> None:
    """Add ``finding`` to ``problems`` as a warning of the whole file, with its code."""
    problems.warning(finding.code, finding_text(finding), None, kind=finding.code)


def check_run_file(rf: RunFile, context: SplitContext) -> list[Finding]:
    """The findings of ``rf``'s run against ``context`` (none for an unusable file), each also
    added to ``rf.problems`` (:func:`add_finding`)."""
    if rf.run is None:
        return []
    # a run read the wrong way round scores like chance: the reader's warning says why already
    wrong_way = any(p.code in ORDER_CODES for p in rf.problems.items)
    if context.corpus_checks:
        findings = check_run(rf.run, context.qrels, split=context.split, corpus_ids=context.corpus_ids,
                             other_splits=context.other_splits, explained=wrong_way)
    else:
        found = check_wrong_split(rf.run.keys(), context.split, context.qrels.keys(), context.other_splits)
        findings = [found] if found is not None else []
    for finding in findings:
        add_finding(rf.problems, finding)
    return findings


def problem_code(problem: Problem) -> str:
    """The code of a problem (a key of :data:`bsard_demo.runs.problems.CODES` or ``CHECK_CODES``)."""
    return problem.code


def problem_record(problem: Problem, hints: Mapping[str, str] | None = None) -> dict:
    """A problem as JSON: ``{"severity", "code", "line", "message"}``, the message with its hint
    in a front end's words (:meth:`~bsard_demo.runs.Problem.text`)."""
    return problem.as_dict(hints)
