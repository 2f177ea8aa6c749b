"""The Score page's logic: read uploaded runs, score them, and shape every table the page shows.

Conventions:
- runs are read with :func:`bsard_demo.runs.read_run_bytes` and scored with
  :func:`bsard_demo.evaluation.evaluate`, exactly as ``python -m bsard_demo evaluate`` does
  (same question ids, corpus ids and ``k``), so every figure equals the CLI's;
- displayed metric values are percentages rounded to two decimals (``round(100 * v, 2)``), the
  numbers the CLI's ``table`` format prints;
- a run name is the uploaded file's name; a repeated name gets `` (2)``, `` (3)`` …;
- uploads are bytes in memory, never written to disk; the upload limit is the reader's size
  limit: a larger upload is not read (:func:`upload_too_large` words the error) and a
  compressed upload may not inflate past that same limit either (a valid run costs about 20
  times its text in memory, so the limit bounds memory whatever the compression);
- the built-in run (:func:`builtin_run_text`) is produced as TREC text like ``python -m
  bsard_demo run`` and read back through the same reader as an upload; it is kept in the
  session (:class:`BuiltinRun`) for one dataset and split;
- the per-question table is computed once per page run (:func:`score_tables`) and shared by the
  downloads, the charts and the drill-down.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Mapping, MutableMapping, Sequence

import pandas as pd

from ..dataset import Dataset
from ..evaluation import DEFAULT_KS, Evaluation, evaluate, gold_ranks, recall_curve
from ..report import display_columns, is_bsard_test, metric_label, metrics_table, per_question_table
from ..retrievers.base import Retriever
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts, ranked_pairs, run_tag, search_all
from ..runs import DEFAULT_MAX_BYTES, ProblemList, Run, RunFile, format_run, read_run_bytes

SEVERITY_FR = {"error": "erreur", "warning": "avertissement"}
PROBLEM_COLUMNS = ["ligne", "gravité", "problème"]
SHORT_NAMES = {"missing_questions": "manquantes", "unknown_questions": "inconnues", "source": "source"}
BUILTIN_NAME = "BM25 intégré"
#: Uploaded files scored at once (each may hold up to the upload limit, and a run costs about 20
#: times its text in memory); the page does not read the others.
MAX_FILES = 10


def too_many_files(ignored: Sequence[str], limit: int = MAX_FILES) -> str:
    """The French notice for the uploads beyond ``limit`` (names as given: escape them to render)."""
    names = ", ".join(f"« {n} »" for n in ignored)
    return (f"Au plus {limit} fichiers sont évalués à la fois : {len(ignored)} fichier(s) en trop n'ont pas été lus "
            f"({names}). Retirez des fichiers (×) pour évaluer les autres.")


@dataclass
class ScoredRun:
    """One run file: what was read and, when usable, its evaluation."""

    name: str
    file: RunFile
    evaluation: Evaluation | None = None

    @property
    def usable(self) -> bool:
        return self.evaluation is not None


@dataclass
class Scoreboard:
    """All runs scored against one split."""

    split: str
    qrels: Mapping[str, frozenset[str]]
    ks: tuple[int, ...]
    runs: list[ScoredRun] = field(default_factory=list)

    @property
    def evaluations(self) -> dict[str, Evaluation]:
        return {r.name: r.evaluation for r in self.runs if r.evaluation is not None}

    @property
    def published(self) -> bool:
        """True on the real BSARD test split (the paper's rows are added)."""
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


def upload_too_large(size: int, limit_bytes: int) -> str:
    """The French error of an upload above the limit (the reader's ``size_message``)."""
    return f"fichier de {size / 2**20:.1f} Mo, au-delà de la limite de {limit_bytes / 2**20:.0f} Mo"


def score_files(files: Sequence[tuple[str, bytes]], dataset: Dataset, split: str = "test",
                ks: Sequence[int] = DEFAULT_KS, *, limit_bytes: int | None = None) -> Scoreboard:
    """Read and score ``(name, bytes)`` uploads against ``split`` (see the module conventions).

    ``limit_bytes`` (default: the reader's own cap) is the size limit of an upload, raw or
    inflated: a larger file is not read and gets the :func:`upload_too_large` error, a
    compressed one inflating past it gets the reader's error."""
    qrels = dataset.qrels(split)
    corpus = dataset.article_ids
    board = Scoreboard(split=split, qrels=qrels, ks=tuple(sorted(set(int(k) for k in ks))))
    for name, (raw_name, data) in zip(unique_names([n for n, _ in files]), files):
        rf = read_run_bytes(data, name, qids=qrels.keys(), corpus_ids=corpus, k=max(board.ks),
                            max_decompressed_bytes=limit_bytes or DEFAULT_MAX_BYTES,
                            size_message=upload_too_large if limit_bytes else None)
        board.runs.append(score_runfile(rf, qrels, board.ks))
    return board


def score_runfile(rf: RunFile, qrels: Mapping[str, frozenset[str]], ks: Sequence[int]) -> ScoredRun:
    """Evaluate a read run file (no evaluation when it has errors)."""
    return ScoredRun(rf.name, rf, evaluate(qrels, rf.run, ks) if rf.run is not None else None)


def problems_frame(problems: ProblemList) -> pd.DataFrame:
    """The problems of one file as a table: ``ligne`` (1-based, empty for the whole file),
    ``gravité`` (erreur / avertissement), ``problème``; the reader's order (file-level first)."""
    rows = [{"ligne": p.line, "gravité": SEVERITY_FR.get(p.severity, p.severity), "problème": p.message}
            for p in problems]
    df = pd.DataFrame(rows, columns=PROBLEM_COLUMNS)
    df["ligne"] = df["ligne"].astype("Int64")
    return df


def metrics_frame(board: Scoreboard) -> pd.DataFrame:
    """:func:`bsard_demo.report.metrics_table` of the usable runs (published rows on BSARD test)."""
    return metrics_table(board.evaluations, published=board.published)


def display_metrics(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (fractions) as shown: metric columns in % rounded to two decimals, headers
    ``R@100 … MAP@100 MRR@100 manquantes inconnues source``, index ``système``."""
    out = pd.DataFrame(index=table.index.astype(str))
    for col in table.columns:
        if "@" in col:
            out[metric_label(col)] = [None if pd.isna(v) else round(100 * float(v), 2) for v in table[col]]
        elif col.endswith("_questions"):
            out[SHORT_NAMES[col]] = table[col].astype("Int64")
        else:
            out[SHORT_NAMES.get(col, col)] = table[col].astype(str).str.replace("this run", "ce run", regex=False) \
                .str.replace("published", "publié", regex=False)
    out.index.name = "système"
    return out


def ci_frame(board: Scoreboard, metrics: Sequence[str] | None = None, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per run and metric: mean and bootstrap 95 % interval (input of :func:`charts.metric_bars`)."""
    from ..stats import metric_table_with_ci

    metrics = list(metrics or display_columns(board.ks))
    return metric_table_with_ci({n: ev.per_question for n, ev in board.evaluations.items()}, metrics,
                                n_resamples=n_resamples, seed=seed)


def curve_frame(board: Scoreboard, max_k: int = 500) -> pd.DataFrame:
    """Macro recall@k for k = 1 … ``max_k`` of every usable run: columns ``run, k, recall``."""
    frames = []
    for r in board.runs:
        if r.usable:
            df = recall_curve(board.qrels, r.file.run, max_k)
            df.insert(0, "run", r.name)
            frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "k", "recall"])


