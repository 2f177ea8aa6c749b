"""bsard_demo.evaluation.checks: the BSARD-aware checks wired to a read run file, as the CLI and the Score
page use them (one function for both)."""
from __future__ import annotations

import pandas as pd

from bsard_demo.dataset import Dataset
from bsard_demo.evaluation.checks import (
    SplitContext,
    check_near_random,
    check_run_file,
    finding_text,
    problem_code,
    problem_record,
)
from bsard_demo.runs import read_run_bytes


def trec(rankings) -> bytes:
    return "".join(f"{q} Q0 {d} {r} {100 - r} t\n"
                   for q, docs in rankings.items() for r, d in enumerate(docs, 1)).encode()


def read(sample, blob, split="test"):
    qrels = sample.qrels(split)
    return read_run_bytes(blob, "r.trec", qids=qrels.keys(), corpus_ids=sample.article_ids, k=10)


def test_context_holds_the_other_splits_question_ids(sample):
    ctx = SplitContext.of(sample, "test")
    assert ctx.split == "test" and ctx.qrels == sample.qrels("test") and ctx.corpus_ids == sample.article_ids
    assert set(ctx.other_splits) == {"train"} and ctx.other_splits["train"] == set(sample.questions("train")["id"])


def test_findings_become_coded_file_warnings_once(sample):
    qrels = sample.qrels("test")
    shifted = {q: [str(int(d) - 1) for d in sorted(g, key=int)] for q, g in qrels.items()}
    rf = read(sample, trec(shifted))
    before = list(rf.problems)
    findings = check_run_file(rf, SplitContext.of(sample, "test"))
    assert [f.code for f in findings] == ["ids_shifted"]
    added = [p for p in rf.problems if p not in before]
    assert len(added) == 1
    (p,) = added
    assert (p.severity, p.line, problem_code(p)) == ("warning", None, "ids_shifted")
    assert p.message == finding_text(findings[0])
    assert problem_record(p) == {"severity": "warning", "code": "ids_shifted", "line": None, "message": p.message}


def test_a_clean_run_and_an_unusable_file_get_nothing(sample):
    qrels = sample.qrels("test")
    clean = read(sample, trec({q: sorted(g, key=int) for q, g in qrels.items()}))
    n = len(clean.problems)
    assert check_run_file(clean, SplitContext.of(sample, "test")) == [] and len(clean.problems) == n
    bad = read(sample, b"not a run at all\n")
    assert bad.run is None and check_run_file(bad, SplitContext.of(sample, "test")) == []


def test_a_perfect_run_on_a_tiny_corpus_is_not_near_random():
    """Two questions over three articles: chance alone hits 33 % ± 33 %, so no run could beat the
    3-sigma bound; a run hitting every question is not called random (it once was)."""
    qrels = {"10": frozenset({"2"}), "11": frozenset({"3"})}
    run = {"10": ("2", "1", "3"), "11": ("3", "2", "1")}
    assert check_near_random(run, qrels, corpus_ids={"1", "2", "3"}) is None
    articles = pd.DataFrame({"id": ["1", "2", "3"], "article": ["a", "b", "c"]})
    questions = pd.DataFrame({"id": ["10", "11"], "question": ["x", "y"], "article_ids": [("2",), ("3",)],
                              "category": ["", ""], "subcategory": ["", ""], "extra_description": ["", ""]})
    ds = Dataset(name="tiny", kind="local", articles=articles, splits={"test": questions})
    rf = read_run_bytes(trec(run), "r.trec", qids=qrels.keys(), corpus_ids=ds.article_ids, k=3)
    assert check_run_file(rf, SplitContext.of(ds, "test")) == []


def test_a_distance_run_read_as_similarities_is_not_also_called_random(sample):
    """Read the wrong way round a good distance run ranks its gold articles last, so it scores like
    chance; the reader's ``scores_ascending`` says why, and ``near_random`` (whose hint points at
    the id space and the split) is not added on top. Read as distances it is clean."""
    qrels = sample.qrels("test")
    others = [a for a in sorted(sample.article_ids, key=int)]
    rankings = {q: sorted(g, key=int) + [a for a in others if a not in g][:60] for q, g in qrels.items()}
    blob = "".join(f"{q} Q0 {d} {r} {r / 10:.1f} t\n"
                   for q, docs in rankings.items() for r, d in enumerate(docs, 1)).encode()
    ctx = SplitContext.of(sample, "test")
    wrong = read_run_bytes(blob, "d.trec", qids=qrels.keys(), corpus_ids=sample.article_ids, k=100)
    assert "scores_ascending" in [p.code for p in wrong.problems]
    assert check_near_random(wrong.run, qrels, corpus_ids=sample.article_ids) is not None  # what it would say
    assert check_run_file(wrong, ctx) == [] and "near_random" not in [p.code for p in wrong.problems]
    right = read_run_bytes(blob, "d.trec", qids=qrels.keys(), corpus_ids=sample.article_ids, k=100,
                           lower_is_better=True)
    assert check_run_file(right, ctx) == []
    assert not [p for p in right.problems if p.code in ("scores_ascending", "near_random")]
