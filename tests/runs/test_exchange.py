"""Interop both ways (bsard_demo.runs.exchange, ``export-qrels`` / ``export-run``): our qrels and runs
exported as TREC, ranx JSON and parquet, scored by the real ranx and by ir_measures (pytrec_eval), give
our figures; runs that ranx writes (Run.save to trec/json/parquet) read back through our readers in
the same order. Randomized runs with ties, repeated articles and missing questions, on synthetic labels
and on the real BSARD test labels."""
from __future__ import annotations

import hashlib
import json
import os
import random
import stat

import ir_measures
import pandas as pd
import pytest

from bsard_demo.cli.main import main
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.stamp import read_stamp_bytes
from bsard_demo.runs import Run, qrels_bytes, read_run_bytes, read_run_path, run_bytes, run_records, tied_questions
from bsard_demo.sources import load_dataset

#: Our column -> (ranx's name, ir_measures' measure); R-Precision once the measures family exists.
MEASURES = {"recall@100": ("recall@100", ir_measures.R @ 100), "recall@200": ("recall@200", ir_measures.R @ 200),
            "recall@500": ("recall@500", ir_measures.R @ 500), "map@100": ("map@100", ir_measures.AP @ 100),
            "mrr@100": ("mrr@100", ir_measures.RR @ 100)}
RPREC = ("r-precision", ir_measures.Rprec)


def synthetic_qrels(rng: random.Random) -> dict[str, frozenset[str]]:
    """Labels over BSARD's id range (ids of 1 to 5 digits, as its 22,633 articles', as the runs' below: ranx's
    numba functions compile once per longest id, ~9 CPU s each in a fresh venv, tests/conftest.py's ranx group)."""
    return {f"q{i}": frozenset(str(rng.randrange(23000)) for _ in range(rng.choice((1, 1, 2, 5, 40))))
            for i in range(60)}


def random_run(qrels, rng: random.Random, *, ties: bool) -> dict[str, list[tuple[str, float]]]:
    """Entries per question: gold articles mixed with others, some questions missing, some
    articles repeated, scores rounded (ties) or distinct."""
    run = {}
    for qid, gold in qrels.items():
        if rng.random() < 0.1:
            continue  # a missing question scores 0
        docs = [d for d in gold if rng.random() < 0.6]
        docs += [str(rng.randrange(23000)) for _ in range(rng.randrange(50, 600))]
        docs += rng.sample(docs, min(5, len(docs)))  # repeats: the best position counts
        rng.shuffle(docs)
        run[qid] = [(d, round(rng.random(), 2) if ties else rng.random()) for d in docs]
    return run


def ours(qrels, entries: dict) -> tuple[Run, dict[str, float]]:
    run = Run.from_scores({q: dict(sorted(pairs, key=lambda p: p[1])) for q, pairs in entries.items()})
    return run, evaluate(qrels, run, (100, 200, 500)).means


@pytest.fixture(scope="module")
def labels_cases(request, tmp_path_factory):
    """``(label, qrels, data folder)``: synthetic labels always, the real BSARD test labels (the
    folder source on ../shared) when they are there."""
    qrels = synthetic_qrels(random.Random(30))
    folder = tmp_path_factory.mktemp("synthetic")
    (folder / "questions_test.csv").write_text(pd.DataFrame(
        {"id": list(qrels), "question": "q", "article_ids": [",".join(sorted(g)) for g in qrels.values()]}
    ).to_csv(index=False))
    out = [("synthetic", qrels, folder)]
    try:
        real = request.getfixturevalue("real_bsard_dir")
    except pytest.skip.Exception:
        return out
    return out + [("bsard_test", load_dataset(real, need_corpus=False).qrels("test"), real)]


def ranx_figures(ranx, qrels_obj, run_obj) -> dict:
    names = [v[0] for v in MEASURES.values()] + [RPREC[0]]
    return ranx.evaluate(qrels_obj, run_obj, names, make_comparable=True)


