"""The BSARD-aware checks through ``evaluate``: each crafted fault gets its warning with its code
(JSON ``problems`` and one stderr line in table mode), a clean run gets none."""
from __future__ import annotations

import json
import random

import pytest

from bsard_demo.cli.main import main


def perfect(qrels, corpus_ids, depth=100, seed=0, shift=0) -> str:
    """TREC text: each question's gold articles first, then other articles; ids + ``shift``."""
    rnd = random.Random(seed)
    lines = []
    corpus = sorted(corpus_ids, key=int)
    for q, gold in qrels.items():
        rest = [d for d in rnd.sample(corpus, depth + len(gold)) if d not in gold][: depth - len(gold)]
        for r, d in enumerate(sorted(gold, key=int) + rest, 1):
            lines.append(f"{q} Q0 {int(d) + shift} {r} {depth - r + 1} t")
    return "\n".join(lines) + "\n"


def random_run(qids, corpus_ids, depth=100, seed=1) -> str:
    rnd = random.Random(seed)
    corpus = sorted(corpus_ids)
    return "".join(f"{q} Q0 {d} {r} {depth - r + 1} t\n" for q in qids
                   for r, d in enumerate(rnd.sample(corpus, depth), 1))


def evaluate_json(capsys, *paths, extra=()):
    rc = main(["evaluate", *map(str, paths), "--data", "sample", "--format", "json", "--k", "100", *extra])
    captured = capsys.readouterr()
    assert rc or captured.err == ""  # JSON mode: every problem is in the JSON
    return rc, json.loads(captured.out)


def codes(report, name):
    return [p["code"] for p in report["problems"][name]]


def test_a_clean_run_gets_no_finding(tmp_path, sample, capsys):
    path = tmp_path / "clean.trec"
    path.write_text(perfect(sample.qrels("test"), sample.article_ids))
    rc, out = evaluate_json(capsys, path)
    assert rc == 0 and out["problems"]["clean.trec"] == [] and out["runs"]["clean.trec"]["recall@100"] == 1.0


def test_a_zero_based_run_gets_ids_shifted(tmp_path, sample, capsys):
    path = tmp_path / "shifted.trec"
    path.write_text(perfect(sample.qrels("test"), sample.article_ids, shift=-1))
    rc, out = evaluate_json(capsys, path)
    assert rc == 0
    found = [p for p in out["problems"]["shifted.trec"] if p["code"] == "ids_shifted"]
    assert len(found) == 1 and found[0]["severity"] == "warning" and found[0]["line"] is None
    assert "shifted by one: with +1 added" in found[0]["message"] and "R@100 1.000" in found[0]["message"]
    assert "0-based row numbers" in found[0]["message"]  # the hint follows the message
    assert "near_random" not in codes(out, "shifted.trec")  # explained by the more specific finding
    # table mode: one stderr line per problem, with its code
    assert main(["evaluate", str(path), "--data", "sample", "--k", "100"]) == 0
    err = capsys.readouterr().err.splitlines()
    (line,) = [e for e in err if "ids_shifted" in e]
    assert line.startswith("shifted.trec: warning [ids_shifted]: article ids look shifted by one")


def test_a_random_run_gets_near_random(tmp_path, sample, capsys):
    path = tmp_path / "random.trec"
    path.write_text(random_run(sample.qrels("test"), sample.article_ids))
    rc, out = evaluate_json(capsys, path)
    assert rc == 0 and codes(out, "random.trec") == ["near_random"]
    assert "no better than chance" in out["problems"]["random.trec"][0]["message"]


def test_a_run_of_the_train_questions_gets_wrong_split(tmp_path, sample, capsys):
    path = tmp_path / "train.trec"
    path.write_text(perfect(sample.qrels("train"), sample.article_ids))
    rc, out = evaluate_json(capsys, path)
    assert rc == 0 and "wrong_split" in codes(out, "train.trec")
    (p,) = [p for p in out["problems"]["train.trec"] if p["code"] == "wrong_split"]
    assert "are train questions" in p["message"] and "--split train" in p["message"]
    rc, out = evaluate_json(capsys, path, extra=("--split", "train"))
    assert out["problems"]["train.trec"] == [] and out["runs"]["train.trec"]["recall@100"] == 1.0


def test_every_problem_has_a_code(tmp_path, sample, capsys):
    path = tmp_path / "messy.trec"
    text = perfect(sample.qrels("test"), sample.article_ids, depth=20)
    path.write_text(text + "1 Q0 99999 1 0.5 other\nnot a line\n")
    rc, out = evaluate_json(capsys, path)
    assert rc == 2 and out["problems"]["messy.trec"]
    assert all(p["code"] and p["code"].replace("_", "").isalpha() for p in out["problems"]["messy.trec"])


def test_a_distance_run_with_lower_is_better_scores_like_its_similarities(tmp_path, sample, capsys):
    rnd = random.Random(4)
    ids = sorted(sample.article_ids)
    sim, dist = [], []
    for q in sample.qrels("test"):
        docs = rnd.sample(ids, 120)
        scores = sorted((round(rnd.random(), 1) for _ in docs), reverse=True)  # best first, with ties
        for r, (d, s) in enumerate(zip(docs, scores), 1):
            sim.append(f"{q} Q0 {d} {r} {s} sim\n")
            dist.append(f"{q} Q0 {d} {r} {-s} dist\n")
    rnd.shuffle(dist)
    (tmp_path / "sim.trec").write_text("".join(sim))
    (tmp_path / "dist.trec").write_text("".join(dist))
    rc, plain = evaluate_json(capsys, tmp_path / "sim.trec", tmp_path / "dist.trec")
    assert rc == 0 and "scores_ascending" in codes(plain, "dist.trec")
    assert plain["runs"]["dist.trec"] != plain["runs"]["sim.trec"]
    rc, lower = evaluate_json(capsys, tmp_path / "dist.trec", extra=("--lower-is-better",))
    assert rc == 0 and lower["runs"]["dist.trec"] == plain["runs"]["sim.trec"]  # exactly
    assert "scores_ascending" not in codes(lower, "dist.trec")
    # compare: the distance run read as distances ties the similarity run on every question
    copy = tmp_path / "dist2.trec"
    copy.write_text("".join(dist))
    assert main(["compare", str(tmp_path / "dist.trec"), str(copy), "--data", "sample", "--lower-is-better",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"]["dist.trec"] == \
        pytest.approx(plain["runs"]["sim.trec"]["recall@100"], abs=1e-12)  # JSON: 12 digits
    assert out["pairs"][0]["ties"] == out["questions"]
    # a distance run beside a similarity run: --distances reads that one file as distances
    assert main(["compare", str(tmp_path / "sim.trec"), str(tmp_path / "dist.trec"), "--data", "sample",
                 "--distances", "dist.trec", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"]["dist.trec"] == out["runs"]["sim.trec"] and out["pairs"][0]["ties"] == out["questions"]
    rc, mixed = evaluate_json(capsys, tmp_path / "sim.trec", tmp_path / "dist.trec",
                              extra=("--distances", str(tmp_path / "dist.trec")))
    assert rc == 0 and mixed["runs"]["dist.trec"] == mixed["runs"]["sim.trec"] == plain["runs"]["sim.trec"]
    assert not [p for p in mixed["problems"]["sim.trec"] + mixed["problems"]["dist.trec"]
                if p["code"] in ("scores_ascending", "scores_descending")]
    assert main(["evaluate", str(tmp_path / "sim.trec"), "--data", "sample", "--distances", "nope.trec"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--distances names a file that is not a run given here: nope.trec" in err
