"""``python -m bsard_demo compare``: the Score page's comparison from the command line, checked
against the page's own function, scipy's paired t-test on per-question values computed by
pytrec_eval, a hand-made Holm correction, and bad inputs (one line, exit code 2)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from _app_helpers import CLI_ENV, sample_run_trec
from bsard_demo.app.score_compare import comparison
from bsard_demo.app.score_uploads import score_files
from bsard_demo.cli.main import main
from bsard_demo.evaluation.report import PAIR_FIELDS
from bsard_demo.evaluation.stamp import strip_stamp
from bsard_demo.runs import Run
from bsard_demo.sources import load_sample

REPO = Path(__file__).resolve().parents[2]
KEYS = ["dataset", "split", "questions", "measure", "runs", "pairs", "permutation", "stamp"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three TREC runs over the sample's test split: two random ones (the second without its first
    three questions) and one that ranks the gold articles of most questions first."""
    folder = tmp_path_factory.mktemp("compare")
    ds = load_sample()
    a, b = folder / "a.trec", folder / "b.trec.gz"
    a.write_text(sample_run_trec(seed=1))
    import gzip

    b.write_bytes(gzip.compress(sample_run_trec(seed=2, drop=3).encode()))
    rng = np.random.default_rng(7)
    ids = sorted(ds.articles["id"])
    lines = []
    for i, (qid, gold) in enumerate(ds.qrels("test").items()):
        ranking = [str(x) for x in rng.permutation(ids)][:120]
        if i % 4:  # three questions in four: the gold first
            ranking = list(gold) + [d for d in ranking if d not in gold]
        lines += [f"{qid} Q0 {d} {r} {200 - r} good" for r, d in enumerate(ranking, 1)]
    c = folder / "c.trec"
    c.write_text("\n".join(lines) + "\n")
    return {"a": a, "b": b, "c": c}


def run_json(capsys, *argv) -> dict:
    rc = main(["compare", *map(str, argv), "--data", "sample", "--format", "json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out)


def trec_eval_values(path: Path, qrels, measure: str) -> np.ndarray:
    """Per-question values of ``recall_k``/``ndcg_cut_10`` by pytrec_eval, in split order (0 for a
    question absent from the run), on the run cut to its top k in the reader's order."""
    from bsard_demo.runs import read_run_path

    run = read_run_path(path, qids=qrels.keys()).run
    k = int(measure.partition("@")[2])
    name = {"recall": f"recall.{k}", "ndcg": f"ndcg_cut.{k}"}[measure.partition("@")[0]]
    scored = {q: {d: float(len(run[q]) - i) for i, d in enumerate(run[q][:k])} for q in run}
    te = pytrec_eval.RelevanceEvaluator({q: {d: 1 for d in g} for q, g in qrels.items()}, {name}).evaluate(scored)
    key = name.replace(".", "_")
    return np.array([te.get(q, {}).get(key, 0.0) for q in qrels])


def test_two_runs_json_layout_and_the_pages_numbers(files, sample, capsys):
    out = run_json(capsys, files["a"], files["b"])
    assert list(out) == KEYS
    assert (out["dataset"], out["split"], out["questions"], out["measure"]) == (sample.name, "test", 27, "recall@100")
    assert list(out["runs"]) == ["a.trec", "b.trec.gz"]
    (pair,) = out["pairs"]
    assert list(pair) == list(PAIR_FIELDS)
    assert out["permutation"]["n_resamples"] == 10000 and out["permutation"]["seed"] == 0
    # the page's comparison of the same files: the same function, the same numbers (exactly)
    board = score_files([(p.name, p.read_bytes()) for p in (files["a"], files["b"])], sample, "test")
    page = comparison(board, "recall@100").to_dict()
    assert out["runs"] == page["runs"]
    assert out["pairs"] == [{k: p[k] for k in PAIR_FIELDS} for p in page["pairs"]]
    assert out["permutation"] == page["permutation"]


@pytest.mark.parametrize("measure", ["recall@100", "ndcg@10"])
def test_three_runs_against_scipy_and_a_hand_made_holm(files, sample, capsys, measure):
    qrels = sample.qrels("test")
    out = run_json(capsys, files["a"], files["b"], files["c"], "--measure", measure)
    names = ["a.trec", "b.trec.gz", "c.trec"]
    values = {n: trec_eval_values(files[k], qrels, measure) for n, k in zip(names, "abc")}
    assert [(p["run_a"], p["run_b"]) for p in out["pairs"]] == [(names[0], names[1]), (names[0], names[2]),
                                                                 (names[1], names[2])]
    for name in names:
        assert out["runs"][name] == pytest.approx(values[name].mean(), abs=1e-12)
    for p in out["pairs"]:
        x, y = values[p["run_a"]], values[p["run_b"]]
        assert p["p_ttest"] == pytest.approx(stats.ttest_rel(x, y).pvalue, abs=1e-9)
        assert p["diff"] == pytest.approx(x.mean() - y.mean(), abs=1e-12)
        d = x - y
        assert (p["wins"], p["ties"], p["losses"]) == (int((d > 1e-12).sum()), int((abs(d) <= 1e-12).sum()),
                                                       int((d < -1e-12).sum()))
        assert 0 < p["p_permutation"] <= 1
    for test in ("p_ttest", "p_permutation"):  # Holm over the three pairs, by hand
        raw = [p[test] for p in out["pairs"]]
        order = sorted(range(3), key=lambda i: raw[i])
        adjusted, running = [0.0] * 3, 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (3 - rank) * raw[i]))
            adjusted[i] = running
        assert [p[f"{test}_holm"] for p in out["pairs"]] == pytest.approx(adjusted, abs=1e-15)
    assert [p["significant"] for p in out["pairs"]] == [p["p_permutation_holm"] < 0.05 for p in out["pairs"]]
    # the planted gold run beats both random ones, clearly
    assert out["pairs"][1]["significant"] and out["pairs"][2]["significant"] and out["pairs"][1]["diff"] < 0