def per_question_frame(board: Scoreboard, questions: pd.DataFrame) -> pd.DataFrame:
    """:func:`bsard_demo.report.per_question_table` of the usable runs plus the question text."""
    df = per_question_table(board.evaluations, questions)
    if len(df):
        text = questions.set_index("id")["question"]
        df.insert(3 if "category" in df.columns else 2, "question", df["qid"].map(text).fillna(""))
    return df


def filter_categories(df: pd.DataFrame, categories: Sequence[str] | None) -> pd.DataFrame:
    """Rows of the chosen categories (all rows when none are chosen)."""
    if not categories or "category" not in df.columns:
        return df
    return df[df["category"].isin(list(categories))]


def comparison(board: Scoreboard, metric: str, *, n_resamples: int = 10000, seed: int = 0):
    """:func:`bsard_demo.stats.compare_measure` of the usable runs on ``metric``: the function
    and settings of ``python -m bsard_demo compare``, so the page's numbers are the CLI's."""
    from ..stats import compare_measure

    return compare_measure({n: ev.per_question for n, ev in board.evaluations.items()}, metric,
                           n_resamples=n_resamples, seed=seed)


def comparison_frame(board: Scoreboard, metric: str, *, n_resamples: int = 10000, seed: int = 0) -> pd.DataFrame:
    """The pairs of :func:`comparison` (:func:`bsard_demo.stats.compare_runs`'s table)."""
    return comparison(board, metric, n_resamples=n_resamples, seed=seed).pairs


@dataclass(frozen=True)
class GoldRow:
    article_id: str
    reference: str
    rank: int | None


@dataclass(frozen=True)
class TopRow:
    rank: int
    article_id: str
    score: float | None
    reference: str
    gold: bool


@dataclass(frozen=True)
class DrillDown:
    """One question seen through one run."""

    qid: str
    question: str
    category: str
    gold: list[GoldRow]
    top: list[TopRow]
    in_run: bool


