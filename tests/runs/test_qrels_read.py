"""The labels reader (bsard_demo.runs.qrels_read): every layout other tools write (TREC qrels, ranx's JSON,
CSV/TSV/parquet tables with ir_measures' and ranx's column names, gzipped), graded relevance kept, and hostile
files: every problem at once with its line and code, quotes bounded, parquet decoded in the sandbox's child,
LZ4 refused with how to convert it."""
from __future__ import annotations

import gzip
import io
import json

import pandas as pd
import pytest

from bsard_demo.runs import QRELS_CODES, qrels_bytes, qrels_read, read_qrels_bytes, read_qrels_path

LABELS = {"q1": {"d1": 1, "d2": 2}, "q 2": {"d3": 0}, "q3": {"d4": 3, "d1": 1}}
TREC = "q1 0 d1 1\nq1 0 d2 2\nq3 0 d4 3\nq3 0 d1 1\n"


def _parquet(frame: pd.DataFrame) -> bytes:
    sink = io.BytesIO()
    frame.to_parquet(sink, index=False)
    return sink.getvalue()


def _rows(names=("q_id", "doc_id", "relevance")) -> pd.DataFrame:
    rows = [(q, d, r) for q, docs in LABELS.items() for d, r in docs.items()]
    return pd.DataFrame(rows, columns=list(names))


def layouts() -> dict[str, tuple[str, bytes]]:
    """Every layout: (format the reader must say, bytes)."""
    trec = "".join(f"{q.replace(' ', '_')} 0 {d} {r}\n" for q, docs in LABELS.items() for d, r in docs.items())
    return {
        "trec": ("trec-qrels", trec.encode()),
        "trec.gz": ("trec-qrels", gzip.compress(trec.encode())),
        "ranx.json": ("ranx-json", json.dumps(LABELS).encode()),
        "ir_measures.csv": ("csv", _rows(("query_id", "doc_id", "relevance")).to_csv(index=False).encode()),
        "ranx.csv": ("csv", _rows(("q_id", "doc_id", "score")).to_csv(index=False).encode()),
        "table.tsv": ("tsv", _rows().to_csv(index=False, sep="\t").encode()),
        "ranx.parquet": ("parquet", _parquet(_rows(("q_id", "doc_id", "score")))),
        "ir_measures.parquet": ("parquet", _parquet(_rows(("query_id", "doc_id", "relevance")))),
    }


@pytest.mark.parametrize("name", list(layouts()))
def test_every_layout_reads_the_same_graded_labels(name):
    fmt, data = layouts()[name]
    got = read_qrels_bytes(data, name)
    assert got.ok and got.format == fmt and not list(got.problems), [str(p) for p in got.problems]
    want = {q.replace(" ", "_") if fmt == "trec-qrels" else q: docs for q, docs in LABELS.items()}
    assert got.labels == want and got.graded
    # binary measures: relevance > 0 (trec_eval's rule); a question judged 0 only has no relevant article
    assert got.relevant()[next(q for q in want if q.startswith("q") and "2" in q)] == frozenset()
    assert got.relevant()["q1"] == {"d1", "d2"}


@pytest.mark.parametrize("fmt", ["trec", "ranx", "parquet"])
def test_what_export_qrels_writes_reads_back(fmt):
    qrels = {"1": frozenset({"10", "11"}), "2": frozenset({"3"})}
    got = read_qrels_bytes(qrels_bytes(qrels, fmt), f"q.{fmt}")
    assert got.ok and got.relevant() == qrels and not got.graded


def test_every_problem_at_once_with_lines_codes_and_bounded_quotes():
    huge = "x" * 100_000
    text = (f"q1 0 d1 1\nq1 0 d1\nq2 0 d3 {huge}\nq2 0 d4 1.5\nq3 0 d5 1\nq3 0 d5 2\nq4 0 d6 1\nq4 0 d6 1\n"
            f"{huge} 0 d7 one\n")
    got = read_qrels_bytes(text.encode(), "bad.trec")
    assert not got.ok and got.labels is None
    found = [(p.line, p.code, p.severity) for p in got.problems]
    assert found == [(2, "bad_field_count", "error"), (3, "bad_relevance", "error"), (4, "bad_relevance", "error"),
                     (6, "conflicting_label", "error"), (8, "duplicate_label", "warning"),
                     (9, "bad_relevance", "error")]
    assert all(len(p.message) < 300 for p in got.problems)  # a 100,000-character field is quoted bounded
    assert "(100,000 characters)" in got.problems.items[1].message


