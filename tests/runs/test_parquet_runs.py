"""Parquet runs (issue 11 item 7): the layouts ranx and pandas write, plain and gzip, the same
validation as the text formats (row numbers as lines), and hostile files refused clearly."""
from __future__ import annotations

import gzip
import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bsard_demo.runs import FORMATS, UNKNOWN, Run, read_run_bytes, read_run_path

SCORES = {"1": {"947": 12.5, "948": 11.0, "12": 11.0, "3": 0.25}, "2": {"5": -2.5, "9": 1.0, "10": 1.0}}


def table_bytes(table: pa.Table, **kw) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **kw)
    return out.getvalue()


def scores_table(names=("q_id", "doc_id", "score"), scores=SCORES) -> pa.Table:
    q, d, s = names
    return pa.table({q: [qid for qid, docs in scores.items() for _ in docs],
                     d: [doc for docs in scores.values() for doc in docs],
                     s: [v for docs in scores.values() for v in docs.values()]})


def codes(rf) -> set[str]:
    return {p.code for p in rf.problems}


@pytest.mark.parametrize("names", [("q_id", "doc_id", "score"), ("qid", "docid", "score"),
                                   ("query_id", "doc_id", "score"), ("QID", "DocId", "Score")])
@pytest.mark.parametrize("compress", [False, True])
def test_score_tables_round_trip(names, compress):
    data = table_bytes(scores_table(names))
    rf = read_run_bytes(gzip.compress(data) if compress else data, "run.parquet")
    assert rf.format == "parquet" and rf.compressed == compress and rf.ok, [str(p) for p in rf.problems]
    expected = Run.from_scores(SCORES)
    assert rf.run.rankings == expected.rankings and rf.run.scores == expected.scores


def test_pandas_categoricals_integer_ids_rank_and_tag_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"qid": pd.Categorical(["7", "7", "8"]), "docid": [3, 1, 2], "rank": [2, 1, 1],
                       "tag": ["bm25", "bm25", "bm25"], "other": [1.5, None, 2.0]})
    path = tmp_path / "run.parquet"
    df.to_parquet(path, index=False)
    rf = read_run_path(path)
    assert rf.format == "parquet" and rf.run.rankings == {"7": ("1", "3"), "8": ("2",)} and rf.run.scores is None
    assert rf.tags == ("bm25",)


def test_score_and_rank_check_ranks_and_lines_are_row_numbers():
    t = pa.table({"qid": ["1", "1", "1"], "docid": ["a", "b", "c"], "rank": [1, 2, 3], "score": [0.2, 0.9, 0.1]})
    rf = read_run_bytes(table_bytes(t), "r.parquet")
    assert rf.run["1"] == ("b", "a", "c")
    [p] = [p for p in rf.problems if p.code == "rank_score_order"]
    assert p.line == 2 and "rank 1 (line 1, score 0.2) has a lower score than rank 2 (line 2" in p.message


def test_same_problems_as_the_csv_of_the_same_table():
    """Duplicates, ties, unknown articles and questions, short rankings, several tags: the codes
    and messages of the CSV, lines one less (the CSV has a header line; parquet rows count from 1)."""
    rng = random.Random(0)
    rows = [(str(rng.randrange(6)), str(rng.randrange(40)), rng.choice([0.5, 1.0, 2.0, 3.5]), rng.randrange(1, 9),
             rng.choice(["x", "y"])) for _ in range(300)]
    t = pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows], "score": [r[2] for r in rows],
                  "rank": [r[3] for r in rows], "tag": [r[4] for r in rows]})
    csv = "qid,docid,score,rank,tag\n" + "".join(f"{q},{d},{s!r},{r},{g}\n" for q, d, s, r, g in rows)
    kw = {"qids": ["1", "2", "3"], "corpus_ids": [str(i) for i in range(30)], "k": 100}
    a, b = read_run_bytes(table_bytes(t, row_group_size=70), "r", **kw), read_run_bytes(csv.encode(), "r", **kw)
    assert a.run.rankings == b.run.rankings and a.run.scores == b.run.scores and a.tags == b.tags
    assert [(p.code, p.message.replace("line ", "L"), p.line) for p in a.problems] == [
        (p.code, _shift_lines(p.message).replace("line ", "L"), None if p.line is None else p.line - 1)
        for p in b.problems]
    assert {"duplicate_article", "rank_score_order", "unknown_articles", "unknown_questions",
            "several_tags"} <= codes(a)


def _shift_lines(message: str) -> str:
    import re

    return re.sub(r"line (\d+)", lambda m: f"line {int(m.group(1)) - 1}", message)


