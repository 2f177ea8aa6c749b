"""The published results table (bsard_demo.evaluation.anchors): its schema, provenance of every shown
figure, MTEB v1 as a hit rate, the paper's baselines shared with the run tables, and the CLI."""
from __future__ import annotations

import csv
import io
import json
import math
import random
import re

import pandas as pd
import pytest

from bsard_demo.cli.main import main
from bsard_demo.evaluation import anchors as A, evaluate
from bsard_demo.evaluation.report import metrics_table
from bsard_demo.runs import Run


def test_every_anchor_has_the_schema_and_a_known_state():
    assert A.COLUMNS == ("system", "measure", "value", "paper", "venue", "url", "where", "trained_on",
                         "evaluated_on", "read", "read_in", "note")
    assert len(A.ANCHORS) == len({(a.system, a.measure) for a in A.ANCHORS})  # one figure per system and measure
    for a in A.ANCHORS:
        assert a.measure in A.MEASURES and a.read in A.READ_STATES
        for name in ("system", "paper", "venue", "url", "where", "trained_on", "evaluated_on", "read_in"):
            assert isinstance(getattr(a, name), str) and getattr(a, name).strip(), (a.system, name)
        assert a.url.startswith("https://")


def test_every_shown_figure_was_read_and_says_where():
    shown = [a for a in A.ANCHORS if a.shown]
    assert len(shown) >= 9
    for a in shown:
        assert a.read in (A.READ_SOURCE, A.READ_LISTING)
        assert "https://" in a.read_in
        assert isinstance(a.value, float) and 0 < a.value < 100 and math.isfinite(a.value)
    for a in A.ANCHORS:
        if a.read == A.NOT_READ:  # a system whose figures could not be read is listed without one
            assert a.value is None and not a.shown


def test_qabisar_table_1_as_read_in_the_paper():
    """QABISAR's Table 1 (BSARD test), read in a copy of the paper: its rows, MRP under R-Prec, MAP without a
    cut-off, each figure naming the paper, the table and where it was read."""
    table = {("QABISAR", "recall@100"): 83.7, ("QABISAR", "recall@200"): 87.9, ("QABISAR", "recall@500"): 91.3,
             ("QABISAR", "map"): 43.1, ("QABISAR", "rprec"): 35.6,
             ("BM25 (in QABISAR)", "recall@100"): 49.3, ("BM25 (in QABISAR)", "rprec"): 13.6,
             ("BE w/o Hier. (in QABISAR)", "map"): 36.4, ("BE (in QABISAR)", "recall@500"): 88.7,
             ("BE+GE-Stat. (in QABISAR)", "recall@100"): 82.3, ("BE+GE-Stat. (in QABISAR)", "rprec"): 34.8}
    figures = {(a.system, a.measure): a for a in A.ANCHORS}
    for key, value in table.items():
        a = figures[key]
        assert a.value == value and a.shown and a.read == A.READ_SOURCE, a
        assert a.paper == A.QABISAR_PAPER and "coling-main.100" in a.url and a.where.startswith("Table 1")
        assert "page" in a.where and "coling-main.100.pdf" in a.read_in
    qabisar = [a for a in A.ANCHORS if a.paper == A.QABISAR_PAPER]
    assert len(qabisar) == 25 and not any(a.measure.startswith("mrr") for a in qabisar)  # MRP is not MRR
    assert {a.measure for a in qabisar} == {"recall@100", "recall@200", "recall@500", "map", "rprec"}


def test_gdsr_and_the_bsard_papers_own_table_are_not_shown_unread():
    """G-DSR's table and the BSARD paper's MAP@100/MRR@100 could not be read: listed, no figure; none of the
    G-DSR figures of a secondary note appears."""
    assert not {a.value for a in A.ANCHORS if a.value is not None} & {84.3, 90.4, 93.1, 47.1}
    gdsr = [a for a in A.ANCHORS if a.system == "G-DSR"]
    assert gdsr and all(a.read == A.NOT_READ and a.value is None for a in gdsr)
    for system in A.paper_baselines():
        for measure in ("map@100", "mrr@100"):
            (a,) = [a for a in A.ANCHORS if a.system == system and a.measure == measure]
            assert a.read == A.NOT_READ and a.value is None and not a.shown


def test_mteb_v1_figures_are_hit_rates_never_recall():
    mteb = [a for a in A.ANCHORS if a.venue == "MTEB"]
    assert mteb
    for a in mteb:
        assert a.measure in A.MTEB_V1_MEASURES and not a.measure.startswith("recall")
        assert "one gold article" in a.evaluated_on and "2906" in a.evaluated_on
        assert a.read == A.READ_SOURCE and "embeddings-benchmark/results" in a.read_in
    assert A.LABELS["hit@100"].startswith("Hit@100")
    frame = A.anchors_frame()
    for system in {a.system for a in mteb}:
        assert all(pd.isna(frame.loc[system, c]) for c in frame.columns if c.startswith("recall@"))
        assert frame.loc[system, "hit@100"] > 0
    assert any("hit rate, not recall" in n for n in A.NOTES)
    assert any("1314" in n and "5092" in n for n in A.NOTES)


