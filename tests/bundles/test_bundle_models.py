"""Index bundles that carry a model (issue 14): ``index --export`` puts a model folder's ONNX
export (not its torch weights) into the bundle with what it was trained on; where the bundle is
active, ``--encoder NAME`` encodes questions with it and loads the article embeddings from the
bundle, with no torch (a subprocess where ``import torch`` fails), no corpus encoding and the
same run file; a bundle whose model files were altered is refused in one line while its BM25
index keeps serving; ``--push-to-hub`` uploads the model files too."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import huggingface_hub
import pytest

from _onnx_model import exported_model
from _tiny_corpus import articles, make_data, no_bundle, run_cli  # noqa: F401 (no_bundle: autouse)
from bsard_demo import bundles, cache
from bsard_demo.retrievers import bm25 as bm25_module
from bsard_demo.retrievers.onnx_encoder import OnnxEncoder
from bsard_demo.training import METADATA_FILE

#: One xdist worker runs the three ONNX files, so the session's export (and the torch/ONNX vectors)
#: is made once (tests/conftest.py groups them too).
pytestmark = pytest.mark.xdist_group("onnx")

REPO = Path(__file__).resolve().parents[2]
ARTICLES = articles(long_seventh=True)  # the 7th longer than the model's window
TRAINING = {"created": "2026-11-30T10:00:00+00:00", "pairs": 42, "base": {"name": "minilm"},
            "dataset": {"name": "bsard", "split": "train", "articles": 8, "articles_sha256": "ab" * 32,
                        "questions": 3, "questions_sha256": "cd" * 32}, "settings": {"epochs": 1},
            "evaluation": {"split": "test", "measure": "recall@100", "value": 0.5}}
#: Blocks torch and the packages built on it, as on the hosted install (no torch wheels).
NO_TORCH = textwrap.dedent("""
    import sys
    class NoTorch:
        blocked = ("torch", "sentence_transformers", "transformers", "onnx", "accelerate", "datasets")
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.blocked:
                raise ImportError(f"no module named {name!r} (blocked: a torch-free install)")
            return None
    sys.meta_path.insert(0, NoTorch())
""")


@pytest.fixture(scope="session")  # xdist may interleave files of the group
def setup(tmp_path_factory):
    """A trained-looking model folder (the session export plus a training record), a tiny dataset,
    its hybrid bundle, and the warm runs made with the model folder itself."""
    import shutil

    root = tmp_path_factory.mktemp("bundle-models")
    model = shutil.copytree(exported_model(tmp_path_factory), root / "models" / "statute-minilm")
    (model / METADATA_FILE).write_text(json.dumps(TRAINING))  # not part of the vectors: the export stays sound
    data = make_data(root / "data", ARTICLES)
    build = root / "build-cache"
    dest = root / "bundle"
    bundles.deactivate()
    cache.forget_used()
    assert run_cli("index", "--retriever", "hybrid", "--encoder", str(model), "--data", str(data), "--cache-dir",
                   str(build), "--export", str(dest), "--no-progress") == 0
    warm = {}
    for retriever in ("hybrid", "dense"):
        out = root / f"warm-{retriever}.trec"
        assert run_cli("run", "--retriever", retriever, "--encoder", str(model), "--data", str(data), "--cache-dir",
                       str(build), "--out", str(out), "--tag", "t", "--no-progress") == 0
        warm[retriever] = out.read_bytes()
    bundles.deactivate()
    return {"root": root, "model": model, "data": data, "bundle": dest, "warm": warm}


def test_the_bundle_carries_the_onnx_export_and_its_record(setup, capsys):
    dest = setup["bundle"]
    manifest = json.loads((dest / "bundle.json").read_text())
    (model,) = manifest["models"]
    assert model["name"] == "statute-minilm" and model["path"] == "models/statute-minilm"
    files = sorted(n for n in manifest["files"] if n.startswith("models/"))
    assert files == [f"models/statute-minilm/{n}" for n in ("bsard_training.json", "model.onnx", "onnx_export.json",
                                                            "tokenizer.json")]
    assert not any(n.endswith(".safetensors") for n in manifest["files"])  # no torch weights
    assert all(len(manifest["files"][n]["sha256"]) == 64 for n in files)
    assert model["training"]["split"] == "train" and model["training"]["articles_sha256"] == "ab" * 32
    assert model["test"] == TRAINING["evaluation"] and model["base_model"] == "minilm"
    opened = bundles.open_bundle(dest)
    (listed,) = opened.model_list()
    assert listed.name == "statute-minilm" and listed.trained_on == "bsard train, 2026-11-30"
    assert listed.version == OnnxEncoder(setup["model"] / "onnx").version  # what the embeddings are keyed on
    assert "model statute-minilm" in opened.summary() and opened.check() == []
    assert isinstance(opened.encoder("statute-minilm"), OnnxEncoder)


def test_a_cold_server_encodes_only_the_questions(setup, tmp_path, monkeypatch, capsys):
    def boom(*a, **k):
        raise AssertionError("articles encoded although the bundle holds their embeddings")
    monkeypatch.setattr(OnnxEncoder, "encode_documents", boom)
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    empty = tmp_path / "empty-cache"
    out = tmp_path / "cold.trec"
    assert run_cli("run", "--retriever", "hybrid", "--encoder", "statute-minilm", "--index", str(setup["bundle"]),
                   "--data", str(setup["data"]), "--cache-dir", str(empty), "--out", str(out), "--tag", "t",
                   "--no-progress") == 0
    assert out.read_bytes() == setup["warm"]["hybrid"]
    assert not empty.exists() or not any(empty.rglob("*"))  # nothing written: no dense entry, no model
    assert "note:" not in capsys.readouterr().err


def test_a_torch_free_process_serves_the_bundle_and_encodes_a_folder(setup, tmp_path):
    """The hosted install's path: with import torch failing, the bundled model serves the hybrid,
    and a model folder's export embeds a corpus; both runs equal the torch install's."""
    script = NO_TORCH + textwrap.dedent(f"""
        from bsard_demo.cli.main import main
        common = ["--data", {str(setup['data'])!r}, "--tag", "t", "--no-progress"]
        assert main(["run", "--retriever", "hybrid", "--encoder", "statute-minilm", "--index", {str(setup['bundle'])!r},
                     "--cache-dir", {str(tmp_path / 'c1')!r}, "--out", {str(tmp_path / 'hybrid.trec')!r}, *common]) == 0
        assert main(["run", "--retriever", "dense", "--encoder", {str(setup['model'])!r}, "--index", "",
                     "--cache-dir", {str(tmp_path / 'c2')!r}, "--out", {str(tmp_path / 'dense.trec')!r}, *common]) == 0
        assert not [m for m in sys.modules if m.split(".")[0] in ("torch", "sentence_transformers", "transformers")]
        try:
            import torch
        except ImportError:
            print("torch-free")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "BSARD_INDEX": ""}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "torch-free"
    assert (tmp_path / "hybrid.trec").read_bytes() == setup["warm"]["hybrid"]
    assert (tmp_path / "dense.trec").read_bytes() == setup["warm"]["dense"]