def test_real_labels_t_test(tmp_path, real_bsard_dir, real_bsard, capsys):
    qrels = real_bsard.qrels("test")
    rng = np.random.default_rng(3)
    paths = []
    for name, keep in (("x.trec", 0.5), ("y.trec", 0.4)):
        scores = {}
        for q, gold in qrels.items():
            docs = {str(d): float(s) for d, s in zip(rng.choice(22633, 150, replace=False) + 1, rng.random(150))}
            docs.update({g: float(rng.random()) for g in gold if rng.random() < keep})
            scores[q] = docs
        path = tmp_path / name
        path.write_text(Run.from_scores(scores).to_trec("t"))
        paths.append(path)
    rc = main(["compare", *map(str, paths), "--data", str(real_bsard_dir), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["questions"] == 222
    (p,) = out["pairs"]
    x, y = (trec_eval_values(path, qrels, "recall@100") for path in paths)
    assert p["p_ttest"] == pytest.approx(stats.ttest_rel(x, y).pvalue, abs=1e-9)
    assert p["mean_a"] == pytest.approx(x.mean(), abs=1e-12) and p["mean_b"] == pytest.approx(y.mean(), abs=1e-12)


def test_formats(files, capsys):
    args = ["compare", str(files["a"]), str(files["c"]), "--data", "sample", "--measure", "mrr@100"]
    assert main(args + ["--format", "csv"]) == 0
    lines = strip_stamp(capsys.readouterr().out).splitlines()
    assert lines[0] == ",".join(PAIR_FIELDS) and len(lines) == 2 and lines[1].startswith("a.trec,c.trec,")
    assert main(args + ["--format", "markdown"]) == 0
    md = strip_stamp(capsys.readouterr().out)
    assert md.startswith("| run A | run B | MRR@100 A | MRR@100 B | A - B |") and "| a.trec | c.trec |" in md
    assert main(args + ["--format", "latex"]) == 0
    assert r"\begin{tabular}{llrrrrrrrrrrr}" in capsys.readouterr().out
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "split test · 27 questions · mrr@100" in table and "10,000 resamples" in table and "seed 0" in table
    assert "(1 + #{|T*| >= |T|}) / (1 + n)" in table


def test_help_states_the_permutation_settings(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("10,000 random sign vectors", "default_rng(seed=0)", "p = (1 + #{|T*| >= |T|}) / (1 + 10,000)",
                   "scipy.stats.ttest_rel", "Holm", "--lower-is-better", "ndcg@10"):
        assert phrase in text, phrase


def one_line_exit_2(capsys, argv, *phrases):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert rc == 2 and len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


def test_bad_inputs_are_one_line_and_exit_2(files, tmp_path, capsys):
    a, c = str(files["c"]), str(files["c"])  # a clean run (the random ones get a near_random warning)
    one_line_exit_2(capsys, ["compare", a, "--data", "sample"], "bsard_demo compare:", "at least two run files")
    one_line_exit_2(capsys, ["compare", a, str(tmp_path / "absent.trec"), "--data", "sample"],
                    "absent.trec: error [file_not_found]: file not found", "not scored")
    empty = tmp_path / "empty.trec"
    empty.write_text("")
    one_line_exit_2(capsys, ["compare", str(empty), c, "--data", "sample", "--format", "json"], "empty.trec",
                    "the file is empty")
    for measure in ("precision@10", "recall@0", "ndcg@20", "recall"):
        one_line_exit_2(capsys, ["compare", a, c, "--data", "sample", "--measure", measure], "unknown measure")
    one_line_exit_2(capsys, ["compare", a, c, "--data", "sample", "--format", "html"], "--format")
    one_line_exit_2(capsys, ["compare", a, c, "--data", "sample", "--split", "dev"], "bsard_demo compare:", "dev")
    one_line_exit_2(capsys, ["compare", a, c, "--data", str(tmp_path / "nowhere")], "no such folder")


def test_an_unusable_file_among_usable_ones_exits_2_after_comparing_the_others(files, tmp_path, capsys):
    bad = tmp_path / "bad.trec"
    bad.write_text("1 Q0 5 1 nan t\n1 Q0 6\n")
    rc = main(["compare", str(files["a"]), str(bad), str(files["c"]), "--data", "sample", "--format", "json"])
    captured = capsys.readouterr()
    assert rc == 2
    out = json.loads(captured.out)
    assert list(out["runs"]) == ["a.trec", "c.trec"] and len(out["pairs"]) == 1
    assert captured.err.splitlines()[-1] == \
        "bsard_demo compare: unusable run file(s), not scored: bad.trec (2 error(s))"


def test_the_same_file_twice_is_two_runs(files, capsys):
    """Two runs of one base name are named as on the Score page (bsard_demo.evaluation.scoring.unique_names)."""
    out = run_json(capsys, files["a"], files["a"])
    assert list(out["runs"]) == ["a.trec", "a.trec (2)"]
    (p,) = out["pairs"]
    assert p["diff"] == 0 and p["p_permutation"] == 1.0 and p["p_ttest"] == 1.0 and p["ties"] == 27


def test_through_the_interpreter(files):
    proc = subprocess.run([sys.executable, "-m", "bsard_demo", "compare", str(files["a"]), str(files["c"]), "--data",
                           "sample", "--format", "json"], cwd=REPO, env={**__import__("os").environ, **CLI_ENV},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert list(json.loads(proc.stdout)) == KEYS