def test_anchors_frame_is_what_the_page_needs():
    frame = A.anchors_frame((100, 200, 500))
    assert frame.index.name == "system"
    assert list(frame.columns) == ["recall@100", "recall@200", "recall@500", "map", "rprec", "hit@100",
                                   "ndcg@10 (one gold)", "paper", "venue", "trained_on", "evaluated_on", "read",
                                   "read_in"]  # no MAP@100/MRR@100 column: none of those figures was read
    assert frame.loc["QABISAR", "rprec"] == pytest.approx(0.356) and pd.isna(frame.loc["BM25", "rprec"])
    assert frame.loc["BM25", "recall@100"] == pytest.approx(0.5133)
    assert "G-DSR" not in frame.index  # nothing read, nothing shown
    full = A.anchors_frame((100,), shown_only=False)
    assert "recall@200" not in full.columns and full.loc["G-DSR", "read"] == A.NOT_READ
    assert pd.isna(full.loc["G-DSR", "recall@100"])
    measures = [c for c in frame.columns if "@" in c]
    values = frame[measures].stack().dropna()
    assert len(values) and ((values > 0) & (values < 1)).all()  # fractions, as the run tables


def _evaluation_of_a_random_run(qrels):
    rnd = random.Random(0)
    docs = sorted({d for g in qrels.values() for d in g})
    ranked = {q: rnd.sample(docs, min(50, len(docs))) for q in qrels}
    return evaluate(qrels, ranked, ks=(100, 200, 500))


def test_the_run_tables_published_rows_are_the_anchors_paper_rows():
    qrels = {"1": frozenset({"a"}), "2": frozenset({"b", "c"})}
    table = metrics_table({"run": _evaluation_of_a_random_run(qrels)}, published=True)
    baselines = A.paper_baselines((100, 200, 500))
    assert set(baselines) == {"BM25", "siamese bi-encoder", "two-tower bi-encoder"}
    for system, values in baselines.items():
        for column, value in values.items():
            assert table.loc[f"{system} (published)", column] == value
            (anchor,) = [a for a in A.ANCHORS if a.system == system and a.measure == column]
            assert value == anchor.value / 100
    assert set(table.loc[[f"{s} (published)" for s in baselines], "source"]) == {A.PUBLISHED_SOURCE}


def test_cli_anchors_table_fits_100_columns_and_shows_every_figure(capsys):
    assert main(["anchors"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= 100
    cells = lambda line: re.split(r"\s{2,}", line.strip())  # noqa: E731
    for a in A.ANCHORS:  # every figure in its system's row, under its measure's header, in its paper's block
        i = next(n for n, x in enumerate(lines) if x.startswith(a.system + "  "))
        header = next(lines[n] for n in range(i, -1, -1) if lines[n].startswith("system "))
        cell = cells(lines[i])[cells(header).index(A.SHORT_LABELS[a.measure])]
        assert cell == (f"{a.value:.2f}" if a.shown else "not shown"), a
        block = "\n".join(lines[:i]).split("\n\n")[-1]
        assert " ".join(block.split()).startswith(a.paper), a  # wrapped
    for paper in {a.paper for a in A.ANCHORS}:
        head = out[out.index(paper[:30]):]
        assert "read (" in head.split("\nsystem")[0] or "not shown (" in head.split("\nsystem")[0]
    assert "R-Prec" in out and "MRR" not in out.split("Santosh")[1].split("\n\n")[0]
    assert "hit rate, not recall" in out


def test_cli_anchors_full_provenance_in_json_csv_and_left_aligned_markdown(capsys):
    assert main(["anchors", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["anchors"] == A.anchors_records() and data["notes"] == list(A.NOTES)
    assert main(["anchors", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert tuple(rows[0]) == A.COLUMNS and len(rows) == len(A.ANCHORS)
    assert main(["anchors", "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| system | measure | value % |")
    assert lines[1] == "|---|---|---:|---|---|---|---|---|"  # text left, the value right
    for a in A.ANCHORS:
        assert any(x.startswith(f"| {a.system} | {A.LABELS[a.measure]} |") and a.read_in[:40] in x for x in lines)


def test_evaluate_anchors_on_the_real_test_split(tmp_path, real_bsard_dir, real_bsard, capsys):
    qrels = real_bsard.qrels("test")
    rnd = random.Random(1)
    docs = sorted({d for g in qrels.values() for d in g})
    run = Run.from_scores({q: {d: rnd.random() for d in rnd.sample(docs, 100)} for q in qrels})
    path = tmp_path / "r.trec"
    path.write_text(run.to_trec("t"))
    assert main(["evaluate", str(path), "--data", str(real_bsard_dir), "--anchors"]) == 0
    out = capsys.readouterr().out
    assert "r.trec" in out and "published results (python -m bsard_demo anchors):" in out
    assert "Hit@100 (MTEB v1)" in out and "intfloat/multilingual-e5-small" in out
    assert main(["evaluate", str(path), "--data", str(real_bsard_dir), "--anchors", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "r.trec" in data["runs"] and data["anchors"]["anchors"] == A.anchors_records()
    assert main(["evaluate", str(path), "--data", str(real_bsard_dir), "--anchors", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert "hit@100" not in captured.out and "anchors --format csv" in captured.err  # one table per CSV
    assert main(["evaluate", str(path), "--data", str(real_bsard_dir), "--anchors", "--format", "markdown"]) == 0
    assert "| system | measure | value % |" in capsys.readouterr().out
    # another split: said, not shown
    assert main(["evaluate", str(path), "--data", str(real_bsard_dir), "--split", "train", "--anchors"]) == 0
    captured = capsys.readouterr()
    assert "published results" not in captured.out and "not BSARD's test split" in captured.err
