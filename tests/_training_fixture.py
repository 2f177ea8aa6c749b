"""The one tiny fine-tuning of a test run, shared by ``tests/training/test_training.py`` and
``tests/cli/test_cli_train.py`` (``tests/conftest.py`` registers the fixtures and marks every test
that uses ``tiny_model`` ``training`` and ``slow``, in one xdist group so that one worker trains).

``tiny_model`` is two trainings with the same settings and seed, made side by side:

- ``a``: :func:`bsard_demo.training.train` in this process, its progress calls recorded;
- ``b``: ``python -m bsard_demo train`` with the same settings through the real interpreter, with
  another hash seed: the entry point trains, and a seed gives the same weights in another process.

Tests read what they need from the folders (the record, ``model.safetensors``, what the CLI
printed), never the folders' full file list (``train`` may add files, e.g. an ONNX export).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Tiny settings; one torch thread: on a busy 2-core machine two threads trained ~3x slower. 16 tokens a
#: text: the fits (a's, b's, test_training's third) cost their tokens, half of 32's; a dense build of the
#: model encodes twice the windows of half the length, at the same cost (509 of 32 tokens: 5.1 CPU s,
#: 1,116 of 16: 5.2 s).
TINY = dict(max_seq=16, batch=8, epochs=1, threads=1)
#: The settings of ``a`` and ``b``: one BM25 hard negative per pair (that path trains too).
SEED, HARD_NEGATIVES = 0, 1
#: ``b``'s flags: the same settings as ``a`` (``--no-onnx``: the export has tests of its own;
#: ``--no-evaluate``: ``a`` scores itself on test, which the weights do not depend on).
CLI_FLAGS = ["--finetune", "--max-seq", str(TINY["max_seq"]), "--batch", str(TINY["batch"]), "--epochs",
             str(TINY["epochs"]),
             "--threads", str(TINY["threads"]), "--seed", str(SEED), "--hard-negatives", str(HARD_NEGATIVES),
             "--no-onnx", "--no-evaluate", "--no-progress"]


#: What training needs (none of them below Python 3.12's hosted install).
TRAINING_MODULES = ("sentence_transformers", "datasets", "accelerate")


def skip_without_training() -> None:
    """Skip the calling test module when a training dependency is not installed. Looked up, not
    imported: importing sentence-transformers (torch) costs seconds that collecting the quick
    loop need not pay."""
    missing = [m for m in TRAINING_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"training needs {', '.join(missing)} (not installed)", allow_module_level=True)


@dataclass
class TinyModel:
    data: Path  #: the dataset folder both were trained on (the sample cut to ~110 short articles, 11 train questions)
    root: Path  #: holds ``a`` and ``b``
    a: Path  #: trained in this process
    b: Path  #: trained by ``python -m bsard_demo train`` in another process
    result: object  #: ``a``'s :class:`bsard_demo.training.TrainResult`
    steps: list = field(default_factory=list)  #: ``a``'s progress calls ``(done, total, message)``
    cli_argv: list = field(default_factory=list)  #: ``b``'s arguments after ``python -m bsard_demo``
    cli_stdout: str = ""  #: what ``b``'s command printed
    #: an index cache for dense builds of these models, shared: ``a``'s dev figure encoded the corpus
    #: into it, and ``b`` (the same weights, the same content digest) has the same cache key
    cache: Path = Path()


#: Each article of the tiny dataset cut to its words within these many characters (its text; each
#: of its header fields: reference, code, ..., description): still several 16-token windows an article
#: (minilm: median 44 tokens, the shortest 33; the windowed, pooled path of a dense build). ``a``'s dev
#: figure encodes them all: 4,953 tokens at 60/15 against 10,659 at 150/30 (test_training 38.5 -> 33.4
#: CPU s); what the checks read (the record, same seed same weights, a dense run) does not depend on length.
ARTICLE_CHARS, HEADER_CHARS = 60, 15
#: The train split's first questions kept: 24 of its 46 pairs (test_training checks over 20), 3+ steps of 8. Every
#: fit on it (``a``, ``b``, test_e5_finetune's) costs its pairs' tokens: about half. What those tests check (same
#: seed, same weights; steps; the record; moved tensors) does not depend on the pair count.
TRAIN_QUESTIONS = 11


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """The bundled sample cut to its gold articles (~110 of 220), each to its first
    :data:`ARTICLE_CHARS` characters (each header field to :data:`HEADER_CHARS`), its train split to its first
    :data:`TRAIN_QUESTIONS` questions (the others' gold articles stay in the corpus), as a dataset folder."""
    import pandas as pd

    from _small_sample import small_sample_folder

    folder = small_sample_folder(tmp_path_factory.mktemp("tiny-data") / "data", max_chars=ARTICLE_CHARS,
                                 header_chars=HEADER_CHARS)
    train = folder / "questions_train.csv"
    pd.read_csv(train, dtype=str, keep_default_na=False).head(TRAIN_QUESTIONS).to_csv(train, index=False)
    return folder


@pytest.fixture(scope="session")
def tiny_model(tiny_data, tmp_path_factory) -> TinyModel:
    for module in TRAINING_MODULES:
        pytest.importorskip(module)
    from _small_sample import one_torch_thread
    from bsard_demo.sources import load_dataset
    from bsard_demo.training import TrainOptions, train

    root = tmp_path_factory.mktemp("tiny-models")
    cache = tmp_path_factory.mktemp("tiny-cache")
    argv = ["train", "--data", str(tiny_data), "--out", str(root / "b"), "--cache-dir", str(cache / "b"), *CLI_FLAGS]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    env.pop("BSARD_DATA", None)
    # b first: it starts its interpreter while a trains here
    proc = subprocess.Popen([sys.executable, "-m", "bsard_demo", *argv], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        dataset = load_dataset(str(tiny_data))
        steps: list = []
        # one torch thread for all of it: TINY's threads cover the fit only, and a's dev figure (the corpus
        # encoded by torch, beside b's process and the other xdist worker) took 2.2x the CPU on two threads
        with one_torch_thread():
            result = train(TrainOptions(out=root / "a", data=dataset.name, seed=SEED, hard_negatives=HARD_NEGATIVES,
                                        cache_root=cache / "dense", **TINY), dataset,
                           progress=lambda done, total, message: steps.append((done, total, message)))
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    return TinyModel(data=tiny_data, root=root, a=root / "a", b=root / "b", result=result, steps=steps,
                     cli_argv=argv, cli_stdout=out, cache=cache / "dense")
