"""Every CSV the CLI writes is formula-safe (issue 37, OWASP "CSV injection"): a run named
``=HYPERLINK(…).trec`` comes back as a text cell ``'=HYPERLINK(…).trec`` in ``evaluate --format csv``,
its ``--per-query`` and ``--misses`` files and ``compare --format csv``, as the page's downloads."""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from _app_helpers import sample_run_trec
from bsard_demo.app.score_tables import to_csv_bytes
from bsard_demo.cli.main import main
from bsard_demo.evaluation.report import csv_text, formula_safe
from bsard_demo.evaluation.stamp import strip_stamp

#: One run name per dangerous first character (= + - @, tab); the first is the issue's own.
NAMES = ['=HYPERLINK("evil.example";"x")', "+1+1", "-2+3", "@SUM(A1)", "\tx"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("formulas")
    paths = []
    for seed, name in enumerate(NAMES):
        path = folder / f"{name}.trec"
        path.write_text(sample_run_trec(seed=seed, depth=20))
        paths.append(path)
    return paths


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(strip_stamp(text))))


def assert_safe(values) -> None:
    """Every run name came back prefixed, and no cell starts a formula."""
    values = set(values)
    assert {f"'{n}.trec" for n in NAMES} <= values, values
    assert not [v for v in values if v.startswith(("=", "+", "-", "@", "\t", "\r"))]


def test_evaluate_csv_and_its_files_are_formula_safe(runs, tmp_path, capsys):
    per_query, misses = tmp_path / "q.csv", tmp_path / "m.csv"
    code = main(["evaluate", *map(str, runs), "--data", "sample", "--k", "10", "--format", "csv",
                 "--per-query", str(per_query), "--misses", str(misses)])
    assert code == 0, capsys.readouterr().err
    assert_safe(r["run"] for r in rows(capsys.readouterr().out))
    assert_safe(r["run"] for r in rows(per_query.read_text(encoding="utf-8")))
    assert_safe(r["run"] for r in rows(misses.read_text(encoding="utf-8")))


def test_compare_csv_is_formula_safe(runs, capsys):
    assert main(["compare", *map(str, runs[:3]), "--data", "sample", "--format", "csv"]) == 0
    table = rows(capsys.readouterr().out)
    names = {r["run_a"] for r in table} | {r["run_b"] for r in table}
    assert names == {f"'{n}.trec" for n in NAMES[:3]}


def test_csv_text_prefixes_text_only():
    """Index labels, column names and text cells are prefixed; numbers, even negative, are not."""
    df = pd.DataFrame({"run": ["=1+1", "ok", "-x"], "=col": [-0.5, 1.0, 2.0], "n": [-1, 2, 3]},
                      index=pd.Index(["@a", "b", "c"], name="id"))
    back = pd.read_csv(io.StringIO(csv_text(df)), index_col=0)
    assert list(back.index) == ["'@a", "b", "c"] and list(back.columns) == ["run", "'=col", "n"]
    assert list(back["run"]) == ["'=1+1", "ok", "'-x"] and list(back["'=col"]) == [-0.5, 1.0, 2.0]
    assert list(back["n"]) == [-1, 2, 3]
    assert formula_safe("\rx") == "'\rx" and formula_safe(-3) == -3 and formula_safe("a=b") == "a=b"


def test_the_score_page_csv_uses_the_same_function():
    data = to_csv_bytes(pd.DataFrame({"run": ["=HYPERLINK(1)"], "ndcg": [-0.25]})).decode("utf-8")
    assert data.splitlines() == ["run,ndcg", "'=HYPERLINK(1),-0.250000"]
