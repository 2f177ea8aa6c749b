"""What ``train`` fits, registered once (bsard_demo/retrievers/trained.py, issue 40 item 1): the CLI's flags, the
record kinds, the one-line summaries in English and French, what a bundle serves, all read from the registration."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from bsard_demo.app.builds import trained_label
from bsard_demo.bundles.model import BundleModel
from bsard_demo.cli.main import build_parser
from bsard_demo.retrievers.trained import (
    ENCODER_KINDS,
    TrainedKind,
    default_trained,
    register_trained,
    trained_kind_of,
    trained_kinds,
    unregister_trained,
)
from bsard_demo.training import TrainedModel, TrainResult

ADAPTER_RECORD = {"kind": "adapter", "base": {"name": "use"}, "dataset": {"name": "sample", "split": "train"},
                  "pairs": 40, "steps": 200}
FINETUNED_RECORD = {"base": {"name": "minilm"}, "dataset": {"name": "sample", "split": "train"}, "pairs": 40,
                    "settings": {"epochs": 1}}


def train_help() -> str:
    """``train --help``, as printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    return out.getvalue()


def test_every_trained_kind_has_its_train_flag_and_one_default():
    text = " ".join(train_help().split())
    for kind in trained_kinds().values():
        assert f"--{kind.name} " in text and " ".join(kind.help.split())[:40] in text
    assert [k.name for k in trained_kinds().values() if k.default] == [default_trained().name]
    assert f"(the default) {' '.join(default_trained().help.split())[:30]}" in text


def test_every_trained_kind_is_fitted_by_train(tmp_path, capsys):
    """``train --NAME`` reaches a fit of its own: each refuses a missing data folder in one line, and none says
    it has no way to be fitted (a kind registered without its handler in cli/train.py)."""
    from bsard_demo.cli.main import main

    for kind in trained_kinds().values():
        code = main(["train", f"--{kind.name}", "--data", str(tmp_path / "absent"), "--out", str(tmp_path / "m")])
        assert code == 2 and "cannot fit it" not in capsys.readouterr().err, kind.name


def test_the_handler_check_can_fail(toy_kind, tmp_path, capsys):
    from bsard_demo.cli.main import main

    assert main(["train", "--toy", "--data", str(tmp_path / "absent"), "--out", str(tmp_path / "m")]) == 2
    assert "--toy: registered, but train cannot fit it" in capsys.readouterr().err


def test_the_summaries_read_the_record():
    plain = lambda v: "?" if v is None else str(v)  # noqa: E731
    assert trained_kind_of(ADAPTER_RECORD).summary(ADAPTER_RECORD, plain) == \
        "query adapter on use, fitted on sample train (40 pairs, 200 steps)"
    assert trained_kind_of(FINETUNED_RECORD).summary(FINETUNED_RECORD, plain) == \
        "minilm fine-tuned on sample train (40 pairs, 1 epoch(s))"
    assert TrainedModel(Path("m"), ADAPTER_RECORD).label() == \
        "m: query adapter on use, fitted on sample train (40 pairs, 200 steps)"
    assert trained_label("m", ADAPTER_RECORD) == ("m — adaptateur des questions sur use (articles inchangés), ajusté "
                                                  "sur sample (split train, 40 paires, 200 pas)")
    assert trained_label("m", FINETUNED_RECORD) == "m — minilm affiné sur sample (split train, 40 paires, 1 époque(s))"
    assert set(ENCODER_KINDS) == {k.record for k in trained_kinds().values() if k.encoder}


def test_the_run_lines_are_those_of_the_kinds_it_serves(tmp_path):
    for kind in trained_kinds().values():
        record = {"kind": kind.record} if kind.record else {}
        lines = TrainResult(tmp_path / "m", record, 1.0).commands()
        assert [line.split("--retriever ")[1].split()[0] for line in lines] == list(kind.runs_with)


@pytest.fixture
def toy_kind():
    kind = register_trained(TrainedKind("toy", "toy", "fit a toy", ("dense",), True, "toyed", "pure toy, no torch",
                                        "toy on {base}", "jouet sur {base}"))
    yield kind
    unregister_trained("toy")


def test_a_registered_kind_is_known_everywhere_with_no_other_file_changed(toy_kind):
    assert "--toy " in train_help()
    assert trained_kind_of({"kind": "toy"}) is toy_kind
    model = BundleModel(name="t", path="models/t", version="1", dim=3, base_model="b",
                        training={"kind": "toy", "dataset": "d", "split": "s", "created": "2026-01-01"}, files={})
    assert "toyed on" in model.describe() and "pure toy, no torch" in model.describe()
    assert trained_label("t", {"kind": "toy", "base": {"name": "b"}}) == "t — jouet sur b"