def test_tables_and_json_problems():
    csv_bad = b"q_id,doc_id,relevance\nq1,d1,1\nq1,,1\nq2,d2,high\nq3,d3\n"
    got = read_qrels_bytes(csv_bad, "bad.csv")
    assert [(p.line, p.code) for p in got.problems] == [(3, "bad_id"), (4, "bad_relevance"), (5, "bad_field_count")]
    no_rel = read_qrels_bytes(b"q_id,doc_id,grade\nq1,d1,1\n", "x.csv")
    assert [p.code for p in no_rel.problems] == ["missing_columns"]
    for data, code in ((b'{"q1": [1, 2]}', "json_not_qrels"), (b"[1, 2]", "json_not_qrels"),
                       (b'{"q1": {"d1": true}}', "bad_relevance"), (b'{"q1": {"d1": 1}', "invalid_json"),
                       (b"[" * 100_000, "json_too_deep"), (b"{}", "no_labels"), (b"", "empty_file"),
                       (b"  \n", "whitespace_only"), (b"\x89PNG\r\n\x1a\n....", "binary_file")):
        got = read_qrels_bytes(data, "x")
        assert not got.ok and code in [p.code for p in got.problems], (data[:20], [str(p) for p in got.problems])


def test_a_damaged_parquet_file_is_read_in_the_child_and_refused():
    data = _parquet(_rows())
    got = read_qrels_bytes(data[:len(data) // 2] + b"PAR1", "cut.parquet")
    assert not got.ok and got.problems.items[0].code in ("parquet_unreadable", "reader_crashed")


def test_lz4_labels_in_ranx_frames_are_read_in_the_child_like_their_json_twin(tmp_path):
    ranx = pytest.importorskip("ranx", reason="ranx is not installed (requirements-dev.txt)")
    # LABELS with ids of 5 characters, as the other ranx runs of its group (ranx's numba functions compile once per
    # longest id: tests/conftest.py's ranx group)
    labels = {q: {f"d{d[1:]:0>4}": r for d, r in docs.items()} for q, docs in LABELS.items()}
    ranx.Run(labels).save(str(tmp_path / "q.lz4"), kind="lz4")  # ranx's Qrels.save has no lz4: its frame layout
    got = read_qrels_bytes((tmp_path / "q.lz4").read_bytes(), "q.lz4")
    twin = read_qrels_bytes(json.dumps(labels).encode(), "q.json")
    assert got.ok and got.format == "lz4" and got.labels == twin.labels == labels
    damaged = read_qrels_bytes(qrels_read.LZ4_MAGIC + b"\x64\x40\xa7" + b"\x00" * 8, "cut.lz4")
    assert not damaged.ok and damaged.format == "lz4" and damaged.problems.has_errors


def test_paths(tmp_path):
    path = tmp_path / "q.trec"
    path.write_text(TREC)
    assert read_qrels_path(path).labels == {"q1": {"d1": 1, "d2": 2}, "q3": {"d4": 3, "d1": 1}}
    assert [p.code for p in read_qrels_path(tmp_path / "none").problems] == ["file_not_found"]
    assert [p.code for p in read_qrels_path(tmp_path).problems] == ["not_a_file"]
    assert [p.code for p in read_qrels_path(path, max_bytes=10).problems] == ["file_too_large"]


def test_codes_are_declared_with_their_severity():
    assert set(QRELS_CODES) == {"bad_relevance", "conflicting_label", "duplicate_label",
                                "json_not_qrels", "no_labels"}
    assert QRELS_CODES["duplicate_label"][0] == "warning"


def test_mutated_labels_files_never_escape_as_an_internal_error():
    """300 seeded mutations of every text layout (deleted and inserted bytes, quotes, NUL, huge numbers,
    doubled content): each read gives problems or labels, never ``internal_error``."""
    import random

    rnd = random.Random(0)
    seeds = [data for name, (_, data) in layouts().items() if not name.endswith((".gz", ".parquet"))]
    for _ in range(300):
        s = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randrange(1, 6)):
            pos = rnd.randrange(len(s) + 1)
            op = rnd.randrange(4)
            if op == 0 and s:
                del s[rnd.randrange(len(s))]
            elif op == 1:
                s[pos:pos] = bytes([rnd.randrange(256)])
            elif op == 2:
                s[pos:pos] = rnd.choice([b'"', b",", b"\t", b"{", b"[", b"\x00", b"\n", b"1e999", b"NaN", b"\xff"])
            else:
                s = s * 2
        got = read_qrels_bytes(bytes(s), "fuzz")
        assert "internal_error" not in [p.code for p in got.problems], bytes(s)[:200]
        assert got.ok == (got.labels is not None) and (got.ok or got.problems.has_errors)
