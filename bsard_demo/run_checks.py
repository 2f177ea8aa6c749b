"""The BSARD-aware checks of :mod:`bsard_demo.diagnostics`, wired to a read run file: one
function for ``python -m bsard_demo evaluate``/``compare`` and the Score page alike.

:func:`check_run_file` runs :func:`bsard_demo.diagnostics.check_run` on a usable run against a
split (its labels, the corpus ids when the corpus is loaded, the question ids of the dataset's
other splits) and adds each finding to the file's problems as a *warning* carrying the
finding's code (``ids_shifted``, ``near_random``, ``wrong_split``; ``scores_ascending`` is the
reader's own warning, which sees the file's order, and a run carrying it or ``scores_descending``
gets no ``near_random`` on top: read the wrong way round, it scores like chance for that reason).
A clean run gets none. The warning's message
is the finding's message, then its hint: ``"<message>; <hint>"``, one line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .dataset import Dataset
from .diagnostics import Finding, check_run
from .runs import Problem, ProblemList, RunFile

#: The reader's warnings that a run's scores run the other way than it was read.
ORDER_CODES = ("scores_ascending", "scores_descending")


@dataclass(frozen=True)
class SplitContext:
    """What the checks need to know about the split a run is scored against."""

    split: str
    qrels: Mapping[str, frozenset[str]]
    corpus_ids: frozenset[str] | None
    other_splits: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, dataset: Dataset, split: str) -> "SplitContext":
        """The context of ``split`` of ``dataset`` (its other splits' question ids included)."""
        others = {name: frozenset(str(q) for q in dataset.questions(name)["id"])
                  for name in dataset.split_names if name != split}
        return cls(split, dataset.qrels(split), dataset.article_ids, others)


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
    findings = check_run(rf.run, context.qrels, split=context.split, corpus_ids=context.corpus_ids,
                         other_splits=context.other_splits, explained=wrong_way)
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
