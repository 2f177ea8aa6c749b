"""The one scoring service: run sources in, a :class:`Scoreboard` out, for the CLI (``evaluate``,
``compare``) and the Score page alike; each front end only renders the Scoreboard. :func:`score_runs` reads
each source (a path, bytes or an in-process :class:`~bsard_demo.runs.Run`), adds the BSARD-aware checks'
warnings (:func:`bsard_demo.evaluation.checks.check_run_file`, called from here only) and evaluates it.

Conventions: docs/design.md, 'bsard_demo/evaluation/scoring.py'.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Hashable, Mapping, Sequence, TypeVar

from ..build_once import BuildOnce
from ..dataset import Dataset
from ..runs import (
    BUILT_FORMAT,
    DEFAULT_ISOLATION,
    DEFAULT_MAX_BYTES,
    Isolation,
    ReadOptions,
    Run,
    RunFile,
    SizeMessage,
    read_run,
    read_run_bytes,
    read_run_path,
)
from .aggregate import DEFAULT_KS, Evaluation, evaluate
from .checks import SplitContext, check_run_file
from .labels import gains_of
from .report import is_bsard_test
from .ties import add_tie_warning, tie_effect, tie_note

T = TypeVar("T")

#: A kept ranked article's bytes and a board's own (its tables), measured with tracemalloc on frlaw-dev test boards
#: of 1 to 10 runs of depth 100 to 1,000: 27 bytes an entry (the ids are the corpus's strings), ~4 MB a board
#: (docs/reliability.md, section 12).
ENTRY_BYTES, BOARD_BYTES = 27, 4 * 2**20
#: The format a :class:`~bsard_demo.runs.Run` source is shown with (the layout it is written in).
RUN_SOURCE_FORMAT = BUILT_FORMAT


@dataclass(frozen=True)
class RunSource:
    """One run to score: exactly one of ``path``, ``data`` (bytes) or ``run``, the name it is
    shown under (before :func:`unique_names`) and its orientation (``lower_is_better``: the
    scores are distances, ordered ascending; ignored for a ``run``, already ordered)."""

    name: str
    path: str | Path | None = None
    data: bytes | None = None
    run: Run | None = None
    lower_is_better: bool = False

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.path, self.data, self.run)) != 1:
            raise ValueError("a run source is one of a path, bytes or a Run")

    @classmethod
    def file(cls, path: str | Path, *, lower_is_better: bool = False) -> "RunSource":
        """A run file on disk, named by its base name."""
        return cls(Path(path).name, path=path, lower_is_better=lower_is_better)

    @classmethod
    def upload(cls, name: str, data: bytes, *, lower_is_better: bool = False) -> "RunSource":
        """A run file's bytes (an upload) under its file name."""
        return cls(str(name), data=data, lower_is_better=lower_is_better)

    @classmethod
    def built(cls, name: str, run: Run) -> "RunSource":
        """A run produced in-process (a built-in system's)."""
        return cls(str(name), run=run)


