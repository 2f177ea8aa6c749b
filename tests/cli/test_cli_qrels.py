"""``evaluate``/``compare --qrels FILE`` (bsard_demo.evaluation.labels over bsard_demo.runs.qrels_read): the same
figures as ``--data`` for the same labels in every layout other tools write; without ``--data`` the checks that
need a corpus are skipped with one line; graded labels give pytrec_eval's figures (binary measures count
relevance > 0, nDCG takes the grades as gains), on randomized runs with ties, repeated articles and questions
missing from the run or from the labels."""
from __future__ import annotations

import gzip
import json
import random

import pandas as pd
import pytest
import pytrec_eval

from bsard_demo.cli.main import main
from bsard_demo.evaluation.labels import SKIPPED_CHECKS
from bsard_demo.runs import Run, read_run_path

KS = (5, 20, 100)


def _folder(tmp_path, qrels: dict[str, frozenset[str]]):
    """A dataset folder with these test labels and a small corpus (every article id 0..299)."""
    folder = tmp_path / "data"
    folder.mkdir()
    pd.DataFrame({"id": list(qrels), "question": "q", "article_ids": [",".join(sorted(g)) for g in qrels.values()]}
                 ).to_csv(folder / "questions_test.csv", index=False)
    pd.DataFrame({"id": [str(i) for i in range(300)], "article": "texte", "code": "C"}).to_csv(
        folder / "articles.csv", index=False)
    return folder


def _random_run(rng: random.Random, qids, *, ties: bool) -> str:
    """TREC lines: some questions missing, articles repeated, scores rounded (ties) or not, a question
    outside the labels."""
    lines = []
    for q in list(qids) + ["not-a-question"]:
        if rng.random() < 0.15:
            continue
        docs = [str(rng.randrange(300)) for _ in range(rng.randrange(5, 150))]
        docs += docs[:3]  # repeats: the best position counts
        for rank, d in enumerate(docs, 1):
            score = round(rng.random(), 1) if ties else rng.random()
            lines.append(f"{q} Q0 {d} {rank} {score!r} t")
    return "\n".join(lines) + "\n"


def _figures(capsys, argv) -> dict:
    assert main(argv + ["--k", *map(str, KS), "--format", "json"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    return out["runs"]


def _labels_files(tmp_path, folder, qrels) -> dict[str, str]:
    files = {}
    for fmt in ("trec", "ranx", "parquet"):
        path = tmp_path / f"qrels.{fmt}"
        assert main(["export-qrels", "--data", str(folder), "--format", fmt, "--out", str(path)]) == 0
        files[fmt] = str(path)
    rows = [(q, d, 1) for q, g in qrels.items() for d in sorted(g)]
    table = pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])  # ir_measures' names
    files["csv"] = str(tmp_path / "qrels.csv")
    table.to_csv(files["csv"], index=False)
    files["tsv.gz"] = str(tmp_path / "qrels.tsv.gz")
    files_tsv = table.rename(columns={"query_id": "q_id"}).to_csv(index=False, sep="\t").encode()
    (tmp_path / "qrels.tsv.gz").write_bytes(gzip.compress(files_tsv))
    return files


@pytest.mark.parametrize("seed", [0, 1])
def test_qrels_in_every_layout_give_the_figures_of_data(tmp_path, capsys, seed):
    rng = random.Random(seed)
    qrels = {f"q{i}": frozenset(str(rng.randrange(300)) for _ in range(rng.choice((1, 2, 5, 12)))) for i in range(40)}
    folder = _folder(tmp_path, qrels)
    run = tmp_path / "run.trec"
    run.write_text(_random_run(rng, qrels, ties=True))
    want = _figures(capsys, ["evaluate", str(run), "--data", str(folder)])
    for fmt, path in _labels_files(tmp_path, folder, qrels).items():
        assert _figures(capsys, ["evaluate", str(run), "--qrels", path]) == want, fmt
        assert _figures(capsys, ["evaluate", str(run), "--qrels", path, "--data", str(folder)]) == want, fmt


