"""Training and the neighbours over several splits (``--train-splits train,synthetic``, issue 30 item 6), on a folder
source holding a ``questions_synthetic.csv`` (tests/_synthetic_split.py): the union is used, keys stay unique, and
leave-one-out and out-of-fold hold across splits (a question's same-text twin in another split is never its
neighbour, shares its fold, and leaves its citation prior)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _small_sample import cache_copy, use_index as embedded_by_use
from _synthetic_split import synthetic_folder
from bsard_demo.cli.main import main
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.retrievers.neighbours import NeighboursRetriever, labelled_questions
from bsard_demo.retrievers.ranker import citation_counts
from bsard_demo.sources import load_dataset
from bsard_demo.training import METADATA_FILE, questions_fingerprint
from bsard_demo.training.ranker import fold_of, folds_by_text, left_out_priors, same_text_groups


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    made = synthetic_folder(tmp_path_factory.mktemp("synthetic"))
    return {**made, "dataset": load_dataset(made["folder"])}


@pytest.fixture(scope="module")
def use_index(data, tmp_path_factory) -> Path:
    """An index cache holding the folder's corpus embedded by ``use`` (what the adapter's base and the ranker's
    ``use`` input build): each train test starts its own cache as a copy of it (:func:`private_cache`), so the
    corpus is embedded once a module, not once a test (~2 CPU s each)."""
    return embedded_by_use(data["dataset"], tmp_path_factory.mktemp("use-index"))


def private_cache(use_index: Path, tmp_path: Path) -> Path:
    """A cache of the test's own, holding :func:`use_index`'s entries (a copy: the module's stays as built)."""
    return cache_copy(use_index, tmp_path / "cache")


def test_the_neighbours_draw_on_the_union_with_unique_keys(data):
    ds = data["dataset"]
    both = NeighboursRetriever.build(ds, split="train, synthetic")
    train_only = NeighboursRetriever.build(ds, split="train")
    assert both.split == "train,synthetic" and "(train,synthetic," in both.name
    assert len(both.texts) == len(labelled_questions(ds, "train")[0]) + len(labelled_questions(ds, "synthetic")[0])
    assert len(set(both.question_ids)) == len(both.question_ids)
    assert {k.split(":")[0] for k in both.question_ids} == {"train", "synthetic"}
    assert train_only.question_ids == list(ds.questions("train")["id"])  # one split: ids as before
    # through the registry's spec, as the product builds it: the split option carries the list as it is
    spec = build_retriever(RetrieverSpec("neighbours", {"split": "train,synthetic"}), ds)
    assert spec.question_ids == both.question_ids
    with pytest.raises(Exception, match="no split 'nope'"):
        NeighboursRetriever.build(ds, split="train,nope")


def test_a_test_question_never_draws_on_its_twin_in_another_split(data):
    ds, twin, lonely = data["dataset"], data["twin_text"], data["twin_article"]
    both = NeighboursRetriever.build(ds, split="train,synthetic")
    hits = [h.article_id for h in both.search(twin, k=1000)]
    assert lonely not in hits  # only the twin cites it, and the twin is the question itself
    assert all(not n.question_id.endswith(":999999") for n in both.neighbours(twin))
    count, _ = both.votes(twin)
    assert count[ds.article_position(lonely)] == 0
    # the same question worded a little differently does draw on it: the rule, not the data, kept it out
    reworded = twin + " Merci."
    assert lonely in [h.article_id for h in both.search(reworded, k=1000)]
    assert any(n.question_id == "synthetic:999999" for n in both.neighbours(reworded))


def test_folds_are_cut_over_the_union_and_twins_share_one():
    texts = [f"question {i}" for i in range(23)]
    assert np.array_equal(folds_by_text(texts, 5, 3), fold_of(23, 5, 3))  # distinct texts: as before
    twins = texts + ["Question  3", "question 7"]  # a synthetic split repeating two train questions
    folds = folds_by_text(twins, 5, 3)
    assert len(folds) == 25 and folds[23] == folds[3] and folds[24] == folds[7]
    assert list(same_text_groups(twins)[-2:]) == [3, 7]
    assert set(np.bincount(fold_of(23, 5, 3))) <= {4, 5}  # groups, not questions, are spread evenly


def test_a_prior_leaves_out_the_question_and_its_twins():
    gold = [np.array([0, 1]), np.array([1, 2]), np.array([3]), np.array([1])]
    texts = ["a", "b", "c", "A"]  # question 3 repeats question 0's text (another split)
    priors = list(left_out_priors(gold, texts, 5))
    full = citation_counts(gold, 5)
    assert np.array_equal(priors[1], full - np.isin(np.arange(5), [1, 2]))  # no twin: its own labels only
    assert np.array_equal(priors[0], full - np.isin(np.arange(5), [0, 1]) - np.isin(np.arange(5), [1]))
    assert np.array_equal(priors[3], priors[0])
    assert all((p >= 0).all() for p in priors)


def test_train_adapter_on_train_and_synthetic(data, use_index, tmp_path, capsys):
    ds, folder = data["dataset"], data["folder"]
    out, cache = tmp_path / "adapter", private_cache(use_index, tmp_path)
    assert main(["train", "--data", str(folder), "--train-splits", "train,synthetic", "--out", str(out),
                 "--adapter-steps", "3", "--adapter-lr", "0.01", "--cache-dir", str(cache), "--no-progress",
                 "--no-evaluate"]) == 0
    record = json.loads((out / METADATA_FILE).read_text())["dataset"]
    union = ds.questions_of("train,synthetic")
    assert record["split"] == "train,synthetic" and record["questions"] == len(union)
    assert record["questions_used"] == len(labelled_questions(ds, "train,synthetic")[0])
    assert record["questions_sha256"] == questions_fingerprint(union)
    capsys.readouterr()
    # fine-tuning takes one split; an absent split is named; both in one line, nothing written
    assert main(["train", "--finetune", "--data", str(folder), "--train-splits", "train,synthetic",
                 "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "--finetune trains on one split" in err and err.count("\n") == 1
    assert main(["train", "--data", str(folder), "--train-splits", "train,nope", "--out", str(tmp_path / "g"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no split 'nope'" in err and err.count("\n") == 1
    assert not (tmp_path / "f").exists() and not (tmp_path / "g").exists()


def test_train_ranker_on_train_and_synthetic(data, use_index, tmp_path):
    pytest.importorskip("lightgbm")
    ds, out = data["dataset"], tmp_path / "ranker"
    cache = private_cache(use_index, tmp_path)
    assert main(["train", "--ranker", "--data", str(data["folder"]), "--train-splits", "train, synthetic",
                 "--ranker-inputs", "bm25,use,neighbours", "--folds", "2", "--out", str(out), "--no-progress",
                 "--no-evaluate", "--cache-dir", str(cache)]) == 0
    record = json.loads((out / METADATA_FILE).read_text())
    assert record["split"] == record["dataset"]["split"] == "train,synthetic"
    assert record["dataset"]["questions_used"] == len(labelled_questions(ds, "train,synthetic")[0])
    assert record["systems"] == ["bm25", "use", "neighbours"]
    # served over the same folder: its neighbours and prior read the union again
    run = tmp_path / "ranker.trec"
    assert main(["run", "--retriever", "ranker", "--encoder", str(out), "--data", str(data["folder"]), "--out",
                 str(run), "--cache-dir", str(cache), "--no-progress"]) == 0
    assert len({line.split()[0] for line in run.read_text().splitlines()}) == len(ds.questions("test"))
