"""The reproducibility stamp (bsard_demo.evaluation.stamp): what it holds, the hub commit the download
resolved (a substituted download), every format written and read back, and ``stamps A B``."""
from __future__ import annotations

import hashlib
import io
import json
import shutil

import pandas as pd
import pytest

from _app_helpers import sample_run_trec
from bsard_demo.cli.main import main
from bsard_demo.evaluation.scoring import RunSource, score_runs
from bsard_demo.evaluation.stamp import (
    STAMP_FORMAT,
    board_stamp,
    dataset_stamp,
    hub_revision,
    read_stamp,
    read_stamp_bytes,
    run_sha256,
    same_runs,
    stamp_differences,
    stamp_export,
    strip_stamp,
)
from bsard_demo.runs import STAMP_KEY, Run
from bsard_demo.sources import load_hub

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def run_file(tmp_path, sample):
    path = tmp_path / "a.trec"
    path.write_text(sample_run_trec())
    return path


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_evaluate_json_carries_the_run_and_dataset_hashes(tmp_path, real_bsard_dir, capsys):
    run = tmp_path / "r.trec"
    run.write_text("".join(f"1 Q0 {d} {r} {1 / r} t\n" for r, d in enumerate(range(1, 300), 1)))
    assert main(["evaluate", str(run), "--data", str(real_bsard_dir), "--format", "json", "--k", "10", "100"]) == 0
    stamp = json.loads(capsys.readouterr().out)["stamp"]
    assert stamp["runs"] == {"r.trec": sha(run)}
    assert stamp["dataset"]["sha256"] == {"articles.csv": None, "questions_test.csv": sha(real_bsard_dir /
                                                                                          "questions_test.csv")}
    assert stamp["dataset"]["labels_sha256"] == "59ea7bcd706f50b7925a79851faf3ba7cb4ac7f7dfb4c7cd9b023c6926422cb9"
    assert stamp["dataset"]["name"] == real_bsard_dir.name and str(real_bsard_dir.parent) not in json.dumps(stamp)
    assert stamp["split"] == "test" and stamp["ks"] == [10, 100] and stamp["stamp"] == STAMP_FORMAT
    assert stamp["measures"]["recall@100"] == "R@100" and stamp["measures"]["map@10"] == "AP@10"
    assert stamp["measures"]["mrr@100"] == "RR@100" and stamp["bsard_demo"]["version"]


def test_the_hub_commit_the_download_resolved(tmp_path, real_bsard_dir):
    """huggingface_hub returns .../snapshots/<commit>/<file>: the stamp keeps that commit, no path."""
    snapshot = tmp_path / "datasets--maastrichtlawtech--bsard" / "snapshots" / COMMIT
    shutil.copytree(real_bsard_dir, snapshot)

    def download(*, repo_id, filename, repo_type, **kwargs):
        return str(snapshot / filename)

    ds = load_hub(need_corpus=False, download=download, reachable=lambda: True)
    stamp = dataset_stamp(ds, "test")
    assert stamp["revision"] == COMMIT and stamp["kind"] == "hub"
    assert stamp["sha256"]["questions_test.csv"] == sha(real_bsard_dir / "questions_test.csv")
    assert stamp["sha256"]["articles.csv"] is None  # scoring never downloads the corpus
    assert str(tmp_path) not in json.dumps(stamp)
    assert hub_revision("/x/snapshots/abc/questions_test.csv") is None  # not a commit
    # with the corpus, the optional synthetic split's file is hashed too
    pd.DataFrame({"id": range(1, 22634), "article": ["x"] * 22633}).to_csv(snapshot / "articles.csv", index=False)
    shutil.copy(snapshot / "questions_train.csv", snapshot / "questions_synthetic.csv")
    full = load_hub(download=download, reachable=lambda: True)
    synthetic = dataset_stamp(full, "synthetic")
    assert synthetic["revision"] == COMMIT and synthetic["sha256"] == {
        "articles.csv": sha(snapshot / "articles.csv"), "questions_synthetic.csv": sha(real_bsard_dir /
                                                                                        "questions_train.csv")}
    assert dataset_stamp(load_hub(need_corpus=False, download=lambda **kw: str(real_bsard_dir / kw["filename"]),
                                  reachable=lambda: True), "test")["revision"] is None