def ir_measures_figures(qrels_dict, run_dict, n_questions: int) -> dict:
    """Per question, then averaged over every labelled question (a question missing from the run
    scores 0, as ours and ranx's make_comparable do; pytrec_eval alone leaves it out)."""
    wanted = [v[1] for v in MEASURES.values()] + [RPREC[1]]
    sums = {m: 0.0 for m in wanted}
    for metric in ir_measures.iter_calc(wanted, qrels_dict, run_dict):
        sums[metric.measure] += metric.value
    return {m: s / n_questions for m, s in sums.items()}


def check_same(ranx, qrels, run: Run, means: dict, q_ranx, r_ranx, q_dict, r_dict):
    got_ranx = ranx_figures(ranx, q_ranx, r_ranx)
    got_irm = ir_measures_figures(q_dict, r_dict, sum(1 for g in qrels.values() if g))
    for column, (ranx_name, irm) in MEASURES.items():
        assert got_ranx[ranx_name] == pytest.approx(means[column], abs=1e-12), column
        assert got_irm[irm] == pytest.approx(means[column], abs=1e-12), column
    assert got_ranx[RPREC[0]] == pytest.approx(got_irm[RPREC[1]], abs=1e-12)
    assert got_irm[RPREC[1]] == pytest.approx(means["rprec"], abs=1e-12)


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_round_trip_through_ranx_and_ir_measures(tmp_path, capsys, labels_cases, ties, ranx):
    """Our files, read by ranx and ir_measures, give our figures; ties need --rank-scores for ranx
    (numpy's unstable argsort), never for trec_eval, which breaks ties as we do."""
    for label, qrels, data in labels_cases:
        folder = tmp_path / label
        folder.mkdir()
        entries = random_run(qrels, random.Random(label + str(ties)), ties=ties)
        src = folder / "source.trec"
        src.write_text("".join(f"{q} Q0 {d} 0 {s!r} t\n" for q, pairs in entries.items() for d, s in pairs))
        run, means = ours(qrels, entries)
        assert tied_questions(run) > 0 if ties else tied_questions(run) == 0
        files = {}
        for fmt in ("trec", "ranx", "parquet"):
            files[fmt] = (folder / f"qrels.{fmt}", folder / f"run.{fmt}")
            assert main(["export-qrels", "--data", str(data), "--format", fmt, "--out", str(files[fmt][0])]) == 0
            argv = ["export-run", str(src), "--format", fmt, "--out", str(files[fmt][1])]
            assert main(argv + (["--rank-scores"] if ties else [])) == 0
        err = capsys.readouterr().err
        assert "error" not in err
        q_trec = list(ir_measures.read_trec_qrels(str(files["trec"][0])))
        r_trec = list(ir_measures.read_trec_run(str(files["trec"][1])))
        check_same(ranx, qrels, run, means, ranx.Qrels.from_file(str(files["trec"][0]), kind="trec"),
                   ranx.Run.from_file(str(files["trec"][1]), kind="trec"), q_trec, r_trec)
        q_json, r_json = (json.loads(p.read_text()) for p in files["ranx"])
        check_same(ranx, qrels, run, means, ranx.Qrels.from_dict(q_json), ranx.Run.from_dict(r_json), q_json, r_json)
        q_pq, r_pq = (pd.read_parquet(p) for p in files["parquet"])
        assert list(q_pq.columns) == list(r_pq.columns) == ["q_id", "doc_id", "score"]
        # ranx 0.3.21's from_parquet asserts object columns, and pandas 3 reads strings as "str" (ranx
        # cannot read its own parquet under pandas 3): the same frames, ids as objects, through from_df
        ids = {"q_id": object, "doc_id": object}
        check_same(ranx, qrels, run, means, ranx.Qrels.from_df(q_pq.astype(ids)), ranx.Run.from_df(r_pq.astype(ids)),
                   q_pq.rename(columns={"q_id": "query_id", "score": "relevance"}),
                   r_pq.rename(columns={"q_id": "query_id"}))
        if ties:  # the file's own scores: trec_eval (pytrec_eval) breaks ties as we do; ir_measures computes
            # RR@k with its msmarco provider, which cuts at k in its own tie order: R@k and AP@k only
            assert main(["export-run", str(src), "--format", "trec", "--out", str(folder / "given.trec")]) == 0
            err = capsys.readouterr().err
            assert "tied scores" in err, err[-600:]
            given = ir_measures_figures(q_trec, list(ir_measures.read_trec_run(str(folder / "given.trec"))),
                                        sum(1 for g in qrels.values() if g))
            for column, (_, irm) in MEASURES.items():
                if not column.startswith("mrr"):
                    assert given[irm] == pytest.approx(means[column], abs=1e-12), column


