"""The registry is the one list of retriever kinds, and a kind is whole where it is registered (issues 22
and 28): a toy kind with one flag and one setting, registered at run time, is in the CLI's ``--retriever``
choices and ``run --help`` with its flag, round-trips spec -> flags (``tune``'s printed line) -> spec, shows
in the Search page's systems menu with its label, keeps its setting through a link, is a Score page
built-in and runs end to end through ``run``, with no other file changed; the README lists every kind, and
the CLI's other choices are the core's own constants."""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from _app_helpers import TIMEOUT, assert_clean, column_names, set_app_env
from _tiny_corpus import make_data, run_cli
from bsard_demo.app.link_codec import LinkChoices, SearchSettings, link_params, parse_link
from bsard_demo.app.link_widgets import settings_from_state, state_from_settings
from bsard_demo.app.score_builtins import baseline_specs
from bsard_demo.app.search_page import KIND_LABELS, column_specs, kind_label
from bsard_demo.cli.main import build_parser
from bsard_demo.cli.retrieval import spec_from_args
from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.bm25 import METHODS
from bsard_demo.retrievers.encoders import BACKENDS, ENCODER_CHOICES
from bsard_demo.retrievers.registry import (
    Flag,
    RetrieverKind,
    RetrieverSpec,
    Setting,
    build_retriever,
    menu_kinds,
    register,
    retriever_kinds,
    unregister,
)
from bsard_demo.runs import read_run_path
from bsard_demo.runs.write import RUN_FORMATS
from bsard_demo.sources import load_sample
from bsard_demo.tuning import run_command

REPO = Path(__file__).resolve().parents[2]


@dataclass
class CorpusOrder:
    """A toy retriever: every question gets the corpus in reverse file order (or in file order)."""

    ids: list[str]
    name: str = "toy"

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return [Hit(a, float(-i)) for i, a in enumerate(self.ids)][:k]

    def search_many(self, questions, k: int = 100):
        return [self.search(q, k) for q in questions]


def _build_toy(spec, dataset, **context):
    ids = [str(a) for a in dataset.articles["id"]]
    return CorpusOrder(ids if spec.options.get("order") == "file" else ids[::-1])


#: The toy's one flag and one setting: the order it returns the corpus in.
TOY_FLAG = Flag(("--toy-order",), {"choices": ("reverse", "file"), "default": None,
                                   "help": "the toy's order of the corpus (default reverse)"}, "toy")
TOY_SETTING = Setting("order", "toyorder", "reverse", ("reverse", "file"), "Ordre du jouet")


def _toy_from_args(values):
    return RetrieverSpec("toy", {"order": values["toy_order"]} if values.get("toy_order") else {})


def _toy_flags(spec, notes):
    return ["--toy-order", spec.options["order"]] if "order" in spec.options else []


@pytest.fixture
def toy():
    kind = register(RetrieverKind("toy", "the corpus in reverse order (a test's toy)", frozenset({"order"}), _build_toy,
                                  flags=(TOY_FLAG,), takes=frozenset({"toy_order"}), from_args=_toy_from_args,
                                  to_flags=_toy_flags, label="Jouet", settings=(TOY_SETTING,)))
    yield kind
    unregister("toy")


def _run_parser_action(dest: str) -> argparse.Action:
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    return next(a for a in run._actions if a.dest == dest)


def test_a_registered_kind_is_offered_everywhere_and_runs(toy, tmp_path, capsys):
    assert "toy" not in [*RUN_FORMATS]  # (the names do not collide)
    retriever = _run_parser_action("retriever")
    assert list(retriever.choices)[-1] == "toy" and "toy: the corpus in reverse order" in retriever.help
    with pytest.raises(SystemExit):
        run_cli("run", "--help")
    assert "toy" in capsys.readouterr().out
    assert list(KIND_LABELS)[-1] == "toy" and KIND_LABELS["toy"] == "Jouet" == kind_label("toy")
    assert column_specs(["bm25", "toy"]) == {"BM25": RetrieverSpec("bm25"),
                                             "Jouet": RetrieverSpec("toy", {"order": "reverse"})}
    out = tmp_path / "toy.trec"
    assert run_cli("run", "--retriever", "toy", "--data", str(make_data(tmp_path / "d")), "--depth", "3",
                   "--out", str(out), "--no-progress") == 0
    rf = read_run_path(out)
    assert rf.run is not None and rf.run.rankings["10"] == ("8", "7", "6")
    with pytest.raises(ValueError, match="--encoder applies to --retriever dense, hybrid or ranker, not toy"):
        spec_from_args(build_parser().parse_args(["run", "--retriever", "toy", "--encoder", "e5", "--out", "x"]))
    with pytest.raises(ValueError, match="--toy-order applies to --retriever toy, not bm25"):
        spec_from_args(build_parser().parse_args(["run", "--toy-order", "file", "--out", "x"]))
    with pytest.raises(ValueError, match="registered already"):
        register(toy)


def test_the_toys_flag_is_in_run_help_and_round_trips_spec_flags_spec(toy, capsys):
    with pytest.raises(SystemExit):
        run_cli("run", "--help")
    assert "--toy-order {reverse,file}" in capsys.readouterr().out
    for spec in (RetrieverSpec("toy", {"order": "file"}), RetrieverSpec("toy")):
        command, notes = run_command(spec, "sample")  # what tune prints
        assert notes == [] and command.startswith("python -m bsard_demo run --retriever toy")
        argv = command.split()[3:]
        assert spec_from_args(build_parser().parse_args(argv)) == spec
    assert "--toy-order file" in run_command(RetrieverSpec("toy", {"order": "file"}))[0]


