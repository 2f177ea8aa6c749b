"""Every message that quotes user data quotes a bounded excerpt (issue 30, item 7): ``quote`` is the one
helper; runs with a huge article id, question id, score, rank, tag or header, in every format, give
messages of bounded lines from the reader, from the Score page's reading path (``score_runs`` of
uploads) and from the CLI's ``evaluate``."""
from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _hostile_data import HUGE, articles, huge_id_runs, questions, write_dataset
from bsard_demo.cli.main import main
from bsard_demo.evaluation.scoring import Limits, RunSource, score_runs
from bsard_demo.runs import FORMATS, ProblemList, Run, quote, read_run, read_run_bytes
from bsard_demo.sources import load_dataset

#: The bound a reader's message line keeps (the issue: none over 1,000 characters).
LINE_LIMIT = 1000
CASES = huge_id_runs()


def bounded(text: str) -> bool:
    """No line over the limit, and no run of the huge values' characters beyond a quote's excerpt."""
    return all(len(line) <= LINE_LIMIT for line in text.splitlines()) and not any(
        c * 81 in text for c in "AQ9")


def test_quote_keeps_short_values_as_repr_and_bounds_long_ones():
    assert quote("q1") == "'q1'" and quote("it's") == repr("it's") and quote(7) == "'7'"
    assert quote("a" * 80) == repr("a" * 80)
    long = quote("a" * 40_000_000)
    assert long == "'" + "a" * 80 + "…' (40,000,000 characters)"
    assert quote("\x00" * 100).endswith("…' (100 characters)") and len(quote("\x00" * 100)) < 120
    assert quote("é" * 81, marks=False) == "é" * 80 + "… (81 characters)"
    assert quote("col1, col2", marks=False) == "col1, col2"
    for n in (81, 100, 5000):  # an escape is never cut in half before the closing mark
        assert quote("\\" * n).startswith("'" + "\\\\" * 40 + "…'")


def test_the_cases_cover_every_format():
    # without the read's limits: a 1 MB id makes a TREC or CSV line longer than the 64 KB a line may have
    formats = {read_run_bytes(data, name, isolation=None, limits=None).format for name, data in CASES}
    assert {"json-scores", "jsonl", "trec", "csv", "parquet"} <= formats <= set(FORMATS)


@pytest.mark.parametrize("name, data", CASES, ids=[name for name, _ in CASES])
def test_the_reader_quotes_a_bounded_excerpt(name, data):
    qids = {q["id"] for q in questions()}
    corpus = {a["id"] for a in articles()}
    rf = read_run_bytes(data, name, qids=qids, corpus_ids=corpus, isolation=None)
    assert rf.problems, name  # each case has something to say about its huge value
    for p in rf.problems:
        assert bounded(str(p)), (name, p.code, str(p)[:300])
    if rf.ok and name.startswith(("huge-doc", "huge-qid")):  # the run keeps the whole id: only messages are bounded
        assert any(len(q) >= HUGE or any(len(d) >= HUGE for d in docs) for q, docs in rf.run.rankings.items())


def test_a_built_run_with_a_huge_id_is_warned_about_in_bounded_words():
    run = Run.from_rankings({"Q" * HUGE: ("A" * HUGE, "1")})
    rf = read_run(run, "built", qids={"1"}, corpus_ids={str(i) for i in range(20)}, k=10)
    assert {p.code for p in rf.problems} == {"unknown_questions", "unknown_articles", "short_rankings"}
    assert all(bounded(str(p)) for p in rf.problems)


@pytest.fixture(scope="module")
def hostile_dataset(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("hostile") / "data")


def test_the_score_pages_reading_path_quotes_bounded_excerpts(hostile_dataset):
    """What the Score page does with uploads (``score_runs`` of ``RunSource.upload``, parquet in its
    child), every problem of every case bounded, BSARD-aware checks included."""
    ds = load_dataset(str(hostile_dataset))
    board = score_runs(ds, "test", [RunSource.upload(name, data) for name, data in CASES], limits=Limits())
    assert len(board.runs) == len(CASES)
    for scored in board.runs:
        problems: ProblemList = scored.file.problems
        assert problems, scored.name
        for p in problems:
            assert bounded(p.text()), (scored.name, p.code, p.text()[:300])


def test_the_cli_prints_bounded_lines(hostile_dataset, tmp_path, capsys):
    paths = []
    for name, data in CASES:
        path = tmp_path / name
        path.write_bytes(data)
        paths.append(str(path))
    main(["evaluate", *paths, "--data", str(hostile_dataset)])
    out, err = capsys.readouterr()
    assert "unknown_articles" in err and "unknown_questions" in err
    assert bounded(out) and bounded(err), max((out + err).splitlines(), key=len)[:300]


LONG_INT = b"9" * 5000  # beyond int()'s 4,300 digits from text


@pytest.mark.parametrize("data", [
    b'{"1": {"2": ' + LONG_INT + b"}}", b'{"1": [' + LONG_INT + b"]}",
    b'{"qid": "1", "docid": "2", "score": ' + LONG_INT + b"}\n",
    b'{"qid": ' + LONG_INT + b', "docid": "2", "score": 1}\n{"qid": "1", "docid": "2", "score": 1}\n',
    b"1 Q0 2 " + LONG_INT + b" 1.0 t\n", b"1 2 " + LONG_INT + b"\n1 3 2\n", b"1 2 1\n1 3 " + LONG_INT + b"\n1 4 3\n",
    b"qid,docid,rank\n1,2," + LONG_INT + b"\n"], ids=["json", "json-ranked", "jsonl-score", "jsonl-qid", "trec",
                                                    "3col-score", "3col-rank", "csv-rank"])
def test_an_integer_too_long_for_int_is_a_bad_value_not_a_failure(data):
    rf = read_run_bytes(data, "r")
    codes = {p.code for p in rf.problems}
    assert "internal_error" not in codes and codes & {"bad_score", "bad_rank", "bad_id"}, codes
    assert all(bounded(str(p)) for p in rf.problems)


@pytest.mark.parametrize("data", [b"1 Q0 a " + b"9" * 4000 + b" 2.0 t\n1 Q0 b 1 1.0 t\n",
                                  b"qid,docid,score,rank\n1,a,2.0," + b"9" * 4000 + b"\n1,b,1.0,1\n"],
                         ids=["trec", "csv"])
def test_a_rank_beyond_64_bits_is_quoted_bounded_where_it_contradicts_the_scores(data):
    rf = read_run_bytes(data, "r")
    assert "rank_score_order" in {p.code for p in rf.problems}
    assert all(bounded(str(p)) for p in rf.problems), max(map(str, rf.problems), key=len)[:200]


def test_a_huge_parquet_column_type_is_quoted_bounded():
    """A struct of 300 long-named fields: its type's text is 18,496 characters."""
    names = ["f" * 50 + str(i) for i in range(300)]
    score = pa.array([dict.fromkeys(names, 1)], type=pa.struct([pa.field(n, pa.int64()) for n in names]))
    out = io.BytesIO()
    pq.write_table(pa.table({"qid": ["1"], "docid": ["2"], "score": score}), out)
    rf = read_run_bytes(out.getvalue(), "r.parquet")
    assert [p.code for p in rf.problems] == ["bad_column_type"] and all(bounded(str(p)) for p in rf.problems)