def test_every_format_reads_back_and_readers_skip_it(sample, run_file):
    board = score_runs(sample, "test", [RunSource.file(run_file)])
    stamp = board_stamp(board, [RunSource.file(run_file)])
    stamp["runs"]["x --> <!-- \n % # , | é"] = "f" * 64  # a hostile run name cannot end the comment
    for fmt, text in (("csv", "run,recall@100\na,0.5\n"), ("markdown", "| run |\n|---|\n| a |\n"),
                      ("latex", "\\begin{tabular}{l}\n\\end{tabular}\n"), ("json", '{"runs": {}}')):
        out = stamp_export(text, fmt, stamp)
        assert read_stamp(out) == json.loads(json.dumps(stamp)), fmt
        if fmt == "json":
            assert json.loads(out)["runs"] == {}
            continue
        assert strip_stamp(out) == text and out.endswith(text), fmt
        marker = {"csv": "# ", "markdown": "<!-- ", "latex": "% "}[fmt]
        head = out[: len(out) - len(text)].splitlines()
        assert all(line.startswith(marker) and line.isascii() for line in head), fmt
        if fmt == "markdown":
            assert all(line.endswith(" -->") and line.count("-->") == 1 for line in head)
    csv = stamp_export("run,recall@100\na,0.5\n", "csv", stamp)
    assert pd.read_csv(io.StringIO(csv), comment="#").to_dict("list") == {"run": ["a"], "recall@100": [0.5]}
    assert stamp_export("aligned table\n", "table", stamp) == "aligned table\n"
    assert read_stamp("run,recall@100\n") is None and read_stamp("{not json") is None
    assert read_stamp("\ufeff" + stamp_export('{"runs": {}}', "json", stamp))["split"] == "test"  # a BOM
    assert read_stamp("\ufeff" + csv)["split"] == "test"


def test_the_score_pages_stamp(sample, run_file):
    """The Score page's stamp (score_ui: board_stamp once, then stamp_export for each download): uploads are
    hashed by their bytes, built-in runs by their TREC text."""
    data = run_file.read_bytes()
    built = Run.from_rankings({"1": ["1", "2"]}, name="BM25")
    sources = [RunSource.upload("up.trec", data), RunSource.built("BM25", built)]
    board = score_runs(sample, "test", sources)
    out = stamp_export("run,x\n", "csv", board_stamp(board, sources, ["recall@100"]))
    stamp = read_stamp(out)
    assert stamp["runs"] == {"up.trec": hashlib.sha256(data).hexdigest(),
                             "BM25": hashlib.sha256(built.to_trec().encode()).hexdigest()}
    assert stamp["measures"] == {"recall@100": "R@100"} and stamp["dataset"]["kind"] == "sample"
    assert stamp["dataset"]["sha256"]["articles.csv"]  # the sample's files, hashed
    assert stamp_export("t\n", "table", board_stamp(board, sources)) == "t\n"
    other = Run.from_rankings({"1": ["2", "1"]})
    assert run_sha256(other) != run_sha256(built) == stamp["runs"]["BM25"]  # each run its own digest


