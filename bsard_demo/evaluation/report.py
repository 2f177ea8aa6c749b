"""Metrics tables: one row per run, in the formats the CLI and the app offer.

The table's numbers are fractions in [0, 1] (JSON, CSV) or percentages with two decimals
(table, Markdown, LaTeX), always from the same :class:`~bsard_demo.evaluation.Evaluation`, so
a figure on screen equals the one printed by ``python -m bsard_demo evaluate``.
"""
from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

import pandas as pd

from . import measures
from .aggregate import Evaluation
from .anchors import PUBLISHED_SOURCE, paper_baselines
from .measures import Measure, column_label, is_measure_column

#: sha256 of the real BSARD test labels (sorted (qid, sorted gold ids)), to recognise the split
#: whatever source it was loaded from.
BSARD_TEST_LABELS_SHA256 = "59ea7bcd706f50b7925a79851faf3ba7cb4ac7f7dfb4c7cd9b023c6926422cb9"
FORMATS = ("table", "json", "csv", "markdown", "latex")
#: A text cell starting with one of these would be read as a formula by a spreadsheet (OWASP "CSV
#: injection"): every CSV the CLI and the app write prefixes it with ``'`` (:func:`formula_safe`).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(value: object) -> object:
    """``value`` with a leading ``'`` when it is text a spreadsheet would take for a formula
    (:data:`FORMULA_START`); numbers and other text unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_text(df: pd.DataFrame, **to_csv: object) -> str:
    """``df.to_csv(**to_csv)`` with every text cell, index label and column name :func:`formula_safe`:
    the one way the CLI and the app write a table as CSV."""
    safe = df.rename(columns=formula_safe, index=formula_safe)
    for i, dtype in enumerate(safe.dtypes):
        if not pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            safe.isetitem(i, safe.iloc[:, i].map(formula_safe))
    return safe.to_csv(**to_csv)


def labels_digest(qrels: Mapping[str, frozenset[str]]) -> str:
    return hashlib.sha256(repr(sorted((k, sorted(v)) for k, v in qrels.items())).encode()).hexdigest()


def is_bsard_test(qrels: Mapping[str, frozenset[str]]) -> bool:
    """True when ``qrels`` are exactly the real BSARD test labels (published rows then apply)."""
    return len(qrels) == 222 and labels_digest(qrels) == BSARD_TEST_LABELS_SHA256


#: What nDCG@10 is, said beside every table that shows it.
NDCG_NOTE = ("nDCG@10: binary gains (a graded --qrels file's grades), trec_eval ndcg_cut_10 on the top 10, every "
             "question counted; the figure MTEB reports")
#: What R-Precision is, said beside every table that shows it.
RPREC_NOTE = ("R-Prec: precision at rank R, R = the question's number of relevant articles (trec_eval Rprec, "
              "whole run); its mean is the MRP of QABISAR and G-DSR")
#: The note of each measure column that has one (:func:`table_notes`).
NOTES = {"rprec": RPREC_NOTE, "ndcg@10": NDCG_NOTE}


def table_notes(columns: Sequence[str]) -> list[str]:
    """The notes (:data:`NOTES`) of the measures among ``columns``, in column order."""
    return [NOTES[c] for c in columns if c in NOTES]


def metric_label(metric: str) -> str:
    """Display name of a metric column (:attr:`bsard_demo.evaluation.measures.Measure.label`): ``recall@100``
    -> ``R@100``, ``map@100`` -> ``MAP@100``, ``mrr@100`` -> ``MRR@100``, ``ndcg@10`` ->
    ``nDCG@10``; other names are returned unchanged."""
    return column_label(metric)


def extra_columns(evaluations: Mapping[str, Evaluation]) -> list[str]:
    """The extra measures (:func:`~bsard_demo.evaluation.measures.extra_columns`, e.g. ``ndcg@10``) that
    every evaluation has, in their column order."""
    evs = list(evaluations.values())
    return [m for m in measures.extra_columns() if evs and all(m in ev.means for ev in evs)]


def display_columns(ks: Sequence[int], extra: Sequence[str] = ()) -> list[str]:
    """The table's metric columns, in :data:`~bsard_demo.evaluation.measures.FAMILIES` order with the families
    declared ``tables="last"`` moved to the end: a family computed at every cut-off at each of ``ks`` (its
    ``tables`` is ``"every k"``: recall) or at the smallest (MAP, MRR), an extra family at those of its columns in
    ``extra`` (``rprec``, ``ndcg@10``). Today: recall at every cutoff, MAP, R-Prec, nDCG@10, then MRR.

    The first columns are those of the published BSARD tables (R@100/200/500, MAP, then MRP =
    mean R-Prec, as QABISAR's Table 1). MRR stays computed (the paper reports it, and it is the
    primary figure of single-answer retrieval) but comes last: it looks at the first relevant
    article only, while a BSARD test question has up to 57 of them (mean 4.8, median 2; 83 of 222 have one), so
    finding one of 57 at rank 1 scores the same 1.0 as finding the only one."""
    k0 = min(ks)

    def columns(family: measures.Family) -> list[str]:
        if not family.every_cutoff:
            return [m.column for m in measures.extra_measures() if m.family == family.name and m.column in extra]
        return [Measure(family.name, k).column for k in (sorted(ks) if family.tables == "every k" else (k0,))]

    return [c for f in sorted(measures.FAMILIES.values(), key=lambda f: f.tables == "last") for c in columns(f)]


def metrics_table(evaluations: Mapping[str, Evaluation], *, published: bool = False) -> pd.DataFrame:
    """One row per run (index ``run``): display metric columns as fractions (with the extra
    measures every run has, :func:`extra_columns`), then ``missing_questions`` and
    ``unknown_questions``; with ``published`` the BSARD paper's rows follow (recall at the cutoffs it
    reports, labelled "(published)": :func:`bsard_demo.evaluation.anchors.paper_baselines`)."""
    ks = next(iter(evaluations.values())).ks if evaluations else (100, 200, 500)
    cols = display_columns(ks, extra_columns(evaluations))
    rows = {name: {**{c: ev.means[c] for c in cols}, "missing_questions": ev.missing_questions,
                   "unknown_questions": ev.unknown_questions} for name, ev in evaluations.items()}
    df = pd.DataFrame.from_dict(rows, orient="index", columns=cols + ["missing_questions", "unknown_questions"])
    df["source"] = "this run"
    if published:
        pub = pd.DataFrame.from_dict({f"{name} (published)": values for name, values in paper_baselines(ks).items()},
                                     orient="index")
        pub["source"] = PUBLISHED_SOURCE
        df = pd.concat([df, pub.reindex(columns=df.columns).assign(source=pub["source"])])
    df.index.name = "run"
    return df


def json_report(dataset: str, split: str, questions: int, evaluations: Mapping[str, Evaluation],
                problems: Mapping[str, list[dict]], *, misses: Mapping[str, list[dict]] | None = None,
                anchors: Mapping | None = None, skipped_checks: Sequence[str] | None = None,
                ties: Mapping[str, str] | None = None) -> str:
    """The CLI's ``--format json`` object (see README): metrics are fractions, every cutoff's
    recall/map/mrr is present, then ``rprec`` and ``ndcg@10``, plus missing/unknown question counts
    per run; with ``misses`` (``evaluate --misses``), where each run's misses land, per k; with
    ``anchors`` (``evaluate --anchors``: :func:`bsard_demo.evaluation.anchors.anchors_report`), the
    published results, last; ``skipped_checks`` (labels without a corpus: the checks not run) and ``ties`` (per
    run with tied scores, the one line that says the rule) when given."""
    runs = {name: {**{c: round(v, 12) for c, v in ev.means.items()}, "missing_questions": ev.missing_questions,
                   "unknown_questions": ev.unknown_questions} for name, ev in evaluations.items()}
    out = {"dataset": dataset, "split": split, "questions": questions, "runs": runs, "problems": dict(problems)}
    if ties:
        out["ties"] = dict(ties)
    if skipped_checks:
        out["skipped_checks"] = list(skipped_checks)
    if misses is not None:
        out["misses"] = dict(misses)
    if anchors is not None:
        out["anchors"] = dict(anchors)
    return json.dumps(out, ensure_ascii=False, indent=2)


def _percent(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if is_measure_column(c):
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{100 * v:.2f}")
        elif c.endswith("_questions"):
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else str(int(v)))
    return out


def _latex_escape(text: str) -> str:
    table = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
             "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(table.get(ch, ch) for ch in str(text))


def render_table(df: pd.DataFrame, fmt: str) -> str:
    """Render :func:`metrics_table` output as ``table`` (aligned text), ``csv`` (fractions),
    ``markdown`` or ``latex`` (percentages, special characters escaped)."""
    if fmt == "csv":
        return csv_text(df, float_format="%.6f")
    shown = _percent(df.drop(columns=["source"], errors="ignore"))
    header = ["run"] + [metric_label(c).replace("missing_questions", "missing").replace("unknown_questions", "unknown")
                        for c in shown.columns]
    rows = [[str(i)] + list(r) for i, r in zip(shown.index, shown.astype(str).values.tolist())]
    return render_rows(header, rows, fmt)


def render_rows(header: Sequence[str], rows: Sequence[Sequence[str]], fmt: str, *, left: int = 1,
                right: Sequence[int] | None = None) -> str:
    """Text cells as ``table`` (aligned, the first ``left`` columns to the left, the others to
    the right), ``markdown`` (``|`` escaped) or ``latex`` (special characters escaped). ``right``:
    the indices of the right-aligned (number) columns instead, the others left-aligned."""
    header, rows = list(header), [list(r) for r in rows]
    on_right = set(range(left, len(header)) if right is None else right)
    if fmt == "markdown":
        esc = lambda s: s.replace("|", r"\|")  # noqa: E731
        lines = ["| " + " | ".join(esc(h) for h in header) + " |",
                 "|" + "|".join("---:" if i in on_right else "---" for i in range(len(header))) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    if fmt == "latex":
        align = "".join("r" if i in on_right else "l" for i in range(len(header)))
        lines = [r"\begin{tabular}{" + align + "}", r"\toprule",
                 " & ".join(_latex_escape(h) for h in header) + r" \\", r"\midrule"]
        lines += [" & ".join(_latex_escape(c) for c in r) + r" \\" for r in rows]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"
    if fmt == "table":
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        fmt_row = lambda r: "  ".join(c.rjust(w) if i in on_right else c.ljust(w)  # noqa: E731
                                      for i, (c, w) in enumerate(zip(r, widths)))
        return "\n".join([fmt_row(header), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in rows]) + "\n"
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


#: The fields of one pair in ``compare --format json``, in order (values of
#: :meth:`bsard_demo.evaluation.stats.Comparison.pair_records`).
PAIR_FIELDS = ("run_a", "run_b", "mean_a", "mean_b", "diff", "wins", "ties", "losses", "p_ttest", "p_permutation",
               "p_ttest_holm", "p_permutation_holm", "significant")


def comparison_report(comparison, dataset: str, split: str) -> dict:
    """``compare --format json``: ``{"dataset", "split", "questions", "measure", "runs": {NAME:
    mean}, "pairs": [{PAIR_FIELDS}], "permutation": {"n_resamples", "seed", "alpha", "p"}}``
    from a :class:`bsard_demo.evaluation.stats.Comparison` (means and differences as fractions)."""
    d = comparison.to_dict()
    out = {"dataset": dataset, "split": split, "questions": d["questions"], "measure": d["measure"],
           "runs": d["runs"], "pairs": [{k: pair[k] for k in PAIR_FIELDS} for pair in d["pairs"]]}
    if "permutation" in d:
        out["permutation"] = d["permutation"]
    return out


def _p(value: float) -> str:
    return f"{value:.4f}" if value >= 1e-4 or value == 0 else f"{value:.1e}"


def render_comparison(comparison, fmt: str, *, dataset: str = "", split: str = "") -> str:
    """``compare``'s output: ``json`` (:func:`comparison_report`), ``csv`` (one row per pair,
    :data:`PAIR_FIELDS`, fractions and p-values at full precision), or ``table`` / ``markdown`` /
    ``latex`` (means and differences in %, p-values to 4 decimals; ``table`` also lists each
    run's mean first)."""
    if fmt == "json":
        return json.dumps(comparison_report(comparison, dataset, split), ensure_ascii=False, indent=2) + "\n"
    records = comparison.pair_records()
    if fmt == "csv":
        return csv_text(pd.DataFrame([{k: r[k] for k in PAIR_FIELDS} for r in records], columns=list(PAIR_FIELDS)),
                        index=False)
    label = metric_label(comparison.measure)
    header = ["run A", "run B", f"{label} A", f"{label} B", "A - B", "wins", "ties", "losses", "p t-test",
              "p permutation", "p t-test (Holm)", "p permutation (Holm)", "significant"]
    rows = [[r["run_a"], r["run_b"], f"{100 * r['mean_a']:.2f}", f"{100 * r['mean_b']:.2f}", f"{100 * r['diff']:+.2f}",
             str(r["wins"]), str(r["ties"]), str(r["losses"]), _p(r["p_ttest"]), _p(r["p_permutation"]),
             _p(r["p_ttest_holm"]), _p(r["p_permutation_holm"]), "yes" if r["significant"] else "no"] for r in records]
    pairs = render_rows(header, rows, fmt, left=2)
    if fmt != "table":
        return pairs
    means = render_rows(["run", label], [[name, f"{100 * v:.2f}"] for name, v in comparison.runs.items()], "table")
    return means + "\n" + pairs


def per_question_table(evaluations: Mapping[str, Evaluation], questions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long table of per-question values: ``run, qid, [category,] metrics…, n_relevant,
    n_retrieved, missing`` (fractions)."""
    frames = []
    for name, ev in evaluations.items():
        df = ev.per_question.reset_index()
        df.insert(0, "run", name)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if questions is not None and len(out):
        cats = questions.set_index("id")["category"]
        out.insert(2, "category", out["qid"].map(cats).fillna(""))
    return out
