"""ranx's own compressed run format (issue 39 item 3): a run that ranx writes with
``Run.save(kind="lz4")`` is scored by ``evaluate`` with the same figures as its TREC twin, written by
ranx too; its decoders (lz4, cbor2) run in the reader's child process, never in the CLI's."""
from __future__ import annotations

import json
import random

from bsard_demo.cli.main import main
from bsard_demo.evaluation.measures import is_measure_column
from bsard_demo.runs import lz4_format
from bsard_demo.sources import load_sample


def test_a_ranx_lz4_run_scores_as_its_trec_twin(tmp_path, capsys, monkeypatch, ranx):
    def in_this_process(*args):
        raise AssertionError("an LZ4 file was decoded in the CLI's process")

    monkeypatch.setattr(lz4_format, "lz4_json", in_this_process)  # the child (its own interpreter) is not patched
    ds = load_sample()
    labels = ds.qrels("test")
    rng = random.Random(7)
    ids = sorted({a for gold in labels.values() for a in gold} | {str(a) for a in ds.articles["id"][:150]})
    scores = {q: {d: round(rng.uniform(0, 30), 3) for d in rng.sample(ids, 60)} for q in list(labels)[:-2]}
    # and an article outside the corpus, of 5 characters (it matches no label, in both files): ranx's numba
    # functions compile once per longest id (~10 CPU s in an empty numba cache, CI's), and ranx's other runs
    # here have 5 (tests/conftest.py's ranx group)
    for docs in scores.values():
        docs["x0000"] = 0.5
    run = ranx.Run(scores, name="bm25")
    run.save(str(tmp_path / "bm25.lz4"), kind="lz4")
    run.save(str(tmp_path / "bm25.trec"), kind="trec")
    assert (tmp_path / "bm25.lz4").read_bytes()[:4] == b"\x04\x22\x4d\x18"  # an LZ4 frame, not text
    figures = {}
    for name in ("bm25.lz4", "bm25.trec"):
        assert main(["evaluate", str(tmp_path / name), "--data", "sample", "--format", "json"]) == 0
        res = json.loads(capsys.readouterr().out)["runs"][name]
        figures[name] = {k: v for k, v in res.items() if is_measure_column(k)}
        assert res["missing_questions"] == 2
    assert figures["bm25.lz4"] and figures["bm25.lz4"] == figures["bm25.trec"]


def test_a_damaged_lz4_run_is_one_error_and_exit_2(tmp_path, capsys, ranx):
    # ids of 5 characters, as ranx's other runs here (its numba functions compile once per longest id)
    ranx.Run({"1": {"a0001": 1.0}}, name="x").save(str(tmp_path / "x.lz4"), kind="lz4")
    data = (tmp_path / "x.lz4").read_bytes()
    (tmp_path / "cut.lz4").write_bytes(data[: len(data) // 2])
    assert main(["evaluate", str(tmp_path / "cut.lz4"), "--data", "sample"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "error [lz4_unreadable]" in line and "Traceback" not in line
