"""bsard_demo.runs.write: the one TREC/JSON writer, read back by the reader; the atomic write;
the reader's size limit and its wording."""
from __future__ import annotations

import json
import os
import random

import pytest

from bsard_demo.runs import Run, format_run, read_run_bytes, read_run_path, write_text_atomic


def random_rankings(seed: int):
    rng = random.Random(seed)
    qids = [f"q{i}" for i in range(rng.randint(1, 8))]
    rankings = []
    for _ in qids:
        docs = rng.sample([str(d) for d in range(60)], rng.randint(0, 25))
        scores = sorted((rng.choice([rng.random(), 0.5, 1e-9, 123456.789]) for _ in docs), reverse=True)
        rankings.append(list(zip(docs, scores)))
    return qids, rankings


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("fmt", ["trec", "json"])
def test_written_runs_read_back_unchanged(seed, fmt):
    qids, rankings = random_rankings(seed)
    text = format_run(qids, rankings, fmt, "tag")
    rf = read_run_bytes(text.encode(), f"r.{fmt}")
    written = {q: r for q, r in zip(qids, rankings) if r}
    assert rf.format == ("trec" if fmt == "trec" else "json-scores") or not written
    if not written:
        return
    assert rf.ok, [str(p) for p in rf.problems]
    assert set(rf.run) == set(written)
    for q, ranking in written.items():
        # same scores; ties come back in trec_eval order (article id descending)
        expected = sorted(ranking, key=lambda p: p[0], reverse=True)
        expected.sort(key=lambda p: p[1], reverse=True)
        assert rf.run.scored(q) == expected


def test_trec_lines_exactly():
    text = format_run(["1", "2"], [[("7", 2.5), ("3", 0.1)], [("9", 1.0)]], "trec", "bm25")
    assert text == "1 Q0 7 1 2.5 bm25\n1 Q0 3 2 0.1 bm25\n2 Q0 9 1 1.0 bm25\n"
    assert format_run([], [], "trec", "t") == ""
    assert json.loads(format_run(["1"], [[("7", 2.5)]], "json", "t")) == {"1": {"7": 2.5}}
    with pytest.raises(ValueError, match="unknown run format"):
        format_run(["1"], [[("7", 2.5)]], "csv", "t")


def test_to_trec_is_the_writer():
    run = Run.from_rankings({"a": ["x", "y", "z"], "b": ["w"]})
    assert run.to_trec("t") == format_run(["a", "b"], [[("x", 3.0), ("y", 2.0), ("z", 1.0)], [("w", 1.0)]], "trec", "t")
    scored = Run.from_scores({"a": {"x": 0.5, "y": 0.75}})
    assert scored.to_trec("t") == "a Q0 y 1 0.75 t\na Q0 x 2 0.5 t\n"


def test_write_text_atomic(tmp_path):
    target = tmp_path / "run.trec"
    target.write_text("old")
    write_text_atomic(target, "new\n")
    assert target.read_bytes() == b"new\n" and os.listdir(tmp_path) == ["run.trec"]
    with pytest.raises(OSError):
        write_text_atomic(tmp_path / "missing" / "run.trec", "x")
    assert os.listdir(tmp_path) == ["run.trec"]


def test_the_reader_owns_the_size_limit(tmp_path):
    """One limit for the raw bytes (also gzip ones), the file on disk and the inflated content;
    ``size_message`` words it (the app's French message)."""
    import gzip

    def french(size, limit):
        return f"trop gros : {size} > {limit}"

    data = b"1 Q0 a 1 1.0 t\n" * 100
    assert [p.message for p in read_run_bytes(data, "r", max_bytes=1000).problems] == [
        "the file is 1.5 KB, above the limit of 1000 bytes"]
    assert [p.message
            for p in read_run_bytes(data, "r", max_bytes=1000, size_message=french).problems] == [
        "trop gros : 1500 > 1000"]
    noise = gzip.compress(os.urandom(3000))  # incompressible: above the limit before inflating
    rf = read_run_bytes(noise, "r.gz", max_bytes=2000, size_message=french)
    assert rf.compressed and [p.message for p in rf.problems] == [f"trop gros : {len(noise)} > 2000"]
    path = tmp_path / "r.trec"
    path.write_bytes(data)
    assert [p.message for p in read_run_path(path, max_bytes=1000, size_message=french).problems] == [
        "trop gros : 1500 > 1000"]
    assert read_run_bytes(data, "r", max_bytes=1500).ok
