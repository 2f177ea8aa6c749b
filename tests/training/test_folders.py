"""bsard_demo.training.folders: which trained folders the app offers as encoders (no training here)."""
from __future__ import annotations

import json

from bsard_demo.training import ENCODER_KINDS, METADATA_FILE, list_trained_models


def _folder(root, name, record, *, modules=True):
    sub = root / name
    sub.mkdir()
    (sub / METADATA_FILE).write_text(record if isinstance(record, str) else json.dumps(record))
    if modules:
        (sub / "modules.json").write_text("[]")
    return sub


def test_only_encoder_kinds_are_listed_and_a_bad_record_says_why(tmp_path):
    _folder(tmp_path, "a-finetuned", {"base": {"name": "minilm"}})
    _folder(tmp_path, "b-adapter", {"kind": "adapter"}, modules=False)
    _folder(tmp_path, "c-ranker", {"kind": "ranker"}, modules=False)  # a trained model, not an encoder
    _folder(tmp_path, "d-no-modules", {}, modules=False)
    _folder(tmp_path, "e-broken", "{not json")
    (tmp_path / ".hidden").mkdir()
    listed = {m.name: m.error for m in list_trained_models(tmp_path)}
    assert list(listed) == ["a-finetuned", "b-adapter", "d-no-modules", "e-broken"]
    assert listed["a-finetuned"] is None and listed["b-adapter"] is None
    assert "no modules.json" in listed["d-no-modules"] and listed["e-broken"]
    assert None in ENCODER_KINDS and "ranker" not in ENCODER_KINDS
    assert list_trained_models(tmp_path / "absent") == []
