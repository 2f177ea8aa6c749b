"""Run-file readers: every format round-trips, and every malformed file gets a clear problem."""
from __future__ import annotations

import gzip
import json
import random
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bsard_demo.runs import Run, RunFile, read_run_bytes, read_run_path
from bsard_demo.runs.read import formats

# Ties on purpose: in question 1, 948 and 12 share 11.0 (string order puts "948" first); in
# question 2, "9" and "10" share 1.0 ("9" > "10" as strings).
SCORES = {
    "1": {"947": 12.5, "948": 11.0, "12": 11.0, "3": 0.25},
    "2": {"5": -2.5, "9": 1.0, "10": 1.0},
    "10": {"7": 3.0},
}
RANKINGS = {"1": ["947", "12", "3"], "2": ["50", "5"], "10": ["7"]}


def read(data: bytes | str, name: str = "run.txt", **kw) -> RunFile:
    return read_run_bytes(data.encode() if isinstance(data, str) else data, name, **kw)


def has(rf: RunFile, severity: str, line: int | None, phrase: str) -> bool:
    return any(p.severity == severity and p.line == line and phrase in p.message for p in rf.problems)


def assert_problem(rf: RunFile, severity: str, line: int | None, phrase: str) -> None:
    assert has(rf, severity, line, phrase), [str(p) for p in rf.problems]
    if severity == "error":
        assert rf.run is None and not rf.ok


def assert_same_run(rf: RunFile, expected: Run) -> None:
    assert rf.run is not None, [str(p) for p in rf.problems]
    assert not rf.problems.has_errors
    assert rf.run.rankings == expected.rankings
    assert rf.run.scores == expected.scores


def trec_lines(scores=SCORES, tag="bm25") -> list[str]:
    """TREC lines with ranks consistent with the reference order of Run.from_scores."""
    ref = Run.from_scores(scores)
    return [f"{q} Q0 {d} {r} {s!r} {tag}" for q in ref for r, (d, s) in enumerate(ref.scored(q), 1)]


def three_col_score_lines(scores=SCORES) -> list[str]:
    return [f"{q}\t{d}\t{s!r}" for q, docs in scores.items() for d, s in docs.items()]


def three_col_rank_lines(rankings=RANKINGS) -> list[str]:
    return [f"{q} {d} {r}" for q, docs in rankings.items() for r, d in enumerate(docs, 1)]


def jsonl_score_lines(scores=SCORES) -> list[str]:
    return [json.dumps({"qid": q, "docid": d, "score": s}) for q, docs in scores.items() for d, s in docs.items()]


def text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def parquet(columns: dict) -> bytes:
    """A parquet table of ``columns``, as pandas/ranx write one (pyarrow)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# round trips

def ranx_lz4(scores) -> bytes:
    """``scores`` as ranx's ``Run.save(kind="lz4")`` writes them: LZ4 frame of LZ4 frame of CBOR."""
    cbor2, lz4_frame = pytest.importorskip("cbor2"), pytest.importorskip("lz4.frame")
    return lz4_frame.compress(lz4_frame.compress(cbor2.dumps(scores), compression_level=16))


SCORE_FILES = {
    "trec": lambda: text(trec_lines()),
    "3col-score": lambda: text(three_col_score_lines()),
    "csv": lambda: "qid,docid,score\n" + "".join(
        f"{q},{d},{s!r}\n" for q, docs in SCORES.items() for d, s in docs.items()),
    "json-scores": lambda: json.dumps(SCORES),
    "jsonl": lambda: text(jsonl_score_lines()),
    "parquet": lambda: parquet({"q_id": [q for q, docs in SCORES.items() for _ in docs],
                                "doc_id": [d for docs in SCORES.values() for d in docs],
                                "score": [s for docs in SCORES.values() for s in docs.values()]}),
    "lz4": lambda: ranx_lz4(SCORES),
}
RANK_FILES = {
    "3col-rank": lambda: text(three_col_rank_lines()),
    "csv": lambda: "query_id;article_id;rank\n" + "".join(
        f"{q};{d};{r}\n" for q, docs in RANKINGS.items() for r, d in enumerate(docs, 1)),
    "json-ranked": lambda: json.dumps(RANKINGS),
    "jsonl": lambda: text([json.dumps({"qid": q, "docids": docs}) for q, docs in RANKINGS.items()]),
    "parquet": lambda: parquet({"qid": [q for q, docs in RANKINGS.items() for _ in docs],
                                "docid": [d for docs in RANKINGS.values() for d in docs],
                                "rank": [r for docs in RANKINGS.values() for r in range(1, len(docs) + 1)]}),
}


