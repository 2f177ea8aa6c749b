"""The one scoring service (bsard_demo.evaluation.scoring): its figures against pytrec_eval, one naming rule,
every kind of source scored alike, and the CLI rendering the Scoreboard it gets (the Score page's
rendering is checked in tests/app/test_app.py and tests/app/test_score_page_model.py)."""
from __future__ import annotations

import dataclasses
import gzip
import json

import pytest
import pytrec_eval

from _app_helpers import sample_run_trec
from bsard_demo.cli.main import main
from bsard_demo.evaluation.report import json_report, metrics_table, render_table
from bsard_demo.evaluation.scoring import Limits, RunSource, score_runs, unique_names
from bsard_demo.evaluation.stamp import read_stamp, sha256_file, strip_stamp
from bsard_demo.evaluation.stats import STATS, StatsSettings, compare_measure
from bsard_demo.runs import read_run_bytes


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scoring")
    (folder / "other").mkdir()
    paths = {"a": folder / "a.trec", "b": folder / "b.trec.gz", "a2": folder / "other" / "a.trec"}
    paths["a"].write_text(sample_run_trec(seed=31))
    paths["b"].write_bytes(gzip.compress(sample_run_trec(seed=32, drop=3).encode()))
    paths["a2"].write_text(sample_run_trec(seed=33))
    return paths


def test_figures_equal_pytrec_eval(sample, files):
    board = score_runs(sample, "test", [RunSource.file(files["a"]), RunSource.file(files["b"])], (100, 200))
    qrels = sample.qrels("test")
    measures = {"recall.100", "recall.200", "ndcg_cut.10"}
    evaluator = pytrec_eval.RelevanceEvaluator({q: {d: 1 for d in g} for q, g in qrels.items()}, measures)
    for name in ("a.trec", "b.trec.gz"):
        run = board.runs[[r.name for r in board.runs].index(name)].file.run
        per_q = board.evaluations[name].per_question
        for k in (100, 200):  # the run cut to its top k, in the reader's order
            cut = {q: {d: float(len(run[q]) - i) for i, d in enumerate(run[q][:k])} for q in run}
            te = evaluator.evaluate(cut)
            for qid in qrels:
                want = te.get(qid, {})
                assert per_q.loc[qid, f"recall@{k}"] == pytest.approx(want.get(f"recall_{k}", 0.0), abs=1e-12)
                if k == 100:
                    assert per_q.loc[qid, "ndcg@10"] == pytest.approx(want.get("ndcg_cut_10", 0.0), abs=1e-12)


def test_one_naming_rule(sample, files):
    assert unique_names(["a", "b", "a", "a", "a (2)"]) == ["a", "b", "a (2)", "a (3)", "a (2) (2)"]
    run = read_run_bytes(files["a"].read_bytes(), "x").run
    sources = [RunSource.file(files["a"]), RunSource.file(files["a2"]), RunSource.upload("a.trec", b"1 Q0 1 1 1 t\n"),
               RunSource.built("a.trec", run)]
    board = score_runs(sample, "test", sources)
    assert [r.name for r in board.runs] == ["a.trec", "a.trec (2)", "a.trec (3)", "a.trec (4)"]


def test_every_kind_of_source_scores_alike(sample, files):
    text = files["a"].read_bytes()
    run = read_run_bytes(text, "a.trec", qids=sample.qrels("test").keys()).run
    sources = [RunSource.file(files["a"]), RunSource.upload("up", text), RunSource.upload("gz", gzip.compress(text)),
               RunSource.built("built", run)]
    board = score_runs(sample, "test", sources)
    first = board.runs[0]
    for other in board.runs[1:]:
        assert other.evaluation.per_question.equals(first.evaluation.per_question), other.name
        assert [p.as_dict() for p in other.file.problems] == [p.as_dict() for p in first.file.problems], other.name
    assert board.runs[2].file.compressed and board.runs[3].file.format == "trec"
    assert {p.code for p in first.file.problems} >= {"near_random"}  # a random run: the checks ran on each source