def test_nulls_and_bad_values_name_their_rows():
    t = pa.table({"qid": ["1", None, "1", "1", " "], "docid": ["a", "b", "c", "d", "e"],
                  "score": [1.0, 2.0, None, float("nan"), 0.5]})
    rf = read_run_bytes(table_bytes(t), "r.parquet")
    assert not rf.ok
    assert {(p.code, p.line, p.message) for p in rf.problems} >= {
        ("bad_id", 2, "empty question id"), ("bad_score", 3, "score is missing (null)"),
        ("bad_score", 4, "score nan is not a finite number"), ("bad_id", 5, "empty question id")}
    ranks = pa.table({"qid": ["1", "1"], "docid": ["a", "b"], "rank": [1.0, 2.5]})
    rf = read_run_bytes(table_bytes(ranks), "r.parquet")
    assert [(p.code, p.line) for p in rf.problems if p.severity == "error"] == [("bad_rank", 2)]


@pytest.mark.parametrize("table, phrase", [
    (pa.table({"qid": ["1"], "score": [1.0]}), "no article id column"),
    (pa.table({"docid": ["a"], "score": [1.0]}), "no question id column"),
    (pa.table({"qid": ["1"], "docid": ["a"], "other": [1.0]}), "no score or rank column"),
])
def test_missing_columns(table, phrase):
    rf = read_run_bytes(table_bytes(table), "r.parquet")
    assert [p.code for p in rf.problems] == ["missing_columns"] and phrase in rf.problems.items[0].message


@pytest.mark.parametrize("column, value", [
    ("docid", pa.array([["a", "b"]])),  # a list: nested
    ("docid", pa.array([{"x": 1}])),  # a struct
    ("qid", pa.array([b"\x00\x01"], type=pa.binary())),
    ("score", pa.array(["0.5"])),  # scores as strings
    ("score", pa.array([True])),
    ("qid", pa.array([1.5])),  # float ids
    ("docid", pa.array([pa.scalar(0, type=pa.date32()).as_py()], type=pa.date32())),
])
def test_wrong_column_types(column, value):
    cols = {"qid": pa.array(["1"]), "docid": pa.array(["a"]), "score": pa.array([1.0])}
    cols[column] = value
    rf = read_run_bytes(table_bytes(pa.table(cols)), "r.parquet")
    assert [p.code for p in rf.problems] == ["bad_column_type"], [str(p) for p in rf.problems]
    assert column in rf.problems.items[0].message and rf.format == "parquet"


def test_truncated_damaged_and_huge_files_are_refused():
    data = table_bytes(scores_table())
    for cut in (len(data) // 2, len(data) - 3, 12):
        rf = read_run_bytes(data[:cut], "r.parquet")
        assert [p.code for p in rf.problems] == ["parquet_unreadable"], (cut, [str(p) for p in rf.problems])
    damaged = bytearray(data)
    damaged[len(data) // 3: len(data) // 3 + 20] = bytes(20)
    rf = read_run_bytes(bytes(damaged), "r.parquet")
    assert not rf.ok and codes(rf) <= {"parquet_unreadable", "bad_id", "bad_score", "unknown_articles"} | codes(rf)
    big = pa.table({"qid": ["q"] * 50_000, "docid": [str(i) for i in range(50_000)], "score": [1.0] * 50_000})
    rf = read_run_bytes(table_bytes(big, compression="zstd"), "big.parquet", max_bytes=200_000)
    assert [p.code for p in rf.problems] == ["parquet_too_large"] and "row group 1" in rf.problems.items[0].message
    empty = pa.table({"qid": pa.array([], pa.string()), "docid": pa.array([], pa.string()),
                      "score": pa.array([], pa.float64())})
    assert [p.code for p in read_run_bytes(table_bytes(empty), "e.parquet").problems] == ["no_run_lines"]


def test_a_text_run_whose_first_id_is_par1_is_still_text():
    rf = read_run_bytes(b"PAR1 Q0 a 1 1.0 t\n", "r")
    assert rf.format == "trec" and rf.run.rankings == {"PAR1": ("a",)}


def test_lower_is_better_and_scores_ascending_apply_to_parquet():
    t = pa.table({"qid": ["1"] * 3 + ["2"] * 3, "docid": list("abcdef"), "rank": [1, 2, 3] * 2,
                  "score": [0.1, 0.5, 0.9, 0.2, 0.3, 0.4]})
    rf = read_run_bytes(table_bytes(t), "d.parquet")
    assert "scores_ascending" in codes(rf)
    rf = read_run_bytes(table_bytes(t), "d.parquet", lower_is_better=True)
    assert rf.run["1"] == ("a", "b", "c") and not {"scores_ascending", "rank_score_order"} & codes(rf)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_parquet_never_raises(data):
    raw = bytearray(table_bytes(scores_table()))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(4, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    rf = read_run_bytes(bytes(raw), "fuzz.parquet")
    assert rf.format in FORMATS or rf.format == UNKNOWN
    assert (rf.run is None) == rf.problems.has_errors
    assert all(p.code != "internal_error" for p in rf.problems), [str(p) for p in rf.problems]
