"""``tune`` and ``train`` say what they did on real data (issue 16 item 4): on a small slice of
frlaw-dev (real French code articles and real citizen questions, read from ../shared, never
copied into the repository; skipped when it is absent), the figure each command prints is the
figure its printed ``run`` line gives through ``evaluate``, and ``train``'s summary counts the
pairs and hard negatives that the slice's labels make.

The fine-tuning test runs torch on one thread throughout (``--threads`` covers the fit only): on a busy
2-core machine the dev figure's encoding took 2.2x the CPU on two threads; its run lines too, so that
they encode the questions as the dev figure did."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _small_sample import cut_fields, one_torch_thread
from bsard_demo.cli.main import main
from bsard_demo.evaluation import evaluate
from bsard_demo.runs import read_run_path
from bsard_demo.sources import load_dataset

FRLAW = Path(__file__).resolve().parents[3] / "shared" / "data" / "frlaw-dev"
#: 70 gold articles and 50 distractors: a corpus over 100 articles (R@100 can miss).
TRAIN_QUESTIONS, TEST_QUESTIONS, DISTRACTORS = 12, 6, 50
#: Each article's text, and each of its header fields, cut to its words within these many characters
#: (frlaw-dev's averages: 1,250 and ~620 for the headers together): real text, still several
#: :data:`MAX_SEQ`-token windows an article (median ~80 tokens), for the few tokens ``train``'s dev figure
#: encodes with minilm (~1,700 a CPU second): that encoding was ~55 % of the train test at 1,250 characters,
#: still half of it at 200 and 40 (16,750 tokens; the ten header fields were most of them), 9,976 now.
ARTICLE_CHARS, HEADER_CHARS = 120, 20
#: The fine-tuning's ``--max-seq``: the fit's cost is its texts' tokens (16 a text: half of 32's), a dense
#: build's the corpus' tokens, whatever the window (more windows of 16 tokens, as many tokens).
MAX_SEQ = 16


@pytest.fixture(scope="module")
def real_slice(tmp_path_factory) -> Path:
    """The first questions of each split, every article they cite, and seeded distractors, each
    article cut to :data:`ARTICLE_CHARS`."""
    if not (FRLAW / "articles.csv").is_file():
        pytest.skip(f"frlaw-dev not found at {FRLAW} (../shared is absent)")
    read = lambda name: pd.read_csv(FRLAW / name, dtype=str, keep_default_na=False)  # noqa: E731
    train, test = read("questions_train.csv").head(TRAIN_QUESTIONS), read("questions_test.csv").head(TEST_QUESTIONS)
    articles = read("articles.csv")
    gold = {a.strip() for ids in pd.concat([train, test])["article_ids"] for a in ids.split(",")}
    others = sorted(set(articles["id"]) - gold)
    keep = gold | set(np.random.default_rng(0).choice(others, DISTRACTORS, replace=False))
    folder = tmp_path_factory.mktemp("frlaw-slice")
    kept = cut_fields(articles[articles["id"].isin(keep)], ARTICLE_CHARS, HEADER_CHARS)
    kept.to_csv(folder / "articles.csv", index=False)
    train.to_csv(folder / "questions_train.csv", index=False)
    test.to_csv(folder / "questions_test.csv", index=False)
    return folder


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))


def printed(capsys, argv: list[str]) -> str:
    code = main(argv + ["--no-progress"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def figures_of_run_line(line: str, folder: Path, split: str, tmp_path: Path, capsys) -> dict[str, float]:
    """Run a printed ``use it:`` line (on ``split``) and score its run file as ``evaluate`` does: its means
    by measure (one run for every measure a test reads)."""
    argv = shlex.split(line)[3:]  # after "python -m bsard_demo"
    out = tmp_path / f"{split}-{len(list(tmp_path.iterdir()))}.trec"
    argv[argv.index("--out") + 1] = str(out)
    printed(capsys, argv + (["--split", split] if "--split" not in argv else []))
    ds = load_dataset(str(folder))
    run = read_run_path(out, qids=ds.qrels(split).keys(), corpus_ids=ds.article_ids, k=500)
    assert run.ok and not run.problems, [str(p) for p in run.problems]
    return evaluate(ds.qrels(split), run.run).means


def use_lines(text: str) -> list[str]:
    return [line.split("use it: ", 1)[1] for line in text.splitlines() if line.startswith("use it: ")]


@pytest.mark.parametrize("retriever",
                         [["--retriever", "bm25", "--k1-values", "0.5", "1.2", "--b-values", "0.3", "0.75"],
                                       ["--retriever", "hybrid", "--encoder", "neighbours", "--rrf-k-values", "10",
                                        "60", "--weight-values", "0.5", "1", "--alpha-values", "0.5"]],
                         ids=["bm25", "bm25+neighbours"])
def test_tune_prints_the_figure_its_run_line_gives(real_slice, retriever, tmp_path, capsys):
    text = printed(capsys, ["tune", *retriever, "--data", str(real_slice), "--split", "train", "--measure", "map@100"])
    head = re.search(r"split train \((\d+) questions\), (\d+) settings by map@100", text)
    assert head and int(head[1]) == TRAIN_QUESTIONS, text
    best = float(re.search(r"^best: .*map@100 = ([0-9.]+)$", text, re.M)[1])
    start = float(re.search(r"^start: .*map@100 = ([0-9.]+) ", text, re.M)[1])
    assert best >= start
    [line] = use_lines(text)
    assert round(figures_of_run_line(line, real_slice, "train", tmp_path, capsys)["map@100"], 4) == best


def test_train_summary_counts_its_pairs_and_its_dev_figure_is_the_run_lines(real_slice, tmp_path, capsys):
    ds = load_dataset(str(real_slice))
    pairs = sum(len(set(ids) & ds.article_ids) for ids in ds.questions("train")["article_ids"])
    model = tmp_path / "model"
    with one_torch_thread():  # the train and its run lines (module docstring's note)
        _train_and_its_run_lines(real_slice, ds, pairs, model, tmp_path, capsys)


def _train_and_its_run_lines(real_slice, ds, pairs, model, tmp_path, capsys):
    text = printed(capsys, ["train", "--finetune", "--data", str(real_slice), "--out", str(model), "--epochs", "1",
                            "--batch", "8", "--max-seq", str(MAX_SEQ), "--threads", "1", "--hard-negatives", "1",
                            "--no-onnx"])
    summary = re.search(r"split train: (\d+) pairs and (\d+) BM25 hard negatives from (\d+) questions, .* in (\d+) s",
                        text)
    assert summary, text
    assert (int(summary[1]), int(summary[2]), int(summary[3])) == (pairs, pairs, TRAIN_QUESTIONS)
    dev = re.search(r"scored on test \((\d+) questions\): dense R@100 ([0-9.]+) MAP@100 ([0-9.]+); "
                    r"hybrid with BM25 R@100 ([0-9.]+) MAP@100 ([0-9.]+)", text)
    assert dev and int(dev[1]) == TEST_QUESTIONS, text
    dense, hybrid = use_lines(text)
    for line, (recall, ap) in ((dense, dev.group(2, 3)), (hybrid, dev.group(4, 5))):
        means = figures_of_run_line(line, real_slice, "test", tmp_path, capsys)
        means = {m: round(means[m], 4) for m in ("recall@100", "map@100")}
        assert means == {"recall@100": float(recall), "map@100": float(ap)}


def test_train_by_default_fits_the_adapter_and_its_dev_figure_is_the_run_lines(real_slice, tmp_path, capsys):
    """``train`` with its defaults (the query adapter on ``use``) on real text: the summary counts
    the slice's pairs and questions, and the test-split figures it prints are those of its own
    ``run`` lines (dense, and hybrid with BM25 as the product fuses it)."""
    ds = load_dataset(str(real_slice))
    pairs = sum(len(set(ids) & ds.article_ids) for ids in ds.questions("train")["article_ids"])
    text = printed(capsys, ["train", "--data", str(real_slice), "--out", str(tmp_path / "adapter")])
    summary = re.search(r"fitted a query adapter on use over .*, split train: (\d+) pairs from (\d+) questions, "
                        r"(\d+) full-batch steps", text)
    assert summary and (int(summary[1]), int(summary[2]), int(summary[3])) == (pairs, TRAIN_QUESTIONS, 200), text
    dev = re.search(r"scored on test \((\d+) questions\): dense R@100 ([0-9.]+) MAP@100 ([0-9.]+); "
                    r"hybrid with BM25 R@100 ([0-9.]+) MAP@100 ([0-9.]+)", text)
    assert dev and int(dev[1]) == TEST_QUESTIONS, text
    dense, hybrid = use_lines(text)
    assert "--retriever dense" in dense and "--retriever hybrid" in hybrid
    for line, (recall, ap) in ((dense, dev.group(2, 3)), (hybrid, dev.group(4, 5))):
        means = figures_of_run_line(line, real_slice, "test", tmp_path, capsys)
        means = {m: round(means[m], 4) for m in ("recall@100", "map@100")}
        assert means == {"recall@100": float(recall), "map@100": float(ap)}