def read_format(files: dict, fmt: str, compress: bool) -> RunFile:
    """The file ``files[fmt]`` makes, gzipped when ``compress``, read back: its format and
    compression are detected."""
    data = files[fmt]()
    data = data.encode() if isinstance(data, str) else data
    rf = read(gzip.compress(data) if compress else data)
    assert rf.format == fmt and rf.compressed == compress
    return rf


@pytest.mark.parametrize("fmt", list(SCORE_FILES))
@pytest.mark.parametrize("compress", [False, True])
def test_score_formats_round_trip(fmt, compress):
    assert_same_run(read_format(SCORE_FILES, fmt, compress), Run.from_scores(SCORES))


@pytest.mark.parametrize("fmt", list(RANK_FILES))
@pytest.mark.parametrize("compress", [False, True])
def test_rank_formats_round_trip(fmt, compress):
    rf = read_format(RANK_FILES, fmt, compress)
    assert_same_run(rf, Run.from_rankings(RANKINGS))
    assert rf.run.scores is None


def test_all_formats_are_exercised():
    assert set(SCORE_FILES) | set(RANK_FILES) == set(formats())


def test_ties_follow_trec_eval_order_whatever_the_file_order():
    lines = trec_lines()
    random.Random(3).shuffle(lines)
    rf = read(text(lines))
    assert rf.run["1"] == ("947", "948", "12", "3")  # 948 and 12 tie: article id descending as strings
    assert rf.run["2"] == ("9", "10", "5")  # "9" > "10" as strings
    assert rf.run.scores["1"] == (12.5, 11.0, 11.0, 0.25)


def test_trec_order_is_by_score_not_rank():
    rf = read("q1 Q0 a 1 0.1 t\nq1 Q0 b 2 0.9 t\nq1 Q0 c 3 0.5 t\n")
    assert rf.run["q1"] == ("b", "c", "a")


def test_bom_crlf_tabs_and_blank_lines():
    body = "\r\n".join(line.replace(" ", " \t  ") for line in trec_lines()) + "\r\n\r\n"
    body = "\r\n\r\n" + body.replace("\r\n", "\r\n  \r\n", 1)
    rf = read(b"\xef\xbb\xbf" + body.encode())
    assert rf.format == "trec"
    assert_same_run(rf, Run.from_scores(SCORES))


def test_bom_before_csv_header_and_utf16_with_bom():
    csv_text = SCORE_FILES["csv"]().replace("\n", "\r\n")
    assert_same_run(read(b"\xef\xbb\xbf" + csv_text.encode()), Run.from_scores(SCORES))
    assert_same_run(read(text(trec_lines()).encode("utf-16")), Run.from_scores(SCORES))


def test_no_trailing_newline_and_old_mac_line_endings():
    assert_same_run(read("\n".join(trec_lines())), Run.from_scores(SCORES))
    assert_same_run(read("\r".join(trec_lines())), Run.from_scores(SCORES))


def test_line_numbers_count_blank_lines():
    rf = read("\n\n1 Q0 a 1 1.0 t\n\n1 Q0 b 2 x t\n")
    assert_problem(rf, "error", 5, "score 'x' is not a number")


def test_name_and_tags():
    rf = read(text(trec_lines(tag="bm25-k1.2")), name="my run.trec")
    assert rf.name == "my run.trec" and rf.run.name == "my run.trec"
    assert rf.tags == ("bm25-k1.2",) and rf.run.tags == ("bm25-k1.2",)


def test_csv_with_score_and_rank_uses_score():
    rf = read("qid,docid,rank,score,tag\n1,a,1,0.2,x\n1,b,2,0.9,x\n")
    assert rf.format == "csv" and rf.run["1"] == ("b", "a")
    assert has(rf, "warning", 3, "lower score")


