"""The hub's optional ``questions_synthetic.csv`` (sources.HUB_OPTIONAL_FILES): read as split ``synthetic`` when
the hub has it, never required (absent, offline, late or damaged: the dataset loads without it); a folder's
``questions_synthetic.csv`` is a split like any other. The hub is a substituted download function."""
from __future__ import annotations

from pathlib import Path

import pytest

from _synthetic_split import synthetic_folder
from bsard_demo.dataset import DataError, parse_splits
from bsard_demo.sources import HUB_OPTIONAL_FILES, HUB_REPO_ID, load_dataset, load_hub


def fake_hub(folder: Path, calls: list):
    """hf_hub_download's stand-in: serves ``folder``'s files, a missing one raises as a 404 does."""
    def download(*, repo_id, filename, repo_type, **kwargs):
        calls.append(filename)
        assert repo_id == HUB_REPO_ID and repo_type == "dataset"
        path = folder / filename
        if not path.exists():
            raise FileNotFoundError(f"404 {filename}")
        return str(path)
    return download


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory) -> dict:
    return synthetic_folder(tmp_path_factory.mktemp("hub"))


def test_the_hub_reads_questions_synthetic_as_split_synthetic(hub_folder):
    assert HUB_OPTIONAL_FILES == ("questions_synthetic.csv",)
    calls: list = []
    ds = load_hub(download=fake_hub(hub_folder["folder"], calls), reachable=lambda: True)
    assert calls == ["articles.csv", "questions_train.csv", "questions_test.csv", "questions_synthetic.csv"]
    assert ds.split_names == ["test", "train", "synthetic"]
    synthetic = ds.questions("synthetic")
    assert list(synthetic["id"]) == [str(i) for i in hub_folder["synthetic"]["id"]]
    assert synthetic["article_ids"].iloc[-1] == (hub_folder["twin_article"],)


def test_a_hub_without_the_file_loads_without_the_split(hub_folder, tmp_path):
    folder = tmp_path / "hub"
    folder.mkdir()
    for name in ("articles.csv", "questions_train.csv", "questions_test.csv"):
        (folder / name).write_bytes((hub_folder["folder"] / name).read_bytes())
    calls: list = []
    ds = load_hub(download=fake_hub(folder, calls), reachable=lambda: True)
    assert "questions_synthetic.csv" in calls and ds.split_names == ["test", "train"]  # asked, absent: no error
    offline: list = []  # offline and not cached: the same
    assert load_hub(download=fake_hub(folder, offline), reachable=lambda: False).split_names == ["test", "train"]


def test_the_optional_file_is_not_asked_for_scoring_or_when_declined(hub_folder):
    for kwargs in ({"need_corpus": False}, {"optional": False}):
        calls: list = []
        ds = load_hub(download=fake_hub(hub_folder["folder"], calls), reachable=lambda: True, **kwargs)
        assert "questions_synthetic.csv" not in calls and "synthetic" not in ds.splits
    calls = []
    ds = load_dataset("hub", download=lambda **kw: fake_hub(hub_folder["folder"], calls)(**kw), optional_splits=False)
    assert "synthetic" not in ds.splits and "questions_synthetic.csv" not in calls


def test_a_damaged_or_failing_optional_file_is_left_out(hub_folder, tmp_path):
    folder = tmp_path / "hub"
    folder.mkdir()
    for name in ("articles.csv", "questions_train.csv", "questions_test.csv"):
        (folder / name).write_bytes((hub_folder["folder"] / name).read_bytes())
    # cut inside a row: a question without relevant article, the sign of a truncated file
    text = (hub_folder["folder"] / "questions_synthetic.csv").read_text()
    (folder / "questions_synthetic.csv").write_text(text[: text.rindex(",")])
    assert "synthetic" not in load_hub(download=fake_hub(folder, []), reachable=lambda: True).splits
    inner = fake_hub(hub_folder["folder"], [])

    def late(**kwargs):
        if kwargs["filename"] == "questions_synthetic.csv":
            raise TimeoutError("read timed out")
        return inner(**kwargs)

    ds = load_hub(download=late, reachable=lambda: True)
    assert ds.split_names == ["test", "train"]  # the required files are read as before


def test_a_folder_reads_its_questions_synthetic(hub_folder):
    ds = load_dataset(hub_folder["folder"])
    assert "synthetic" in ds.splits and len(ds.questions("synthetic")) == len(hub_folder["synthetic"])


def test_questions_of_several_splits_have_unique_keys(hub_folder):
    ds = load_dataset(hub_folder["folder"])
    union = ds.questions_of("train, synthetic")
    train, synthetic = ds.questions("train"), ds.questions("synthetic")
    assert len(union) == len(train) + len(synthetic)
    assert set(train["id"]) & set(synthetic["id"])  # the ids repeat across the two files …
    assert union["key"].is_unique and union["key"].iloc[0] == f"train:{train['id'].iloc[0]}"  # … the keys do not
    assert list(union["split"].unique()) == ["train", "synthetic"]
    one = ds.questions_of("train")
    assert list(one["key"]) == list(train["id"]) and one.drop(columns=["split", "key"]).equals(train)
    assert parse_splits(" train,,synthetic,train ") == ("train", "synthetic")
    with pytest.raises(DataError, match="no split named"):
        parse_splits(" , ")
    with pytest.raises(DataError, match="no split 'nope'"):
        ds.questions_of("train,nope")
