"""docs/extending.md's recipes run as written (issue 40 item 5): each recipe's ``python`` snippets are taken from the
page and run in the recipe's order, then checked as the recipe says: a recipe whose code does not run fails here."""
from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

from bsard_demo.cli.main import main as run_cli
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.measures import FAMILIES, Family, Measure, column_label, extra_columns, families_help
from bsard_demo.retrievers.registry import kind, retriever_kinds, unregister
from bsard_demo.runs import read_run_bytes, read_run_path
from bsard_demo.runs.read import formats, unregister_format
from bsard_demo.sources import load_sample

REPO = Path(__file__).resolve().parents[1]
EXTENDING = REPO / "docs" / "extending.md"


def recipe(section: str) -> list[str]:
    """The snippets of docs/extending.md's recipe ``section``."""
    return snippets(EXTENDING.read_text(encoding="utf-8"), section)


def module_at(name: str) -> types.ModuleType:
    """A fresh module ``name`` of the process (a recipe's new file), removed again by :func:`forget`."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    return module


def forget(module: types.ModuleType) -> None:
    sys.modules.pop(module.__name__, None)


def load_test_module(path: str) -> types.ModuleType:
    """The test module at ``tests/path``, loaded apart (its lists patched here change no other test's)."""
    spec = importlib.util.spec_from_file_location(f"recipe_{Path(path).stem}", REPO / "tests" / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snippets(markdown: str, section: str) -> list[str]:
    """The ``python`` fenced blocks of ``## section`` in ``markdown``, in order, dedented."""
    body = markdown.partition(f"\n## {section}\n")[2].split("\n## ", 1)[0]
    return [textwrap.dedent(block) for block in re.findall(r"```python\n(.*?)\n\s*```", body, re.DOTALL)]


def test_the_snippet_reader_can_fail():
    page = "# x\n\n## A\n\n1. one:\n\n   ```python\n   x = 1\n   ```\n\n## B\n\n```python\ny = 2\n```\n"
    assert snippets(page, "A") == ["x = 1"] and snippets(page, "B") == ["y = 2"] and snippets(page, "C") == []


@pytest.fixture
def toy_module():
    """Where the recipe's first snippet lives (``bsard_demo/retrievers/toy.py``), as a module of the process."""
    module = module_at("bsard_demo.retrievers.toy")
    yield module
    forget(module)
    unregister("toy")


def test_the_retriever_kind_recipe_runs(toy_module, tmp_path):
    module_code, registration = recipe("A retriever kind")
    exec(compile(module_code, "retrievers/toy.py", "exec"), toy_module.__dict__)  # step 1: its module
    exec(compile(registration, "retrievers/kinds.py", "exec"), {})  # step 2: its registration
    toy = retriever_kinds()["toy"]
    assert "bsard_demo/retrievers/toy.py" in load_test_module("test_layout.py").kind_modules()  # no Layout line
    assert kind("toy") is toy and toy.label == "Jouet"
    spec = toy.spec_of({"toy_order": "file"})
    assert toy.spec_of(dict(zip(["toy_order"], toy.flags_of(spec, [])[1:]))) == spec  # flags both ways
    out = tmp_path / "toy.trec"
    assert run_cli(["run", "--retriever", "toy", "--toy-order", "file", "--data", "sample", "--depth", "3",
                    "--out", str(out), "--no-progress"]) == 0
    first = [str(a) for a in load_sample().articles["id"]][:3]
    assert all(list(ranking) == first for ranking in read_run_path(out).run.rankings.values())


def test_the_measure_recipe_runs(monkeypatch):
    function, declaration = recipe("A measure")[:2]
    namespace: dict = {"Family": Family}
    exec(compile(function, "evaluation/metrics.py", "exec"), namespace)  # step 1: what computes it
    family = eval(compile(declaration, "evaluation/measures.py", "eval"), namespace)  # step 2: its row
    monkeypatch.setitem(FAMILIES, family.name, family)
    assert Measure.parse("P@2") == Measure("p", 2) and column_label("p@2") == "P@2"
    ev = evaluate({"q": {"a", "b"}}, {"q": ["a", "x", "b"]}, ks=(2,))
    assert ev.means["p@2"] == 0.5 and list(ev.means)[-len(extra_columns()) - 1] == "p@2"  # before the extras
    assert f"  {family.name}@k: {family.label}@k " in families_help()  # evaluate --help's list


@pytest.fixture
def toy_format_module():
    """The run format recipe's new file, ``bsard_demo/runs/toy_format.py``."""
    module = module_at("bsard_demo.runs.toy_format")
    yield module
    forget(module)
    unregister_format("toy-ranked")


def test_the_run_format_recipe_runs(toy_format_module, monkeypatch):
    parser, registration, example = recipe("A run format")
    exec(compile(parser, "runs/toy_format.py", "exec"), toy_format_module.__dict__)  # step 1: the parser
    exec(compile(registration, "runs/toy_format.py", "exec"), toy_format_module.__dict__)  # step 2: at its end
    assert formats()[-1] == "toy-ranked"
    run_files = load_test_module("runs/test_run_files.py")
    with pytest.raises(AssertionError):  # the format has no example yet
        run_files.test_all_formats_are_exercised()
    row = eval(compile("{" + example + "}", "tests/runs/test_run_files.py", "eval"), vars(run_files))  # step 3
    monkeypatch.setattr(run_files, "RANK_FILES", {**run_files.RANK_FILES, **row})
    run_files.test_all_formats_are_exercised()
    for compress in (False, True):  # plain and gzipped, through the real reader, to the reference run
        run_files.test_rank_formats_round_trip("toy-ranked", compress)
    rf = read_run_bytes(b"\n#TOY-RUN\nq1 a,b\nq2\n", "toy.txt")
    assert rf.format == "toy-ranked" and rf.run is None  # its error, with its line (the blank one counted)
    assert [(p.code, p.line) for p in rf.problems.items if p.severity == "error"] == [("bad_field_count", 4)]
    assert read_run_bytes(b"#toy-run\nq1 a,b\nq2 b\n", "toy.txt").run.rankings == {"q1": ("a", "b"), "q2": ("b",)}