def test_an_altered_model_is_refused_and_bm25_still_serves(setup, tmp_path, monkeypatch, capsys):
    import shutil

    dest = shutil.copytree(setup["bundle"], tmp_path / "tampered")
    onnx = dest / "models" / "statute-minilm" / "model.onnx"
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0xFF
    onnx.write_bytes(bytes(data))
    common = ["--index", str(dest), "--data", str(setup["data"]), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
    capsys.readouterr()
    assert run_cli("run", "--retriever", "dense", "--encoder", "statute-minilm", "--out", str(tmp_path / "d.trec"),
                   *common) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].startswith("bsard_demo run: using index bundle")
    assert lines[1] == (f"bsard_demo run: index bundle {dest}: its model statute-minilm is damaged (checksum of "
                        "model.onnx differs); it is not used")

    def boom(*a, **k):
        raise AssertionError("BM25 built although the bundle holds it")
    monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
    assert run_cli("run", "--retriever", "bm25", "--out", str(tmp_path / "b.trec"), *common) == 0
    assert "note:" not in capsys.readouterr().err
    problems = bundles.open_bundle(dest).check()
    assert problems == ["models/statute-minilm: checksum of model.onnx differs"]
    with pytest.raises(bundles.BundleError, match="not published, it is damaged"):
        bundles.push_bundle(dest, "me/x", upload=lambda **k: None, create_repo=lambda **k: None)


def test_push_to_hub_uploads_the_model_files(setup, tmp_path, monkeypatch, capsys):
    uploads = []

    def upload_folder(api, **kwargs):
        folder = Path(kwargs["folder_path"])
        uploads.append(sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()))
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda api, **k: None)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    assert run_cli("index", "--retriever", "dense", "--encoder", str(setup["model"]), "--data", str(setup["data"]),
                   "--cache-dir", str(setup["root"] / "build-cache"), "--push-to-hub", "me/idx", "--no-progress") == 0
    onnx_files = ("model.onnx", "tokenizer.json", "onnx_export.json")
    assert {f"models/statute-minilm/{n}" for n in onnx_files} <= set(uploads[0])
    err = capsys.readouterr().err
    assert "select it with --encoder statute-minilm" in err


def test_a_model_without_export_or_run_by_torch_is_refused_before_building(setup, tmp_path, capsys):
    import shutil

    plain = shutil.copytree(setup["model"], tmp_path / "plain", ignore=shutil.ignore_patterns("onnx"))
    base = ["index", "--retriever", "hybrid", "--data", str(setup["data"]), "--cache-dir", str(tmp_path / "c"),
            "--export", str(tmp_path / "b"), "--no-progress"]
    assert run_cli(*base, "--encoder", str(plain)) == 2
    assert f"{plain} has none: run python -m bsard_demo export-onnx {plain} first" in capsys.readouterr().err
    assert run_cli(*base, "--encoder", str(setup["model"]), "--backend", "torch") == 2
    assert "cannot go in a bundle with --backend torch" in capsys.readouterr().err
    assert not (tmp_path / "c").exists() and not (tmp_path / "b").exists()
