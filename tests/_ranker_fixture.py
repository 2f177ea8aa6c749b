"""The one learned ranker of a test run, fitted on the sample (``train`` for a 3-step adapter, then
``train --ranker`` over it, BM25, ``use`` and the neighbours, 2 folds), shared by
``tests/training/test_ranker_training.py`` and ``tests/app/test_search_ranker.py`` (``tests/conftest.py``
puts both files in one xdist group, so one worker fits it). ``sample_ranker``: ``(root, ranker folder,
cache folder)``; the cache holds the sample's BM25 index and ``use`` embeddings."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def sample_ranker(tmp_path_factory, sample_use_index):
    pytest.importorskip("lightgbm")
    from _small_sample import cache_copy
    from bsard_demo.cli.main import main

    root = tmp_path_factory.mktemp("ranker")
    cache_dir = cache_copy(sample_use_index, root / "cache")
    adapter = root / "sample-use-adapter"
    assert main(["train", "--data", "sample", "--out", str(adapter), "--adapter-steps", "3", "--adapter-lr", "0.01",
                 "--cache-dir", str(cache_dir), "--no-progress", "--no-evaluate"]) == 0
    out = root / "models" / "sample-ranker"
    # e5 left out: its embeddings of the sample would cost the suite a minute; tests/training/test_ranker_training.py
    # checks that a ranker's record naming e5 serves it through ONNX Runtime
    assert main(["train", "--ranker", "--ranker-adapter", str(adapter), "--ranker-inputs",
                 "bm25,use,adapter,neighbours", "--folds", "2", "--data", "sample",
                 "--out", str(out), "--cache-dir", str(cache_dir), "--no-progress"]) == 0
    return root, out, cache_dir
