"""Stable problem codes: every problem has a declared code, every declared code is produced by a
crafted input, summaries carry their kind's code, and the README lists them all."""
from __future__ import annotations

import ast
import gzip
import io
import json
import re
import zlib
from pathlib import Path

import pandas as pd
import pytest

from bsard_demo.dataset import Dataset
from bsard_demo.evaluation import checks
from bsard_demo.evaluation.scoring import RunSource, score_runs
from bsard_demo.runs import Problem, ProblemList, read as read_module, read_run_bytes, read_run_path
from bsard_demo.runs.limits import ReadLimits
from bsard_demo.runs.problems import CHECK_CODES, CODES, QRELS_CODES, codes_markdown
from bsard_demo.runs.sandbox import Isolation

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / "bsard_demo" / "runs"
GOOD = b"1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n"


def codes_of(data: bytes, **kw) -> set[str]:
    return {p.code for p in read_run_bytes(data, "r", **kw).problems}


def _parquet(**columns) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table({k: pa.array(v, type=pa.float64()) if k == "score" else v for k, v in columns.items()}),
                   out)
    return out.getvalue()


_PARQUET = _parquet(qid=["1", "1"], docid=["a", "b"], score=[2.0, 1.0])
_BIG_PARQUET = _parquet(qid=["1"] * 20_000, docid=[str(i) for i in range(20_000)], score=[1.0] * 20_000)


def _lz4(content: bytes, frames: int = 2) -> bytes:
    """``content`` in LZ4 frames, as ranx writes its ``kind="lz4"`` files (a frame of a frame)."""
    lz4_frame = pytest.importorskip("lz4.frame")
    for _ in range(frames):
        content = lz4_frame.compress(content)
    return content


