"""Qrels and runs in the forms other tools read: TREC (trec_eval, ir_measures, ranx), ranx's JSON
(``{q_id: {doc_id: score}}``) and parquet with ranx's columns ``q_id, doc_id, score``
(``ranx.Run.from_parquet`` / ``ranx.Qrels.from_parquet``). ``export-qrels`` and ``export-run``
(:mod:`bsard_demo.cli.exchange`) call :func:`qrels_bytes` and :func:`run_bytes`.

Qrels hold the questions with at least one relevant article, relevance 1 (BSARD's labels are
binary; trec_eval and ranx leave a question without relevant article out anyway). A run is written
in our order (:mod:`bsard_demo.runs.run`), with scores that make every tool rank it the same way:
the file's scores, negated for distances (``lower_is_better``), or synthesised from ranks (``n - i``)
when the run has none or ``rank_scores`` is asked. Tied scores are the one thing tools disagree on:
trec_eval breaks ties by document id descending, as we do, but ranx sorts with numpy's unstable
``argsort`` (no fixed order), so :func:`tied_questions` counts them and ``rank_scores`` removes them.

A parquet export carries the reproducibility stamp given (``stamp``) in its schema metadata under
:data:`STAMP_KEY` (pandas, ranx and pyarrow read the table as before). TREC and ranx JSON have no room for
one: a ``#`` line is read as a label by ranx's and ir_measures' qrels readers and breaks their run
readers, and ranx's JSON reader takes every key for a question.
"""
from __future__ import annotations

import io
import json
from typing import Mapping

from .problems import quote
from .run import Run
from .write import format_run

#: The formats of :func:`qrels_bytes` and :func:`run_bytes`.
EXCHANGE_FORMATS = ("trec", "ranx", "parquet")
#: ranx's column names (``Run.to_dataframe``, ``from_parquet``'s defaults).
RANX_COLUMNS = ("q_id", "doc_id", "score")
#: The parquet schema metadata key of an export's stamp (its value: the stamp as JSON).
STAMP_KEY = b"bsard_demo.stamp"


def qrels_records(qrels: Mapping[str, frozenset[str]]) -> list[tuple[str, str, int]]:
    """``(q_id, doc_id, 1)`` for every relevant article, questions in the given order, articles
    sorted; questions without relevant article are left out."""
    return [(qid, doc, 1) for qid, gold in qrels.items() for doc in sorted(gold)]


def run_records(run: Run, *, rank_scores: bool = False) -> list[tuple[str, str, float]]:
    """``(q_id, doc_id, score)`` in our rank order, with scores decreasing down each ranking as
    the module doc says (given, negated distances, or ``n - i`` from ranks)."""
    out = []
    for qid, docs in run.rankings.items():
        given = None if rank_scores or not run.scores else run.scores.get(qid)
        if given is None:
            scores = [float(len(docs) - i) for i in range(len(docs))]
        else:
            scores = [-float(s) if run.lower_is_better else float(s) for s in given]
        out.extend((qid, doc, score) for doc, score in zip(docs, scores))
    return out


def tied_questions(run: Run) -> int:
    """How many questions have two articles with the same score (where ranx may rank otherwise)."""
    if not run.scores:
        return 0
    return sum(1 for qid in run.rankings if len(set(run.scores.get(qid) or ())) < len(run.rankings[qid]))


def _grouped(records) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for qid, doc, score in records:
        out.setdefault(qid, {})[doc] = score
    return out


def _parquet(records, score_type: str, stamp: Mapping | None = None) -> bytes:
    # imported here: pyarrow (~40 MB, 0.3 s) stays out of every process that imports bsard_demo.runs;
    # the server reads parquet only in the sandbox's child
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(zip(*records)) if records else [[], [], []]
    table = pa.table({name: pa.array(list(values), type=kind) for name, values, kind in
                      zip(RANX_COLUMNS, columns, (pa.string(), pa.string(), pa.type_for_alias(score_type)))})
    if stamp is not None:
        table = table.replace_schema_metadata({STAMP_KEY: json.dumps(dict(stamp), ensure_ascii=True).encode()})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _check_trec_ids(records) -> None:
    """TREC's lines are split on blanks: an id holding one (a JSON or CSV run may) would write a
    file that reads back otherwise. :class:`ValueError` naming the first such id, quoted bounded."""
    for q, d, _ in records:
        for kind, value in (("question", q), ("article", d)):
            if any(ch.isspace() for ch in str(value)):
                raise ValueError(f"TREC cannot hold the {kind} id {quote(str(value))} (it has a blank or a line "
                                 "break): choose --format ranx or parquet")


def qrels_bytes(qrels: Mapping[str, frozenset[str]], fmt: str, *, stamp: Mapping | None = None) -> bytes:
    """The qrels as TREC qrels (``q_id 0 doc_id 1``), ranx JSON or parquet (``q_id, doc_id, score``; with
    ``stamp`` in its metadata)."""
    records = qrels_records(qrels)
    if fmt == "trec":
        _check_trec_ids(records)
        return "".join(f"{q} 0 {d} {r}\n" for q, d, r in records).encode("utf-8")
    if fmt == "ranx":
        return (json.dumps(_grouped(records), ensure_ascii=False) + "\n").encode("utf-8")
    if fmt == "parquet":
        return _parquet(records, "int64", stamp)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(EXCHANGE_FORMATS)}")


def run_bytes(run: Run, fmt: str, *, tag: str = "bsard-demo", rank_scores: bool = False,
              stamp: Mapping | None = None) -> bytes:
    """The run as TREC (:func:`bsard_demo.runs.write.format_run`), ranx JSON or parquet
    (``q_id, doc_id, score``; with ``stamp`` in its metadata), scores as :func:`run_records` gives them."""
    records = run_records(run, rank_scores=rank_scores)
    if fmt == "parquet":
        return _parquet(records, "float64", stamp)
    grouped = _grouped(records)
    if fmt == "ranx":
        return (json.dumps(grouped, ensure_ascii=False) + "\n").encode("utf-8")
    if fmt == "trec":
        _check_trec_ids(records)
        return format_run(list(grouped), [list(d.items()) for d in grouped.values()], "trec", tag).encode("utf-8")
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(EXCHANGE_FORMATS)}")