def test_runs_written_by_ranx_read_back_in_the_same_order(tmp_path, ranx):
    rng = random.Random(5)
    scores = {f"q{i}": {str(rng.randrange(23000)): rng.random() for _ in range(rng.randrange(1, 80))}
              for i in range(30)}
    want = Run.from_scores(scores)
    written = ranx.Run.from_dict(scores, name="ranx_run")
    for ext in ("trec", "json", "parquet"):
        path = tmp_path / f"run.{ext}"
        written.save(str(path))
        rf = read_run_path(path, isolation=None)
        assert rf.run is not None and not [p for p in rf.problems if p.severity == "error"], ext
        assert rf.run.rankings == want.rankings, ext
        # and back out: our export of what we read equals what ranx wrote, question by question
        assert json.loads(run_bytes(rf.run, "ranx")) == {q: {d: pytest.approx(s) for d, s in docs.items()}
                                                         for q, docs in written.to_dict().items()}
    for sep, ext in ((",", "csv"), ("\t", "tsv")):  # ranx's table as CSV / TSV: q_id, doc_id, score
        path = tmp_path / f"run.{ext}"
        written.to_dataframe().to_csv(path, sep=sep, index=False)
        rf = read_run_path(path, isolation=None)
        assert rf.run is not None and rf.run.rankings == want.rankings, ext


def test_distances_and_rank_only_runs_keep_our_order():
    dist = read_run_bytes(b"q Q0 a 1 0.5 t\nq Q0 b 2 0.1 t\nq Q0 c 3 0.9 t\n", "d.trec", lower_is_better=True,
                          isolation=None).run
    assert run_records(dist) == [("q", "b", -0.1), ("q", "a", -0.5), ("q", "c", -0.9)]
    ranked = Run.from_rankings({"q": ["x", "y", "z"]})
    assert run_records(ranked) == [("q", "x", 3.0), ("q", "y", 2.0), ("q", "z", 1.0)]
    assert run_records(Run.from_scores({"q": {"a": 1.0, "b": 1.0}}), rank_scores=True) == \
        [("q", "b", 2.0), ("q", "a", 1.0)]  # the tie broken by id descending, as trec_eval does
    assert qrels_bytes({"1": frozenset({"9", "10"}), "2": frozenset()}, "trec") == b"1 0 10 1\n1 0 9 1\n"
    with pytest.raises(ValueError):
        run_bytes(ranked, "csv")


def test_export_run_refuses_a_broken_run(tmp_path, capsys):
    bad = tmp_path / "bad.trec"
    bad.write_text("not a run\n")
    assert main(["export-run", str(bad), "--format", "trec", "--out", str(tmp_path / "x.trec")]) == 2
    err = capsys.readouterr().err
    assert "not written" in err and not (tmp_path / "x.trec").exists()
    assert main(["export-run", str(bad), "--format", "trec", "--out", str(tmp_path / "x"), "--tag", "a b"]) == 2


