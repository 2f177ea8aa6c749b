"""What a tuning found (:class:`TuneResult`), the measure it maximised (:class:`TuneTarget`), and
the ``run`` command line that uses its settings (:func:`run_command`). See :mod:`bsard_demo.tuning`."""
from __future__ import annotations

import importlib.util
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from ..dataset import DataError, Dataset
from ..evaluation import measures
from ..evaluation.aggregate import evaluate
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts
from ..retrievers.kind_flags import fmt
from ..retrievers.kinds import BM25
from ..retrievers.registry import RetrieverSpec, kind

DEFAULT_MEASURE = "recall@100"


# ------------------------------------------------------------------------------ measures

class TuneTarget(measures.Measure):
    """A figure to maximise: a :class:`bsard_demo.evaluation.measures.Measure` (one parser,
    :meth:`~bsard_demo.evaluation.measures.Measure.parse`), with the figures a tuning records beside it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.k is None:  # R-Precision: a tuning ranks to a depth, the measure's cut-off
            raise ValueError(f"{self.label} has no cut-off to rank to: tune on recall@k, map@k, mrr@k or ndcg@10")

    @property
    def columns(self) -> list[str]:
        """The figures recorded per setting: the measure first, then the others at its cutoff."""
        others = measures.cutoff_columns([self.k]) + ([self.name] if self.is_extra else [])
        return [self.name] + [c for c in others if c != self.name]

    def evaluate(self, qrels: Mapping[str, frozenset[str]], run: Mapping[str, Sequence[str]]) -> dict[str, float]:
        """The :attr:`columns` of ``run`` (top-k rankings), by the product's ``evaluate``."""
        extra = (self.name,) if self.is_extra else ()
        means = evaluate(qrels, run, ks=[self.k], extra=extra).means
        return {c: means[c] for c in self.columns}


def as_measure(measure: str | TuneTarget) -> TuneTarget:
    return measure if isinstance(measure, TuneTarget) else TuneTarget.parse(measure)



# ------------------------------------------------------------------------------ results

