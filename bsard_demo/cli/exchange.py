"""The ``export-qrels`` and ``export-run`` commands: a split's labels and a run file in the forms
trec_eval, ir_measures and ranx read (:mod:`bsard_demo.runs.exchange`: TREC, ranx's JSON, parquet
with ranx's columns ``q_id, doc_id, score``).

``export-run`` reads the run as ``evaluate`` does (any format we read, every problem one line on
stderr, exit 2 when it has errors) and writes it in our rank order; with tied scores it says how
many questions have some, since ranx breaks ties in no fixed order (``--rank-scores`` writes
scores from our ranks instead). The file is written whole or not at all
(:func:`bsard_demo.runs.write_text_atomic`); a parquet file carries the reproducibility stamp in its metadata
(TREC and ranx JSON have no room for one that every reader skips).
"""
from __future__ import annotations

import argparse
import sys

from ..evaluation.scoring import RunSource
from ..evaluation.stamp import export_stamp, source_sha256
from ..runs import EXCHANGE_FORMATS, qrels_bytes, read_run_path, run_bytes, tied_questions, write_text_atomic
from ..sources import load_dataset
from .common import add_data_argument, data_spec, fail, problem_line, say, trec_word

FORMAT_HELP = ("trec (trec_eval, ir_measures, ranx), ranx (ranx's JSON {q_id: {doc_id: score}}) or parquet "
               "(columns q_id, doc_id, score, as ranx reads and writes them)")


def add_export_qrels_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``export-qrels``: a split's labels for other tools."""
    q = subparsers.add_parser("export-qrels", help="write a split's labels as TREC qrels, ranx JSON or parquet",
                              description="Write the relevant articles of a split's questions (relevance 1) for "
                                          "trec_eval, ir_measures or ranx: " + FORMAT_HELP + ".")
    add_data_argument(q)
    q.add_argument("--split", default="test", help="question split (default: test)")
    q.add_argument("--format", choices=EXCHANGE_FORMATS, required=True, help=FORMAT_HELP)
    q.add_argument("--out", required=True, metavar="FILE", help="the file to write")
    q.set_defaults(func=cmd_export_qrels)
    return q


def add_export_run_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``export-run``: a run file for other tools."""
    r = subparsers.add_parser("export-run", help="write a run file as TREC, ranx JSON or parquet",
                              description="Read a run file (any format evaluate reads) and write it in our rank "
                                          "order for trec_eval, ir_measures or ranx: " + FORMAT_HELP + ".")
    r.add_argument("run", metavar="RUN", help="a run file")
    r.add_argument("--format", choices=EXCHANGE_FORMATS, required=True, help=FORMAT_HELP)
    r.add_argument("--out", required=True, metavar="FILE", help="the file to write")
    r.add_argument("--lower-is-better", action="store_true",
                   help="the file's scores are distances: they are written negated, so that every tool ranks "
                        "them as we do")
    r.add_argument("--rank-scores", action="store_true",
                   help="write scores from our ranks (n, n-1, ..., 1) instead of the file's: no ties left, so ranx "
                        "ranks exactly as trec_eval and bsard-demo do")
    r.add_argument("--tag", default="bsard-demo", help="the TREC run tag (default: bsard-demo)")
    r.set_defaults(func=cmd_export_run)
    return r


def cmd_export_qrels(args: argparse.Namespace) -> int:
    ds = load_dataset(data_spec(args), need_corpus=False)
    qrels = ds.qrels(args.split)
    try:
        data = qrels_bytes(qrels, args.format, stamp=export_stamp(dataset=ds, split=args.split))
    except ValueError as exc:
        return fail("export-qrels", str(exc))
    write_text_atomic(args.out, data)
    labelled = sum(1 for gold in qrels.values() if gold)
    say("export-qrels", f"{labelled} question(s) of split {args.split}, {sum(map(len, qrels.values()))} relevant "
                        f"article(s), written to {args.out} ({args.format})"
        + (f"; {len(qrels) - labelled} question(s) without relevant article left out" if labelled < len(qrels)
           else ""))
    return 0


def cmd_export_run(args: argparse.Namespace) -> int:
    if not trec_word(args.tag):
        return fail("export-run", "--tag takes one word (a TREC tag has no blanks)")
    rf = read_run_path(args.run, lower_is_better=args.lower_is_better)
    for p in rf.problems:
        print(problem_line(rf.name, p, code=False), file=sys.stderr)
    if rf.run is None:
        return fail("export-run", f"{rf.name} has errors and was not written")
    stamp = export_stamp(runs={rf.name: source_sha256(RunSource.file(args.run))},
                         rankings={rf.name: rf.run.ranking_sha256()})
    try:
        data = run_bytes(rf.run, args.format, tag=args.tag, rank_scores=args.rank_scores, stamp=stamp)
    except ValueError as exc:
        return fail("export-run", str(exc))
    write_text_atomic(args.out, data)
    ties = 0 if args.rank_scores else tied_questions(rf.run)
    say("export-run", f"{len(rf.run)} question(s) written to {args.out} ({args.format})"
        + (f"; {ties} question(s) have tied scores, which ranx orders in no fixed way (trec_eval and bsard-demo: "
           "article id descending): --rank-scores writes our order" if ties else ""))
    return 0

