"""What a tuning found (:class:`TuneResult`), the measure it maximised (:class:`TuneTarget`), and
the ``run`` command line that uses its settings (:func:`run_command`). See :mod:`bsard_demo.tuning`."""
from __future__ import annotations

import importlib.util
import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from ..analyzer import DEFAULT_FIELDS, TEXT_ONLY
from ..dataset import DataError, Dataset
from ..evaluation import measures
from ..evaluation.aggregate import evaluate
from ..retrievers.base import DEFAULT_DEPTH
from ..retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts
from ..retrievers.bm25 import BM25Settings
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_NORMALISATION, DEFAULT_RRF_K, FusionConfig
from ..retrievers.registry import RetrieverSpec, default_weights, hybrid_parts, part_name

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


def _as_measure(measure: str | TuneTarget) -> TuneTarget:
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
        return " ".join(f"{k}={_fmt(v)}" for k, v in settings.items())

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
        if self.kind == "bm25":
            pivot = self.grid.pivot(index="k1", columns="b", values=self.measure)
            cols = list(pivot.columns)
            out = ["| k1 \\ b | " + " | ".join(_fmt(c) for c in cols) + " |",
                   "|---:|" + "---:|" * len(cols)]
            for k1, row in pivot.iterrows():
                cells = []
                for c in cols:
                    text = f"{row[c]:.4f}"
                    if k1 == self.best["k1"] and c == self.best["b"]:
                        text = f"**{text}**"
                    cells.append(text)
                out.append(f"| {_fmt(k1)} | " + " | ".join(cells) + " |")
            return head + "\n".join(out) + "\n"
        cols = list(self.grid.columns)
        out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for _, row in self.grid.iterrows():
            out.append("| " + " | ".join(_fmt(row[c]) if c in self.setting_columns else f"{row[c]:.4f}" for c in cols)
                       + " |")
        return head + "\n".join(out) + "\n"

    def chart(self):
        """An Altair chart of the grid: a k1 × b heatmap (BM25), RRF k × weight heatmaps and an α
        curve (hybrid); the best setting is outlined."""
        import altair as alt

        m = self.measure
        tooltip = [alt.Tooltip(c, type="nominal") for c in self.setting_columns] + [
            alt.Tooltip(c, type="quantitative", format=".4f")
            for c in self.grid.columns if c not in self.setting_columns]
        if self.kind == "bm25":
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


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# ---------------------------------------------------------------------------- the command

def run_command(spec: RetrieverSpec, data: str | None = None, *, split: str = "test", out: str = "run.trec",
                with_description: bool = DEFAULT_WITH_DESCRIPTION) -> tuple[str | None, list[str]]:
    """``(command line, notes)``: the ``python -m bsard_demo run`` line that builds ``spec`` over
    ``data`` and writes ``split``'s run to ``out``; ``None`` (and a note) when a setting of
    ``spec`` has no ``run`` option."""
    notes: list[str] = []
    args = ["python", "-m", "bsard_demo", "run", "--retriever", spec.kind]
    if spec.kind == "bm25":
        args += _bm25_args(spec.options, notes)
    elif spec.kind == "dense":
        args += _dense_args([spec], notes)
    elif spec.kind == "neighbours":
        _dense_args([spec], notes)  # its options are not run options
    else:
        parts = hybrid_parts(spec)
        if parts[0].kind != "bm25" or any(p.kind not in ("dense", "neighbours") for p in parts[1:]):
            notes.append("run's hybrid is BM25 followed by dense encoders and neighbours; this one is "
                         + " + ".join(p.kind for p in parts))
        else:
            args += _bm25_args(parts[0].options, notes) + _dense_args(parts[1:], notes)
        f = FusionConfig.from_options(spec.options, len(parts))  # absent options at their defaults
        if f.method != DEFAULT_FUSION:
            args += ["--fusion", f.method]
        if f.method == "rrf" and float(f.rrf_k) != DEFAULT_RRF_K:
            args += ["--rrf-k", _fmt(float(f.rrf_k))]
        if f.method == "rrf":
            # a spec without weights means equal weights, but run's default is default_weights
            effective = f.weights_for(len(parts))
            encoders = [part_name(p) for p in parts[1:]]
            if effective != default_weights(encoders):
                args += ["--weights", ",".join(_fmt(w) for w in effective)]
        elif f.weights is not None:
            args += ["--weights", ",".join(_fmt(float(w)) for w in f.weights)]
        elif f.alpha is not None and float(f.alpha) != DEFAULT_ALPHA:  # a weighted fusion of two parts
            args += ["--alpha", _fmt(float(f.alpha))]
        if f.normalisation != DEFAULT_NORMALISATION:
            notes.append(f"normalisation {f.normalisation!r} is not a run option")
        if int(f.depth) != DEFAULT_DEPTH:
            notes.append(f"fusion depth {f.depth} is not a run option")
    if data is not None:
        args += ["--data", str(data)]
    if split != "test":
        args += ["--split", split]
    if with_description != DEFAULT_WITH_DESCRIPTION:
        args.append("--with-description" if with_description else "--no-with-description")
    args += ["--out", out]
    return (None if notes else shlex.join(args)), notes


def _bm25_args(options: Mapping[str, object], notes: list[str]) -> list[str]:
    s = BM25Settings(**options)
    args = []
    if s.k1 != 1.0:
        args += ["--k1", _fmt(s.k1)]
    if s.b != 0.6:
        args += ["--b", _fmt(s.b)]
    if s.method != "lucene":
        args += ["--bm25-method", s.method]
    if s.fields == TEXT_ONLY:
        args.append("--no-headers")
    elif s.fields != DEFAULT_FIELDS:
        notes.append(f"BM25 fields {'+'.join(s.fields)} are not a run option")
    if not s.stem:
        args.append("--no-stem")
    if not s.stopwords or not s.keep_numbers or s.engine != "bm25s":
        notes.append("BM25 stop words / numbers / engine settings are not run options")
    return args


def _dense_args(parts: Sequence[RetrieverSpec], notes: list[str]) -> list[str]:
    encoders = []
    for p in parts:
        extra = sorted(set(p.options) - ({"encoder"} if p.kind == "dense" else set()))
        if extra:
            notes.append(f"{p.kind} option(s) {', '.join(extra)} are not run options")
        encoders.append(part_name(p))
    if encoders == ["use"]:
        return []
    return ["--encoder", ",".join(encoders)]


# ------------------------------------------------------------------------------ helpers

def _split_questions(dataset: Dataset, split: str, with_description: bool) -> tuple[list[str], list[str], dict]:
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



def _pick_best(rows: list[dict], measure: str, distance: Callable[[dict], tuple]) -> dict:
    """The row with the highest ``measure``; ties go to the smallest ``distance``."""
    top = max(r[measure] for r in rows)
    return min((r for r in rows if r[measure] == top), key=distance)

