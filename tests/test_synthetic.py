"""The synthetic BSARD-like generator of tests/_synthetic.py (small sizes; speed is benched, not tested)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import _synthetic as synthetic
from bsard_demo.dataset import ARTICLE_COLUMNS, QUESTION_COLUMNS
from bsard_demo.evaluation import evaluate
from bsard_demo.runs import read_run_path
from bsard_demo.sources import load_dataset

pytrec_eval = pytest.importorskip("pytrec_eval")

N_ARTICLES, N_TEST, N_TRAIN = 500, 20, 30
FILES = ("articles.csv", "questions_test.csv", "questions_train.csv")




@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    synthetic.generate(out, seed=0, n_articles=N_ARTICLES, n_test=N_TEST, n_train=N_TRAIN)
    return out


def test_same_seed_same_bytes_other_seed_other_bytes(small, tmp_path):
    synthetic.generate(tmp_path / "again", seed=0, n_articles=N_ARTICLES, n_test=N_TEST, n_train=N_TRAIN)
    synthetic.generate(tmp_path / "other", seed=1, n_articles=N_ARTICLES, n_test=N_TEST, n_train=N_TRAIN)
    for name in FILES:
        assert (small / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
        assert (small / name).read_bytes() != (tmp_path / "other" / name).read_bytes(), name


def test_generate_writes_a_loadable_folder(tmp_path):
    stats = synthetic.generate(tmp_path, seed=0, n_articles=300, n_test=7, n_train=5)
    ds = load_dataset(tmp_path)
    assert len(ds.articles) == 300 and len(ds.questions("test")) == 7 and len(ds.questions("train")) == 5
    assert stats["articles"] == 300 and 0 < stats["words_median"] <= stats["words_p99"] <= stats["words_max"]


def test_schema_loads_with_bsard_columns_and_ids(small):
    header = (small / "articles.csv").read_text(encoding="utf-8").split("\n", 1)[0]
    assert header == ",".join(ARTICLE_COLUMNS)
    for split in ("test", "train"):
        q_header = (small / f"questions_{split}.csv").read_text(encoding="utf-8").split("\n", 1)[0]
        assert q_header == ",".join(QUESTION_COLUMNS)
    ds = load_dataset(small)
    assert list(ds.articles.columns[: len(ARTICLE_COLUMNS)]) == list(ARTICLE_COLUMNS)
    assert list(ds.articles["id"]) == [str(i) for i in range(1, N_ARTICLES + 1)]
    assert ds.split_names == ["test", "train"]
    test, train = ds.questions("test"), ds.questions("train")
    assert (len(test), len(train)) == (N_TEST, N_TRAIN)
    assert set(test["id"]).isdisjoint(train["id"])
    arts = ds.articles
    assert (arts["article"] != "").all() and (arts["code"] != "").all() and (arts["chapter"] != "").all()
    assert (arts["law_type"].isin(["federal", "regional"])).all()
    assert arts["code"].nunique() > 10
    assert all(ref.startswith("Art. ") and ref.endswith(code) for ref, code in zip(arts["reference"], arts["code"]))
    assert (arts[["book", "section"]] == "").any().any()  # some hierarchy cells are empty


def test_gold_ids_exist_and_lie_in_one_code(small):
    ds = load_dataset(small)
    ids = ds.article_ids
    code = dict(zip(ds.articles["id"], ds.articles["code"]))
    counts = []
    for split in ("test", "train"):
        for gold in ds.qrels(split).values():
            assert 1 <= len(gold) <= 10
            assert gold <= ids
            assert len({code[g] for g in gold}) == 1
            counts.append(len(gold))
    assert np.mean(np.array(counts) <= 2) >= 0.4  # skewed to 1–2 gold articles


def test_questions_share_vocabulary_with_their_gold_articles(small):
    ds = load_dataset(small)
    text = dict(zip(ds.articles["id"], ds.articles["article"].str.lower()))
    words = lambda s: set(re.findall(r"\w+", s.lower()))  # noqa: E731
    q = ds.questions("test")
    shared_gold, shared_other = [], []
    rng = np.random.default_rng(0)
    for qid, question in zip(q["id"], q["question"]):
        gold = ds.qrels("test")[qid]
        long_words = {w for w in words(question) if len(w) > 6}
        gold_words = set().union(*(words(text[g]) for g in gold))
        other = str(rng.integers(1, N_ARTICLES + 1))
        shared_gold.append(len(long_words & gold_words))
        shared_other.append(len(long_words & words(text[other])) if other not in gold else 0)
    assert np.mean(shared_gold) > 1.0
    assert np.mean(shared_gold) > 2 * np.mean(shared_other)


def test_length_statistics_for_the_small_size(small):
    ds = load_dataset(small)
    lengths = ds.articles["article"].str.split().str.len().to_numpy()
    stats = synthetic.length_stats(lengths)
    assert stats["words_mean"] == pytest.approx(lengths.mean())
    assert 100 <= stats["words_mean"] <= 165
    assert stats["words_median"] < stats["words_mean"] < stats["words_p99"] <= stats["words_max"]  # long tail
    assert lengths.min() >= synthetic.MIN_WORDS and lengths.max() <= synthetic.MAX_WORDS
    q_words = ds.questions("test")["question"].str.split().str.len() - 1  # the final "?"
    assert 11 <= q_words.mean() <= 19


def test_make_run_reads_back_cleanly_and_scores(small, tmp_path):
    ds = load_dataset(small)
    path = tmp_path / "run.trec"
    depth = 100
    text = synthetic.make_run(ds, path, depth=depth, seed=3, tie_rate=0.1)
    assert path.read_text(encoding="utf-8") == text == synthetic.make_run(ds, depth=depth, seed=3, tie_rate=0.1)
    lines = [line.split() for line in text.splitlines()]
    assert all(len(p) == 6 and p[1] == "Q0" for p in lines)
    per_q: dict[str, list[list[str]]] = {}
    for p in lines:
        per_q.setdefault(p[0], []).append(p)
    assert list(per_q) == list(ds.questions("test")["id"])
    ties = 0
    for rows in per_q.values():
        assert [int(r[3]) for r in rows] == list(range(1, depth + 1))
        docs = [r[2] for r in rows]
        assert len(set(docs)) == depth and set(docs) <= ds.article_ids
        scores = [float(r[4]) for r in rows]
        assert all(a >= b for a, b in zip(scores, scores[1:]))
        ties += sum(a == b for a, b in zip(scores, scores[1:]))
    assert ties > 0

    run = read_run_path(path)
    run = getattr(run, "run", run)
    assert {q: len(run[q]) for q in run} == {q: depth for q in per_q}
    result = evaluate(ds.qrels("test"), run, ks=(10, depth))
    with open(path, encoding="utf-8") as f:
        pt = pytrec_eval.RelevanceEvaluator({q: {d: 1 for d in g} for q, g in ds.qrels("test").items()},
                                            {"recall_10", f"recall_{depth}",
                                             "map_cut_10"}).evaluate(pytrec_eval.parse_run(f))
    for qid, row in result.per_question.iterrows():
        assert row["recall@10"] == pytest.approx(pt[qid]["recall_10"], abs=1e-12)
        assert row[f"recall@{depth}"] == pytest.approx(pt[qid][f"recall_{depth}"], abs=1e-12)
        assert row["map@10"] == pytest.approx(pt[qid]["map_cut_10"], abs=1e-12)
    assert 0 < result.means[f"recall@{depth}"] < 1


def test_make_run_found_rate_bounds(small):
    ds = load_dataset(small)
    qrels = ds.qrels("test")

    def recall(found_rate: float) -> float:
        rankings: dict[str, list[str]] = {}
        for line in synthetic.make_run(qrels, depth=50, n_articles=N_ARTICLES, found_rate=found_rate).splitlines():
            qid, _, doc, *_ = line.split()
            rankings.setdefault(qid, []).append(doc)
        return float(np.mean([len(set(rankings[q]) & g) / len(g) for q, g in qrels.items()]))

    assert recall(0.0) == 0.0
    assert recall(1.0) == 1.0


def test_make_run_rejects_a_depth_beyond_the_corpus():
    with pytest.raises(ValueError, match="depth"):
        synthetic.make_run({"1": ["2"]}, depth=11, n_articles=10)
