"""The streaming reader: chunk boundaries change nothing, the array fast path equals the token
path, large files give the reference order (``Run.from_entries``), and memory stays bounded."""
from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from _cold_read import COLD_WORKER
from bsard_demo.runs import Entry, ProblemList, Run, decode, read_run_bytes, read_run_path
from bsard_demo.runs.columns import Columns
from bsard_demo.runs.fields import ArrayFields, KeyIndex, TokenFields, positions

REPO = Path(__file__).resolve().parents[2]


def outcome(rf) -> tuple:
    run = None
    if rf.run is not None:
        run = (dict(rf.run.rankings), None if rf.run.scores is None else dict(rf.run.scores), rf.run.tags)
    return rf.format, rf.tags, run, [(p.severity, p.code, p.line, p.message) for p in rf.problems]


def messy_trec(seed: int, n: int = 3000) -> bytes:
    """TREC lines with ties, repeated articles, interleaved questions, long ids, blank lines,
    bad fields, CRLF endings and a non-ASCII id now and then."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        q = str(rng.randrange(40)) if rng.random() < 0.7 else f"question-{rng.randrange(5)}"
        d = str(rng.randrange(300)) if rng.random() < 0.9 else f"article-{rng.randrange(30)}-long"
        if rng.random() < 0.01:
            d = "é" + d
        score = rng.choice(["1.5", "2.25", "0.5", "3"]) if rng.random() < 0.3 else f"{rng.random() * 10:.3f}"
        if rng.random() < 0.003:
            score = rng.choice(["x", "nan", "1,5"])
        rank = str(rng.randrange(1, 500)) if rng.random() > 0.003 else "two"
        fields = [q, "Q0", d, rank, score, rng.choice(["run"] * 20 + ["other"])]
        if rng.random() < 0.003:
            fields.pop()
        lines.append(rng.choice([" ", "\t", "  "]).join(fields))
        if rng.random() < 0.01:
            lines.append("")
    return "\r\n".join(lines).encode("utf-8") + b"\r\n"


@pytest.mark.parametrize("seed", range(4))
def test_chunk_size_bytes_path_and_gzip_change_nothing(seed, tmp_path, monkeypatch):
    data = messy_trec(seed)
    kw = {"qids": [str(i) for i in range(20)], "corpus_ids": [str(i) for i in range(250)], "k": 50}
    whole = outcome(read_run_bytes(data, "r", **kw))
    assert any(p[1] == "bad_field_count" for p in whole[3]) and any(p[1] == "duplicate_article" for p in whole[3])
    path = tmp_path / "r.trec"
    path.write_bytes(data)
    (tmp_path / "r.trec.gz").write_bytes(gzip.compress(data))
    for block in (64, 1000, 4096):
        monkeypatch.setattr(decode, "BLOCK", block)
        assert outcome(read_run_bytes(data, "r", **kw)) == whole, block
        assert outcome(read_run_path(path, **kw)) == whole, block
        assert outcome(read_run_path(tmp_path / "r.trec.gz", **kw)) == whole, block


@pytest.mark.parametrize("seed", range(3))
def test_large_files_match_the_reference_order(seed):
    """Every field good: the reader's run equals Run.from_entries (bsard_demo.runs.run's pure
    Python convention) on a file of several chunks, and each repeated article is reported."""
    rng = random.Random(seed)
    entries, lines = [], []
    for _ in range(60_000):
        q = str(rng.randrange(30))
        d = str(rng.randrange(2000)) if rng.random() < 0.8 else f"doc{rng.randrange(999)}x"
        s = float(rng.randrange(50)) / 4 if rng.random() < 0.5 else rng.random()
        r = rng.randrange(1, 9)
        entries.append(Entry(q, d, s, r))
        lines.append(f"{q} Q0 {d} {r} {s!r} t")
    data = ("\n".join(lines) + "\n").encode()
    rf = read_run_bytes(data, "big")
    expected = Run.from_entries(entries)
    assert rf.run.rankings == expected.rankings and rf.run.scores == expected.scores
    pairs = {(e.qid, e.docid) for e in entries}
    repeats = rf.problems.totals["article listed twice for a question"]
    assert repeats == len(entries) - len(pairs) > 0


_ascii_token = st.text(alphabet="0123456789abcxyz._-+eE", min_size=1, max_size=10)
_value_token = st.one_of(st.integers(-5, 10**20).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                         st.sampled_from(["1_0", "nan", "inf", "x", "1,5", "007", "+3", "-0", "3.0", "1e3"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_ascii_token, _ascii_token, _value_token, _value_token, _ascii_token), min_size=1,
                max_size=30), st.sampled_from([" ", "\t", "  "]))
def test_array_fields_equal_token_fields(rows, sep):
    data = "\n".join(sep.join(r) for r in rows).encode() + b"\n"
    starts, ends, widths = positions(data, ord("\n"))
    assert widths.tolist()[:-1] == [len(line.split()) for line in data.split(b"\n")][:-1]
    fast, slow = ArrayFields(data, starts, ends, 5), TokenFields(data.split(), 5)
    lines = np.arange(1, len(rows) + 1)
    for j in range(5):
        a, b = Columns(), Columns()
        codes_a = fast.codes(j, a.q_codes, a.q_index)
        codes_b = slow.codes(j, b.q_codes)
        assert [a.qnames[c] for c in codes_a] == [b.qnames[c] for c in codes_b] == [t.decode() for t in slow.tokens(j)]
        pa, pb = ProblemList(), ProblemList()
        va, ba = fast.floats(j, lines, pa)
        vb, bb = slow.floats(j, lines, pb)
        assert np.array_equal(va, vb, equal_nan=True) and (ba is None) == (bb is None) and list(pa) == list(pb)
        pa, pb = ProblemList(), ProblemList()
        ia, ja = fast.ints(j, lines, pa, positive=True)
        ib, jb = slow.ints(j, lines, pb, positive=True)
        assert ia.tolist() == ib.tolist() and (ja is None) == (jb is None) and list(pa) == list(pb)
        ma, da = fast.digit_values(j)
        mb, db = slow.digit_values(j)
        assert ma.tolist() == mb.tolist() and (da is None) == (db is None)
        assert da is None or da.tolist() == db.tolist()
        assert fast.first_seen(j) == slow.first_seen(j)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.-+eEinfatyxXpP_ ", min_size=1, max_size=12)
                .map(str.strip).filter(bool).filter(lambda t: " " not in t), min_size=1, max_size=20))
def test_numpy_bytes_to_float_is_pythons_float(tokens):
    """ArrayFields.floats relies on numpy's cast of bytes to float64 giving float(token) exactly,
    and failing where float() fails."""
    for t in tokens:
        raw = t.encode()
        try:
            ours = float(np.array([raw]).astype(np.float64)[0])
        except ValueError:
            ours = None
        try:
            python = float(raw)
        except ValueError:
            python = None
        assert repr(ours) == repr(python), t


def test_key_index_keeps_codes_across_chunks_and_the_token_path():
    cols = Columns()
    first = b"12 a\n7 b\n12 c\n"
    s, e, _ = positions(first, 10)
    codes = ArrayFields(first, s, e, 2).codes(0, cols.q_codes, cols.q_index)
    assert codes.tolist() == [0, 1, 0] and cols.qnames == ["12", "7"]
    assert cols.q_codes(["7", "é", "12"]).tolist() == [1, 2, 0]  # the token path sees the same ids
    second = b"9 x\n7 y\n"
    s, e, _ = positions(second, 10)
    assert ArrayFields(second, s, e, 2).codes(0, cols.q_codes, cols.q_index).tolist() == [3, 1]
    assert cols.qnames == ["12", "7", "é", "9"]
    index = KeyIndex(lambda ids: list(range(100, 100 + len(ids))))
    assert index.codes(np.array([5, 3, 5], dtype=np.int64)).tolist() == [100, 101, 100]


def test_questions_keep_their_first_usable_line_order():
    """A question first seen on a dropped line (bad score) comes where its first usable line is."""
    rf = read_run_bytes(b"2 Q0 a 1 x t\n1 Q0 b 1 1.0 t\n2 Q0 c 2 1.0 t\n", "r", qids=["3"])
    messages = [p.message for p in rf.problems if p.code == "unknown_questions"]
    assert messages == ["none of the run's 2 question ids is a question of the split scored (e.g. '1', '2'); "
                        "is this a run for these questions?"]


def test_the_first_chunk_guess_is_corrected_by_a_second_reading(monkeypatch):
    """The first chunk looks like 3-column ranks; the rest of the file makes it 6 fields."""
    monkeypatch.setattr(decode, "BLOCK", 64)
    body = "q a 1\nq b 2\nq c 3\n" * 3 + "".join(f"q Q0 d{i} {i} {10 - i / 100} t\n" for i in range(1, 40))
    rf = read_run_bytes(body.encode(), "r")
    assert rf.format == "trec" and rf.run is None
    assert rf.problems.totals["wrong number of fields"] == 9
    three = "q a 1\nq b 2\nq c 3\n" * 1 + "".join(f"r d{i} {i + 0.5}\n" for i in range(40))
    rf = read_run_bytes(three.encode(), "r")
    assert rf.format == "3col-score" and rf.run["q"] == ("c", "b", "a")


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc/self/clear_refs")
def test_a_large_run_costs_a_bounded_memory(tmp_path):
    """300 questions x 2,000 articles (600,000 lines, 17 MB): the whole-file reader of before
    added 397 MB (23x the file); this one adds about 61 MB (its arrays, the Run, numpy
    temporaries of one 1 MB chunk). The bound leaves room for allocator noise."""
    rng = np.random.default_rng(0)
    path = tmp_path / "big.trec"
    with open(path, "w") as f:
        for q in range(300):
            docs = rng.choice(22_633, size=2000, replace=False) + 1
            scores = np.sort(rng.random(2000))[::-1]
            # as Python numbers: the same text, formatted 1.5x faster than numpy scalars
            f.write("".join(f"{q} Q0 {d} {r} {s:.6f} run\n"
                            for r, (d, s) in enumerate(zip(docs.tolist(), scores.tolist()), 1)))
    size_mb = path.stat().st_size / 2**20
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # read and scored in a fresh interpreter, the peak reset after the imports (nothing before the read counts)
    proc = subprocess.run([sys.executable, "-c", COLD_WORKER, str(path), "1000", "100,1000"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)
    assert m["lines"] == 600_000 and m["means"]["recall@1000"] == 1.0
    assert m["cost"] < 5 * size_mb, (m, size_mb)
