"""ranx's LZ4 files (issue 39 item 3), decoded in the reader's child: what ranx writes (a frame of a
frame of CBOR), ranxhub's layout, qrels through ``lz4_bytes_to_json`` (the entry point of any other
reader), and hostile ones: damaged, inflating past the cap, odd CBOR values, no decoder installed."""
from __future__ import annotations

import json

import pytest

from bsard_demo.runs import ProblemList, lz4_bytes_to_json, read_run_bytes, sandbox

cbor2 = pytest.importorskip("cbor2")
lz4_frame = pytest.importorskip("lz4.frame")


def ranx_lz4(value) -> bytes:
    """As ranx's ``save_lz4`` writes ``value`` (ranx/io.py)."""
    return lz4_frame.compress(lz4_frame.compress(cbor2.dumps(value), compression_level=16))


def test_qrels_come_back_as_json_text_for_any_reader():
    qrels = {"1": {"947": 1, "948": 2}, "2": {"3": 1}}
    problems = ProblemList()
    assert json.loads(lz4_bytes_to_json(ranx_lz4(qrels), "qrels.lz4", problems)) == qrels and not problems


def test_ranxhub_layout_and_one_frame_are_read():
    run = {"1": {"a": 2.0, "b": 1.0}}
    hub = ranx_lz4({"metadata": {"run": {"name": "bm25"}}, "run": run})
    one = lz4_frame.compress(cbor2.dumps(run))
    for data in (hub, one):
        rf = read_run_bytes(data, "r.lz4")
        assert rf.ok and rf.format == "lz4" and rf.run.rankings == {"1": ("a", "b")}


@pytest.mark.parametrize("data, phrase", [
    (b"1 Q0 a 1 1.0 t\n", "not an LZ4 file"),
    (ranx_lz4({"1": {"a": 1.0}})[:30], "truncated"),
    (ranx_lz4([1, 2]), "not a map"),
    (lz4_frame.compress(b"\xff\xff"), "does not hold ranx's CBOR data"),
])
def test_what_is_not_a_ranx_file_is_one_lz4_error(data, phrase):
    problems = ProblemList()
    assert lz4_bytes_to_json(data, "x.lz4", problems) is None
    [p] = list(problems)
    assert p.code == "lz4_unreadable" and phrase in p.message, p.message


def test_an_lz4_bomb_stops_at_the_cap():
    bomb = lz4_frame.compress(lz4_frame.compress(bytes(8 * 2**20)))
    assert len(bomb) < 2**16
    problems = ProblemList()
    assert lz4_bytes_to_json(bomb, "bomb.lz4", problems, cap=2**20) is None
    [p] = list(problems)
    assert p.code == "lz4_too_large" and "1.0 MB" in p.message


def test_odd_cbor_values_are_bad_ids_or_scores_in_bounded_words():
    value = {"1": {"a": b"\x00" * 500, "b": 1.0, 7: 2.0}, b"k" * 300: {"c": float("nan")},
             "2": {"d": cbor2.CBORTag(1, 0)}}
    rf = read_run_bytes(ranx_lz4(value), "odd.lz4")
    assert not rf.ok and {p.code for p in rf.problems} >= {"bad_score"}
    assert all(len(str(p)) < 400 for p in rf.problems)


def test_without_the_decoders_an_lz4_file_is_one_error(monkeypatch):
    monkeypatch.setattr(sandbox, "lz4_format", None)
    rf = read_run_bytes(ranx_lz4({"1": {"a": 1.0}}), "r.lz4", isolation=None)
    [p] = list(rf.problems)
    assert p.code == "lz4_unreadable" and "pip install lz4 cbor2" in p.message