def test_csv_quoted_fields_other_columns_and_tab_header():
    rf = read('"QID","Doc_ID","Score","comment"\n"1","a","0.5","x, y"\n"1","b","0.7",""\n')
    assert rf.format == "csv" and rf.run["1"] == ("b", "a")
    rf = read("qid\tdocid\tscore\n1\ta\t0.5\n1\tb\t0.7\n")
    assert rf.format == "csv" and rf.run["1"] == ("b", "a")


def test_whitespace_header_line_on_a_trec_file():
    rf = read("qid Q0 docid rank score tag\n" + text(trec_lines()))
    assert rf.format == "csv"
    assert_same_run(rf, Run.from_scores(SCORES))


def test_json_ids_may_be_integers_and_jsonl_ranks():
    assert read('{"1": [947, "12"]}').run["1"] == ("947", "12")
    rf = read('{"qid": 1, "docid": 947, "rank": 2}\n{"qid": 1, "docid": 12, "rank": 1}\n')
    assert rf.format == "jsonl" and rf.run["1"] == ("12", "947")


def test_multi_member_gzip():
    lines = trec_lines()
    data = gzip.compress(text(lines[:3]).encode()) + gzip.compress(text(lines[3:]).encode())
    assert_same_run(read(data), Run.from_scores(SCORES))


# --------------------------------------------------------------------------------------------
# 3-column detection


@pytest.mark.parametrize("body, fmt, order", [
    ("q a 1\nq b 2\nq c 3\n", "3col-rank", ("a", "b", "c")),
    ("q c 3\nq a 1\nq b 2\nr x 1\n", "3col-rank", ("a", "b", "c")),  # ranks, any file order
    ("q a 3\nq b 2\nq c 1\nr x 2\nr y 1\n", "3col-score", ("a", "b", "c")),  # whole-number scores, best first
    ("q a 0.5\nq b 2\nq c 1.5\n", "3col-score", ("b", "c", "a")),
    ("q a 10\nq b 7\nq c 12\n", "3col-score", ("c", "a", "b")),  # does not start at 1
    ("q a 1\nq b 1\nq c 2\n", "3col-score", ("c", "b", "a")),  # repeated values
])
def test_three_column_rank_or_score(body, fmt, order):
    rf = read(body)
    assert rf.format == fmt, [str(p) for p in rf.problems]
    assert rf.run["q"] == order


# --------------------------------------------------------------------------------------------
# malformed files: one specific problem each