def test_the_toy_is_in_the_search_menu_keeps_its_setting_in_a_link_and_is_a_score_builtin(toy):
    choices = LinkChoices(encoders=("use",))
    assert "toy" in choices.kinds
    search = SearchSettings(question="bail", systems=("bm25", "toy"), options=(("toyorder", "file"),))
    params = link_params(search)
    assert params["systems"] == ["bm25", "toy"] and params["toyorder"] == "file"
    back, notes = parse_link(params, choices)
    assert back == search and notes == []
    assert settings_from_state(state_from_settings(back, choices.encoders), choices) == search
    bad, notes = parse_link({**params, "toyorder": "upside-down"}, choices)  # a value not offered: its default
    assert dict(bad.options) == {"toyorder": "reverse"} and "upside-down" in notes[0]
    assert "toyorder" not in link_params(SearchSettings(question="bail", options=(("toyorder", "file"),)))
    assert column_specs(back.systems, settings=dict(back.options))["Jouet"] == RetrieverSpec("toy", {"order": "file"})
    assert baseline_specs()["Jouet"] == RetrieverSpec("toy", {"order": "reverse"})


def test_the_toy_runs_with_its_flag(toy, tmp_path):
    data = make_data(tmp_path / "d")
    for order, ranking in (("file", ("1", "2", "3")), ("reverse", ("8", "7", "6"))):
        out = tmp_path / f"{order}.trec"
        assert run_cli("run", "--retriever", "toy", "--toy-order", order, "--data", str(data), "--depth", "3",
                       "--out", str(out), "--no-progress") == 0
        assert read_run_path(out).run.rankings["10"] == ranking


def test_without_the_toy_nothing_offers_it():
    assert "toy" not in retriever_kinds() and "toy" not in _run_parser_action("retriever").choices
    assert "toy" not in KIND_LABELS and list(KIND_LABELS) == menu_kinds()  # the registry's, whatever they are
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    assert "--toy-order" not in [o for a in run._actions for o in a.option_strings]
    with pytest.raises(ValueError, match="unknown retriever 'toy'"):
        RetrieverSpec("toy")


def test_the_cli_choices_are_the_cores_constants():
    assert tuple(_run_parser_action("backend").choices) == BACKENDS
    assert tuple(_run_parser_action("bm25_method").choices) == METHODS
    assert tuple(_run_parser_action("format").choices) == RUN_FORMATS
    assert all(name in _run_parser_action("encoder").help for name in ENCODER_CHOICES)


def test_the_readme_names_no_kind_list():
    """A new kind edits no document (docs/extending.md, 'A retriever kind'): the README and docs/design.md point
    to ``run --help``, which lists every registered kind with its summary, and write no list of kinds by hand."""
    for page in (REPO / "README.md", REPO / "docs" / "design.md"):
        text = page.read_text(encoding="utf-8")
        assert "run --help" in text, page
        assert not re.search(r"--retriever [a-z0-9]+\|[a-z0-9]+", text), f"{page}: a hand list of kinds"
        assert not [k for k in retriever_kinds().values() if f"| `{k.name}` | {k.summary} |" in text], page


def test_the_search_page_shows_the_toy_by_its_label_and_searches_it_from_a_link(toy, monkeypatch, tmp_path):
    """The page itself (AppTest, in process): the systems menu words the toy by its label, and a
    link naming it with its setting shows its column in that order."""
    set_app_env(monkeypatch, tmp_path / "cache", "sample")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"q": "bail", "systems": "toy", "toyorder": "file", "k": "3"})
    at.run()
    assert_clean(at)
    assert at.multiselect(key="kinds").options == [retriever_kinds()[k].title for k in menu_kinds()]
    assert at.multiselect(key="kinds").options[-1] == "Jouet"
    assert column_names(at) == ["Jouet"]
    assert at.selectbox(key="setting:toyorder").value == "file"
    ids = [str(a) for a in load_sample().articles["id"]][:3]
    shown = [h.value.split('data-article="')[1].split('"')[0] for h in at.html
             if h.value.startswith('<div class="bsard-hit')]
    assert shown == ids


def test_a_kind_of_parts_starts_every_parts_prepare_before_building_the_first():
    """``RetrieverKind.prepare`` (e5's graph and session in the background) runs for every part
    before the first part is built, so that slow loads overlap the other parts' (registry.prepare_parts)."""
    events: list[tuple[str, int]] = []

    def build_part(spec, dataset, **context):
        events.append(("build", spec.options["n"]))
        return CorpusOrder([str(a) for a in dataset.articles["id"]])

    register(RetrieverKind("parttoy", "a part (a test's toy)", frozenset({"n"}), build_part,
                           prepare=lambda spec: events.append(("prepare", spec.options["n"])), offered="never"))
    register(RetrieverKind("wholetoy", "two parts (a test's toy)", frozenset(), offered="never",
                           parts=lambda spec: [RetrieverSpec("parttoy", {"n": 1}), RetrieverSpec("parttoy", {"n": 2})],
                           assemble=lambda spec, built, dataset: built[0]))
    try:
        retriever = build_retriever(RetrieverSpec("wholetoy"), load_sample())
    finally:
        unregister("wholetoy")
        unregister("parttoy")
    assert events == [("prepare", 1), ("prepare", 2), ("build", 1), ("build", 2)]
    assert retriever.search("q", 1)
