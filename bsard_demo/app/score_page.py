"""The Score page's logic (``pages/score.py``): read uploaded runs, score them through
:func:`bsard_demo.evaluation.scoring.score_runs` (the service ``evaluate`` calls, so every figure equals the
CLI's), make the built-in runs, and shape every table the page shows.

Conventions: docs/design.md, 'bsard_demo/app/score_page.py'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, MutableMapping, Sequence

import pandas as pd

from ..dataset import Dataset
from ..evaluation import DEFAULT_KS, gold_ranks, recall_curve
from ..evaluation.measures import is_measure_column
from ..evaluation.report import display_columns, extra_columns, metric_label, metrics_table, per_question_table
from ..evaluation.scoring import Limits, RunSource, Scoreboard, score_runs
from ..evaluation.stats import STATS, TIE_TOL, StatsSettings, win_tie_loss
from ..retrievers.base import Retriever
from ..retrievers.batch import DEFAULT_QUERY_TEXT, question_texts, ranked_pairs, run_tag, search_all
from ..runs import Entry, ProblemList, Run, format_run, sandbox
from . import french
from .highlight import highlight_html

SEVERITY_FR = {"error": "erreur", "warning": "avertissement"}
#: The label of the Score page's checkbox that reads a file's scores as distances (the CLI's
#: ``--lower-is-better``), which the problems' hints name.
DISTANCES_LABEL = "scores = distances"
#: The page's words for a problem's hint (:data:`bsard_demo.runs.problems.HINTS`): the problems
#: table is in the reader's English, and its hints name both front ends, as the CLI's do.
PROBLEM_HINTS = {
    "read_as_distances": f"use --lower-is-better (CLI) / tick « {DISTANCES_LABEL} » under the file (Score page)",
    "read_as_similarities": f"if higher scores are better, drop --lower-is-better (CLI) / untick « {DISTANCES_LABEL} » "
                            "(Score page)",
}
PROBLEM_COLUMNS = ["ligne", "gravité", "code", "problème"]
SHORT_NAMES = {"missing_questions": "manquantes", "unknown_questions": "inconnues", "source": "source"}
#: What the page says about nDCG@10 and MTEB's figures (behind a help icon).
NDCG_HELP = ("nDCG@10 : gains binaires, les 10 premiers articles, chaque question comptée "
             "(`trec_eval -m ndcg_cut.10`) : le chiffre que rapporte MTEB.\n\n"
             "Attention en comparant avec MTEB : BSARDRetrieval v1 n'y gardait qu'un seul article pertinent par "
             "question, si bien que son « recall@100 » est un taux de réussite (au moins un article trouvé) ; la v2 "
             "(2025) a corrigé cela. MTEB interroge avec la question suivie de sa description (extra_description) ; "
             "l'article BSARD, et les runs intégrés par défaut, avec la question seule.")
#: Uploaded files scored at once (each may hold up to the upload limit, and a run costs about 20
#: times its text in memory); the page does not read the others.
MAX_FILES = 10


def too_many_files(ignored: Sequence[str], limit: int = MAX_FILES) -> str:
    """The French notice for the uploads beyond ``limit`` (names as given: escape them to render)."""
    names = ", ".join(f"« {n} »" for n in ignored)
    return (f"Au plus {limit} fichiers sont évalués à la fois : {len(ignored)} fichier(s) en trop n'ont pas été lus "
            f"({names}). Retirez des fichiers (×) pour évaluer les autres.")


def upload_too_large(size: int, limit_bytes: int) -> str:
    """The French error of an upload above the limit (the reader's ``size_message``)."""
    return (f"fichier de {french.decimal(size / 2**20, 1)} Mo, au-delà de la limite de "
            f"{french.decimal(limit_bytes / 2**20, 0)} Mo")


def score_files(files: Sequence[tuple[str, bytes]], dataset: Dataset, split: str = "test",
                ks: Sequence[int] = DEFAULT_KS, *, limit_bytes: int | None = None,
                lower_is_better: Sequence[bool] = (), runs: Sequence[tuple[str, Run]] = ()) -> Scoreboard:
    """:func:`bsard_demo.evaluation.scoring.score_runs` of the ``(name, bytes)`` uploads, then the
    ``(name, Run)`` built-in ``runs``, against ``split``.

    ``limit_bytes`` (default: the reader's own cap) is the size limit of an upload, raw or
    inflated: a larger file is not read and gets the :func:`upload_too_large` error, a
    compressed one inflating past it gets the reader's error. ``lower_is_better[i]`` says that
    the scores of ``files[i]`` are distances (the CLI's ``--lower-is-better``; default: no)."""
    flags = list(lower_is_better) + [False] * (len(files) - len(lower_is_better))
    sources = [RunSource.upload(name, data, lower_is_better=bool(lower)) for (name, data), lower in zip(files, flags)]
    sources += [RunSource.built(name, run) for name, run in runs]
    limits = Limits(limit_bytes, upload_too_large) if limit_bytes else Limits()
    return score_runs(dataset, split, sources, ks, limits=limits)


def prepare_reader() -> None:
    """Start the child-process reader of parquet uploads (:mod:`bsard_demo.runs.sandbox`) while
    the visitor picks files, so the first upload does not wait for pyarrow to load (idempotent)."""
    sandbox.keep_warm()


def problems_frame(problems: ProblemList) -> pd.DataFrame:
    """The problems of one file as a table: ``ligne`` (1-based, empty for the whole file),
    ``gravité`` (erreur / avertissement), ``code`` (the stable code, as in the CLI's JSON),
    ``problème``; the reader's order (file-level first), then the checks' findings."""
    rows = [{"ligne": p.line, "gravité": SEVERITY_FR.get(p.severity, p.severity), "code": p.code,
             "problème": p.text(PROBLEM_HINTS)} for p in problems]
    df = pd.DataFrame(rows, columns=PROBLEM_COLUMNS)
    df["ligne"] = df["ligne"].astype("Int64")
    return df


def metrics_frame(board: Scoreboard) -> pd.DataFrame:
    """:func:`bsard_demo.evaluation.report.metrics_table` of the usable runs (published rows on BSARD test)."""
    return metrics_table(board.evaluations, published=board.published)


def display_metrics(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (fractions) as shown: metric columns in % rounded to two decimals, headers
    ``R@100 … MAP@100 MRR@100 manquantes inconnues source``, index ``système``."""
    out = pd.DataFrame(index=table.index.astype(str))
    for col in table.columns:
        if is_measure_column(col):
            out[metric_label(col)] = [None if pd.isna(v) else round(100 * float(v), 2) for v in table[col]]
        elif col.endswith("_questions"):
            out[SHORT_NAMES[col]] = table[col].astype("Int64")
        else:
            out[SHORT_NAMES.get(col, col)] = table[col].astype(str).str.replace("this run", "ce run", regex=False) \
                .str.replace("published", "publié", regex=False)
    out.index.name = "système"
    return out


def shown_metrics(board: Scoreboard) -> list[str]:
    """The measures the page shows and offers (the CLI table's columns): recalls, MAP, MRR, nDCG@10."""
    return display_columns(board.ks, extra_columns(board.evaluations))


def ci_frame(board: Scoreboard, metrics: Sequence[str] | None = None, *, n_resamples: int = 2000,
             seed: int = 0) -> pd.DataFrame:
    """Per run and metric: mean and bootstrap 95 % interval (input of :func:`charts.metric_bars`)."""
    from ..evaluation.stats import metric_table_with_ci

    metrics = list(metrics or shown_metrics(board))
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
    """:func:`bsard_demo.evaluation.report.per_question_table` of the usable runs plus the question text."""
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


def comparison(board: Scoreboard, metric: str, *, settings: StatsSettings = STATS):
    """:func:`bsard_demo.evaluation.stats.compare_measure` of the usable runs on ``metric``: the function
    and settings (:data:`bsard_demo.evaluation.stats.STATS`) of ``python -m bsard_demo compare``, so the
    page's numbers are the CLI's."""
    from ..evaluation.stats import compare_measure

    return compare_measure({n: ev.per_question for n, ev in board.evaluations.items()}, metric,
                           n_resamples=settings.resamples, seed=settings.seed, alpha=settings.alpha)


def significant_label(settings: StatsSettings = STATS) -> str:
    """The comparison table's header of ``significant``: ``significatif (α = 0,05)``."""
    return f"significatif (α = {french.decimal(settings.alpha)})"


def permutation_caption(settings: StatsSettings = STATS) -> str:
    """The French caption under the comparison table, stating ``settings`` (resamples, seed, alpha)."""
    n = french.integer(settings.resamples)
    return (f"Test de permutation apparié ({n} tirages, graine {settings.seed}, p = (1 + #{{|T*| ≥ |T|}}) / (1 + {n}), "
            f"exact quand 2^m ≤ {n}) et test t apparié (scipy), p-valeurs corrigées par Holm sur toutes les paires ; "
            f"« significatif » : p permutation (Holm) < {french.decimal(settings.alpha)}. « A gagne / égalités / A "
            "perd » : nombre de questions où A fait mieux, pareil ou moins bien que B. Les mêmes nombres que "
            "`python -m bsard_demo compare`.")


#: Outcome of a question in the A-vs-B view (wins, ties, losses of A, as
#: :func:`bsard_demo.evaluation.stats.win_tie_loss`).
OUTCOMES = ("A meilleur", "égalité", "B meilleur")
#: Session keys of the drill-down widgets (a click on the A-vs-B chart sets them).
DD_QID, DD_RUN, PQ_FILTER = "dd_qid", "dd_run", "pq_categories"
#: The A-vs-B chart's point selection (its name in the Vega-Lite spec and in the selection state).
SELECTION = "question"


@dataclass(frozen=True)
class ABView:
    """Run A against run B on one measure, question by question: ``points`` has one row per
    question (``qid, category, question, run_a, run_b, a, b, outcome``, split order), ``wins`` /
    ``ties`` / ``losses`` are those of :func:`bsard_demo.evaluation.stats.win_tie_loss` (A above, equal to,
    below B), the comparison table's counts."""

    a: str
    b: str
    metric: str
    points: pd.DataFrame
    wins: int
    ties: int
    losses: int


def ab_view(board: Scoreboard, per_question_text: pd.DataFrame, a: str, b: str, metric: str) -> ABView:
    """The A-vs-B view of runs ``a`` and ``b`` (two different usable runs) on ``metric``; the counts
    are :func:`bsard_demo.evaluation.stats.win_tie_loss` of their per-question values, as in :func:`comparison`."""
    if a == b:
        raise ValueError("choose two different runs for A and B")
    evs = board.evaluations
    values_a = evs[a].per_question[metric]
    wins, ties, losses = win_tie_loss(values_a.to_numpy(dtype=float),
                                      evs[b].per_question[metric].reindex(values_a.index).to_numpy(dtype=float))
    cols = ["qid", "category", "question"]
    left = per_question_text[per_question_text["run"] == a][[c for c in cols if c in per_question_text] + [metric]]
    right = per_question_text[per_question_text["run"] == b][["qid", metric]]
    points = left.rename(columns={metric: "a"}).merge(right.rename(columns={metric: "b"}), on="qid", how="left")
    for c in ("category", "question"):
        if c not in points:
            points[c] = ""
    d = points["a"] - points["b"]
    points["outcome"] = [OUTCOMES[0] if x > TIE_TOL else OUTCOMES[2] if x < -TIE_TOL else OUTCOMES[1] for x in d]
    points.insert(3, "run_a", a)
    points.insert(4, "run_b", b)
    points = points[["qid", "category", "question", "run_a", "run_b", "a", "b", "outcome"]].reset_index(drop=True)
    return ABView(a, b, metric, points, wins, ties, losses)


def picked_qid(state, name: str = SELECTION) -> str | None:
    """The question id clicked in the A-vs-B chart: ``state`` is its selection state
    (``{"selection": {name: [{"qid": …}, …]}}``, empty when nothing is selected)."""
    try:
        points = state["selection"][name]
    except (KeyError, TypeError):
        return None
    if not isinstance(points, (list, tuple)):  # {} before any click
        return None
    for p in points:
        if isinstance(p, Mapping) and p.get("qid") is not None:
            return str(p["qid"])
    return None


def open_question(session: MutableMapping, qid: str, *, run: str | None = None, category: str | None = None) -> None:
    """Show question ``qid`` (as seen by ``run``) in the drill-down: set its widgets' state, and
    clear the category filter when it hides that question's ``category``."""
    chosen = session.get(PQ_FILTER) or []
    if chosen and category not in chosen:
        session[PQ_FILTER] = []
    session[DD_QID] = qid
    if run is not None:
        session[DD_RUN] = run


def chart_key(view: ABView, current: str | None) -> str:
    """The A-vs-B chart's widget key: a new one whenever the runs, the measure or the question the
    drill-down shows change, so the chart's old selection is cleared and any click counts."""
    import hashlib

    return "ab_chart_" + hashlib.sha256(repr((view.a, view.b, view.metric, current)).encode()).hexdigest()[:12]


def chart_clicked(session: MutableMapping, chart_key: str, view: ABView) -> None:
    """The A-vs-B chart's ``on_select`` callback: open the clicked question's drill-down (run A)."""
    qid = picked_qid(session.get(chart_key))
    if qid is None:
        return
    cats = dict(zip(view.points["qid"], view.points["category"]))
    if qid in cats:
        open_question(session, qid, run=view.a, category=cats[qid])


@dataclass(frozen=True)
class GoldRow:
    article_id: str
    reference: str
    rank: int | None
    text: str = ""


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
        gold=[GoldRow(a, _reference(dataset, a), ranks[a], _text(dataset, a)) for a in gold_ids],
        top=[TopRow(i, doc, score if score == score else None, _reference(dataset, doc), doc in gold_set)
             for i, (doc, score) in enumerate(run.scored(qid)[:top], 1)],
        in_run=qid in run,
    )


def _reference(dataset: Dataset, article_id: str) -> str:
    art = dataset.article(article_id)
    return "" if art is None else str(art.get("reference", "") or "")


def _text(dataset: Dataset, article_id: str) -> str:
    art = dataset.article(article_id)
    return "" if art is None else str(art.get("article", "") or "")


#: Column of :func:`gold_ranks_frame` holding a run's ranks; "—" marks an article absent from the run.
RANK_PREFIX, ABSENT = "rang · ", "—"


def gold_ranks_frame(dd: DrillDown, runs: Mapping[str, Run]) -> pd.DataFrame:
    """The gold articles of a drill-down with their rank in every run: columns ``article``,
    ``référence``, then ``rang · <run>`` per run (in order; ``—`` when the article is not in that
    run's ranking, whatever its depth)."""
    rows = []
    ranked = {name: gold_ranks([g.article_id for g in dd.gold], run.get(dd.qid, ())) for name, run in runs.items()}
    for g in dd.gold:
        row = {"article": g.article_id, "référence": g.reference}
        for name, ranks in ranked.items():
            row[RANK_PREFIX + name] = ABSENT if ranks[g.article_id] is None else str(ranks[g.article_id])
        rows.append(row)
    return pd.DataFrame(rows, columns=["article", "référence"] + [RANK_PREFIX + n for n in runs])


#: Characters of an article shown before "…" (the whole text is behind an expander).
ARTICLE_PREVIEW = 500


def article_text_html(text: str, terms=(), *, max_chars: int | None = ARTICLE_PREVIEW) -> str:
    """An article's text as an escaped HTML fragment (``<div class="bsard-text">``, the
    question's terms in ``<mark>``), cut after about ``max_chars`` characters (None: whole)."""
    return f'<div class="bsard-text">{highlight_html(text, terms, max_chars=max_chars)}</div>'


def is_long(text: str, max_chars: int = ARTICLE_PREVIEW) -> bool:
    """Whether :func:`article_text_html` shortens ``text``."""
    return len(text or "") > max_chars


def builtin_run(dataset: Dataset, split: str, retriever: Retriever, depth: int = max(DEFAULT_KS),
                progress=None, query_text: str = DEFAULT_QUERY_TEXT) -> Run:
    """The run of ``retriever`` over every question of ``split``, as ``python -m bsard_demo run
    --query-text QUERY_TEXT`` makes it (same question text, depth and tag rule), as a
    :class:`~bsard_demo.runs.Run` (its only tag the run tag); :func:`builtin_run_text` is its file."""
    questions = dataset.questions(split)
    size = len(dataset.articles) if dataset.articles is not None else depth
    hits = search_all(retriever, question_texts(questions, query_text=query_text), min(depth, size), progress)
    entries = (Entry(str(qid), doc, score, rank) for qid, pairs in zip(questions["id"], ranked_pairs(hits))
               for rank, (doc, score) in enumerate(pairs, 1))
    return Run.from_entries(entries, by="score", tags=(run_tag(retriever.name, query_text),))


def builtin_run_text(run: Run) -> bytes:
    """The TREC file of a :func:`builtin_run`, byte for byte what ``python -m bsard_demo run``
    writes (:func:`bsard_demo.runs.format_run`: a retriever's rankings are already in the run's
    order, score descending, ties by article id descending)."""
    return format_run(list(run), [run.scored(q) for q in run], "trec", run.tags[0]).encode("utf-8")


#: The French names of the question texts.
QUERY_TEXT_FR = {"question": "question seule (protocole de l'article BSARD)",
                 "question+description": "question + description (comme MTEB)"}


def builtin_name(label: str, query_text: str = DEFAULT_QUERY_TEXT) -> str:
    """The run name of a built-in system: ``"BM25 intégré"``, ``"Dense (use) intégré (question +
    description)"``…"""
    return f"{label} intégré" + ("" if query_text == "question" else " (question + description)")


class BuiltinRun:
    """The Score page's built-in runs in a session (``st.session_state`` or any dict).

    Protocol: the button's callback :meth:`request` asks for one system (its label) and question
    text on one split; the next page run calls :meth:`settle`, which builds that run (once) when
    it was asked for on the split shown and the dataset has articles, and forgets the request
    either way; :meth:`built` are the runs ``[(name, Run, TREC bytes)]`` built for the
    session's dataset and split, in build order (runs built for another dataset or split are
    dropped when a new one is built: memory stays bounded); :meth:`drop` removes one or all.
    """

    STORED = "builtin_runs"
    WANTED = "builtin_wanted"

    def __init__(self, session: MutableMapping, data_key: Hashable, split: str):
        self.session, self.key, self.split = session, (data_key, split), split

    def _stored(self) -> dict:
        return {n: v for n, v in (self.session.get(self.STORED) or {}).items() if v["key"] == self.key}

    def built(self) -> list[tuple[str, Run, bytes]]:
        """``(name, run, its TREC file)`` of each run built for this dataset and split."""
        return [(name, v["run"], v["bytes"]) for name, v in self._stored().items()]

    def has(self, label: str, query_text: str = DEFAULT_QUERY_TEXT) -> bool:
        return builtin_name(label, query_text) in self._stored()

    @property
    def present(self) -> bool:
        return bool(self._stored())

    @classmethod
    def request(cls, session: MutableMapping, split: str, label: str = "BM25",
                query_text: str = DEFAULT_QUERY_TEXT) -> None:
        """Button callback: build the run of system ``label`` for ``split`` on the next page run."""
        session[cls.WANTED] = (split, label, query_text)

    @classmethod
    def drop(cls, session: MutableMapping, name: str | None = None) -> None:
        """Button callback: forget the built run ``name`` (all of them when None)."""
        if name is None:
            session.pop(cls.STORED, None)
        else:
            (session.get(cls.STORED) or {}).pop(name, None)

    def settle(self, can_build: bool, build: Callable[[str, str], Run | None]) -> bool:
        """Build the requested run if it is for this split, absent and can be built (``build(label,
        query_text)`` returns its :func:`builtin_run`, or None when it failed); True when any run is
        present."""
        wanted = self.session.pop(self.WANTED, None)
        if wanted and wanted[0] == self.split and can_build and not self.has(wanted[1], wanted[2]):
            run = build(wanted[1], wanted[2])
            if run is not None:
                stored = self._stored()
                stored[builtin_name(wanted[1], wanted[2])] = {"key": self.key, "run": run,
                                                              "bytes": builtin_run_text(run)}
                self.session[self.STORED] = stored
        return self.present


@dataclass(frozen=True)
class ScoreTables:
    """The tables of one page run, each computed once: ``metrics`` (the CLI's rows, no published
    rows: the downloads), ``per_question`` (:func:`bsard_demo.evaluation.report.per_question_table`: the
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
