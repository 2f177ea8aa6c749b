"""ranx's (``q_id, doc_id, score``) and ir_measures' (``query_id, doc_id, score``) column names are read in
every tabular format, as ours are (issue 30, item 5); their qrels tables are refused as qrels."""
from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bsard_demo.runs import read_run_bytes

ROWS = [("q1", "d3", 2.5), ("q1", "d1", 2.5), ("q1", "d2", 0.5), ("q2", "d9", 1.0)]
NAMES = {"ours": ("qid", "docid"), "ranx": ("q_id", "doc_id"), "ir_measures": ("query_id", "doc_id")}


def table(fmt: str, q: str, d: str, last: str = "score", rows=ROWS) -> bytes:
    if fmt == "parquet":
        out = io.BytesIO()
        pq.write_table(pa.table({q: [r[0] for r in rows], d: [r[1] for r in rows], last: [r[2] for r in rows]}), out)
        return out.getvalue()
    if fmt == "jsonl":
        return "".join(json.dumps({q: a, d: b, last: c}) + "\n" for a, b, c in rows).encode()
    sep = {"csv": ",", "tsv": "\t", "semicolon": ";", "spaces": " "}[fmt]
    return "\n".join([sep.join((q, d, last))] + [sep.join(map(str, r)) for r in rows]).encode() + b"\n"


FORMATS = ("csv", "tsv", "semicolon", "spaces", "jsonl", "parquet")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("tool", ["ranx", "ir_measures"])
def test_other_tools_column_names_read_as_ours(fmt, tool):
    ours = read_run_bytes(table(fmt, *NAMES["ours"]), f"r.{fmt}", isolation=None)
    theirs = read_run_bytes(table(fmt, *NAMES[tool]), f"r.{fmt}", isolation=None)
    assert ours.ok and not ours.problems.has_errors, [str(p) for p in ours.problems]
    assert theirs.ok and theirs.format == ours.format, [str(p) for p in theirs.problems]
    assert dict(theirs.run.rankings) == dict(ours.run.rankings) == {"q1": ("d3", "d1", "d2"), "q2": ("d9",)}
    assert dict(theirs.run.scores) == dict(ours.run.scores)


def test_ranx_json_run_is_read():
    """ranx's ``Run.save(kind="json")``: ``{q_id: {doc_id: score}}``."""
    run = {"q1": {"d3": 2.5, "d1": 2.5, "d2": 0.5}, "q2": {"d9": 1.0}}
    rf = read_run_bytes(json.dumps(run).encode(), "run.json")
    assert rf.format == "json-scores" and dict(rf.run.rankings) == {"q1": ("d3", "d1", "d2"), "q2": ("d9",)}


def test_our_name_wins_over_ranxs_when_both_are_present():
    data = b"q_id,qid,docid,score\nx,q1,d1,1.0\n"
    assert list(read_run_bytes(data, "r.csv").run.rankings) == ["q1"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_ir_measures_qrels_table_is_refused_as_qrels(fmt):
    rows = [("q1", "d1", 1), ("q1", "d2", 0)]
    rf = read_run_bytes(table(fmt, "query_id", "doc_id", "relevance", rows), f"qrels.{fmt}", isolation=None)
    assert not rf.ok
    assert [p.code for p in rf.problems] == (["qrels_file"] if fmt != "jsonl" else ["missing_field"] * 2)