GOOD = text(trec_lines())
TREC_MALFORMED = [
    # (body, severity, line, phrase)
    ("1 Q0 a 1 1.5 t\n1 Q0 b 2 1.0\n", "error", 2, "expected 6 fields (qid Q0 docid rank score tag), found 5"),
    ("1 Q0 a 1 1.5 t\n1 Q0 b 2 nan t\n", "error", 2, "score 'nan' is not a finite number"),
    ("1 Q0 a 1 1.5 t\n1 Q0 b 2 -inf t\n", "error", 2, "score '-inf' is not a finite number"),
    ("1 Q0 a 1 1.5 t\n1 Q0 b 2 high t\n", "error", 2, "score 'high' is not a number"),
    ("1 Q0 a 1 1.5 t\n1 Q0 b second 1.0 t\n", "error", 2, "rank 'second' is not a whole number"),
    ("1 Q0 a 1 1.5 t\n1 Q0 b 2.5 1.0 t\n", "error", 2, "rank '2.5' is not a whole number"),
    ("qid;docid;score\n1;a;0,5\n", "error", 2, "score '0,5' is not a number (decimal comma? use a point)"),
    ("q a 1\nq b 2\nq c 2.5\nq d 4\n", "error", 3,
     "rank '2.5' is not a whole number ≥ 1 (the third column holds ranks"),
    ("q a 1\nq b 2\nq c x\nq d 4\n", "error", 3, "rank 'x' is not a whole number"),
    ("q a 1\nq b -2\nq c 3\n", "error", 2, "rank '-2' is not a whole number ≥ 1"),
    ("q a 0.5\nq b 0.25\nq c inf\n", "error", 3, "score 'inf' is not a finite number"),
    ("q a 0.5\nq b 0.25 extra\nq c 0.1\n", "error", 2, "expected 3 fields (qid docid rank|score), found 4"),
    ("qid,docid,score\n1,a,0.5\n1,b\n", "error", 3, "expected 3 fields as in the header (qid, docid, score), found 2"),
    ("qid,score\n1,0.5\n", "error", 1, "no article id column (expected one of docid, doc_id, article_id)"),
    ("docid,score\na,0.5\n", "error", 1, "no question id column"),
    ("qid,docid,comment\n1,a,x\n", "error", 1, "no score or rank column"),
    ("qid,docid,score\n", "error", 1, "header but no data lines"),
    ("qid,docid,score\n,a,0.5\n", "error", 2, "empty question id"),
    ("1,947,0.5\n1,948,0.4\n", "error", 1, "comma-separated values without a header line"),
    ("4 0 2222 1\n7 0 2222 1\n", "error", 1, "looks like a qrels file"),
    ("Ceci est un texte.\nIl n'a rien d'un run, vraiment rien.\n", "error", 1, "does not look like a run file"),
    ("[1, 2, 3]", "error", None, "JSON top level is a list"),
    ("42\n", "error", 1, "does not look like a run file"),
    ('{"1": {"a": 0.5, "b": "high"}}', "error", None,
     "question '1', article 'b': score \"high\" is a string, not a number"),
    ('{"1": {"a": true}}', "error", None, "is a boolean, not a number"),
    ('{"1": {"a": NaN}}', "error", None, "score nan is not a finite number"),
    ('{"1": {"a": 0.5}, "2": ["b"]}', "error", None, "question '2': expected an object {docid: score} like the first"),
    ('{"1": 0.5}', "error", None, "expected for each question an object"),
    ("{}", "error", None, "JSON object is empty"),
    ('{\n  "1": {"a": 0.5,}\n}', "error", 2, "invalid JSON"),
    ('{"qid": "1", "docid": "a", "score": 1}\n{"qid": "1", "docid": "b", "score": \n', "error", 2, "not valid JSON"),
    ('{"qid": "1", "docid": "a", "score": 1}\n{"qid": "1", "docid": "b", "rank": 2}\n', "error", 2,
     "expected a score, like the first record (line 1)"),
    ('{"qid": "1", "docid": "a", "score": 1}\n{"docid": "b", "score": 2}\n', "error", 2, "no question id"),
    ('{"qid": "1", "docid": "a", "score": 1}\n[1]\n', "error", 2, "expected a JSON object, found a list"),
    ('{"qid": "1", "docids": ["a", null]}\n', "error", 1, "article id null at position 2"),
]


@pytest.mark.parametrize("body, severity, line, phrase", TREC_MALFORMED, ids=[p for *_, p in TREC_MALFORMED])
def test_malformed_text_files(body, severity, line, phrase):
    assert_problem(read(body), severity, line, phrase)


def test_empty_and_whitespace_only():
    assert_problem(read(b""), "error", None, "empty (0 bytes)")
    assert_problem(read(b"  \n\t\r\n \n"), "error", None, "only whitespace")
    assert_problem(read(gzip.compress(b"")), "error", None, "decompresses to 0 bytes")


@pytest.mark.parametrize("data, phrase", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "PNG image"),
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "PDF document"),
    (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "ZIP archive"),
    (b"\x00\x01\x02\x03binary\xff\xfe\x00", "binary file"),
    (b"BZh91AY&SY" + bytes(20), "bzip2"),
    (gzip.compress(gzip.compress(GOOD.encode())), "gzip-compressed twice"),
])
def test_binary_files(data, phrase):
    rf = read(data)
    assert_problem(rf, "error", None, phrase)
    assert rf.format == "unknown"


def test_html_page():
    rf = read("<!DOCTYPE html>\n<html><head><title>GitHub</title></head><body>run.trec</body></html>\n")
    assert_problem(rf, "error", None, "HTML web page")


def test_invalid_utf8_names_its_lines():
    lines = [line.encode() for line in trec_lines()]
    lines[2] = lines[2].replace(b"bm25", b"bm\xe925")
    lines[5] = lines[5].replace(b"bm25", b"\xff\xfe")
    rf = read(b"\n".join(lines))
    assert_problem(rf, "error", 3, "not valid UTF-8: byte 0xE9")
    assert_problem(rf, "error", 6, "not valid UTF-8: byte 0xFF")
    assert rf.problems.count("error") == 2


