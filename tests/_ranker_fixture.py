"""The one learned ranker of a test run, fitted on the sample (``train`` for a 3-step adapter, then
``train --ranker`` over it, 2 folds), shared by ``tests/training/test_ranker_training.py`` and
``tests/app/test_search_ranker.py`` (``tests/conftest.py`` puts both files in one xdist group, so one
worker fits it). ``sample_ranker``: ``(root, ranker folder, cache folder)``; the cache holds the
sample's BM25 index and ``use`` embeddings."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def sample_ranker(tmp_path_factory):
    pytest.importorskip("lightgbm")
    from bsard_demo.cli.main import main

    root = tmp_path_factory.mktemp("ranker")
    cache_dir = root / "cache"
    adapter = root / "sample-use-adapter"
    assert main(["train", "--data", "sample", "--out", str(adapter), "--adapter-steps", "3", "--adapter-lr", "0.01",
                 "--cache-dir", str(cache_dir), "--no-progress", "--no-evaluate"]) == 0
    out = root / "models" / "sample-ranker"
    assert main(["train", "--ranker", "--ranker-adapter", str(adapter), "--folds", "2", "--data", "sample",
                 "--out", str(out), "--cache-dir", str(cache_dir), "--no-progress"]) == 0
    return root, out, cache_dir
