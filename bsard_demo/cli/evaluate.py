"""The ``data`` and ``evaluate`` commands: summarise a dataset, score run files against a split.

``evaluate`` scores the run files with :func:`bsard_demo.evaluation.scoring.score_runs` (the Score page's
service) and renders its Scoreboard: every problem of a file on stderr, one line each, then the
:mod:`bsard_demo.evaluation.report` table (or JSON, CSV, Markdown, LaTeX).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from ..dataset import DataError
from ..evaluation import DEFAULT_KS
from ..evaluation.anchors import anchors_report
from ..evaluation.checks import problem_record
from ..evaluation.labels import SKIPPED_CHECKS, SKIPPED_NOTE, has_corpus_checks, labels_dataset
from ..evaluation.measures import cutoff_families, extra_columns, families_help
from ..evaluation.misses import CLASS_LABELS, CLASSES, LINE_COLUMNS, WINDOW, Misses, board_misses, misses_table
from ..evaluation.report import (
    FORMATS,
    csv_text,
    json_report,
    metrics_table,
    per_question_table,
    render_rows,
    render_table,
    table_notes,
)
from ..evaluation.scoring import RunSource, Scoreboard, score_runs
from ..evaluation.stamp import board_stamp, stamp_export
from ..runs import quote, read_qrels_path, warm
from ..sources import load_dataset
from .anchors import anchors_text
from .common import PROBLEM_HINTS, add_data_argument, data_spec, one_line, problem_line, say

CONVENTIONS = """\
conventions:
  Every question of the split counts: a question missing from a run scores 0.
  Questions of a run that are not in the split are ignored (and counted).
  Within a question, documents are ordered by score descending, ties broken by document id
  descending compared as strings (trec_eval's rule); a run with ranks only is ordered by rank.
  A document listed twice keeps its best position. recall@k, map@k and mrr@k equal
  trec_eval -c -M k (recall_k, map_cut_k, recip_rank) on the run cut to its top k;
  ndcg@10 (binary gains) equals trec_eval's ndcg_cut_10, the figure MTEB reports.
  --qrels FILE: labels from a file; relevance > 0 counts as relevant, and graded relevance
  is nDCG's gain (trec_eval's rules).
  rprec (R-Precision: precision at rank R, R = the question's number of relevant articles)
  equals trec_eval's Rprec on the whole run; its mean is the MRP of QABISAR and G-DSR.
  Runs with errors are not scored (exit 2); warnings are reported and the run is scored.
  BSARD-aware checks add warnings with a code: ids_shifted (ids off by one), near_random (no
  better than chance), wrong_split (questions of another split), scores_ascending (distances:
  use --lower-is-better). With --lower-is-better, scores are distances, ordered ascending.
"""


def add_data_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``data``: summarise a dataset."""
    p = subparsers.add_parser("data", help="summarise a dataset",
                              description="Summarise a dataset: counts, relevant articles per question, questions per "
                                          "category.")
    add_data_argument(p)
    p.set_defaults(func=cmd_data)
    return p


def add_evaluate_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``evaluate``: score run files."""
    measures = [f"{f}@k" for f in cutoff_families()] + list(extra_columns())
    p = subparsers.add_parser("evaluate", help="score run files", epilog=f"{CONVENTIONS}\n{families_help()}",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Score retrieval runs (TREC, 3-column, CSV, JSON, JSON Lines, parquet; optionally "
                                   f"gzipped) against a split: {', '.join(measures[:-1])} and {measures[-1]} (the "
                                   "measures below), macro-averaged over all questions.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run file(s)")
    add_run_arguments(p)
    p.add_argument("--k", type=int, nargs="+", default=list(DEFAULT_KS), metavar="K",
                   help="cutoffs (default: 100 200 500)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--per-query", metavar="FILE", help="also write per-question values of every run as CSV")
    p.add_argument("--anchors", action="store_true",
                   help="on BSARD's test split, also print the published results with their provenance (the table "
                        "of python -m bsard_demo anchors; JSON: key 'anchors'; not with --format csv)")
    p.add_argument("--misses", metavar="FILE",
                   help="also print where each run's misses land in the corpus hierarchy (per k: missed gold "
                        f"articles by the closest retrieved article of the top k: same section within {WINDOW} "
                        "articles, same chapter, same book/act, same code, elsewhere) and write one line per "
                        "question, k and missed article to FILE (CSV); needs the articles. With --format json "
                        "the counts are under \"misses\"; with --format csv they are not printed")
    p.set_defaults(func=cmd_evaluate)
    return p


def cmd_data(args: argparse.Namespace) -> int:
    ds = load_dataset(data_spec(args), need_corpus=False)
    out = [f"dataset: {ds.name}" + ("  [articles are FICTIONAL, for demonstration only]" if ds.fictional else "")]
    out.append(f"articles: {len(ds.articles) if ds.articles is not None else 'not loaded (no articles.csv)'}")
    if ds.articles is not None and "code" in ds.articles:
        out.append(f"codes: {ds.articles['code'].replace('', '(none)').nunique()}")
    for split in ds.split_names:
        q = ds.questions(split)
        n_rel = q["article_ids"].map(len)
        out.append(f"split {split}: {len(q)} questions; relevant articles per question: "
                   f"mean {n_rel.mean():.2f}, median {n_rel.median():g}, max {n_rel.max() if len(q) else 0}"
                   f"; {int((n_rel == 1).sum())} with exactly one")
        if (n_rel == 0).any():
            out.append(f"  note: {int((n_rel == 0).sum())} question(s) without any relevant article: searchable, "
                       "but left out of every score (as trec_eval does)")
        if ds.articles is not None:
            known = ds.article_ids
            unknown = {a for ids in q["article_ids"] for a in ids if a not in known}
            if unknown:
                out.append(f"  warning: {len(unknown)} gold article id(s) not in the corpus, e.g. "
                           f"{', '.join(sorted(unknown)[:5])}")
        cats = q["category"].replace("", "(none)").value_counts()
        out.append("  per category: " + ", ".join(f"{c} {n}" for c, n in cats.items()))
    print("\n".join(out))
    return 0


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The options every command reading run files shares: ``--data``, ``--qrels``, ``--split``,
    ``--lower-is-better``, ``--distances``."""
    add_data_argument(p)
    p.add_argument("--qrels", metavar="FILE",
                   help="score against the labels of FILE instead of the split's: TREC qrels (qid 0 docid "
                        "relevance), ranx's qrels JSON {q_id: {doc_id: relevance}}, or a CSV/TSV/parquet table with "
                        "q_id (or query_id), doc_id and relevance (what export-qrels writes); optionally gzipped. "
                        "Relevance > 0 counts as relevant; graded relevance is nDCG's gain (trec_eval's rules). "
                        "With --data, the corpus checks use that dataset; without, they are skipped")
    p.add_argument("--split", default="test", help="question split to score against (default: test)")
    p.add_argument("--lower-is-better", action="store_true",
                   help="every file's scores are distances (lower = better): articles are ordered by score "
                        "ascending, ties as for similarities (article id descending)")
    p.add_argument("--distances", action="append", default=[], metavar="RUN",
                   help="this file's scores are distances (repeatable; RUN as given or its base name): "
                        "--lower-is-better for some files only, e.g. a FAISS L2 run beside a BM25 run")


def _named(path: str, names) -> bool:
    """Whether ``path`` is one of ``names`` (``--distances``), as given or by its base name."""
    return path in names or Path(path).name in names


@dataclass
class ScoredRuns:
    """What ``evaluate`` and ``compare`` print from a :class:`bsard_demo.evaluation.scoring.Scoreboard`
    (:func:`score_run_paths`): each run's problems as JSON records, the unusable files named
    for the closing line, and whether a file failed with a single problem already said."""

    board: Scoreboard
    sources: list[RunSource] = field(default_factory=list)
    problems: dict[str, list[dict]] = field(default_factory=dict)
    unusable: list[str] = field(default_factory=list)
    failed: bool = False

    @property
    def exit_code(self) -> int:
        return 2 if self.unusable or self.failed else 0


def score_run_paths(command: str, paths: Sequence[str], args: argparse.Namespace, ks: Sequence[int], *,
                    quiet: bool = False, with_corpus: bool = False) -> ScoredRuns:
    """Score the run files of ``paths`` with :func:`bsard_demo.evaluation.scoring.score_runs` (a file is
    read as distances with ``--lower-is-better`` or when ``--distances`` names it) and render
    its Scoreboard's problems: unless ``quiet`` (JSON output), each problem is one line on
    stderr and a file whose single problem is an error gets one line ``…; not scored``. With
    ``with_corpus`` the articles are loaded and the runs kept, to place the misses (``evaluate --misses``)."""
    warm(paths)  # a parquet file is decoded in a child: its fork server loads meanwhile
    ds = _dataset(command, args, with_corpus, quiet)
    qrels = ds.qrels(args.split)
    labelled = sum(1 for gold in qrels.values() if gold)
    if labelled < len(qrels) and not quiet:
        say(command, f"note: {len(qrels) - labelled} question(s) of split {args.split} have no relevant "
                     "article and are left out of the averages (as trec_eval does)")
    distances = set(getattr(args, "distances", None) or [])
    unknown = sorted(d for d in distances if not any(_named(path, {d}) for path in paths))
    if unknown:
        raise DataError(f"--distances names a file that is not a run given here: {', '.join(unknown)}")
    sources = [RunSource.file(path, lower_is_better=args.lower_is_better or _named(path, distances)) for path in paths]
    out = ScoredRuns(score_runs(ds, args.split, sources, ks, keep_runs=with_corpus), sources)
    for scored in out.board.runs:
        name, problems = scored.name, scored.file.problems
        out.problems[name] = [problem_record(p, PROBLEM_HINTS) for p in problems]
        lines = [problem_line(name, p) for p in problems]
        if not scored.usable and len(lines) == 1 and not quiet:
            say(command, f"{lines[0]}; not scored")  # one problem: one line
            out.failed = True
            continue
        if not quiet and lines:
            print("\n".join(lines), file=sys.stderr)
        if not quiet and scored.ties and not any(p.code == "tie_order" for p in problems):
            print(one_line(f"{name}: note: {scored.ties}"), file=sys.stderr)  # the rule, once per run
        if not scored.usable:
            out.unusable.append(one_line(f"{name} ({problems.count('error')} error(s))"))
    return out


def _dataset(command: str, args: argparse.Namespace, with_corpus: bool, quiet: bool):
    """The dataset to score against: ``--data``'s split, or the labels of ``--qrels`` (on ``--data``'s corpus
    when given, else none: the corpus checks skipped, said in one line). A labels file with errors: each
    problem one line on stderr, then :class:`DataError`."""
    labels_path = getattr(args, "qrels", None)
    base = None
    if labels_path is None or args.data is not None:
        try:
            base = load_dataset(data_spec(args), need_corpus=with_corpus)
        except DataError as exc:
            if not with_corpus:
                raise
            raise DataError(f"--misses places each miss in the corpus: {exc}") from None
    if labels_path is None:
        return base
    if with_corpus and base is None:
        raise DataError("--misses places each miss in the corpus: give --data with --qrels")
    labels = read_qrels_path(labels_path)
    for p in labels.problems:
        print(problem_line(labels.name, p), file=sys.stderr)
    if not labels.ok:
        raise DataError(f"the labels file {quote(labels.name, marks=False)} has {labels.problems.count('error')} "
                        "error(s): nothing scored")
    if base is None and not quiet:
        say(command, SKIPPED_NOTE)
    return labels_dataset(labels, args.split, base, path=labels_path)


def report_unusable(command: str, scored: ScoredRuns) -> None:
    if scored.unusable:
        say(command, f"unusable run file(s), not scored: {', '.join(scored.unusable)}")


def cmd_evaluate(args: argparse.Namespace) -> int:
    if any(k < 1 for k in args.k):
        raise DataError("--k takes positive integers")
    scored = score_run_paths("evaluate", args.runs, args, args.k, quiet=args.format == "json",
                             with_corpus=bool(args.misses))
    board = scored.board
    ds, evaluations = board.dataset, board.evaluations
    stamp = board_stamp(board, scored.sources) if args.format != "table" or args.per_query or args.misses else {}
    anchors = args.anchors and board.published and args.format != "csv"
    if args.anchors and not board.published:
        say("evaluate", f"note: --anchors: split {args.split} of {ds.name} is not BSARD's test split; the published "
                        "results are not shown")
    elif args.anchors and not anchors:
        say("evaluate", "note: --anchors: a CSV holds one table; python -m bsard_demo anchors --format csv writes it")
    misses = board_misses(board) if args.misses else None
    if args.format == "json":
        report = json_report(ds.name, args.split, board.labelled, evaluations, scored.problems,
                             misses=None if misses is None else misses_records(misses),
                             anchors=anchors_report() if anchors else None,
                             skipped_checks=None if has_corpus_checks(ds) else SKIPPED_CHECKS,
                             ties={r.name: r.ties for r in board.runs if r.ties})
        print(stamp_export(report, "json", stamp), end="")
    elif evaluations:
        table = metrics_table(evaluations, published=board.published and args.format == "table")
        if args.format == "table":
            print(f"{ds.name} · split {args.split} · {board.labelled} questions · values in %")
        print(stamp_export(render_table(table, args.format), args.format, stamp), end="")
        if args.format == "table":
            print("\n".join(table_notes(list(table.columns))))
        if anchors:
            print(("\npublished results (python -m bsard_demo anchors):\n" if args.format == "table" else "")
                  + anchors_text(args.format), end="")
    if misses and args.format not in ("json", "csv"):  # csv: stdout stays one table; json: under "misses"
        print(render_misses(misses, args.format), end="")
    if misses is not None:
        lines = [m.lines.assign(run=name) for name, m in misses.items()]
        frame = pd.concat(lines, ignore_index=True) if lines else pd.DataFrame(columns=["run", *LINE_COLUMNS])
        Path(args.misses).write_text(stamp_export(csv_text(frame[["run", *LINE_COLUMNS]], index=False), "csv", stamp),
                                     encoding="utf-8")
    if args.per_query and evaluations:
        per_question = csv_text(per_question_table(evaluations, ds.questions(args.split)), index=False,
                                float_format="%.6f")
        Path(args.per_query).write_text(stamp_export(per_question, "csv", stamp), encoding="utf-8")
    report_unusable("evaluate", scored)
    return scored.exit_code


def misses_records(misses: Mapping[str, Misses]) -> dict[str, list[dict]]:
    """``evaluate --format json``'s ``misses``: per run, one record per k (``k``, ``missed``, then per
    class its count and share)."""
    table = misses_table(misses)
    out: dict[str, list[dict]] = {name: [] for name in misses}
    for (name, k), row in table.iterrows():
        out[name].append({"k": int(k), "missed": int(row["missed"]),
                          **{c: (int(row[c]) if not c.endswith("_share") else round(float(row[c]), 12))
                             for c in table.columns if c != "missed"}})
    return out


def render_misses(misses: Mapping[str, Misses], fmt: str) -> str:
    """The ``--misses`` table in ``fmt`` (``table``, ``markdown``, ``latex``): per run and k, the missed
    gold articles, then each class's count and share in %."""
    table = misses_table(misses)
    header = ["run", "k", "missed"] + [CLASS_LABELS[c] for c in CLASSES]
    rows = [[str(name), str(k), str(int(row["missed"]))]
            + [f"{int(row[c])} ({100 * row[f'{c}_share']:.1f} %)" for c in CLASSES]
            for (name, k), row in table.iterrows()]
    title = "where the misses land (missed gold articles by the closest retrieved article of the top k):\n"
    return "\n" + (title if fmt == "table" else "") + render_rows(header, rows, fmt, left=1)
