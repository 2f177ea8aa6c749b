"""The train command: the session's tiny training through ``python -m bsard_demo train``
(``tiny_model.b``, ``tests/_training_fixture.py``) records its flags and prints a ``run`` line that
works, and errors are one line."""
from __future__ import annotations

import json
import shlex

import pytest

from _training_fixture import HARD_NEGATIVES, SEED, TINY, skip_without_training

skip_without_training()

from _small_sample import one_torch_thread  # noqa: E402
from _tiny_corpus import run_cli  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402
from bsard_demo.training import METADATA_FILE  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    with one_torch_thread():
        yield


def test_train_then_run_with_the_printed_command(tiny_model, tmp_path, capsys, monkeypatch):
    data, out = tiny_model.data, tiny_model.b
    n_test, n_articles = len(load_dataset(str(data)).questions("test")), len(load_dataset(str(data)).articles)
    record = json.loads((out / METADATA_FILE).read_text())
    flags = {"seed": SEED, "max_seq": TINY["max_seq"], "batch": TINY["batch"], "hard_negatives": HARD_NEGATIVES,
             "threads": TINY["threads"]}
    assert record["settings"] | flags == record["settings"]
    assert record["dataset"]["split"] == "train" and record["dataset"]["spec"] == str(data)
    assert f"model folder: {out}" in tiny_model.cli_stdout
    dense = next(line.split("use it: ", 1)[1] for line in tiny_model.cli_stdout.splitlines()
                 if "--retriever dense" in line)
    argv = shlex.split(dense)[3:]
    run_file = tmp_path / "dense.trec"
    argv[argv.index("--out") + 1] = str(run_file)
    monkeypatch.setenv("BSARD_CACHE", str(tiny_model.cache))  # a (the same weights) encoded the corpus there
    assert run_cli(*argv, "--no-progress") == 0, capsys.readouterr().err
    lines = run_file.read_text().splitlines()
    assert len(lines) == n_test * n_articles and lines[0].split()[1] == "Q0"


@pytest.mark.parametrize("argv,message", [
    (["--epochs", "0"], "epochs must be"),
    (["--batch", "1"], "batch must be"),
    (["--threads", "0"], "threads must be"),
    (["--base", "use"], "cannot be fine-tuned"),
    (["--split", "dev"], "no split 'dev'"),
])
def test_errors_are_one_line(argv, message, tmp_path, capsys):
    assert run_cli("train", "--finetune", "--data", "sample", "--out", str(tmp_path / "m"), "--no-progress", *argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("bsard_demo train: ")
    assert not (tmp_path / "m").exists()


def test_a_busy_out_folder_is_refused(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("mine")
    assert run_cli("train", "--data", "sample", "--out", str(tmp_path / "m"), "--no-progress") == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "m" / "keep.txt").read_text() == "mine"
