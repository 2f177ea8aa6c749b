"""The train command: a tiny real training on the sample, the model it prints is usable by run,
and errors are one line."""
from __future__ import annotations

import json
import shlex

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("datasets")

from bsard_demo.cli.common import OneLineParser  # noqa: E402
from bsard_demo.cli.retrieval import add_run_parser  # noqa: E402
from bsard_demo.cli.train import add_train_parser  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402
from bsard_demo.training import METADATA_FILE  # noqa: E402
from _small_sample import one_torch_thread, small_sample_folder  # noqa: E402


def _main(argv: list[str]) -> int:
    """The train command through a parser of its own (``cli/main.py`` registers the same function)."""
    parser = OneLineParser(prog="python -m bsard_demo")
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_parser(sub)
    add_run_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    with one_torch_thread():
        yield


def test_train_then_run_with_the_printed_command(tmp_path, capsys):
    data = small_sample_folder(tmp_path / "data")
    n_test, n_articles = len(load_dataset(str(data)).questions("test")), len(load_dataset(str(data)).articles)
    out = tmp_path / "models" / "tiny"
    code = _main(["train", "--data", str(data), "--out", str(out), "--max-seq", "64", "--batch", "8",
                  "--hard-negatives", "1", "--seed", "3", "--threads", "1", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    record = json.loads((out / METADATA_FILE).read_text())
    assert record["settings"] | {"seed": 3, "max_seq": 64, "batch": 8, "hard_negatives": 1} == record["settings"]
    assert record["dataset"]["split"] == "train" and record["dataset"]["spec"] == str(data)
    assert f"model folder: {out}" in captured.out
    dense = next(l.split("use it: ", 1)[1] for l in captured.out.splitlines() if "--retriever dense" in l)
    argv = shlex.split(dense)[3:]
    run_file = tmp_path / "dense.trec"
    argv[argv.index("--out") + 1] = str(run_file)
    assert _main(argv + ["--no-progress"]) == 0
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
    assert _main(["train", "--data", "sample", "--out", str(tmp_path / "m"), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("bsard_demo train: ")
    assert not (tmp_path / "m").exists()


def test_a_busy_out_folder_is_refused(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("mine")
    assert _main(["train", "--data", "sample", "--out", str(tmp_path / "m"), "--no-progress"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "m" / "keep.txt").read_text() == "mine"