def test_trec_refuses_an_id_with_a_blank_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "blank.json"
    run.write_text('{"q 1": {"d 1": 1.0}, "q2\\nq3": {"a": 1}}')
    out = tmp_path / "r.trec"
    assert main(["export-run", str(run), "--format", "trec", "--out", str(out)]) == 2
    assert "TREC cannot hold the question id 'q 1'" in capsys.readouterr().err and not out.exists()
    assert main(["export-run", str(run), "--format", "ranx", "--out", str(tmp_path / "r.json")]) == 0


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_exports_follow_the_umask_like_every_other_file(tmp_path, capsys, labels_cases, mask, mode):
    """``export-qrels`` / ``export-run`` write through mkstemp (600) then rename: the file must end with the
    mode a plain ``open`` gives under the umask, as ``--per-query`` and ``--misses`` files do; a file already
    there keeps its own mode."""
    _, qrels, data = labels_cases[0]
    src = tmp_path / "src.trec"
    src.write_text(Run.from_scores({q: {d: 1.0 for d in gold} for q, gold in qrels.items()}).to_trec("t"))
    old = os.umask(mask)
    try:
        for fmt in ("trec", "ranx", "parquet"):
            q_out, r_out = tmp_path / f"q.{fmt}", tmp_path / f"r.{fmt}"
            assert main(["export-qrels", "--data", str(data), "--format", fmt, "--out", str(q_out)]) == 0
            assert main(["export-run", str(src), "--format", fmt, "--out", str(r_out)]) == 0
            plain = tmp_path / f"plain.{fmt}"
            plain.write_text("x")
            assert stat.S_IMODE(q_out.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == mode
            assert stat.S_IMODE(r_out.stat().st_mode) == mode
        os.chmod(q_out, 0o640)  # rewritten: its own mode stays
        assert main(["export-qrels", "--data", str(data), "--format", "parquet", "--out", str(q_out)]) == 0
        assert stat.S_IMODE(q_out.stat().st_mode) == 0o640
    finally:
        os.umask(old)
    assert not list(tmp_path.glob(".*.tmp"))


def test_parquet_exports_carry_a_stamp_and_stamps_matches_runs_by_ranking(tmp_path, capsys, labels_cases):
    """export-run/export-qrels parquet files hold the stamp in their metadata (pandas still reads the table);
    the same ranking exported from its TREC and its JSON twin is the same run for ``stamps`` (exit 0)."""
    _, qrels, data = labels_cases[0]
    src = tmp_path / "src.trec"
    src.write_text(Run.from_scores({q: {d: 1.0 + i for i, d in enumerate(sorted(g))} for q, g in qrels.items()}
                                   ).to_trec("t"))
    twin = tmp_path / "src.json"
    assert main(["export-run", str(src), "--format", "ranx", "--out", str(twin)]) == 0
    outs = []
    for source in (src, twin):
        out = tmp_path / f"{source.suffix[1:]}.parquet"
        assert main(["export-run", str(source), "--format", "parquet", "--out", str(out)]) == 0
        outs.append(out)
    stamps = [read_stamp_bytes(p.read_bytes()) for p in outs]
    assert stamps[0]["runs"] == {"src.trec": hashlib.sha256(src.read_bytes()).hexdigest()}
    digest = read_run_path(src).run.ranking_sha256()
    assert stamps[0]["rankings"]["src.trec"] == stamps[1]["rankings"]["src.json"] == digest
    assert len(pd.read_parquet(outs[0])) == sum(map(len, qrels.values()))
    capsys.readouterr()
    assert main(["stamps", str(outs[0]), str(outs[1])]) == 0
    assert "run src.trec and src.json: the same ranking, another file" in capsys.readouterr().out
    q_out = tmp_path / "q.parquet"
    assert main(["export-qrels", "--data", str(data), "--format", "parquet", "--out", str(q_out)]) == 0
    assert main(["evaluate", str(src), "--data", str(data), "--format", "json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)["stamp"]
    assert read_stamp_bytes(q_out.read_bytes())["dataset"]["labels_sha256"] == evaluated["dataset"]["labels_sha256"]
    # TREC and JSON exports have no room for a stamp that every reader skips: none is written
    assert read_stamp_bytes(twin.read_bytes()) is None
