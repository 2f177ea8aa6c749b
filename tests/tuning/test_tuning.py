"""Tuning: the vectorised BM25 grid and the fusion grid reproduce the product's retrievers exactly,
score like run + evaluate (and pytrec_eval), and hand back settings that `run` takes as they are."""
from __future__ import annotations

import json
import math
import shlex

import numpy as np
import pandas as pd
import pytest

from bsard_demo.dataset import DataError, Dataset
from bsard_demo.evaluation import evaluate
from bsard_demo.retrievers.batch import question_texts, search_all
from bsard_demo.retrievers.bm25 import BM25Retriever, BM25Settings
from bsard_demo.retrievers.hybrid_specs import hybrid_parts, make_hybrid
from bsard_demo.retrievers.registry import RetrieverSpec, build_retriever
from bsard_demo.sources import load_dataset
from bsard_demo.tuning import (
    B_GRID,
    K1_GRID,
    FusionSetting,
    TermMatrix,
    TuneOptions,
    TuneTarget,
    fusion_grid,
    run_command,
    tune,
    tune_bm25,
    tune_hybrid,
)
from bsard_demo.tuning.fusion import _FusionTable

GRID_POINTS = [(1.0, 0.6, "lucene"), (0.0, 0.0, "lucene"), (8.0, 1.0, "lucene"), (0.5, 0.0, "lucene"),
               (3.5, 0.3, "lucene"), (1.5, 0.7, "robertson"), (0.0, 1.0, "robertson")]


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory):
    """Indexes built here go to a cache of this module's own, not the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BSARD_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def sample():
    return load_dataset("sample")


def _same(ref, mine, rel=1e-9):
    assert len(ref) == len(mine)
    for a, b in zip(ref, mine):
        assert [h.article_id for h in a] == [h.article_id for h in b]
        for x, y in zip(a, b):
            assert math.isclose(x.score, y.score, rel_tol=rel, abs_tol=1e-12)


# -- the BM25 weights and rankings are the retriever's ------------------------------------

@pytest.mark.parametrize("fields,stem", [(None, True), (("article",), False)])
def test_term_matrix_ranks_exactly_like_the_bm25_retriever(sample, fields, stem, tmp_path):
    base = BM25Settings(stem=stem, **({"fields": fields} if fields else {}))
    matrix = TermMatrix.build(sample.articles, base)
    texts = question_texts(sample.questions("train"), False) + question_texts(sample.questions("test"), False)
    texts += ["", "xyzzy introuvable", "bail bail bail préavis"]  # no known term; repeated terms
    queries = matrix.query_matrix([matrix.analyzer.tokens(t) for t in texts])
    for k1, b, method in GRID_POINTS:
        settings = BM25Settings(k1=k1, b=b, method=method, stem=stem, **({"fields": fields} if fields else {}))
        retriever = BM25Retriever.build(sample.articles, settings, use_cache=False)
        for k in (1, 10, 150, len(sample.articles)):
            # bit for bit: the same weights, summed in the same term order
            _same(retriever.search_many(texts, k), matrix.rankings(queries, matrix.weights(k1, b, method), k), rel=0)


def _tie_corpus() -> pd.DataFrame:
    """Articles with identical texts (exact ties), prefixes of each other and nothing shared."""
    texts = ["bail loyer", "bail loyer", "loyer bail", "bail", "bail bail loyer garantie", "garantie",
             "divorce époux", "divorce", "rien à voir ici", "bail loyer", "préavis", "préavis préavis"]
    ids = ["10", "9", "100", "2", "1", "30", "3", "20", "7", "07", "b", "a"]
    return pd.DataFrame({"id": ids, "article": texts})


def test_term_matrix_ties_and_zero_tail_match_the_retriever():
    articles = _tie_corpus()
    queries_text = ["bail loyer", "garantie", "divorce loyer préavis", "inconnu", "bail"]
    matrix = TermMatrix.build(articles, BM25Settings(fields=("article",)))
    queries = matrix.query_matrix([matrix.analyzer.tokens(t) for t in queries_text])
    for k1, b, method in GRID_POINTS:
        settings = BM25Settings(k1=k1, b=b, method=method, fields=("article",))
        retriever = BM25Retriever.build(articles, settings, use_cache=False)
        weights = matrix.weights(k1, b, method)
        for k in range(1, len(articles) + 1):
            _same(retriever.search_many(queries_text, k), matrix.rankings(queries, weights, k), rel=0)


def test_term_matrix_is_bit_identical_on_long_random_questions():
    """Long questions over a small vocabulary: here a different summation order or operation
    order in the weights changes last bits of thousands of scores (checked by mutating them)."""
    rng = np.random.default_rng(7)
    words = [f"w{i}x" for i in range(60)]
    weights = np.r_[np.full(10, 0.05), np.full(50, 0.01)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words, size=n, p=weights))

    articles = pd.DataFrame({"id": [str(i) for i in range(400)],
                             "article": [text(int(rng.integers(3, 80))) for _ in range(400)]})
    questions = [text(int(rng.integers(5, 25))) for _ in range(60)]
    base = dict(fields=("article",), stem=False, stopwords=False)
    matrix = TermMatrix.build(articles, BM25Settings(**base))
    queries = matrix.query_matrix([matrix.analyzer.tokens(q) for q in questions])
    for k1, b, method in GRID_POINTS:
        retriever = BM25Retriever.build(articles, BM25Settings(k1=k1, b=b, method=method, **base), use_cache=False)
        _same(retriever.search_many(questions, 400), matrix.rankings(queries, matrix.weights(k1, b, method), 400),
              rel=0)


def test_term_matrix_rejects_bad_settings(sample):
    matrix = TermMatrix.build(sample.articles)
    with pytest.raises(ValueError, match="k1"):
        matrix.weights(-1, 0.5)
    with pytest.raises(ValueError, match="b must"):
        matrix.weights(1, 1.5)
    with pytest.raises(ValueError, match="no indexable word"):
        TermMatrix.build(pd.DataFrame({"id": ["1"], "article": ["le la les"]}), BM25Settings(fields=("article",)))


# -- the grid -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tuned_map(sample):
    return tune_bm25(sample, "train", measure="map@100", data="sample")


def test_grid_is_the_papers_and_every_point_equals_run_plus_evaluate(sample, tuned_map):
    grid = tuned_map.grid
    assert len(grid) == 17 * 11 and list(grid.columns[:2]) == ["k1", "b"]
    assert sorted(set(grid["k1"])) == list(K1_GRID) == [i * 0.5 for i in range(17)]
    assert sorted(set(grid["b"])) == list(B_GRID) and 0.3 in set(grid["b"])  # 3/10 == float("0.3")
    qrels = sample.qrels("train")
    texts = question_texts(sample.questions("train"), False)
    qids = list(sample.questions("train")["id"])
    for k1, b in [(1.0, 0.6), (0.0, 0.0), (8.0, 1.0), (2.5, 0.4), (tuned_map.best["k1"], tuned_map.best["b"])]:
        retriever = BM25Retriever.build(sample.articles, BM25Settings(k1=k1, b=b), use_cache=False)
        run = {q: [h.article_id for h in hs] for q, hs in zip(qids, retriever.search_many(texts, 500))}
        means = evaluate(qrels, run, ks=[100]).means  # a 500-deep run, as `run` writes it
        row = grid[(grid["k1"] == k1) & (grid["b"] == b)].iloc[0]
        for col in ("map@100", "recall@100", "mrr@100"):
            assert row[col] == pytest.approx(means[col], abs=1e-12)


def test_grid_figure_agrees_with_pytrec_eval(sample, tuned_map):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    k1, b = tuned_map.best["k1"], tuned_map.best["b"]
    retriever = BM25Retriever.build(sample.articles, BM25Settings(k1=k1, b=b), use_cache=False)
    questions = sample.questions("train")
    hits = retriever.search_many(question_texts(questions, False), 100)
    run = {q: {h.article_id: float(len(hs) - i) for i, h in enumerate(hs)} for q, hs in zip(questions["id"], hits)}
    qrels = {q: {a: 1 for a in gold} for q, gold in sample.qrels("train").items() if gold}
    per_q = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut_100", "recall_100"}).evaluate(run)
    assert np.mean([v["map_cut_100"] for v in per_q.values()]) == pytest.approx(tuned_map.best_value, abs=1e-9)
    row = tuned_map.grid[(tuned_map.grid["k1"] == k1) & (tuned_map.grid["b"] == b)].iloc[0]
    assert np.mean([v["recall_100"] for v in per_q.values()]) == pytest.approx(row["recall@100"], abs=1e-9)


def test_best_is_the_maximum_and_ties_go_to_the_start(sample, tuned_map):
    top = tuned_map.grid["map@100"].max()
    assert tuned_map.best_value == top
    row = tuned_map.grid[(tuned_map.grid["k1"] == tuned_map.best["k1"]) & (tuned_map.grid["b"] == tuned_map.best["b"])]
    assert row["map@100"].iloc[0] == top
    assert tuned_map.start == {"k1": 1.0, "b": 0.6}
    # On 220 articles recall@100 is flat over most of the grid: a tie keeps the starting point.
    flat = tune_bm25(sample, "train", k1_grid=[0.5, 1.0, 1.5], b_grid=[0.5, 0.6, 0.7])
    assert flat.grid["recall@100"].nunique() == 1
    assert flat.best == {"k1": 1.0, "b": 0.6} and flat.best_value == flat.start_value
    moved = tune_bm25(sample, "train", settings=BM25Settings(k1=1.5, b=0.7), k1_grid=[0.5, 1.0, 1.5],
                      b_grid=[0.5, 0.6, 0.7])
    assert moved.best == {"k1": 1.5, "b": 0.7}


def test_off_grid_start_is_scored_too(sample):
    result = tune_bm25(sample, "train", settings=BM25Settings(k1=1.2, b=0.75), k1_grid=[1.0], b_grid=[0.6])
    assert len(result.grid) == 1 and result.start == {"k1": 1.2, "b": 0.75}
    retriever = BM25Retriever.build(sample.articles, BM25Settings(k1=1.2, b=0.75), use_cache=False)
    questions = sample.questions("train")
    hits = retriever.search_many(question_texts(questions, False), 100)
    run = {q: [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)}
    want = evaluate(sample.qrels("train"), run, ks=[100]).means["recall@100"]
    assert result.start_value == pytest.approx(want, abs=1e-12)


def test_command_line_is_accepted_by_run_and_builds_the_best_spec(sample, tuned_map):
    from bsard_demo.cli.main import build_parser
    from bsard_demo.cli.retrieval import spec_from_args

    args = shlex.split(tuned_map.command)
    assert args[:4] == ["python", "-m", "bsard_demo", "run"]
    parsed = build_parser().parse_args(args[3:])
    assert parsed.data == "sample" and parsed.split == "test"
    spec = spec_from_args(parsed)
    assert spec.kind == "bm25"
    assert BM25Settings(**spec.options) == BM25Settings(k1=tuned_map.best["k1"], b=tuned_map.best["b"])
    assert BM25Settings(**spec.options) == BM25Settings(**tuned_map.spec.options)
    # non-default analysis shows up as the run options
    command, notes = run_command(RetrieverSpec("bm25", {"k1": 2.5, "b": 0.3, "fields": ("article",), "stem": False,
                                                        "method": "robertson"}), "some dir/x")
    assert not notes
    parsed = build_parser().parse_args(shlex.split(command)[3:])
    assert parsed.data == "some dir/x"
    want = BM25Settings(k1=2.5, b=0.3, fields=("article",), stem=False, method="robertson")
    assert BM25Settings(**spec_from_args(parsed).options) == want
    command, notes = run_command(RetrieverSpec("bm25", {"stopwords": False}))
    assert command is None and notes


def test_summary_and_files(tmp_path, tuned_map):
    text = tuned_map.summary()
    assert "best: k1=" in text and tuned_map.command in text and "map@100" in text
    written = tune_files = tuned_map.write(tmp_path / "out")
    names = {p.name for p in written}
    assert {"grid.csv", "grid.md", "best.json", "heatmap.html"} <= names
    back = pd.read_csv(tmp_path / "out" / "grid.csv")
    assert len(back) == 187 and back["map@100"].max() == pytest.approx(tuned_map.best_value, abs=1e-6)
    md = (tmp_path / "out" / "grid.md").read_text()
    assert md.count("\n| ") >= 17 and "**" in md
    html = (tmp_path / "out" / "heatmap.html").read_text()
    assert "vega" in html and "map@100" in html
    record = json.loads((tmp_path / "out" / "best.json").read_text())
    assert record["best"] == tuned_map.best and record["command"] == tuned_map.command
    assert tune_files == written


def test_measures(sample):
    assert TuneTarget.parse("Recall@100").name == "recall@100"
    assert TuneTarget.parse(" map @ 10 ").columns == ["map@10", "recall@10", "mrr@10"]
    assert TuneTarget.parse("ndcg@10").columns[0] == "ndcg@10"
    for bad in ("precision@10", "recall", "ndcg@20", "recall@0", "recall@-1"):
        with pytest.raises(ValueError):
            TuneTarget.parse(bad)
    result = tune_bm25(sample, "train", measure="ndcg@10", k1_grid=[1.0, 2.0], b_grid=[0.6])
    retriever = BM25Retriever.build(sample.articles, BM25Settings(k1=2.0, b=0.6), use_cache=False)
    questions = sample.questions("train")
    hits = retriever.search_many(question_texts(questions, False), 10)
    run = {q: [h.article_id for h in hs] for q, hs in zip(questions["id"], hits)}
    want = evaluate(sample.qrels("train"), run, ks=[10], extra=("ndcg@10",)).means["ndcg@10"]
    assert result.grid.loc[result.grid["k1"] == 2.0, "ndcg@10"].iloc[0] == pytest.approx(want, abs=1e-12)


def test_bad_data_is_a_clear_error(sample):
    with pytest.raises(DataError, match="no split"):
        tune_bm25(sample, "dev")
    unlabelled = Dataset("x", "local", sample.articles,
                         {"train": sample.questions("train").assign(article_ids=[()] * len(sample.questions("train")))})
    with pytest.raises(DataError, match="no question with a relevant article"):
        tune_bm25(unlabelled, "train")
    with pytest.raises(DataError, match="no article corpus"):
        tune_bm25(Dataset("y", "local", None, {"train": sample.questions("train")}), "train")
    with pytest.raises(ValueError, match="unknown measure"):
        tune_bm25(sample, "train", measure="p@10")


def test_unlabelled_questions_are_left_out_as_evaluate_does(sample):
    train = sample.questions("train")
    partly = train.assign(article_ids=[() if i % 3 == 0 else ids for i, ids in enumerate(train["article_ids"])])
    ds = Dataset("partly", "local", sample.articles, {"train": partly})
    result = tune_bm25(ds, "train", k1_grid=[1.0], b_grid=[0.6], measure="map@100")
    assert result.questions == sum(1 for ids in partly["article_ids"] if ids)
    retriever = BM25Retriever.build(sample.articles, BM25Settings(), use_cache=False)
    hits = retriever.search_many(question_texts(partly, False), 100)
    run = {q: [h.article_id for h in hs] for q, hs in zip(partly["id"], hits)}
    assert result.best_value == pytest.approx(evaluate(ds.qrels("train"), run, ks=[100]).means["map@100"], abs=1e-12)


# -- hybrid ---------------------------------------------------------------------------------

def _bm25_parts(n: int) -> list[RetrieverSpec]:
    parts = [RetrieverSpec("bm25"), RetrieverSpec("bm25", {"fields": ("article",), "stem": False}),
             RetrieverSpec("bm25", {"k1": 2.0, "b": 0.3, "method": "robertson"})]
    return parts[:n]


@pytest.mark.parametrize("n", [2, 3])
def test_fusion_table_ranks_exactly_like_the_hybrid_retriever(sample, n):
    from bsard_demo.retrievers.base import id_ranks

    spec = RetrieverSpec("hybrid", {"retrievers": _bm25_parts(n), "depth": 60})
    parts = [build_retriever(p, sample) for p in hybrid_parts(spec)]
    texts = question_texts(sample.questions("test"), False) + ["", "bail bail"]
    ids = [str(a) for a in sample.articles["id"]]
    settings = fusion_grid(n, rrf_ks=[0.0, 10.0, 60.0], weight_grid=[0.5, 1.0, 3.0], alphas=[0.0, 0.3, 1.0])
    assert len(settings) == 3 * 3 ** (n - 1) + (3 if n == 2 else 3 ** (n - 1))
    for k in (5, 30, 100):
        depth = max(k, 60)  # the hybrid searches its parts to max(k, depth)
        table = _FusionTable([search_all(p, texts, depth) for p in parts], {a: i for i, a in enumerate(ids)})
        for s in settings:
            hybrid = make_hybrid(RetrieverSpec("hybrid", {**spec.options, **s.options()}), parts, corpus_size=len(ids))
            _same(hybrid.search_many(texts, k), table.rankings(s, k, ids, id_ranks(ids)), rel=0)


def test_tune_hybrid_scores_like_the_hybrid_retriever(sample):
    spec = RetrieverSpec("hybrid", {"retrievers": _bm25_parts(2)})
    result = tune_hybrid(sample, "train", spec=spec, measure="map@100")
    assert set(result.grid["method"]) == {"rrf", "weighted"}
    assert len(result.grid) == 5 * 7 + 11
    parts = [build_retriever(p, sample) for p in hybrid_parts(spec)]
    questions = sample.questions("train")
    texts = question_texts(questions, False)
    for _, row in result.grid.sample(6, random_state=0).iterrows():
        options = {"method": row["method"]}
        if row["method"] == "rrf":
            options["rrf_k"] = row["rrf_k"]
        else:
            options["alpha"] = row["alpha"]
        if row["weights"]:
            options["weights"] = [float(w) for w in row["weights"].split(",")]
        hybrid = make_hybrid(RetrieverSpec("hybrid", {**spec.options, **options}), parts,
                             corpus_size=len(sample.articles))
        run = {q: [h.article_id for h in hs] for q, hs in zip(questions["id"], hybrid.search_many(texts, 500))}
        want = evaluate(sample.qrels("train"), run, ks=[100]).means["map@100"]
        assert row["map@100"] == pytest.approx(want, abs=1e-12)
    assert result.best_value == result.grid["map@100"].max()
    assert result.start == {"method": "rrf", "rrf_k": 60.0}


def test_hybrid_command_line_is_accepted_by_run(sample):
    from bsard_demo.cli.main import build_parser
    from bsard_demo.cli.retrieval import spec_from_args

    spec = RetrieverSpec("hybrid", {"retrievers": [RetrieverSpec("bm25", {"k1": 1.5}),
                                                   RetrieverSpec("dense", {"encoder": "use"})]})
    for setting in (FusionSetting("rrf", rrf_k=20.0), FusionSetting("weighted", alpha=0.3),
                    FusionSetting("rrf", rrf_k=60.0)):
        best = RetrieverSpec("hybrid", {**spec.options, **setting.options()})
        command, notes = run_command(best, "sample")
        assert not notes
        built = spec_from_args(build_parser().parse_args(shlex.split(command)[3:]))
        assert built.kind == "hybrid"
        assert built.options["method"] == setting.method
        if setting.method == "rrf":
            assert built.options["rrf_k"] == setting.rrf_k
        else:
            assert built.options["alpha"] == setting.alpha
        got = hybrid_parts(built)
        assert BM25Settings(**got[0].options) == BM25Settings(k1=1.5)
        assert [p.kind for p in got] == ["bm25", "dense"]


def test_tune_dispatches_and_validates(sample):
    options = TuneOptions(retriever="bm25", data="sample", measure="mrr@100", k1_grid=[1.0, 2.0], b_grid=[0.6])
    result = tune(options, sample)
    assert result.kind == "bm25" and result.measure == "mrr@100" and len(result.grid) == 2
    with pytest.raises(ValueError, match="tune handles"):
        tune(TuneOptions(retriever="dense"), sample)
    with pytest.raises(ValueError, match="weights"):
        tune_hybrid(sample, "train", spec=RetrieverSpec("hybrid", {"retrievers": _bm25_parts(2)}),
                    settings=[FusionSetting("rrf", rrf_k=60.0, weights=(1.0, 2.0, 3.0))])
    with pytest.raises(ValueError, match="alpha"):
        tune_hybrid(sample, "train", spec=RetrieverSpec("hybrid", {"retrievers": _bm25_parts(3)}),
                    settings=[FusionSetting("weighted", alpha=0.5)])