@dataclass
class TuneResult:
    """What a tuning found: every setting's figures (:attr:`grid`), the best one, and how to use it.

    ``grid`` has one row per setting: the setting columns (:attr:`setting_columns`), then the
    measure and the other figures at its cutoff. ``spec`` is the best retriever, ``command`` the
    ``python -m bsard_demo run`` line that uses it (``None`` when its settings cannot be written
    as ``run`` options; :attr:`notes` says why)."""

    kind: str
    measure: str
    dataset: str
    split: str
    questions: int
    grid: pd.DataFrame
    setting_columns: tuple[str, ...]
    best: dict
    best_value: float
    start: dict
    start_value: float
    spec: RetrieverSpec
    command: str | None
    seconds: float
    notes: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)

    def settings_text(self, settings: Mapping[str, object]) -> str:
        return " ".join(f"{k}={fmt(v)}" for k, v in settings.items())

    def summary(self) -> str:
        """A few lines for a terminal: best settings, their figure against the starting one, and
        the command line that uses them."""
        lines = [f"tuned {self.kind} on {self.dataset}, split {self.split} ({self.questions} questions), "
                 f"{len(self.grid)} settings by {self.measure} in {self.seconds:.1f} s",
                 f"best: {self.settings_text(self.best)}  {self.measure} = {self.best_value:.4f}",
                 f"start: {self.settings_text(self.start)}  {self.measure} = {self.start_value:.4f} "
                 f"({self.best_value - self.start_value:+.4f})"]
        lines.append(f"use it: {self.command}" if self.command else "use it: (no run command line for these settings)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def table(self) -> pd.DataFrame:
        """The grid in its order (settings, then figures)."""
        return self.grid

    def markdown(self) -> str:
        """The grid as Markdown: for BM25 a k1 × b table of the measure, else one row per setting."""
        head = (f"{self.kind} tuned on {self.dataset}, split {self.split}, {self.questions} questions; "
                f"{self.measure} (best: {self.settings_text(self.best)} = {self.best_value:.4f})\n\n")
        if self.kind == BM25.name:
            pivot = self.grid.pivot(index="k1", columns="b", values=self.measure)
            cols = list(pivot.columns)
            out = ["| k1 \\ b | " + " | ".join(fmt(c) for c in cols) + " |",
                   "|---:|" + "---:|" * len(cols)]
            for k1, row in pivot.iterrows():
                cells = []
                for c in cols:
                    text = f"{row[c]:.4f}"
                    if k1 == self.best["k1"] and c == self.best["b"]:
                        text = f"**{text}**"
                    cells.append(text)
                out.append(f"| {fmt(k1)} | " + " | ".join(cells) + " |")
            return head + "\n".join(out) + "\n"
        cols = list(self.grid.columns)
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for _, row in self.grid.iterrows():
            out.append("| " + " | ".join(fmt(row[c]) if c in self.setting_columns else f"{row[c]:.4f}" for c in cols)
                       + " |")
        return head + "\n".join(out) + "\n"

    def chart(self):
        """An Altair chart of the grid: a k1 × b heatmap (BM25), RRF k × weight heatmaps and an α
        curve (hybrid); the best setting is outlined."""
        import altair as alt  # imported late: only tune --out draws (altair: 1.3 s to import, -X importtime here)

        m = self.measure
        tooltip = [alt.Tooltip(c, type="nominal") for c in self.setting_columns] + [
            alt.Tooltip(c, type="quantitative", format=".4f")
            for c in self.grid.columns if c not in self.setting_columns]
        if self.kind == BM25.name:
            data = self.grid.assign(best=[(r.k1 == self.best["k1"] and r.b == self.best["b"])
                                          for r in self.grid.itertuples()])
            base = alt.Chart(data).encode(x=alt.X("b:O", title="b"),
                                          y=alt.Y("k1:O", title="k1", sort="descending"))
            heat = base.mark_rect().encode(color=alt.Color(f"{m}:Q", title=m, scale=alt.Scale(scheme="viridis")),
                                           tooltip=tooltip)
            best = base.transform_filter(alt.datum.best).mark_rect(fill=None, stroke="red", strokeWidth=2)
            title = f"BM25 {m} on {self.dataset} ({self.split}, {self.questions} questions)"
            return (heat + best).properties(title=title, width=330, height=510)
        charts = []
        rrf = self.grid[self.grid["method"] == "rrf"]
        rrf = rrf.assign(weights=rrf["weights"].replace("", "equal"))
        if len(rrf):
            charts.append(alt.Chart(rrf).mark_rect().encode(
                x=alt.X("rrf_k:O", title="RRF k"), y=alt.Y("weights:N", title="weights"),
                color=alt.Color(f"{m}:Q", title=m, scale=alt.Scale(scheme="viridis")), tooltip=tooltip,
            ).properties(title=f"RRF: {m}", width=260, height=max(120, 18 * rrf["weights"].nunique())))
        weighted = self.grid[self.grid["method"] == "weighted"]
        if len(weighted):
            axis = "alpha" if weighted["alpha"].notna().all() else "weights"
            kind = "Q" if axis == "alpha" else "N"
            charts.append(alt.Chart(weighted).mark_line(point=True).encode(
                x=alt.X(f"{axis}:{kind}", title=axis), y=alt.Y(f"{m}:Q", title=m, scale=alt.Scale(zero=False)),
                tooltip=tooltip).properties(title=f"weighted min-max: {m}", width=260, height=200))
        chart = alt.hconcat(*charts) if len(charts) > 1 else charts[0]
        return chart.properties(title=f"hybrid {m} on {self.dataset} ({self.split}, {self.questions} questions)")

    def write(self, out: str | Path) -> list[Path]:
        """Write ``grid.csv`` (every setting, every figure), ``grid.md``, ``best.json`` and the
        chart as ``heatmap.html`` (plus ``heatmap.png`` when ``vl-convert-python`` is installed)
        into the folder ``out`` (created if needed). Returns the paths written."""
        folder = Path(out).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        path = folder / "grid.csv"
        self.grid.to_csv(path, index=False, float_format="%.6f")
        written.append(path)
        path = folder / "grid.md"
        path.write_text(self.markdown(), encoding="utf-8")
        written.append(path)
        path = folder / "best.json"
        path.write_text(json.dumps(self.record(), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
        written.append(path)
        chart = self.chart()
        path = folder / "heatmap.html"
        chart.save(str(path))
        written.append(path)
        if importlib.util.find_spec("vl_convert") is not None:  # optional: a ~34 MB wheel, not required
            path = folder / "heatmap.png"
            chart.save(str(path), scale_factor=2)
            written.append(path)
        return written

    def record(self) -> dict:
        """The result without the grid, as plain JSON-able values."""
        return {"kind": self.kind, "measure": self.measure, "dataset": self.dataset, "split": self.split,
                "questions": self.questions, "settings_tried": len(self.grid), "best": self.best,
                "best_value": self.best_value, "start": self.start, "start_value": self.start_value,
                "spec": json.loads(self.spec.key()), "command": self.command, "seconds": round(self.seconds, 3),
                "stages": {k: round(v, 3) for k, v in self.stages.items()}, "notes": self.notes}


# ---------------------------------------------------------------------------- the command

def run_command(spec: RetrieverSpec, data: str | None = None, *, split: str = "test", out: str = "run.trec",
                with_description: bool = DEFAULT_WITH_DESCRIPTION) -> tuple[str | None, list[str]]:
    """``(command line, notes)``: the ``python -m bsard_demo run`` line that builds ``spec`` over
    ``data`` and writes ``split``'s run to ``out`` (the flags are its kind's:
    :meth:`~bsard_demo.retrievers.registry.RetrieverKind.flags_of`); ``None`` (and a note) when a
    setting of ``spec`` has no ``run`` option."""
    notes: list[str] = []
    args = ["python", "-m", "bsard_demo", "run", "--retriever", spec.kind, *kind(spec.kind).flags_of(spec, notes)]
    if data is not None:
        args += ["--data", str(data)]
    if split != "test":
        args += ["--split", split]
    if with_description != DEFAULT_WITH_DESCRIPTION:
        args.append("--with-description" if with_description else "--no-with-description")
    args += ["--out", out]
    return (None if notes else shlex.join(args)), notes


# ------------------------------------------------------------------------------ helpers

def split_questions(dataset: Dataset, split: str, with_description: bool) -> tuple[list[str], list[str], dict]:
    """Labelled questions of ``split``: ids, searched texts, qrels. Raises DataError if none."""
    if dataset.articles is None or len(dataset.articles) == 0:
        raise DataError(f"{dataset.name}: no article corpus (articles.csv), so nothing to tune on")
    questions = dataset.questions(split)
    qrels_all = dataset.qrels(split)
    texts_all = question_texts(questions, with_description)
    qids, texts = [], []
    for qid, text in zip(questions["id"], texts_all):
        if qrels_all.get(str(qid)):
            qids.append(str(qid))
            texts.append(text)
    if not qids:
        raise DataError(f"{dataset.name}: split {split} has no question with a relevant article; nothing to tune on")
    return qids, texts, {q: qrels_all[q] for q in qids}



def pick_best(rows: list[dict], measure: str, distance: Callable[[dict], tuple]) -> dict:
    """The row with the highest ``measure``; ties go to the smallest ``distance``."""
    top = max(r[measure] for r in rows)
    return min((r for r in rows if r[measure] == top), key=distance)