def test_without_a_corpus_the_corpus_checks_are_skipped_in_one_line(tmp_path, capsys):
    rng = random.Random(3)
    qrels = {f"q{i}": frozenset({str(rng.randrange(300))}) for i in range(60)}
    folder = _folder(tmp_path, qrels)
    run = tmp_path / "random.trec"  # a random ranking: near_random with the corpus
    run.write_text(Run.from_scores({q: {str(d): rng.random() for d in rng.sample(range(400), 20)} for q in qrels}
                                   ).to_trec("t"))
    labels = _labels_files(tmp_path, folder, qrels)["trec"]
    assert main(["evaluate", str(run), "--data", str(folder)]) == 0
    with_corpus = capsys.readouterr().err
    assert "[near_random]" in with_corpus and "[unknown_articles]" in with_corpus
    assert main(["evaluate", str(run), "--qrels", labels]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and all(check in skipped[0] for check in SKIPPED_CHECKS)
    assert "[near_random]" not in err and "[ids_shifted]" not in err and "[unknown_articles]" not in err
    assert main(["evaluate", str(run), "--qrels", labels, "--format", "json"]) == 0  # JSON: said in the object
    captured = capsys.readouterr()
    assert json.loads(captured.out)["skipped_checks"] == list(SKIPPED_CHECKS) and "skipped" not in captured.err
    # the same labels on the corpus of --data: the checks run again
    assert main(["evaluate", str(run), "--qrels", labels, "--data", str(folder)]) == 0
    assert "[near_random]" in capsys.readouterr().err
    # --misses needs the corpus
    assert main(["evaluate", str(run), "--qrels", labels, "--misses", str(tmp_path / "m.csv")]) == 2
    assert "give --data with --qrels" in capsys.readouterr().err


def test_compare_takes_qrels(tmp_path, capsys):
    rng = random.Random(5)
    qrels = {f"q{i}": frozenset(str(rng.randrange(300)) for _ in range(3)) for i in range(30)}
    folder = _folder(tmp_path, qrels)
    runs = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.trec"
        path.write_text(_random_run(rng, qrels, ties=False))
        runs.append(str(path))
    assert main(["compare", *runs, "--data", str(folder), "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert main(["compare", *runs, "--qrels", _labels_files(tmp_path, folder, qrels)["ranx"], "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["runs"] == want["runs"] and got["pairs"] == want["pairs"]


def test_a_labels_file_with_errors_is_every_problem_then_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 0 d1 1\nq1 0 d2\nq2 0 d3 high\n")
    run = tmp_path / "r.trec"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    assert main(["evaluate", str(run), "--qrels", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("bad.trec:2: error [bad_field_count]") and err[1].startswith("bad.trec:3: error "
                                                                                          "[bad_relevance]")
    assert "bad.trec has 2 error(s)" in err[-1]


def _pytrec(qrels: dict[str, dict[str, int]], run: Run, ks) -> dict[str, float]:
    """trec_eval's figures (pytrec_eval) with ``evaluate``'s conventions: the run cut to its top k (our order:
    score descending, ties by article id descending, a repeat at its best position), a question missing from
    the run scoring 0 (-c), questions without a relevant article left out."""
    labelled = {q: docs for q, docs in qrels.items() if any(r > 0 for r in docs.values())}
    out: dict[str, float] = {}

    def mean(measure: str, key: str, depth: int | None) -> float:
        scored = {q: {d: float(len(docs) - i) for i, d in enumerate(docs[:depth])} for q, docs in run.rankings.items()
                  if q in labelled and docs}
        got = pytrec_eval.RelevanceEvaluator(labelled, {measure}).evaluate(scored)
        return sum(got[q][key] if q in got else 0.0 for q in labelled) / len(labelled)

    for k in ks:
        out[f"recall@{k}"] = mean(f"recall.{k}", f"recall_{k}", k)
        out[f"map@{k}"] = mean(f"map_cut.{k}", f"map_cut_{k}", k)
        out[f"mrr@{k}"] = mean("recip_rank", "recip_rank", k)
    out["rprec"] = mean("Rprec", "Rprec", None)
    out["ndcg@10"] = mean("ndcg_cut.10", "ndcg_cut_10", None)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_graded_labels_give_pytrec_eval_figures(tmp_path, capsys, seed):
    rng = random.Random(100 + seed)
    qrels = {f"q{i}": {str(rng.randrange(300)): rng.choice((0, 1, 1, 2, 3)) for _ in range(rng.choice((1, 3, 8)))}
             for i in range(50)}
    path = tmp_path / "graded.json"
    path.write_text(json.dumps(qrels))
    run_path = tmp_path / "r.trec"
    run_path.write_text(_random_run(rng, qrels, ties=True))
    got = _figures(capsys, ["evaluate", str(run_path), "--qrels", str(path)])["r.trec"]
    want = _pytrec(qrels, read_run_path(run_path).run, KS)
    for column, value in want.items():
        assert got[column] == pytest.approx(value, abs=5e-12), column
    # the graded nDCG is not the binary one: the grades are used
    binary = tmp_path / "binary.json"
    binary.write_text(json.dumps({q: {d: int(r > 0) for d, r in docs.items()} for q, docs in qrels.items()}))
    flat = _figures(capsys, ["evaluate", str(run_path), "--qrels", str(binary)])["r.trec"]
    assert flat["recall@100"] == got["recall@100"] and flat["rprec"] == got["rprec"]
    assert flat["ndcg@10"] != got["ndcg@10"]


def test_the_score_page_call_reads_an_upload_and_scores_it(tmp_path):
    """labels_from_upload (the Score page's entry): an upload's bytes -> problems and a dataset score_runs takes;
    a file with errors gives no dataset; a file above the limit is refused before it is read."""
    from bsard_demo.evaluation.labels import labels_from_upload
    from bsard_demo.evaluation.scoring import RunSource, score_runs

    read, dataset = labels_from_upload(b"q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n", "labels.trec")
    assert read.ok and dataset is not None and read.graded
    board = score_runs(dataset, "test", [RunSource.upload("r.trec", b"q1 Q0 d1 1 2.0 t\nq2 Q0 d9 1 1.0 t\n")], (1,))
    assert board.runs[0].evaluation.means["recall@1"] == 0.5 and board.labelled == 2
    read, dataset = labels_from_upload(b"q1 0 d1 high\n", "bad.trec")
    assert dataset is None and [p.code for p in read.problems] == ["bad_relevance"]
    read, dataset = labels_from_upload(b"q1 0 d1 1\n" * 100, "big.trec", max_bytes=50)
    assert dataset is None and [p.code for p in read.problems] == ["file_too_large"]
