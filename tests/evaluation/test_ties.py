"""Ties told once and usefully (bsard_demo.evaluation.ties): the rule said once per run; ``tie_order`` only when
the file's own order of tied articles changes a figure of the measures computed, with by how much. A TREC run
written by ranx with float32 ties that move no figure gets no warning."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from bsard_demo.cli.main import main
from bsard_demo.dataset import Dataset
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.scoring import RunSource, score_runs
from bsard_demo.evaluation.ties import TIE_RULE
from bsard_demo.runs import Run, read_run_bytes


def _dataset(qrels: dict[str, frozenset[str]]) -> Dataset:
    frame = pd.DataFrame({"id": list(qrels), "article_ids": [tuple(sorted(g)) for g in qrels.values()]})
    return Dataset("d", "local", None, {"test": frame})


def _ranx_trec(ranx, tmp_path, scores: dict[str, dict[str, float]]) -> bytes:
    path = tmp_path / "ranx.trec"
    ranx.Run.from_dict(scores, name="bm25s").save(str(path), kind="trec")
    return path.read_bytes()


@pytest.mark.slow
def test_a_ranx_trec_run_whose_float32_ties_move_no_figure_gets_no_warning(tmp_path, capsys, ranx):
    rng = random.Random(0)
    qrels = {f"q{i}": frozenset({f"g{i:03d}a", f"g{i:03d}b"}) for i in range(40)}  # ids of 5 characters, as the
    # other runs ranx makes here (its numba functions compile once per longest id: tests/conftest.py's ranx group)
    scores = {}
    for q, gold in qrels.items():  # relevant articles on distinct scores, the others tied in blocks (float32)
        docs = {d: float(np.float32(5.0 + rng.random())) for d in gold}
        docs.update({f"d{j:04d}": float(np.float32(round(rng.random() * 4, 1))) for j in range(150)})
        scores[q] = docs
    data = _ranx_trec(ranx, tmp_path, scores)
    read = read_run_bytes(data, "ranx.trec")
    assert read.run.file_order, "ranx ranks some ties otherwise than the tie rule: the case under test"
    board = score_runs(_dataset(qrels), "test", [RunSource.upload("ranx.trec", data)], (10, 100))
    scored = board.runs[0]
    assert "tie_order" not in [p.code for p in scored.file.problems]
    assert scored.ties.startswith(f"40 question(s) have tied scores: {TIE_RULE}; the file ranks them otherwise in ")
    assert scored.ties.endswith("which moves no figure shown")
    # the CLI says the rule once for the run, and no warning
    (tmp_path / "questions_test.csv").write_text(pd.DataFrame(
        {"id": list(qrels), "question": "q", "article_ids": [",".join(sorted(g)) for g in qrels.values()]}
    ).to_csv(index=False))
    run_path = tmp_path / "ranx.trec"
    assert main(["evaluate", str(run_path), "--data", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "tie_order" not in err and err.count(TIE_RULE) == 1


def test_ties_that_move_a_figure_say_by_how_much():
    # q1: the relevant article "a" ties with "z" at rank 1-2; the file ranks "a" first, the rule (id descending)
    # puts "z" first: MRR, MAP and nDCG move
    qrels = {"q1": frozenset({"a"}), "q2": frozenset({"c"})}
    data = b"q1 Q0 a 1 0.5 t\nq1 Q0 z 2 0.5 t\nq2 Q0 c 1 0.9 t\nq2 Q0 y 2 0.1 t\n"
    board = score_runs(_dataset(qrels), "test", [RunSource.upload("r.trec", data)], (1, 10))
    (warning,) = [p for p in board.runs[0].file.problems if p.code == "tie_order"]
    ours = board.runs[0].evaluation.means
    theirs = evaluate(qrels, Run.from_rankings({"q1": ["a", "z"], "q2": ["c", "y"]}), (1, 10)).means
    assert theirs["recall@1"] - ours["recall@1"] == pytest.approx(0.5)  # R@1: 0.5 here, 1.0 in the file's order
    assert "R@1 +50.00" in warning.message and TIE_RULE in warning.message
    assert warning.message.startswith("1 question(s) rank tied scores otherwise than here")


def test_ties_in_a_file_without_ranks_are_only_said():
    qrels = {"q1": frozenset({"a"})}
    board = score_runs(_dataset(qrels), "test", [RunSource.upload("r.json", b'{"q1": {"a": 0.5, "z": 0.5}}')], (1,))
    assert "tie_order" not in [p.code for p in board.runs[0].file.problems]
    assert board.runs[0].ties.startswith("1 question(s) have tied scores")


def test_a_move_below_the_shown_decimals_is_no_change_of_figure():
    """200 questions, one of which ranks a tie otherwise at rank 600 of 1,000: MAP@1000 moves by a few
    millionths, no figure shown (two decimals, in %) changes: no warning, the note says so."""
    qrels = {f"q{i}": frozenset({"g"}) for i in range(200)}
    lines = []
    for i in range(200):
        docs = [f"d{j:04d}" for j in range(1000)]
        if i == 0:
            docs[599], docs[600] = "g", "zz"  # the file ranks g before zz; the rule puts zz first
        for rank, d in enumerate(docs, 1):
            score = 0.5 if (i == 0 and rank in (600, 601)) else 1000.0 - rank
            lines.append(f"q{i} Q0 {d} {rank} {score} t")
    data = ("\n".join(lines) + "\n").encode()
    board = score_runs(_dataset(qrels), "test", [RunSource.upload("r.trec", data)], (1000,))
    scored = board.runs[0]
    assert "tie_order" not in [p.code for p in scored.file.problems]
    assert scored.ties.endswith("the file ranks them otherwise in 1, which moves no figure shown")
    other = evaluate(qrels, Run.from_rankings({**scored.file.run.rankings, "q0": scored.file.run.file_order["q0"]}),
                     (1000,))
    assert 0 < abs(other.means["map@1000"] - scored.evaluation.means["map@1000"]) < 5e-5