def test_stamps_command_says_what_differs(tmp_path, sample, run_file, capsys):
    outputs = {}
    for name, extra in (("a.json", []), ("b.csv", []), ("c.md", ["--split", "train"]), ("d.tex", ["--k", "10"])):
        fmt = {"json": "json", "csv": "csv", "md": "markdown", "tex": "latex"}[name.split(".")[1]]
        assert main(["evaluate", str(run_file), "--data", "sample", "--format", fmt, *extra]) in (0, 2)
        outputs[name] = tmp_path / name
        outputs[name].write_text(capsys.readouterr().out)
    assert main(["stamps", str(outputs["a.json"]), str(outputs["b.csv"])]) == 0
    assert "same provenance" in capsys.readouterr().out
    assert main(["stamps", str(outputs["a.json"]), str(outputs["c.md"])]) == 3
    out = capsys.readouterr().out
    assert "split: test vs train" in out and "dataset labels_sha256" in out
    assert main(["stamps", str(outputs["b.csv"]), str(outputs["d.tex"])]) == 3
    assert "k values: [100, 200, 500] vs [10]" in capsys.readouterr().out
    other = tmp_path / "other" / "a.trec"
    other.parent.mkdir()
    other.write_text("\n".join(run_file.read_text().splitlines()[1:]) + "\n")  # its best article dropped
    assert main(["evaluate", str(other), "--data", "sample", "--format", "json"]) == 0
    outputs["e.json"] = tmp_path / "e.json"
    outputs["e.json"].write_text(capsys.readouterr().out)
    assert main(["stamps", str(outputs["a.json"]), str(outputs["e.json"])]) == 3
    assert "run a.trec: another ranking" in capsys.readouterr().out
    # the same ranking re-spaced: another file, the same run (exit 0, said)
    spaced = tmp_path / "spaced" / "a.trec"
    spaced.parent.mkdir()
    spaced.write_text(run_file.read_text().replace(" ", "\t"))
    assert main(["evaluate", str(spaced), "--data", "sample", "--format", "json"]) == 0
    outputs["f.json"] = tmp_path / "f.json"
    outputs["f.json"].write_text(capsys.readouterr().out)
    assert main(["stamps", str(outputs["a.json"]), str(outputs["f.json"])]) == 0
    assert "run a.trec: the same ranking, another file" in capsys.readouterr().out
    plain = tmp_path / "plain.csv"
    plain.write_text("run,recall@100\n")
    assert main(["stamps", str(outputs["a.json"]), str(plain)]) == 2
    err = capsys.readouterr().err
    assert "no reproducibility stamp" in err and len(err.splitlines()) == 1
    assert main(["stamps", str(tmp_path / "missing.json"), str(plain)]) == 2


def test_differences_name_each_field():
    a = {"stamp": STAMP_FORMAT, "dataset": {"name": "d", "revision": "r1", "sha256": {"q.csv": "a" * 64}},
         "split": "test", "ks": [100], "bsard_demo": {"version": "1"}, "measures": {"recall@100": "R@100"},
         "runs": {"x": "1" * 64}}
    assert stamp_differences(a, json.loads(json.dumps(a))) == []
    b = {**a, "dataset": {"name": "d", "revision": "r2", "sha256": {"q.csv": "b" * 64}},
         "bsard_demo": {"version": "2"}, "measures": {"recall@100": "R@100", "rprec": "Rprec"},
         "runs": {"y": "2" * 64}}
    lines = stamp_differences(a, b)
    assert "dataset revision: r1 vs r2" in lines and "dataset file q.csv sha256: aaaaaaaaaaaa vs bbbbbbbbbbbb" in lines
    assert "bsard-demo version: 1 vs 2" in lines and "measures in one file only: rprec" in lines
    assert "runs in the first file only: x" in lines and "runs in the second file only: y" in lines
    long = stamp_differences({**a, "split": "s" * 5000, "runs": {f"r{i}" * 50: "0" * 64 for i in range(1000)}}, a)
    assert max(map(len, long)) < 1000 and "and 995 more" in long[-2]


# -- hostile stamps (a review of issue 30): never a crash, never a slow read, every quote bounded --------------

@pytest.mark.parametrize("text", [
    '{"stamp": {"ks": ' + "1" * 5000 + "}}",  # past Python's integer-digit limit
    "[" * 100_000 + "]" * 100_000,  # nesting past the recursion limit
    "# stamp.ks = " + "1" * 5000 + "\n",
])
def test_a_stamp_that_does_not_parse_is_no_stamp(text):
    assert read_stamp(text) in (None, {})