def test_limits_keep_runs_and_orientation(sample, files):
    board = score_runs(sample, "test", [RunSource.upload("big", b"1 Q0 1 1 1 t\n" * 100)],
                       limits=Limits(64, lambda size, limit: f"{size} > {limit}"))
    (p,) = list(board.runs[0].file.problems)
    assert p.code == "file_too_large" and p.message == "1300 > 64" and board.evaluations == {}
    board = score_runs(sample, "test", [RunSource.file(files["a"])], keep_runs=False)
    assert board.runs[0].file.run is None and board.runs[0].usable
    dist = "".join(f"{q} Q0 {d} {r} {-float(s)} t\n" for q, _, d, r, s, _ in
                   (ln.split() for ln in files["a"].read_text().splitlines()))
    board = score_runs(sample, "test", [RunSource.file(files["a"]), RunSource.upload("d", dist.encode(),
                                                                                     lower_is_better=True)])
    assert board.runs[0].evaluation.per_question.equals(board.runs[1].evaluation.per_question)
    with pytest.raises(ValueError):
        RunSource("x")


def test_evaluate_renders_the_scoreboard(sample, files, capsys):
    board = score_runs(sample, "test", [RunSource.file(files["a"]), RunSource.file(files["b"])])
    assert main(["evaluate", str(files["a"]), str(files["b"]), "--data", "sample", "--format", "json"]) == 0
    problems = {r.name: [p.as_dict() for p in r.file.problems] for r in board.runs}
    out = json.loads(capsys.readouterr().out)
    assert out.pop("stamp")["runs"] == {files[x].name: sha256_file(files[x]) for x in "ab"}
    assert out == json.loads(json_report(sample.name, "test", board.labelled, board.evaluations, problems))
    assert main(["evaluate", str(files["a"]), str(files["b"]), "--data", "sample", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert strip_stamp(out) == render_table(metrics_table(board.evaluations), "csv") and read_stamp(out)


def test_compare_renders_the_scoreboard_with_the_one_settings(sample, files, capsys):
    board = score_runs(sample, "test", [RunSource.file(files["a"]), RunSource.file(files["b"])], (10,))
    assert main(["compare", str(files["a"]), str(files["b"]), "--data", "sample", "--format", "json",
                 "--measure", "ndcg@10"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = compare_measure({n: ev.per_question for n, ev in board.evaluations.items()}, "ndcg@10").to_dict()
    assert out["pairs"] == want["pairs"] and out["runs"] == want["runs"]
    assert out["permutation"]["n_resamples"] == STATS.resamples and out["permutation"]["seed"] == STATS.seed
    assert out["permutation"]["alpha"] == STATS.alpha


def test_the_pages_caption_is_formatted_from_the_settings():
    from bsard_demo.app.score_compare import permutation_caption, significant_label

    text = permutation_caption()
    assert ("(10\u202f000 tirages, graine 0, p = (1 + #{|T*| ≥ |T|}) / (1 + 10\u202f000), "
            "exact quand 2^m ≤ 10\u202f000)") in text
    assert "p permutation (Holm) < 0,05." in text and significant_label() == "significatif (α = 0,05)"
    other = permutation_caption(StatsSettings(resamples=2000, seed=3, alpha=0.01))
    assert "(2\u202f000 tirages, graine 3," in other and "< 0,01." in other
    with pytest.raises(dataclasses.FrozenInstanceError):
        STATS.seed = 1  # frozen


def test_a_boards_memo_computes_once_for_visitors_asking_at_once():
    """Scoreboard.memo: a value derived from the board is computed once, a visitor asking while it is
    computed waits for it (a crowd pressing the same built-in evaluation), and a failure is not kept."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from bsard_demo.evaluation.scoring import Scoreboard

    board = Scoreboard(dataset=None, split="test", qrels={}, ks=(100,))
    calls, started = [], threading.Event()

    def slow():
        calls.append(1)
        started.set()
        time.sleep(0.3)  # the second visitor asks meanwhile
        return {"chart": len(calls)}

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(board.memo, "chart", slow)
        started.wait(10)
        second = pool.submit(board.memo, "chart", slow)
        assert first.result(10) is second.result(10)
    assert len(calls) == 1
    with pytest.raises(ZeroDivisionError):
        board.memo("failing", lambda: 1 / 0)
    assert board.memo("failing", lambda: "now") == "now"
