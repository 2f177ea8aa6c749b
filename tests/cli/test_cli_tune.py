"""The tune command: BM25 and hybrid on the sample, its output files, and one-line errors."""
from __future__ import annotations

import json
import shlex

import pytest

from _small_sample import cache_copy
from _tiny_corpus import run_cli
from bsard_demo.cli.common import OneLineParser
from bsard_demo.cli.retrieval import add_run_parser, spec_from_args
from bsard_demo.retrievers import RetrieverSpec
from bsard_demo.retrievers.bm25 import BM25Settings
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.tuning.result import run_command


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))


def test_tune_bm25_prints_the_best_and_a_run_command_that_works(tmp_path, capsys):
    out = tmp_path / "tuned"
    assert run_cli("tune", "--data", "sample", "--measure", "map@100", "--out", str(out), "--no-progress") == 0
    printed = capsys.readouterr().out
    assert "best: k1=" in printed and "map@100" in printed
    command = next(line.split("use it: ", 1)[1] for line in printed.splitlines() if line.startswith("use it: "))
    record = json.loads((out / "best.json").read_text())
    assert record["command"] == command and record["settings_tried"] == 187
    assert {p.name for p in out.iterdir()} >= {"grid.csv", "grid.md", "best.json", "heatmap.html"}
    run_file = tmp_path / "run.trec"
    argv = shlex.split(command)[3:]
    argv[argv.index("--out") + 1] = str(run_file)
    assert run_cli(*argv, "--no-progress") == 0
    assert run_file.stat().st_size > 0
    parser = OneLineParser(prog="x")
    add_run_parser(parser.add_subparsers(dest="command"))
    spec = spec_from_args(parser.parse_args(argv))
    assert BM25Settings(**spec.options) == BM25Settings(k1=record["best"]["k1"], b=record["best"]["b"])


def test_tune_hybrid_of_bm25_and_use_on_a_small_grid(capsys, tmp_path, sample_use_index):
    cache_copy(sample_use_index, tmp_path / "cache")  # BSARD_CACHE (_private_cache): use's embeddings stored
    code = run_cli("tune", "--retriever", "hybrid", "--data", "sample", "--rrf-k-values", "10", "60",
                   "--weight-values", "0.5", "1", "--alpha-values", "0.5", "--no-progress")
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "tuned hybrid" in printed and "5 settings" in printed and \
        "use it: python -m bsard_demo run --retriever hybrid" in printed


@pytest.mark.parametrize("argv,message", [
    (["--retriever", "dense"], "no settings to grid-search"),
    (["--measure", "precision@5"], "unknown measure"),
    (["--split", "dev"], "no split 'dev'"),
    (["--b-values", "1.5"], "b must be between 0 and 1"),
    (["--k1-values", "-1"], "k1 must be >= 0"),
])
def test_errors_are_one_line(argv, message, capsys):
    assert run_cli("tune", "--data", "sample", "--no-progress", *argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("bsard_demo tune: ")


def _behaviour(spec):
    """What a hybrid spec does: its parts, method and resolved weights (no weights: equal; a
    weighted fusion of two by alpha: alpha, 1 - alpha; a weighted sum is scale-free)."""
    from bsard_demo.retrievers.hybrid_specs import hybrid_parts

    def part(p):  # a dense part without an encoder uses the default one
        return RetrieverSpec("dense", {"encoder": "use", **p.options}).key() if p.kind == "dense" else p.key()

    o, parts = spec.options, [part(p) for p in hybrid_parts(spec)]
    method = o.get("method", "rrf")
    if method == "rrf":
        return parts, method, float(o.get("rrf_k", 60)), [float(w) for w in o.get("weights") or [1] * len(parts)]
    w = o.get("weights")
    if w is None:
        a = float(o.get("alpha", 0.5))
        w = [a, 1 - a] if len(parts) == 2 else [1] * len(parts)
    return parts, method, [float(x) / sum(map(float, w)) for x in w], o.get("normalisation", "minmax")


@pytest.mark.parametrize("spec", [
    RetrieverSpec("hybrid",
                  {"retrievers": [RetrieverSpec("bm25"), RetrieverSpec("dense")], "method": "rrf", "rrf_k": 60.0}),
    RetrieverSpec("hybrid",
                  {"retrievers": [RetrieverSpec("bm25"), RetrieverSpec("dense")], "method": "rrf", "rrf_k": 10.0,
                             "weights": [1.0, 2.0]}),
    RetrieverSpec("hybrid",
                  {"retrievers": [RetrieverSpec("bm25", {"k1": 1.5}), RetrieverSpec("dense", {"encoder": "e5"}),
                                            RetrieverSpec("dense", {"encoder": "use"})], "method": "rrf",
                   "rrf_k": 60.0}),
    hybrid_spec(), hybrid_spec("use,e5"), hybrid_spec("e5,use", weights="1,0.5,1", rrf_k=0),
    hybrid_spec(method="weighted", alpha=0.8), hybrid_spec(method="weighted"),
    hybrid_spec("use,e5", method="weighted", weights="2,1,0"),
], ids=lambda s: s.key()[:60])
def test_tuned_hybrid_command_rebuilds_the_same_fusion(spec):
    """The ``use it:`` line of a tuned hybrid, parsed by ``run``, gives back what was tuned,
    including equal weights now that ``run``'s default weighs a zero-shot encoder 0.5."""
    command, notes = run_command(spec, "sample")
    assert command is not None, notes
    parser = OneLineParser(prog="x")
    add_run_parser(parser.add_subparsers(dest="command"))
    assert _behaviour(spec_from_args(parser.parse_args(shlex.split(command)[3:]))) == _behaviour(spec)