def test_a_long_blank_run_is_read_in_linear_time():
    # the old pattern's lazy group before an optional suffix backtracked quadratically (7 s at 40,000 blanks)
    text = "# stamp.ks = [100]" + " " * 200_000 + "\n# stamp.split = " + " " * 200_000 + "x\nrun\n"
    assert read_stamp(text) == {"ks": [100]}
    assert strip_stamp("<!-- stamp.split = \"test\" -->\n| a |\n") == "| a |\n"


@pytest.mark.parametrize("field, value", [("dataset", [1]), ("bsard_demo", "x"), ("runs", ["a"]),
                                          ("dataset", {"sha256": [{}]}), ("measures", ["x", 1])])
def test_fields_of_the_wrong_type_compare_as_empty(field, value):
    good = {"stamp": "bsard-demo-stamp/1", "runs": {"a": "0" * 64}, "measures": {"rprec": "Rprec"}}
    assert isinstance(stamp_differences({**good, field: value}, good), list)


def test_every_quoted_name_of_a_difference_is_bounded():
    long = "x" * 100_000
    a = {"runs": {long: "a"}, "measures": {long: "R@100", "m": "a"}, "dataset": {"sha256": {long: "a"}}}
    b = {"runs": {long: "b"}, "measures": {long: "R@200", "n": "a"}, "dataset": {"sha256": {long: "b"}}}
    lines = stamp_differences(a, b)
    assert len(lines) >= 4 and max(map(len, lines)) < 300, [len(x) for x in lines]


def test_the_same_rankings_as_trec_and_json_are_the_same_runs(tmp_path, sample, run_file, capsys):
    """Issue 39: two results from the same rankings saved as TREC and as ranx JSON (export-run) exit 0 and say
    so; the stamp carries each run's ranking digest beside its file's sha256."""
    as_json = tmp_path / "a.json"
    assert main(["export-run", str(run_file), "--format", "ranx", "--out", str(as_json)]) == 0
    results = {}
    for path in (run_file, as_json):
        assert main(["evaluate", str(path), "--data", "sample", "--format", "csv"]) == 0
        results[path.suffix] = tmp_path / f"result{path.suffix}.csv"
        results[path.suffix].write_text(capsys.readouterr().out)
    a, b = (read_stamp(results[s].read_text()) for s in (".trec", ".json"))
    assert a["runs"]["a.trec"] != b["runs"]["a.json"] and a["rankings"]["a.trec"] == b["rankings"]["a.json"]
    assert main(["stamps", str(results[".trec"]), str(results[".json"])]) == 0
    assert "run a.trec and a.json: the same ranking, another file" in capsys.readouterr().out
    # another ranking under the same names is a difference
    c = {**b, "rankings": {"a.json": "0" * 64}}
    assert stamp_differences(a, c) == ["runs in the first file only: a.trec", "runs in the second file only: a.json"]
    assert same_runs(a, c) == []


def test_a_parquet_stamp_is_read_from_the_footer_without_a_decoder():
    """read_stamp_bytes finds a parquet export's stamp in its footer by the key and the JSON object after it;
    damaged or hostile footers give no stamp, never an exception."""
    stamp = {"stamp": STAMP_FORMAT, "runs": {"r": "0" * 64}}
    footer = b"\x15\x00" + STAMP_KEY + b"\x18\x40" + json.dumps(stamp).encode() + b"\x00"
    data = b"PAR1" + b"\x00" * 10 + footer + len(footer).to_bytes(4, "little") + b"PAR1"
    assert read_stamp_bytes(data) == stamp
    for bad in (b"PAR1PAR1", b"PAR1" + STAMP_KEY + b'{"stamp": [' * 50_000 + b"\x10\x00\x00\x00PAR1",
                b"PAR1" + STAMP_KEY + b'{"stamp": "x' + b"\xff" * 10 + b"\x20\x00\x00\x00PAR1",
                b"PAR1" + b"\x00" * 20 + b"\xff\xff\xff\xffPAR1"):
        assert read_stamp_bytes(bad) is None
    assert read_stamp_bytes(b'{"stamp": {"split": "test"}}') == {"split": "test"}  # text: read_stamp
