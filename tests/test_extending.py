"""docs/extending.md's recipes run as written (issue 40 item 5): each recipe's ``python`` snippets are taken from the
page and run in the recipe's order, then checked as the recipe says: a recipe whose code does not run fails here."""
from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import textwrap
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from bsard_demo.cli.main import main as run_cli
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.measures import FAMILIES, Family, Measure, column_label, extra_columns, families_help
from bsard_demo.retrievers.neighbours import NEIGHBOURS
from bsard_demo.retrievers.registry import kind, retriever_kinds, unregister
from bsard_demo.runs import read_run_bytes, read_run_path
from bsard_demo.runs.read import formats, unregister_format
from bsard_demo.sources import load_sample

REPO = Path(__file__).resolve().parents[1]
EXTENDING = REPO / "docs" / "extending.md"


def recipe(section: str, language: str = "python") -> list[str]:
    """The snippets of docs/extending.md's recipe ``section``."""
    return snippets(EXTENDING.read_text(encoding="utf-8"), section, language)


@contextmanager
def module_at(name: str, undo=lambda: None) -> Iterator[types.ModuleType]:
    """A fresh module ``name`` of the process (a recipe's new file), removed after, then ``undo()`` (its
    registration)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        yield module
    finally:
        sys.modules.pop(name, None)
        undo()


def load_test_module(path: str) -> types.ModuleType:
    """The test module at ``tests/path``, loaded apart (its lists patched here change no other test's)."""
    spec = importlib.util.spec_from_file_location(f"recipe_{Path(path).stem}", REPO / "tests" / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def snippets(markdown: str, section: str, language: str = "python") -> list[str]:
    """The ``language`` fenced blocks of ``## section`` in ``markdown``, in order, dedented."""
    body = markdown.partition(f"\n## {section}\n")[2].split("\n## ", 1)[0]
    return [textwrap.dedent(block) for block in re.findall(rf"```{language}\n(.*?)\n\s*```", body, re.DOTALL)]


def test_the_snippet_reader_can_fail():
    page = "# x\n\n## A\n\n1. one:\n\n   ```python\n   x = 1\n   ```\n\n## B\n\n```python\ny = 2\n```\n"
    assert snippets(page, "A") == ["x = 1"] and snippets(page, "B") == ["y = 2"] and snippets(page, "C") == []
    assert snippets(page.replace("python\ny", "css\ny"), "B", "css") == ["y = 2"]


@pytest.fixture
def toy_module():
    """Where the recipe's first snippet lives (``bsard_demo/retrievers/toy.py``), as a module of the process."""
    with module_at("bsard_demo.retrievers.toy", lambda: unregister("toy")) as module:
        yield module


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
    with module_at("bsard_demo.runs.toy_format", lambda: unregister_format("toy-ranked")) as module:
        yield module


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


@pytest.fixture
def toy_section_module():
    """The Search section recipe's new file, ``bsard_demo/app/agreement.py``."""
    with module_at("bsard_demo.app.agreement") as module:
        yield module


def page_with(page: str, new_import: str, call: str) -> str:
    """``pages/search.py``'s text with the recipe's step 5: its import line of the sections replaced by
    ``new_import``, and ``call``'s first line (in ``_results``, found once) followed by the rest of ``call``."""
    (old_import,) = [line for line in page.splitlines() if line.startswith(new_import.split(" import ")[0] + " ")]
    anchor = textwrap.indent(call.splitlines()[0], "    ") + "\n"
    assert page.count(anchor) == 1, f"the recipe's place {anchor!r} is not once in the page"
    return page.replace(old_import, new_import.strip()).replace(anchor, textwrap.indent(call.strip(), "    ") + "\n")


def test_the_search_section_recipe_runs(toy_section_module, monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from _app_helpers import TIMEOUT, assert_clean, set_app_env
    from bsard_demo.app import render, search_ui, style, ui
    from bsard_demo.app.search_page import ColumnResult, ShownHit

    model, fragment, section, new_import, call = recipe("A Search page section")
    (rule,) = recipe("A Search page section", "css")
    layout = load_test_module("test_layout.py")
    exec(compile(model, "app/agreement.py", "exec"), toy_section_module.__dict__)  # step 1: the model
    agreed = toy_section_module.agreed_articles
    hits = [[ShownHit(r, a, 1 / r, f"Art. {a}", (), "") for r, a in enumerate(ids, 1)] for ids in ("123", "391")]
    columns = [ColumnResult(name, h, 0.0, 3) for name, h in zip("AB", hits)]
    assert agreed(columns) == [("Art. 1", [1, 3]), ("Art. 3", [3, 1])] and agreed(columns[:1]) == []
    drawing = dict(vars(render))
    exec(compile(fragment, "app/render.py", "exec"), drawing)  # step 2: its fragment, in render.py
    monkeypatch.setattr(render, "agreement_panel", drawing["agreement_panel"], raising=False)
    html = render.agreement_panel([("<script>alert(1)</script>", [1, 2])])
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # hostile text as text
    assert rule.startswith(f".{re.search(r'class=.([a-z-]+)', html).group(1)} {{")  # step 3: its class's rule
    for module in (style, ui):  # ui.inject_style draws the STYLE it imported
        monkeypatch.setattr(module, "STYLE", style.STYLE.replace("</style>", f"{rule}\n</style>"))
    wiring = dict(vars(search_ui))
    exec(compile(section, "app/search_ui.py", "exec"), wiring)  # step 4: the section, in search_ui.py
    monkeypatch.setattr(search_ui, "agreement_section", wiring["agreement_section"], raising=False)
    app = tmp_path / "app"  # step 5: a copy of the app whose page imports and calls it
    shutil.copytree(REPO / "pages", app / "pages")
    shutil.copy(REPO / "app.py", app / "app.py")
    page = app / "pages" / "search.py"
    page.write_text(page_with(page.read_text(encoding="utf-8"), new_import, call), encoding="utf-8")
    grown = tmp_path / "search_ui.py"
    grown.write_text((REPO / "bsard_demo" / "app" / "search_ui.py").read_text(encoding="utf-8") + "\n\n" + section)
    module = tmp_path / "agreement.py"
    module.write_text(model)
    assert len(page.read_text(encoding="utf-8").splitlines()) <= 400 and layout.private_imports(page) == []
    assert layout.oversized([grown, module]) == {} and layout.long_functions([grown, module, page]) == []
    set_app_env(monkeypatch, tmp_path / "cache", "sample")
    at = AppTest.from_file(str(app / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"q": "bail", "systems": ["bm25", "hybrid"], "henc": NEIGHBOURS, "k": "10"})
    at.run()
    assert_clean(at)
    (panel,) = [h.value for h in at.html if h.value.startswith('<div class="bsard-agree"')]
    assert panel.count("<li>") >= 1 and "En tête de tous les systèmes" in panel
    assert any(rule in h.value for h in at.html)  # the stylesheet the page injects holds its rule