def drill_down(dataset: Dataset, split: str, qid: str, run: Run, top: int = 20) -> DrillDown:
    """The question, its gold articles with their rank in ``run`` (``None`` when absent) and the
    run's ``top`` first articles; references come from the corpus when it is loaded ("" else)."""
    q = dataset.questions(split)
    row = q[q["id"] == qid]
    if row.empty:
        raise KeyError(f"no question {qid!r} in split {split!r}")
    row = row.iloc[0]
    gold_ids = list(row["article_ids"])
    ranking = run.get(qid, ())
    ranks = gold_ranks(gold_ids, ranking)
    gold_set = set(gold_ids)
    return DrillDown(
        qid=qid, question=str(row["question"]), category=str(row["category"]),
        gold=[GoldRow(a, _reference(dataset, a), ranks[a]) for a in gold_ids],
        top=[TopRow(i, doc, score if score == score else None, _reference(dataset, doc), doc in gold_set)
             for i, (doc, score) in enumerate(run.scored(qid)[:top], 1)],
        in_run=qid in run,
    )


def _reference(dataset: Dataset, article_id: str) -> str:
    art = dataset.article(article_id)
    return "" if art is None else str(art.get("reference", "") or "")


def builtin_run_text(dataset: Dataset, split: str, retriever: Retriever, depth: int = max(DEFAULT_KS),
                     progress=None) -> bytes:
    """TREC text of ``retriever`` over every question of ``split``, as ``python -m bsard_demo run``
    writes it (same question text, depth and tag rule)."""
    questions = dataset.questions(split)
    size = len(dataset.articles) if dataset.articles is not None else depth
    hits = search_all(retriever, question_texts(questions, DEFAULT_WITH_DESCRIPTION), min(depth, size), progress)
    return format_run(list(questions["id"]), ranked_pairs(hits), "trec", run_tag(retriever.name)).encode("utf-8")


class BuiltinRun:
    """The Score page's built-in BM25 run in a session (``st.session_state`` or any dict).

    Protocol: the button's callback :meth:`request` asks for it on one split; the next page run
    calls :meth:`settle`, which builds it (once) when it was asked for on the split shown and the
    dataset has articles, and forgets the request either way; :meth:`files` is the run as an
    upload ``[(BUILTIN_NAME, bytes)]`` while the session's dataset and split are those it was
    built for (else ``[]``); :meth:`drop` removes it.
    """

    STORED = "builtin_run"
    WANTED = "builtin_wanted"

    def __init__(self, session: MutableMapping, data_key: Hashable, split: str):
        self.session, self.key, self.split = session, (data_key, split), split

    def files(self) -> list[tuple[str, bytes]]:
        stored = self.session.get(self.STORED)
        return [(BUILTIN_NAME, stored["bytes"])] if stored and stored["key"] == self.key else []

    @property
    def present(self) -> bool:
        return bool(self.files())

    @classmethod
    def request(cls, session: MutableMapping, split: str) -> None:
        """Button callback: build the run for ``split`` on the next page run."""
        session[cls.WANTED] = split

    @classmethod
    def drop(cls, session: MutableMapping) -> None:
        """Button callback: forget the built run."""
        session.pop(cls.STORED, None)

    def settle(self, can_build: bool, build: Callable[[], bytes]) -> bool:
        """Build the run if it was requested for this split and can be built; True when present."""
        present = self.present
        if self.session.get(self.WANTED) == self.split and not present and can_build:
            self.session[self.STORED] = {"key": self.key, "bytes": build()}
            present = True
        self.session.pop(self.WANTED, None)
        return present


@dataclass(frozen=True)
class ScoreTables:
    """The tables of one page run, each computed once: ``metrics`` (the CLI's rows, no published
    rows: the downloads), ``per_question`` (:func:`bsard_demo.report.per_question_table`: the
    charts and the per-question download) and ``per_question_text`` (the same plus the question
    text: the per-question table and the drill-down)."""

    metrics: pd.DataFrame
    per_question: pd.DataFrame
    per_question_text: pd.DataFrame


def score_tables(board: Scoreboard, questions: pd.DataFrame) -> ScoreTables:
    """:class:`ScoreTables` of the usable runs of ``board`` (``questions``: the split's)."""
    with_text = per_question_frame(board, questions)
    plain = with_text.drop(columns=["question"]) if "question" in with_text.columns else with_text
    return ScoreTables(metrics_table(board.evaluations), plain, with_text)


def to_csv_bytes(df: pd.DataFrame, *, index: bool = False) -> bytes:
    """UTF-8 CSV of ``df`` with six-decimal floats (the CLI's ``--per-query`` layout)."""
    return df.to_csv(index=index, float_format="%.6f").encode("utf-8")