def test_truncated_and_corrupt_gzip():
    data = gzip.compress(GOOD.encode() * 50)
    assert_problem(read(data[: len(data) // 2]), "error", None, "gzip file is truncated")
    assert_problem(read(data[:-4]), "error", None, "truncated")  # size trailer missing
    corrupt = bytearray(data)
    corrupt[len(corrupt) // 2] ^= 0xFF
    corrupt[len(corrupt) // 2 + 1] ^= 0xFF
    rf = read(bytes(corrupt))
    assert rf.run is None and rf.compressed
    assert has(rf, "error", None, "gzip file is corrupt") or has(rf, "error", None, "truncated")
    bad_crc = bytearray(data)
    bad_crc[-8] ^= 0xFF  # CRC32 of the content
    assert_problem(read(bytes(bad_crc)), "error", None, "gzip file is corrupt")


def _zero_bomb(size: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(2**20)
    return b"".join(comp.compress(block) for _ in range(size // 2**20)) + comp.flush()


def test_gzip_bomb_is_stopped_at_the_cap_without_inflating_it():
    bomb = _zero_bomb(64 * 2**20)  # 64 MB of zeros in ~64 KB
    assert len(bomb) < 2**20
    tracemalloc.start()
    try:
        rf = read(bomb, max_bytes=2**20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_problem(rf, "error", None, "larger than the limit of 1.0 MB")
    assert peak < 8 * 2**20  # never near the 64 MB of content


def test_plain_file_above_the_cap():
    assert_problem(read(GOOD, max_bytes=100), "error", None, "above the limit of 100 bytes")
    rf = read(gzip.compress(GOOD.encode()), max_bytes=len(GOOD))
    assert rf.ok  # exactly at the cap is fine


# --------------------------------------------------------------------------------------------
# warnings: the run is still scored


def test_duplicate_doc_keeps_best_rank_and_names_the_line():
    rf = read("1 Q0 a 1 0.9 t\n1 Q0 b 2 0.8 t\n1 Q0 a 3 0.7 t\n")
    assert_problem(rf, "warning", 3, "article 'a' is listed again for question '1'; its better-ranked copy (line 1)")
    assert rf.run["1"] == ("a", "b") and rf.run.scores["1"] == (0.9, 0.8)
    rf = read("q a 2\nq b 1\nq a 3\n")  # 3-col ranks: best rank kept
    assert rf.format == "3col-rank" and rf.run["q"] == ("b", "a")
    assert has(rf, "warning", 3, "listed again")
    rf = read('{"1": ["a", "b", "a"]}')
    assert rf.run["1"] == ("a", "b") and has(rf, "warning", None, "listed again")


def test_unknown_questions_are_counted_with_examples():
    rf = read(GOOD, qids=["1", "2", "3"])
    assert_problem(rf, "warning", None,
                   "1 of the run's 3 question ids are not questions of the split scored (e.g. '10')")
    assert rf.ok
    rf = read(GOOD, qids={"x", "y"})
    assert_problem(rf, "warning", None, "none of the run's 3 question ids")
    many = text([f"q{i} Q0 a 1 1.0 t" for i in range(20)])
    rf = read(many, qids=[])
    assert has(rf, "warning", None, "'q0', 'q1', 'q2', 'q3', 'q4', ...")


def test_docs_not_in_corpus():
    corpus = {"947", "948", "12", "3", "5", "9", "10"}  # "7" is missing
    rf = read(GOOD, corpus_ids=corpus)
    assert_problem(rf, "warning", None, "1 article id(s) (1 entries) are not in the corpus (e.g. '7')")
    assert not has(read(GOOD, corpus_ids=corpus | {"7"}), "warning", None, "not in the corpus")


def test_rank_score_contradiction():
    rf = read("1 Q0 a 1 0.2 t\n1 Q0 b 2 0.9 t\n1 Q0 c 3 0.1 t\n")
    assert_problem(rf, "warning", 2, "question '1': rank 1 (line 1, score 0.2) has a lower score than rank 2 (line 2")
    assert rf.run["1"] == ("b", "a", "c")
    # not adjacent once sorted: a (2.0, rank 3), b (2.0, rank 1), c (1.0, rank 2)
    rf = read("1 Q0 a 3 2.0 t\n1 Q0 b 1 2.0 t\n1 Q0 c 2 1.0 t\n")
    assert has(rf, "warning", 3, "rank 2 (line 3, score 1) has a lower score than rank 3 (line 1")
    # constant ranks are not a contradiction
    rf = read("1 Q0 a 0 0.2 t\n1 Q0 b 0 0.9 t\n")
    assert not any("score" in p.message for p in rf.problems)


def test_tied_scores_ranked_otherwise_than_trec_eval():
    """The reader orders by the tie rule and keeps the file's own order aside; whether that order changes a
    figure (the tie_order warning) is the scorer's to say, knowing the labels (tests/evaluation/test_ties.py)."""
    rf = read("1 Q0 a 1 0.5 t\n1 Q0 b 2 0.5 t\n")  # trec_eval puts b first
    assert rf.run["1"] == ("b", "a") and rf.run.file_order == {"1": ("a", "b")}
    assert "tie_order" not in [p.code for p in rf.problems]
    assert read("1 Q0 b 1 0.5 t\n1 Q0 a 2 0.5 t\n").run.file_order is None


def test_several_tags():
    rf = read("1 Q0 a 1 0.9 bm25\n1 Q0 b 2 0.8 bm25\n2 Q0 c 1 0.7 dpr\n")
    assert_problem(rf, "warning", None, "the file has 2 run tags ('bm25', 'dpr')")
    assert rf.tags == ("bm25", "dpr")


def test_questions_with_few_docs():
    lines = [f"{q} Q0 d{r} {r} {1.0 / r!r} t" for q in range(5) for r in range(1, (q + 1) * 3 + 1)]
    rf = read(text(lines), k=10)
    assert_problem(rf, "warning", None, "3 of 5 questions have fewer than 10 articles (fewest: 3, question '0')")
    assert not has(read(text(lines), k=3), "warning", None, "fewer than")


# --------------------------------------------------------------------------------------------
# paths


def test_paths(tmp_path):
    assert_problem(read_run_path(tmp_path / "nope.trec"), "error", None, "file not found")
    assert_problem(read_run_path(tmp_path), "error", None, "is a folder, not a run file")
    (tmp_path / "run.trec.gz").write_bytes(gzip.compress(GOOD.encode()))
    rf = read_run_path(str(tmp_path / "run.trec.gz"), qids=["1", "2", "10"])
    assert rf.name == "run.trec.gz" and rf.format == "trec" and rf.compressed
    assert_same_run(rf, Run.from_scores(SCORES))
    big = tmp_path / "big.trec"
    big.write_text(GOOD)
    assert_problem(read_run_path(big, max_bytes=10), "error", None, "above the limit")


def test_special_file_is_not_read():
    assert_problem(read_run_path("/dev/zero"), "error", None, "not a regular file")


# --------------------------------------------------------------------------------------------
# bounded problem lists


def test_a_problem_on_100000_lines_is_capped_but_counted():
    good = "1 Q0 a 1 1.0 t\n"
    bad = "".join(f"1 Q0 d{i} {i + 2} x t\n" for i in range(100_000))
    rf = read(good + bad)
    kept = [p for p in rf.problems.items if "is not a number" in p.message]
    assert len(kept) == rf.problems.cap == 50
    assert [p.line for p in kept] == list(range(2, 52))  # the first ones, with their lines
    assert rf.problems.totals["score is not a number"] == 100_000
    assert rf.problems.count("error") == 100_000
    assert any("99950 more like this (100000 in all)" in p.message for p in rf.problems.omitted())
    assert rf.run is None


# --------------------------------------------------------------------------------------------
# real data


def test_run_over_the_real_test_questions(real_bsard):
    qrels = real_bsard.qrels("test")
    lines = [f"{q} Q0 {d} {r} {100.0 - r} gold" for q, docs in qrels.items() for r, d in enumerate(sorted(docs), 1)]
    rf = read(text(lines), qids=qrels.keys(), k=1)
    assert rf.ok and not rf.problems, [str(p) for p in rf.problems]
    assert {q: set(docs) for q, docs in rf.run.items()} == {q: set(d) for q, d in qrels.items()}
    assert len(rf.run) == 222


# --------------------------------------------------------------------------------------------
# properties


def _never_raises(data: bytes, **kw) -> RunFile:
    rf = read_run_bytes(data, "fuzz", **kw)
    assert isinstance(rf, RunFile)
    assert (rf.run is not None) != rf.problems.has_errors
    if rf.run is None:
        assert rf.problems.count("error") >= 1
    return rf


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    _never_raises(data)
    _never_raises(gzip.compress(data), max_bytes=100)


_token = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=0, max_size=6)
_number = st.one_of(
    st.integers(-5, 600).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "x", "1,5", "", "1_0", "0x10", "٣"]),
    _token,
)
_trec_line = st.builds(
    lambda q, d, r, s, t, extra, sep: sep.join([q, "Q0", d, r, s, t] + extra),
    st.sampled_from(["1", "2", "10", "q"]) | _token,
    st.sampled_from(["a", "b", "947", "12"]) | _token,
    _number,
    _number,
    st.sampled_from(["run", "bm25"]) | _token,
    st.lists(_token, max_size=1),
    st.sampled_from([" ", "\t", "  ", " \t"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_trec_line, max_size=15), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans())
def test_near_valid_trec_never_raises(lines, newline, compress):
    data = newline.join(lines).encode("utf-8", "surrogatepass")
    _never_raises(gzip.compress(data) if compress else data, qids=["1", "2"], corpus_ids=["a", "b"], k=3)


_id = st.text(alphabet="abcdefghij0123456789-_.:", min_size=1, max_size=5)
_scores = st.dictionaries(_id, st.dictionaries(_id, st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=8),
                          min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(_scores)
def test_valid_runs_round_trip_in_every_score_format(scores):
    expected = Run.from_scores(scores)
    files = {
        "trec": text(trec_lines(scores)),
        "json-scores": json.dumps(scores),
        "jsonl": text(jsonl_score_lines(scores)),
        "csv": "qid,docid,score\n" + "".join(f"{q},{d},{s!r}\n" for q, docs in scores.items() for d, s in docs.items()),
    }
    for fmt, body in files.items():
        rf = read(body)
        assert rf.format == fmt
        assert_same_run(rf, expected)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_id, st.lists(_id, min_size=1, max_size=8, unique=True), min_size=1, max_size=5))
def test_valid_rankings_round_trip(rankings):
    expected = Run.from_rankings(rankings)
    for body in (json.dumps(rankings), text(three_col_rank_lines(rankings))):
        assert_same_run(read(body), expected)


_small = st.sampled_from(["1", "2", "10", "9", "a"])
_entries = st.lists(st.tuples(_small, _small, st.sampled_from([0.5, 1.0, -3.0, 2.25]), st.integers(1, 4)), min_size=1,
                    max_size=30)


@settings(max_examples=150, deadline=None)
@given(_entries)
def test_ties_repeats_and_interleaving_match_order_entries(rows):
    """Against Run.from_entries (bsard_demo.runs.run's convention) on files with many ties, repeated
    articles and questions whose lines are not contiguous."""
    from bsard_demo.runs import Entry

    trec = text([f"{q} Q0 {d} {r} {s!r} t" for q, d, s, r in rows])
    expected = Run.from_entries([Entry(q, d, s, r) for q, d, s, r in rows], by="score")
    assert_same_run(read(trec), expected)
    by_rank = "qid,docid,rank\n" + "".join(f"{q},{d},{r}\n" for q, d, _, r in rows)
    assert_same_run(read(by_rank), Run.from_entries([Entry(q, d, None, r) for q, d, _, r in rows], by="rank"))


def test_complete_ranking_of_a_corpus_smaller_than_k_is_not_short():
    data = b"".join(f"1 Q0 {d} {r} {10 - r} t\n".encode() for r, d in enumerate("abc", 1))
    small = read_run_bytes(data, "r.trec", corpus_ids={"a", "b", "c"}, k=100)
    assert not any("fewer than" in p.message for p in small.problems)
    big = read_run_bytes(data, "r.trec", corpus_ids={"a", "b", "c", "d"}, k=100)
    assert [p.message for p in big.problems if "fewer than" in p.message] == [
        "1 of 1 questions have fewer than 4 articles (fewest: 3, question '1'); metrics at 4 count the missing ones as "
        "not found"]