def _zeros_gzip(n: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    return comp.compress(bytes(n)) + comp.flush()


# One input (at least) per code of the reader: ``code -> [bytes or a callable(tmp_path) -> set of codes]``.
BYTES_INPUTS: dict[str, list] = {
    "empty_file": [b"", gzip.compress(b"")],
    "file_too_large": [(GOOD, {"max_bytes": 10})],
    "gzip_too_large": [(_zeros_gzip(2**20), {"max_bytes": 2**16})],
    "gzip_truncated": [gzip.compress(GOOD * 50)[:40]],
    "gzip_corrupt": [gzip.compress(GOOD)[:-8] + b"\x00\x00\x00\x00" + gzip.compress(GOOD)[-4:]],
    "gzip_trailing_data": [gzip.compress(GOOD) + b"junk"],
    "gzip_twice": [gzip.compress(gzip.compress(GOOD))],
    "gzip_too_many_members": [gzip.compress(GOOD) + gzip.compress(b"", mtime=0) * 100_001],
    "lz4_unreadable": [b"\x04\x22\x4d\x18" + b"\x40" * 12, lambda: _lz4(b"\xff\xff", frames=1),
                       lambda: _lz4(b"\x82\x01\x02")],
    "lz4_too_large": [lambda: (_lz4(b"{" + b" " * 4096 + b"}"), {"max_bytes": 1024})],
    "line_too_long": [GOOD + b"1 " * 40_000 + b"\n", b"qid,docid,score\n" + b"1," * 40_000 + b"\n"],
    "too_slow": [(GOOD, {"limits": ReadLimits(seconds=0)})],
    "too_large_in_memory": [(GOOD, {"limits": ReadLimits(max_entries=1)}),
                            (GOOD, {"limits": ReadLimits(max_questions=0)}),
                            (b'{"1": {"a": 1, "b": 2}}', {"limits": ReadLimits(max_entries=1)})],
    "binary_file": [b"\x89PNG\r\n\x1a\n\x00\x00", b"%PDF-1.7\n", b"\x00\x01\x02binary", b"BZh91AY&SY" + bytes(8)],
    "not_utf8": [b"1 Q0 a 1 2.0 t\xe9\n", "1 Q0 a 1 2.0 t\n".encode("utf-16-le") * 3,
                 b"\xff\xfe" + b"\x00\xd8" + b"a\x00"],
    "whitespace_only": [b" \n\t\r\n"],
    "html_page": [b"<!DOCTYPE html><html></html>", b"<?xml version='1.0'?><run/>"],
    "parquet_unreadable": [_PARQUET[: len(_PARQUET) // 2]],
    "parquet_too_large": [(_BIG_PARQUET, {"max_bytes": len(_BIG_PARQUET) + 10})],
    "bad_column_type": [_parquet(qid=["1"], docid=[["a"]], score=[1.0])],
    # the child that decodes parquet: a file that aborts pyarrow, and limits no read can meet
    "reader_crashed": [(Path(__file__).parent / "hostile" / "abort-unencoded-byte-array.parquet").read_bytes()],
    "reader_timeout": [(_PARQUET, {"isolation": Isolation(seconds=0.0001)})],
    "reader_out_of_memory": [(_BIG_PARQUET, {"isolation": Isolation(memory_mb=1)})],
    "not_a_run": [b"Ceci est un texte.\nIl n'a rien d'un run, vraiment rien.\n", b"42\n"],
    "qrels_file": [b"4 0 2222 1\n7 0 2222 1\n"],
    "csv_without_header": [b"1,947,0.5\n1,948,0.4\n"],
    "missing_columns": [b"qid,score\n1,0.5\n", _parquet(qid=["1"], score=[1.0])],
    # a field above csv's limit, its lines short (a longer line is line_too_long)
    "csv_syntax_error": [b'qid,docid,score\n1,a,"' + b"9\n" * 100_000 + b'"\n'],
    "no_run_lines": [b"qid,docid,score\n", b"{}"],
    "invalid_json": [b'{"1": {"a": 0.5,}}', b'{"qid": "1", "docid": "a", "score": 1}\n{"qid": \n'],
    "json_too_deep": [b"[" * 100_000],
    "json_not_a_run": [b"[1, 2]", b'{"1": 0.5}', b'{"qid": "1", "docid": "a", "score": 1}\n[1]\n'],
    "json_mixed_layout": [b'{"1": {"a": 0.5}, "2": ["b"]}',
                          b'{"qid": "1", "docid": "a", "score": 1}\n{"qid": "1", "docid": "b", "rank": 2}\n'],
    "missing_field": [b'{"qid": "1", "docid": "a", "score": 1}\n{"docid": "b", "score": 2}\n',
                      b'{"qid": "1", "docid": "a"}\n'],
    "bad_field_count": [b"1 Q0 a 1 1.5 t\n1 Q0 b 2 1.0\n", b"qid,docid,score\n1,a\n"],
    "bad_id": [b"qid,docid,score\n,a,0.5\n", b'{"1": ["a", null]}', b'{" ": {"a": 1}}'],
    "bad_article_list": [b'{"qid": "1", "docids": "a"}\n'],
    "bad_score": [b"1 Q0 a 1 x t\n", b"1 Q0 a 1 nan t\n", b'{"1": {"a": "high"}}',
                  _parquet(qid=["1"], docid=["a"], score=[None])],
    "bad_rank": [b"1 Q0 a one 1.5 t\n", b"q a 1\nq b 2\nq c 2.5\nq d 4\n"],
    "duplicate_article": [b"1 Q0 a 1 0.9 t\n1 Q0 a 2 0.8 t\n"],
    "rank_score_order": [b"1 Q0 a 1 0.2 t\n1 Q0 b 2 0.9 t\n"],
    "several_tags": [b"1 Q0 a 1 0.9 x\n1 Q0 b 2 0.8 y\n"],
    "unknown_questions": [(GOOD, {"qids": ["2"]})],
    "unknown_articles": [(GOOD, {"corpus_ids": ["a"]})],
    "short_rankings": [(GOOD, {"k": 10})],
    "scores_ascending": [b"1 Q0 a 1 0.1 t\n1 Q0 b 2 0.9 t\n", b"q a 0.1\nq b 0.2\nq c 0.3\n"],
    "scores_descending": [(GOOD, {"lower_is_better": True})],
}


def _path_cases(tmp_path: Path) -> dict[str, list[set[str]]]:
    unreadable = tmp_path / "locked.trec"
    unreadable.write_bytes(GOOD)
    unreadable.chmod(0)
    out = {
        "file_not_found": [read_run_path(tmp_path / "missing.trec")],
        "not_a_file": [read_run_path(tmp_path), read_run_path("/dev/null")],
        "unreadable_file": [read_run_path(unreadable)],
    }
    return {code: [{p.code for p in rf.problems} for rf in rfs] for code, rfs in out.items()}


def test_every_declared_code_is_produced_by_a_crafted_input(tmp_path, monkeypatch):
    produced: dict[str, list[set[str]]] = {}
    for code, inputs in BYTES_INPUTS.items():
        inputs = [i() if callable(i) else i for i in inputs]
        produced[code] = [codes_of(i) if isinstance(i, bytes) else codes_of(i[0], **i[1]) for i in inputs]
    produced.update(_path_cases(tmp_path))
    if all("unreadable_file" not in c for c in produced["unreadable_file"]):  # running as root: chmod 0 reads fine
        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied")
        with monkeypatch.context() as m:
            m.setattr("builtins.open", refuse)
            produced["unreadable_file"] = [{p.code for p in read_run_path(tmp_path / "locked.trec").problems}]

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    with monkeypatch.context() as m:
        m.setattr(read_module, "_read", broken)
        produced["internal_error"] = [codes_of(GOOD)]
    # tie_order: the scorer's, once the labels say the file's own order of tied articles changes a figure
    board = score_runs(Dataset("d", "local", None, {"test": pd.DataFrame({"id": ["1"], "article_ids": [("a",)]})}),
                       "test", [RunSource.upload("r", b"1 Q0 a 1 0.5 t\n1 Q0 b 2 0.5 t\n")])
    produced["tie_order"] = [{p.code for p in board.runs[0].file.problems}]
    for code, sets in produced.items():
        for found in sets:
            assert code in found, (code, found)
    assert set(produced) == set(CODES), set(CODES) ^ set(produced)


def _string_codes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, code)`` of every string constant given as a problem code: the first argument of
    ``.error(...)`` / ``.warning(...)``, the second of ``.add(...)``, a ``code=`` keyword, or the
    first item of a ``(code, message)`` tuple returned for ``problems.error(*what)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = node.args
            pos = {"error": 0, "warning": 0, "add": 1}.get(node.func.attr)
            if pos is not None and len(args) > pos and isinstance(args[pos], ast.Constant) \
                    and isinstance(args[pos].value, str):
                found.append((node.lineno, args[pos].value))
        if isinstance(node, ast.keyword) and node.arg == "code" and isinstance(node.value, ast.Constant):
            found.append((node.value.lineno, node.value.value))
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            first = node.value.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and re.fullmatch(r"[a-z0-9_]+",
                                                                                                 first.value):
                found.append((node.lineno, first.value))
    return found


def test_every_code_used_in_the_package_is_declared():
    used = []
    for path in sorted(RUNS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used += [(f"{path.relative_to(REPO)}:{line}", code) for line, code in _string_codes(tree)]
    assert len({code for _, code in used}) >= 30  # the scan sees the reader's calls (an empty scan would pass)
    assert [(where, code) for where, code in used if code not in CODES and not (
        where.startswith("bsard_demo/runs/qrels_read.py") and code in QRELS_CODES)] == []


def test_codes_are_snake_case_with_a_severity_and_one_line_meaning():
    for code, (severity, meaning) in {**CODES, **CHECK_CODES}.items():
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", code), code
        assert severity in ("error", "warning")
        assert meaning and "\n" not in meaning and "|" not in meaning
    assert not set(CODES) & set(CHECK_CODES)


def test_the_diagnostics_codes_are_all_declared():
    assert set(checks.CODES) <= set(CODES) | set(CHECK_CODES)
    assert set(CHECK_CODES) <= set(checks.CODES)
    assert all(CHECK_CODES.get(c, CODES.get(c))[0] == "warning" for c in checks.CODES)


def test_undeclared_code_or_wrong_severity_is_refused():
    problems = ProblemList()
    with pytest.raises(ValueError):
        problems.error("no_such_code", "x")
    with pytest.raises(ValueError):
        problems.warning("bad_score", "a bad score is an error, not a warning")
    assert not problems


def test_summaries_carry_the_code_of_their_kind():
    good = "1 Q0 a 1 1.0 t\n"
    bad = "".join(f"1 Q0 d{i} {i + 2} x t\n" for i in range(120))
    rf = read_run_bytes((good + bad).encode(), "r", k=1)
    summary = [p for p in rf.problems if p.message.startswith("… and")]
    assert [(p.code, p.severity, p.line) for p in summary] == [("bad_score", "error", None)]
    assert all(p.code == "bad_score" for p in rf.problems)


def test_as_dict_keeps_its_keys_and_adds_code():
    p = Problem("warning", "m", 3, code="tie_order")
    assert list(p.as_dict()) == ["severity", "code", "line", "message"]
    assert p.as_dict() == {"severity": "warning", "code": "tie_order", "line": 3, "message": "m"}
    rf = read_run_bytes(b"1 Q0 a 1 0.9 t\n1 Q0 a 2 0.5 t\n", "r")
    assert "duplicate_article" in [d["code"] for d in json.loads(json.dumps([q.as_dict() for q in rf.problems]))]


def test_extend_keeps_the_cap_per_kind():
    a, b = ProblemList(cap=3), ProblemList(cap=3)
    for i in range(2):
        a.error("bad_score", f"s{i}", line=i + 1, kind="score")
    for i in range(5):
        b.error("bad_score", f"t{i}", line=i + 10, kind="score")
    a.extend(b)
    assert a.totals["score"] == 7 and len(a.items) == 3
    assert [p.message for p in a.items] == ["s0", "s1", "t0"]
    assert [p.code for p in a.omitted()] == ["bad_score"] and "4 more like this (7 in all)" in a.omitted()[0].message


def test_readme_lists_every_code():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert codes_markdown() in readme
    table = codes_markdown()
    for code in {*CODES, *CHECK_CODES, *checks.CODES, *QRELS_CODES}:
        assert f"| `{code}` |" in table
