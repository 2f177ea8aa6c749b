"""The registry is the one list of retriever kinds (issue 22): a toy kind registered at run time is
in the CLI's ``--retriever`` choices and ``run --help``, the Search page's systems menu and its
column specs, and runs end to end through ``run``, with nothing else changed; the README lists
every kind, and the CLI's other choices are the core's own constants."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from _tiny_corpus import make_data, run_cli
from bsard_demo.app.search_page import KIND_LABELS, column_specs
from bsard_demo.cli.main import build_parser
from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.bm25 import METHODS
from bsard_demo.retrievers.encoders import BACKENDS, ENCODER_CHOICES
from bsard_demo.retrievers.registry import (
    RetrieverKind,
    RetrieverSpec,
    kinds_markdown,
    register,
    retriever_kinds,
    unregister,
)
from bsard_demo.runs import read_run_path
from bsard_demo.runs.write import RUN_FORMATS

REPO = Path(__file__).resolve().parents[2]


@dataclass
class CorpusOrder:
    """A toy retriever: every question gets the corpus in reverse file order."""

    ids: list[str]
    name: str = "toy"

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return [Hit(a, float(-i)) for i, a in enumerate(reversed(self.ids))][:k]

    def search_many(self, questions, k: int = 100):
        return [self.search(q, k) for q in questions]


def _build_toy(spec, dataset, **context):
    return CorpusOrder([str(a) for a in dataset.articles["id"]])


@pytest.fixture
def toy():
    kind = register(RetrieverKind("toy", "the corpus in reverse order (a test's toy)", frozenset(), _build_toy))
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
    assert list(KIND_LABELS)[-1] == "toy" and KIND_LABELS["toy"] == "toy"
    assert column_specs(["bm25", "toy"]) == {"BM25": RetrieverSpec("bm25"), "toy": RetrieverSpec("toy")}
    out = tmp_path / "toy.trec"
    assert run_cli("run", "--retriever", "toy", "--data", str(make_data(tmp_path / "d")), "--depth", "3",
                   "--out", str(out), "--no-progress") == 0
    rf = read_run_path(out)
    assert rf.run is not None and rf.run.rankings["10"] == ("8", "7", "6")
    assert "toy" in kinds_markdown()
    with pytest.raises(ValueError, match="--encoder applies to --retriever dense, hybrid or ranker, not toy"):
        from bsard_demo.cli.retrieval import spec_from_args
        spec_from_args(build_parser().parse_args(["run", "--retriever", "toy", "--encoder", "e5", "--out", "x"]))
    with pytest.raises(ValueError, match="registered already"):
        register(toy)


def test_without_the_toy_nothing_offers_it():
    assert "toy" not in retriever_kinds() and "toy" not in _run_parser_action("retriever").choices
    assert "toy" not in KIND_LABELS and list(KIND_LABELS) == ["bm25", "dense", "hybrid"]
    with pytest.raises(ValueError, match="unknown retriever 'toy'"):
        RetrieverSpec("toy")


def test_the_cli_choices_are_the_cores_constants():
    assert tuple(_run_parser_action("backend").choices) == BACKENDS
    assert tuple(_run_parser_action("bm25_method").choices) == METHODS
    assert tuple(_run_parser_action("format").choices) == RUN_FORMATS
    assert all(name in _run_parser_action("encoder").help for name in ENCODER_CHOICES)


def test_the_readme_lists_every_kind():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert kinds_markdown() in readme
    assert f"[--retriever {'|'.join(retriever_kinds())}]" in readme
