"""``export-onnx`` and ``--backend`` on the command line (issue 14): a sound export is left alone
and says so, ``--refresh`` rewrites it, ``--int8`` quantises it, ``train`` writes one; bad exports,
a missing export on a torch-free install and misplaced options are one line and exit code 2."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from _onnx_model import exported_model
from _small_sample import one_torch_thread
from bsard_demo import training
from bsard_demo.cli import export_onnx as export_onnx_cli
from bsard_demo.cli.main import main
from bsard_demo.retrievers import encoders as E
from bsard_demo.retrievers.onnx_encoder import MODEL_FILE, RECORD_FILE, OnnxEncoder, read_record
from bsard_demo.sources import load_dataset
from bsard_demo.training import finetune

#: One xdist worker runs the three ONNX files, so the session's export (and the torch/ONNX vectors)
#: is made once (tests/conftest.py groups them too).
pytestmark = pytest.mark.xdist_group("onnx")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return exported_model(tmp_path_factory)


def err_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def one_line_failure(capsys, argv) -> str:
    assert main(argv) == 2
    lines = err_lines(capsys)
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def test_a_sound_export_is_left_alone_and_says_so(model_dir, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in (model_dir / "onnx").iterdir()}
    assert main(["export-onnx", str(model_dir)]) == 0
    out = capsys.readouterr().out
    assert "holds a sound ONNX export (fp32" in out and "left as it is (--refresh rewrites it)" in out
    assert {p.name: p.stat().st_mtime_ns for p in (model_dir / "onnx").iterdir()} == before


def test_refresh_rewrites_the_export(model_dir, tmp_path, capsys):
    copy = shutil.copytree(model_dir, tmp_path / "copy")
    old = read_record(copy / "onnx")
    with one_torch_thread():  # an export on one thread: ~30 % less CPU (busy 2 cores)
        assert main(["export-onnx", str(copy), "--refresh"]) == 0
    out = capsys.readouterr().out
    assert "ONNX export replaced (--refresh)" in out and f"serve it with --encoder {copy}" in out
    new = read_record(copy / "onnx")
    assert new["check"]["min_cosine"] >= 0.9999 and new["source"] == old["source"]
    assert not [p for p in copy.iterdir() if ".tmp-" in p.name or ".old-" in p.name]  # no temporary folder left
    assert isinstance(E.resolve_encoder(str(copy)), OnnxEncoder)


def test_minilm_exports_to_a_folder_of_its_own_and_int8(model_dir, tmp_path, capsys):
    assert "minilm's files live inside an installed package: give --out DIR" in one_line_failure(
        capsys, ["export-onnx", "minilm"])
    out = tmp_path / "minilm-int8"
    with one_torch_thread():  # an export on one thread: ~30 % less CPU (busy 2 cores)
        assert main(["export-onnx", "minilm", "--out", str(out), "--int8"]) == 0
    assert "ONNX export written" in capsys.readouterr().out
    record = read_record(out)
    fp32 = read_record(model_dir / "onnx")
    assert record["int8"] is True and record["model"] == "minilm" and record["base_model"] == "minilm"
    assert record["files"][MODEL_FILE]["size"] < fp32["files"][MODEL_FILE]["size"] / 3
    # int8 is close to, not equal to, fp32
    questions = list(load_dataset("sample").questions("test")["question"])
    a = E.resolve_encoder(str(out)).encode_queries(questions)
    b = E.resolve_encoder(str(model_dir)).encode_queries(questions)
    cosines = np.sum(a * b, axis=1)
    assert 0.95 < cosines.min() < 0.99999
    assert "holds a sound int8 export already; add --refresh" in one_line_failure(
        capsys, ["export-onnx", "minilm", "--out", str(out)])
    assert main(["export-onnx", "minilm", "--out", str(out), "--int8"]) == 0
    assert "left as it is" in capsys.readouterr().out


def test_export_errors_are_one_line(model_dir, tmp_path, capsys, monkeypatch):
    assert "no such model folder" in one_line_failure(capsys, ["export-onnx", str(tmp_path / "nowhere")])
    assert "is an ONNX export already" in one_line_failure(capsys, ["export-onnx", str(model_dir / "onnx")])
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    assert "holds no ONNX export" in one_line_failure(capsys, ["export-onnx", str(model_dir), "--out", str(busy)])
    assert (busy / "keep.txt").read_text() == "mine"
    monkeypatch.setattr(export_onnx_cli, "torch_available", lambda: False)  # the name the command calls
    assert "needs torch" in one_line_failure(capsys, ["export-onnx", str(model_dir)])


def _data(tmp_path):
    from _small_sample import small_sample_folder

    return small_sample_folder(tmp_path / "data", n_articles=0)


def test_run_with_a_damaged_or_missing_export_is_one_line(model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    data = str(_data(tmp_path))
    broken = shutil.copytree(model_dir / "onnx", tmp_path / "broken")
    (broken / MODEL_FILE).write_bytes((broken / MODEL_FILE).read_bytes()[:1000])
    run = ["run", "--retriever", "dense", "--data", data, "--out", str(tmp_path / "r.trec"), "--no-progress"]
    line = one_line_failure(capsys, run + ["--encoder", str(broken)])
    assert line.startswith("bsard_demo run: ") and "ONNX export is damaged" in line and "truncated" in line
    assert "--backend applies to --retriever dense or hybrid, not bm25" in one_line_failure(
        capsys, ["run", "--data", data, "--out", str(tmp_path / "b.trec"), "--backend", "onnx"])
    plain = shutil.copytree(model_dir, tmp_path / "plain", ignore=shutil.ignore_patterns("onnx"))
    assert "has no ONNX export: run python -m bsard_demo export-onnx" in one_line_failure(
        capsys, run + ["--encoder", str(plain), "--backend", "onnx"])
    monkeypatch.setattr(E, "torch_available", lambda: False)
    line = one_line_failure(capsys, run + ["--encoder", str(plain)])
    assert "has no ONNX export and this install has no torch: run python -m bsard_demo export-onnx" in line
    assert not (tmp_path / "r.trec").exists()


def test_train_writes_the_export_and_records_it(tmp_path, capsys, monkeypatch):
    """The export step of ``train`` (the fine-tuning itself is skipped: the base is saved as is)."""
    pytest.importorskip("datasets")
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    def fit(model, pairs, options, *rest):
        model.max_seq_length = options.max_seq  # what the real one does first
        return [], 0
    monkeypatch.setattr(finetune, "_fit", fit)
    out = tmp_path / "trained"
    with one_torch_thread():  # its export on one thread: ~30 % less CPU (busy 2 cores)
        assert main(["train", "--finetune", "--data", str(_data(tmp_path)), "--out", str(out), "--max-seq", "64",
                     "--no-evaluate", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / training.METADATA_FILE).read_text())
    export = read_record(out / "onnx")
    assert record["onnx"]["files"] == export["files"] and record["onnx"]["min_cosine"] >= 0.9999
    assert export["max_seq_length"] == 64 and f"ONNX export: {out / 'onnx'}" in printed
    enc = E.resolve_encoder(str(out))
    assert isinstance(enc, OnnxEncoder) and enc.max_tokens == 64
    assert not (out / "onnx" / RECORD_FILE).read_text().count(str(tmp_path / ".trained"))  # no temporary path kept
    no_onnx = tmp_path / "no-onnx"
    assert main(["train", "--finetune", "--data", str(_data(tmp_path / "x")), "--out", str(no_onnx), "--no-onnx",
                 "--no-evaluate", "--no-progress"]) == 0
    assert not (no_onnx / "onnx").exists() and "onnx" not in json.loads((no_onnx / training.METADATA_FILE).read_text())