@dataclass(frozen=True)
class Limits:
    """What the reader may read: ``max_bytes`` of a file, raw or inflated, the wording of the
    error of a larger one (``size_message(size, limit)``; None: the reader's English), and the
    limits of the child that decodes a parquet file (``isolation``; None: in this process)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    size_message: SizeMessage | None = None
    isolation: Isolation | None = DEFAULT_ISOLATION


@dataclass
class ScoredRun:
    """One source: its file as read (problems included) and, when usable, its evaluation; ``ties``: the one
    line a front end says of a run with tied scores (how many questions, trec_eval's rule), else ``None``."""

    name: str
    file: RunFile
    evaluation: Evaluation | None = None
    ties: str | None = None
    ranking_sha256: str | None = None  # :meth:`Run.ranking_sha256`, kept when the run itself is not

    @property
    def usable(self) -> bool:
        return self.evaluation is not None


@dataclass
class Scoreboard:
    """All sources scored against one split of ``dataset``, in source order."""

    dataset: Dataset
    split: str
    qrels: Mapping[str, frozenset[str]]
    ks: tuple[int, ...]
    runs: list[ScoredRun] = field(default_factory=list)
    _memo: BuildOnce = field(default_factory=BuildOnce, init=False, repr=False, compare=False)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per board and ``key``: what is derived from the board alone (the bootstrap
        intervals of the Score page's chart, 2,000 draws a run; the page's tables, downloads and charts),
        which a board kept per process would otherwise recompute at every visit. A board is shared by the
        visitors of the same files: who asks while a value is computed waits for it (a crowd pressing the same
        built-in evaluation computes it once). What it keeps is shared: read it, never change it."""
        return self._memo.get(key, compute)

    @property
    def evaluations(self) -> dict[str, Evaluation]:
        """The usable runs' evaluations by name."""
        return {r.name: r.evaluation for r in self.runs if r.evaluation is not None}

    @property
    def nbytes(self) -> int:
        """An estimate of the bytes the board holds: its runs' ranked articles, its per-question tables and a
        board's own share (:data:`ENTRY_BYTES`, :data:`BOARD_BYTES`; the corpus and labels are the dataset's)."""
        entries = sum(len(docs) for r in self.runs if r.file.run is not None for docs in r.file.run.rankings.values())
        tables = sum(int(ev.per_question.memory_usage(deep=True).sum()) for ev in self.evaluations.values())
        return entries * ENTRY_BYTES + tables + BOARD_BYTES

    @property
    def labelled(self) -> int:
        """Questions of the split with at least one relevant article (the ones scored)."""
        return sum(1 for gold in self.qrels.values() if gold)

    @property
    def published(self) -> bool:
        """True on the real BSARD test split (the paper's rows may be added)."""
        return is_bsard_test(self.qrels)


def unique_names(names: Sequence[str]) -> list[str]:
    """``names`` with repeats made distinct by a `` (n)`` suffix, first occurrence unchanged."""
    seen: dict[str, int] = {}
    out = []
    taken = set()
    for name in names:
        candidate = name
        n = seen.get(name, 1)
        while candidate in taken:
            n += 1
            candidate = f"{name} ({n})"
        seen[name] = n
        taken.add(candidate)
        out.append(candidate)
    return out


def score_runs(dataset: Dataset, split: str, sources: Sequence[RunSource], ks: Sequence[int] = DEFAULT_KS, *,
               limits: Limits = Limits(), keep_runs: bool = True) -> Scoreboard:
    """Read, check and score ``sources`` against ``split`` of ``dataset`` at ``ks`` (see the
    module conventions); never raises for a bad source (its problems say why)."""
    context = SplitContext.of(dataset, split)
    board = Scoreboard(dataset, split, context.qrels, tuple(sorted({int(k) for k in ks})))
    gains = gains_of(dataset, split)  # graded labels (a qrels file): nDCG's gains
    for name, source in zip(unique_names([s.name for s in sources]), sources):
        rf = _read(source, name, context, max(board.ks), limits)
        check_run_file(rf, context)
        evaluation = evaluate(context.qrels, rf.run, board.ks, gains=gains) if rf.run is not None else None
        if evaluation is not None:
            add_tie_warning(rf.problems, rf.run, tie_effect(context.qrels, rf.run, evaluation, gains))
        ties = tie_note(rf.run) if rf.run is not None else None
        ranking = rf.run.ranking_sha256() if rf.run is not None else None
        if not keep_runs and rf.run is not None:
            rf = replace(rf, run=None)
        board.runs.append(ScoredRun(name, rf, evaluation, ties, ranking))
    return board


def _read(source: RunSource, name: str, context: SplitContext, k: int, limits: Limits) -> RunFile:
    options = ReadOptions(qids=context.qrels.keys(), corpus_ids=context.corpus_ids, k=k, max_bytes=limits.max_bytes,
                          size_message=limits.size_message, lower_is_better=source.lower_is_better,
                          isolation=limits.isolation)
    if source.run is not None:
        return read_run(source.run, name, options)
    if source.path is not None:
        return read_run_path(source.path, options)
    return read_run_bytes(source.data, name, options)
