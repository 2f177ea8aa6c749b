"""The CLI: evaluate/data on real labels and the sample, formats, exit codes, no tracebacks."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import pytrec_eval

from bsard_demo.cli.main import main
from bsard_demo.evaluation.measures import column_label, cutoff_columns, extra_columns
from bsard_demo.evaluation.report import display_columns
from bsard_demo.evaluation.stamp import read_stamp, strip_stamp
from bsard_demo.runs import Run

REPO = Path(__file__).resolve().parents[2]


def write_trec(path: Path, scores: dict[str, dict[str, float]], tag: str = "t") -> Path:
    run = Run.from_scores(scores)
    path.write_text(run.to_trec(tag))
    return path


def random_scores(qrels, seed=0, depth=500, drop=0.05):
    rnd = random.Random(seed)
    scores = {}
    for q, rel in qrels.items():
        if rnd.random() < drop:
            continue
        docs = {str(d): round(rnd.random(), 2) for d in rnd.sample(range(1, 22634), depth)}
        for d in rel:
            if rnd.random() < 0.6:
                docs[d] = round(rnd.random(), 2)
        while len(docs) > depth:
            docs.popitem()
        scores[q] = docs
    return scores


def test_evaluate_json_on_real_labels_equals_trec_eval(tmp_path, real_bsard_dir, real_bsard, capsys):
    qrels = real_bsard.qrels("test")
    scores = random_scores(qrels)
    run_path = write_trec(tmp_path / "bm25.trec", scores)
    rc = main(["evaluate", str(run_path), "--data", str(real_bsard_dir), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["questions"] == 222 and out["split"] == "test"
    res = out["runs"]["bm25.trec"]
    assert res["missing_questions"] == 222 - len(scores) and res["unknown_questions"] == 0
    assert set(res) >= {"recall@100", "recall@200", "recall@500", "map@100", "map@200", "map@500", "mrr@100", "mrr@200",
                        "mrr@500"}
    run = Run.from_scores(scores)
    tq = {q: {d: 1 for d in rel} for q, rel in qrels.items()}
    for k in (100, 200, 500):
        cut = {q: {d: scores[q][d] for d in run[q][:k]} for q in run}
        te = pytrec_eval.RelevanceEvaluator(tq, {f"recall.{k}", f"map_cut.{k}", "recip_rank"}).evaluate(cut)
        assert res[f"recall@{k}"] == pytest.approx(sum(v[f"recall_{k}"] for v in te.values()) / 222, abs=1e-9)
        assert res[f"map@{k}"] == pytest.approx(sum(v[f"map_cut_{k}"] for v in te.values()) / 222, abs=1e-9)
        assert res[f"mrr@{k}"] == pytest.approx(sum(v["recip_rank"] for v in te.values()) / 222, abs=1e-9)
    cut10 = {q: {d: scores[q][d] for d in run[q][:10]} for q in run}
    te10 = pytrec_eval.RelevanceEvaluator(tq, {"ndcg_cut.10"}).evaluate(cut10)
    assert res["ndcg@10"] == pytest.approx(sum(v["ndcg_cut_10"] for v in te10.values()) / 222, abs=1e-9)
    assert list(res)[-2 - len(extra_columns()):] == [*extra_columns(), "missing_questions", "unknown_questions"]
    # the planted gold articles are mostly dropped at the depth cut: a run no better than chance
    (problem,) = out["problems"]["bm25.trec"]
    assert (problem["code"], problem["severity"], problem["line"]) == ("near_random", "warning", None)


def test_evaluate_table_formats_and_published_rows(tmp_path, real_bsard_dir, real_bsard, capsys):
    run_path = write_trec(tmp_path / "r.trec", random_scores(real_bsard.qrels("test"), seed=1))
    assert main(["evaluate", str(run_path), "--data", str(real_bsard_dir)]) == 0
    table = capsys.readouterr().out
    assert "R@100" in table and "MAP@100" in table and "BM25 (published)" in table and "51.33" in table
    header = table.splitlines()[1].split()
    columns = display_columns((100, 200, 500), extra_columns())  # the declarations' (tests/evaluation: their order)
    labels = [column_label(c) for c in columns]
    assert header == ["run", *labels, "missing", "unknown"]
    assert "the figure MTEB reports" in table
    for fmt, marker in (("markdown", f"| run | {' | '.join(labels)} | missing | unknown |"),
                        ("latex", r"\begin{tabular}"), ("latex", f"{' & '.join(labels[-2:])} & missing"),
                        ("csv", f"run,{','.join(columns)},missing_")):
        assert main(["evaluate", str(run_path), "--data", str(real_bsard_dir), "--format", fmt]) == 0
        assert marker in capsys.readouterr().out
    per_q = tmp_path / "per_q.csv"
    assert main(["evaluate", str(run_path), "--data", str(real_bsard_dir), "--per-query", str(per_q)]) == 0
    lines = strip_stamp(per_q.read_text()).splitlines()
    assert read_stamp(per_q.read_text())["split"] == "test"
    assert lines[0] == ",".join(["run", "qid", "category", *cutoff_columns((100, 200, 500)), *extra_columns(),
                                 "n_relevant", "n_retrieved", "missing"])
    assert len(lines) == 223


def test_evaluate_unusable_inputs_exit_2(tmp_path, real_bsard_dir, capsys):
    empty = tmp_path / "empty.trec"
    empty.write_text("")
    for bad in (str(tmp_path / "missing.trec"), str(tmp_path), str(empty)):
        rc = main(["evaluate", bad, "--data", str(real_bsard_dir)])
        err = capsys.readouterr().err
        assert rc == 2, bad
        assert "not scored" in err.splitlines()[-1] and "Traceback" not in err


def test_evaluate_scores_good_runs_beside_a_bad_one(tmp_path, real_bsard_dir, real_bsard, capsys):
    good = write_trec(tmp_path / "good.trec", random_scores(real_bsard.qrels("test"), seed=2))
    bad = tmp_path / "bad.trec"
    bad.write_text("1 Q0 5 1 nan t\n")
    rc = main(["evaluate", str(good), str(bad), "--data", str(real_bsard_dir), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and "good.trec" in out["runs"] and "bad.trec" not in out["runs"]
    assert out["problems"]["bad.trec"][0]["severity"] == "error" and out["problems"]["bad.trec"][0]["line"] == 1


def test_data_summary(real_bsard_dir, capsys):
    assert main(["data", "--data", str(real_bsard_dir)]) == 0
    out = capsys.readouterr().out
    assert "222 questions" in out and "mean 4.77, median 2, max 57" in out and "Famille 67" in out


def test_unreachable_hub_exits_2_naming_alternatives(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    env.pop("BSARD_DATA", None)
    proc = subprocess.run([sys.executable, "-m", "bsard_demo", "evaluate", str(tmp_path / "x.trec")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--data sample" in proc.stderr and "--data PATH" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_every_command_module_is_registered():
    """Every ``add_*_parser`` of bsard_demo/cli is reachable from ``python -m bsard_demo``
    (``tune`` and ``train`` once existed only as modules, and their tests built parsers of
    their own)."""
    import ast

    from bsard_demo.cli.main import COMMANDS, build_parser

    defined = set()
    for path in (REPO / "bsard_demo" / "cli").glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("add_") and node.name.endswith("_parser"):
                defined.add(node.name[len("add_"):-len("_parser")].replace("_", "-"))  # export_onnx: export-onnx
    choices = set(next(a for a in build_parser()._actions if a.dest == "command").choices)
    assert defined == choices == set(COMMANDS)


def test_tune_and_train_through_the_entry_point(tmp_path, monkeypatch, capsys):
    """``python -m bsard_demo --help`` names them, and through :func:`main` a bad option of each
    is one line, exit 2 (before any model loads)."""
    shown = subprocess.run([sys.executable, "-m", "bsard_demo", "--help"], cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0 and "{data,evaluate,compare,run,index,tune,train,export-onnx," in shown.stdout
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "c"))
    for command in ("tune", "train"):
        assert main([command, "--data", "sample", "--split", "dev", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"bsard_demo {command}: ") and "no split 'dev'" in err, err
    assert not (tmp_path / "o").exists()
