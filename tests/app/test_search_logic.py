"""Logic behind the app's pages: bsard_demo.app.search_page, bsard_demo.app.state and bsard_demo.app.score_page."""
from __future__ import annotations

import gzip
import os
import time

import pandas as pd
import pytest

from _app_helpers import sample_run_trec
from bsard_demo.app.problem_words import PROBLEMS_FR
from bsard_demo.app.render import missed_list

# Wrapped by hand (isort skips it): one name a line would repeat app/ui.py's and test_score_page_model.py's imports.
from bsard_demo.app.score_builtin_runs import builtin_name, builtin_run, builtin_run_text
from bsard_demo.app.score_compare import comparison
from bsard_demo.app.score_drill import drill_down
from bsard_demo.app.score_tables import (
    curve_frame,
    display_metrics,
    filter_categories,
    metrics_frame,
    per_question_frame,
)
from bsard_demo.app.score_uploads import problem_details, problems_frame, score_files
from bsard_demo.app.search_examples import example_questions

from bsard_demo.app.search_page import (NEW, article_codes, column_specs, filter_by_code,  # isort: skip
                                        missed_gold, rank_marker, run_search, search_depth, split_gold_by_code)
from bsard_demo.app.data_words import FolderAccess, source_kind
from bsard_demo.app.menus import dataset_label
from bsard_demo.app.progress_words import progress_fraction, progress_text

from bsard_demo.app.state import (ActiveData, FailureMemo, data_key, dataset_summary,  # isort: skip
                                  get_retriever, is_built, open_data)
from bsard_demo.build_once import BuildOnce
from bsard_demo.dataset import DataError
from bsard_demo.evaluation import evaluate
from bsard_demo.evaluation.measures import column_label, cutoff_columns, extra_columns
from bsard_demo.evaluation.report import display_columns, metrics_table, render_table
from bsard_demo.evaluation.scoring import unique_names
from bsard_demo.retrievers import Hit, RetrieverSpec, build_retriever
from bsard_demo.runs import read_run_bytes
from bsard_demo.sources import DataUnavailable


class FakeRetriever:
    """Ranks a fixed list of article ids (then every other article by id), scores decreasing."""

    def __init__(self, name, first, all_ids):
        self.name = name
        self.order = list(first) + [a for a in sorted(all_ids) if a not in set(first)]
        self.calls = []

    def search(self, question, k=100):
        self.calls.append((question, k))
        return [Hit(a, float(len(self.order) - i)) for i, a in enumerate(self.order[:k])]

    def search_many(self, questions, k=100):
        return [self.search(q, k) for q in questions]


# --------------------------------------------------------------------------- search


@pytest.mark.parametrize("rank,ref,label,kind", [(1, 4, "▲3", "up"), (5, 3, "▼2", "down"), (2, 2, "=", "same"),
                                                  (1, None, NEW, "new")])
def test_rank_marker(rank, ref, label, kind):
    m = rank_marker(rank, ref)
    assert (m.label, m.kind) == (label, kind)


def test_search_depth():
    assert search_depth(10, 22633, False) == 1000
    assert search_depth(10, 220, False) == 220
    assert search_depth(2000, 22633, False) == 2000
    assert search_depth(10, 22633, True) == 22633
    with pytest.raises(ValueError):
        search_depth(0, 10, False)


def test_run_search_columns_markers_gold_and_scores(sample):
    ids = list(sample.articles["id"])
    a, b, c, d, e = ids[:5]
    ref = FakeRetriever("ref", [a, b, c, d], ids)
    other = FakeRetriever("other", [c, a, e, b], ids)
    last = sorted(ids)[-1]  # ranked last by both fakes
    assert last not in (a, b, c, d, e)
    gold = [a, e, last]
    cols = run_search({"R": ref, "O": other}, sample, "question", 4, gold=gold)
    assert [col.name for col in cols] == ["R", "O"]
    r, o = cols
    assert [h.article_id for h in r.hits] == [a, b, c, d] and [h.rank for h in r.hits] == [1, 2, 3, 4]
    assert all(h.marker is None for h in r.hits)  # the reference column has no markers
    assert [h.marker.label for h in o.hits] == ["▲2", "▼1", NEW, "▼2"]
    assert [h.gold for h in o.hits] == [False, True, True, False]
    # hand-computed: O ranks gold a at 2 and e at 3 of 3 gold articles within k=4
    assert o.scores.recall == pytest.approx(2 / 3)
    assert o.scores.ap == pytest.approx((1 / 2 + 2 / 3) / 3)
    assert o.scores.rr == pytest.approx(1 / 2)
    assert r.scores.recall == pytest.approx(1 / 3) and r.scores.rr == 1.0
    assert [m.article_id for m in o.missed] == [last]
    assert o.missed[0].rank == len(ids) and o.missed[0].in_corpus
    assert [m.article_id for m in r.missed] == [e, last]
    # every retriever searched the same depth (the whole sample: it is smaller than the default)
    assert ref.calls == [("question", len(ids))] and o.depth == len(ids)
    hit = r.hits[0]
    row = sample.article(a)
    assert hit.reference == row["reference"] and hit.text == row["article"] and hit.breadcrumb[0] == row["code"]


def test_run_search_reference_column_and_no_gold(sample):
    ids = list(sample.articles["id"])
    x = FakeRetriever("x", ids[:3], ids)
    y = FakeRetriever("y", ids[2::-1], ids)
    cols = run_search({"X": x, "Y": y}, sample, "q", 3, reference="Y")
    assert cols[1].hits[0].marker is None
    assert [h.marker.label for h in cols[0].hits] == ["▲2", "=", "▼2"]
    assert all(h.gold is None for col in cols for h in col.hits)
    assert cols[0].scores is None and cols[0].missed is None
    single = run_search({"X": x}, sample, "q", 3)
    assert all(h.marker is None for h in single[0].hits)


def test_run_search_code_filter_keeps_only_that_code_ranked_from_one(sample):
    codes = article_codes(sample)
    assert codes == sorted(set(sample.articles["code"]) - {""})
    code = codes[1]
    ids = list(sample.articles["id"])
    r = FakeRetriever("r", [], ids)
    cols = run_search({"R": r}, sample, "q", 5, code=code)
    assert [h.rank for h in cols[0].hits] == [1, 2, 3, 4, 5]
    assert all(sample.article(h.article_id)["code"] == code for h in cols[0].hits)
    in_code = [a for a in sorted(ids) if sample.article(a)["code"] == code]
    assert [h.article_id for h in cols[0].hits] == in_code[:5]
    assert r.calls == [("q", len(ids))]  # a filter searches the whole corpus
    assert filter_by_code([Hit(ids[0], 1.0)], sample, None) == [Hit(ids[0], 1.0)]


def test_code_filter_scores_only_the_gold_articles_of_that_code(sample):
    code = article_codes(sample)[1]
    ids = list(sample.articles["id"])
    in_code = [a for a in sorted(ids) if sample.article(a)["code"] == code]
    other = [a for a in sorted(ids) if sample.article(a)["code"] != code]
    assert len(in_code) > 4 and other
    g1, g2, x = in_code[1], in_code[-1], other[0]
    r = FakeRetriever("r", [x, g1], ids)  # x (another code) first overall: the filter drops it
    col = run_search({"R": r}, sample, "q", 3, gold=[x, g1, g2, "nope"], code=code)[0]
    assert [h.article_id for h in col.hits] == [g1, in_code[0], in_code[2]]
    # hand-computed on the 2 gold articles of the code: g1 at rank 1, g2 beyond k=3
    assert (col.scores.recall, col.scores.ap, col.scores.rr) == (0.5, 0.5, 1.0)
    assert (col.scores.n_relevant, col.scores.code, col.scores.k) == (2, code, 3)
    assert [(m.article_id, m.rank) for m in col.missed] == [(g2, len(in_code))]
    assert [(m.article_id, m.rank, m.in_corpus) for m in col.outside] == [(x, None, True), ("nope", None, False)]
    html = missed_list(col.missed, 3, col.depth, col.outside, code)
    assert "Articles pertinents de ce code absents du top 3" in html and f"rang {len(in_code)}" in html
    assert f"id {x}, hors du code filtré" in html and "id nope, absent du corpus" in html
    assert "au-delà du rang" not in html
    assert split_gold_by_code([x, g1, x], sample, code) == ([g1], [x])
    assert split_gold_by_code([x, g1], sample, None) == ([x, g1], [])


def test_code_filter_without_gold_in_that_code_gives_no_score(sample):
    code = article_codes(sample)[1]
    ids = list(sample.articles["id"])
    x = next(a for a in ids if sample.article(a)["code"] != code)
    col = run_search({"R": FakeRetriever("r", [x], ids)}, sample, "q", 3, gold=[x], code=code)[0]
    assert col.scores is None and col.missed == [] and [m.article_id for m in col.outside] == [x]
    html = missed_list(col.missed, 3, col.depth, col.outside, code)
    assert "hors du code filtré" in html and "au-delà" not in html
    plain = run_search({"R": FakeRetriever("r", [x], ids)}, sample, "q", 3, gold=[x])[0]
    assert plain.outside is None and plain.scores.recall == 1.0 and plain.scores.code is None


def test_k_larger_than_the_corpus_shows_everything(sample):
    ids = list(sample.articles["id"])
    cols = run_search({"R": FakeRetriever("r", [], ids)}, sample, "q", 10_000)
    assert len(cols[0].hits) == len(ids)


def test_missed_gold_unknown_article(sample):
    out = missed_gold(["nope", "1"], ["1"], 1, sample)
    assert [(m.article_id, m.rank, m.in_corpus, m.reference) for m in out] == [("nope", None, False, "")]


def test_example_questions_come_from_the_split(sample):
    ex = example_questions(sample, "test")
    q = sample.questions("test")
    assert list(ex["id"]) == list(q["id"]) and list(ex.columns) == ["id", "question", "category", "article_ids"]
    assert example_questions(sample, "nosuchsplit").empty


def test_column_specs():
    specs = column_specs(["bm25", "dense", "hybrid"], encoder="minilm", fusion="weighted", alpha=0.3)
    assert list(specs) == ["BM25", "Dense (minilm)", "Hybride pondéré α=0.3 (minilm)"]
    assert specs["BM25"] == RetrieverSpec("bm25")
    assert specs["Dense (minilm)"].options == {"encoder": "minilm"}
    hybrid = specs["Hybride pondéré α=0.3 (minilm)"].options
    assert hybrid["method"] == "weighted" and hybrid["alpha"] == 0.3
    assert [p.kind for p in hybrid["retrievers"]] == ["bm25", "dense"]
    rrf = column_specs(["hybrid"], fusion="rrf", rrf_k=20)
    assert list(rrf) == ["Hybride RRF k=20 w=1,0.5 (use)"] and list(rrf.values())[0].options["rrf_k"] == 20
    with pytest.raises(ValueError):
        column_specs(["tfidf"])
    with pytest.raises(ValueError):
        column_specs(["hybrid"], fusion="max")


# --------------------------------------------------------------------------- app_state


def test_failure_memo_forgets_after_its_ttl():
    now = [0.0]
    memo = FailureMemo(ttl=10, clock=lambda: now[0])
    err = DataError("x")
    memo.remember("hub", err)
    now[0] = 9
    assert memo.recent("hub") is err
    now[0] = 11
    assert memo.recent("hub") is None


def test_open_data_falls_back_to_the_sample_with_the_reason(sample):
    calls = []

    def load(spec):
        calls.append(spec)
        if spec == "hub":
            raise DataUnavailable("cannot download articles.csv: the hub is unreachable")
        return sample

    memo = FailureMemo()
    data = open_data("hub", load, memo)
    assert data.spec == "sample" and data.requested == "hub" and data.dataset is sample
    assert "hub Hugging Face" in data.fallback_reason and "échantillon fictif" in data.fallback_reason
    assert data.detail == "cannot download articles.csv: the hub is unreachable"
    again = open_data("hub", load, memo)  # remembered: the hub is not tried again
    assert calls == ["hub", "sample", "sample"] and again.fallback_reason == data.fallback_reason
    ok = open_data("sample", load, memo)
    assert ok.fallback_reason is None and ok.spec == "sample"


def test_open_data_default_is_bsard_data(monkeypatch, sample):
    monkeypatch.setenv("BSARD_DATA", "sample")
    assert open_data(None, lambda s: sample).spec == "sample"
    monkeypatch.delenv("BSARD_DATA")
    seen = []
    open_data(None, lambda s: seen.append(s) or sample)
    assert seen == ["hub"]


def test_open_data_bad_folder(tmp_path, sample):
    from bsard_demo.sources import load_dataset

    data = open_data(str(tmp_path / "absent"), lambda s: sample if s == "sample" else load_dataset(s))
    assert data.spec == "sample" and "n'a pas pu être chargé" in data.fallback_reason and \
        "no such folder" in data.detail


def test_data_key_changes_when_a_local_file_changes(tmp_path):
    f = tmp_path / "questions_test.csv"
    f.write_text("id,question,article_ids\n1,q,1\n")
    k1 = data_key(str(tmp_path))
    f.write_text("id,question,article_ids\n1,q,2\n2,r,3\n")
    os.utime(f, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert data_key(str(tmp_path)) != k1
    assert data_key("hub") == ("hub",) and source_kind("hub") == "hub" and source_kind("/x") == "local"


def test_dataset_summary_and_names(sample):
    s = dataset_summary(sample)
    assert s == {"articles": len(sample.articles), "questions_test": len(sample.questions("test")),
                 "questions_train": len(sample.questions("train"))}
    # the name the sidebar shows (menus.dataset_label): a folder a visitor typed, by its path
    free = FolderAccess(free=True)
    assert dataset_label(ActiveData(sample, "sample", "sample"), free) == "Échantillon fictif (démo)"
    assert dataset_label(ActiveData(sample, "/data/bsard", "/data/bsard"), free) == "Dossier local : /data/bsard"


#: The app's French of the library's progress messages as it was worded before steps had codes
#: (by English prefix): the steps' French must be the same, word for word.
_OLD_WORDS = {
    "analysing articles": "analyse des articles", "indexing": "indexation",
    "saving BM25 index": "enregistrement de l'index BM25",
    "loaded cached BM25 index": "index BM25 chargé depuis le cache",
    "saving embeddings": "enregistrement des plongements", "embedding articles": "encodage des articles",
    "embedding questions": "encodage des questions", "loaded cached embeddings": "plongements chargés depuis le cache",
    "loaded BM25 index": "index BM25 chargé", "loaded embeddings": "plongements chargés",
    "searching questions": "recherche des questions",
}


def _old_progress_text(message: str) -> str:
    message = message.replace(" from the index bundle", " depuis les index préconstruits")
    for english, french in _OLD_WORDS.items():
        if message.startswith(english):
            return french + message[len(english):]
    return message


def test_progress_helpers():
    from bsard_demo.progress import STEP_WORDS, Step

    steps = [Step("analysing_articles"), Step("indexing", engine="bm25s"), Step("indexing", engine="rank_bm25"),
             Step("embedding_articles", encoder="use"), Step("embedding_questions", encoder="e5"),
             Step("searching_questions")]
    for kind in ("saving", "loaded_cached", "loaded_bundle"):
        steps += [Step(kind, entry="bm25s", subject="", what="BM25 index"),
                  Step(kind, entry="dense", subject="use", what="embeddings (use)")]
    newer = [Step("fitting_adapter", encoder="use"), Step("fitting_ranker")]  # added since: no older wording
    assert {s.kind for s in steps + newer} == set(STEP_WORDS)
    for step in steps:  # the French comes from the kind and parameters; it is what it always was
        assert progress_text(step) == _old_progress_text(str(step)) != str(step), step
    assert progress_text(newer[0]) == "ajustement de l'adaptateur des questions (use)"
    assert progress_text(newer[1]) == "ajustement du classement appris"
    assert progress_text(Step("embedding_articles", encoder="use")) == "encodage des articles (use)"
    assert progress_text(Step("loaded_bundle", entry="dense", subject="use", what="embeddings (use)")) == \
        "plongements chargés (use) depuis les index préconstruits"
    assert progress_text("something new") == "something new"
    assert progress_text("analysing articles") == "analysing articles"  # a plain text is never parsed
    assert progress_fraction(3, 4) == 0.75 and progress_fraction(5, 4) == 1.0 and progress_fraction(1, 0) == 0.0


def test_hybrid_is_composed_from_shared_parts(sample, tmp_path, monkeypatch):
    monkeypatch.setenv("BSARD_CACHE", str(tmp_path))
    reg = BuildOnce()
    data = ActiveData(sample, "sample", "sample")
    parts = [RetrieverSpec("bm25"), RetrieverSpec("bm25", {"k1": 1.5})]
    spec = RetrieverSpec("hybrid", {"retrievers": parts, "method": "rrf", "rrf_k": 10})
    seen = []
    hybrid = get_retriever(reg, data, spec, progress=lambda d, t, m: seen.append(m))
    assert seen  # the first build reports progress
    assert is_built(reg, data, parts[0]) and is_built(reg, data, parts[1]) and is_built(reg, data, spec)
    bm25 = get_retriever(reg, data, parts[0])
    assert hybrid.retrievers[0] is bm25
    assert get_retriever(reg, data, spec) is hybrid
    hits = hybrid.search("garantie locative", 5)
    assert len(hits) == 5 and hybrid.name.startswith("hybrid rrf k=10")
    # the same hybrid as the library's own assembly (registry.build_retriever), options and all
    direct = build_retriever(spec, sample)
    assert hybrid.name == direct.name and \
        hybrid.search("garantie locative", 50) == direct.search("garantie locative", 50)
    weighted = RetrieverSpec("hybrid", {"retrievers": parts, "method": "weighted", "alpha": 0.8})
    assert get_retriever(reg, data, weighted).retrievers[1] is get_retriever(reg, data, parts[1])
    assert (get_retriever(reg, data, weighted).search("bail", 30)
            == build_retriever(weighted, sample).search("bail", 30))


# --------------------------------------------------------------------------- scoring


def test_unique_names():
    assert unique_names(["a", "b", "a", "a", "a (2)"]) == ["a", "b", "a (2)", "a (3)", "a (2) (2)"]


def test_score_files_matches_evaluate_and_the_cli_table(sample):
    text = sample_run_trec(seed=1)
    board = score_files([("r.trec", text.encode()), ("r.trec", gzip.compress(text.encode()))], sample, "test")
    assert [r.name for r in board.runs] == ["r.trec", "r.trec (2)"]
    assert board.runs[1].file.compressed and all(r.usable for r in board.runs)
    qrels = sample.qrels("test")
    direct = evaluate(qrels, read_run_bytes(text.encode(), "x", qids=qrels.keys()).run)
    assert board.evaluations["r.trec"].means == direct.means
    table = metrics_frame(board)
    assert not board.published and list(table["source"]) == ["this run", "this run"]
    shown = display_metrics(table)
    measures = [column_label(c) for c in display_columns((100, 200, 500), extra_columns())]
    assert list(shown.columns) == [*measures, "manquantes", "inconnues", "source"]
    # the displayed numbers are the CLI table's numbers
    cli_rows = [line.split() for line in render_table(table, "table").splitlines()[2:]]
    for row, (_, values) in zip(cli_rows, shown.iterrows()):
        assert [f"{v:.2f}" for v in values.iloc[:len(measures)]] == row[-len(measures) - 2:-2]
        assert [str(values["manquantes"]), str(values["inconnues"])] == row[-2:]


def test_score_files_blocks_errors_and_reports_lines(sample):
    bad = b"1 Q0 23 1 notanumber tag\n1 Q0 24\n"
    board = score_files([("bad.trec", bad), ("img.png", b"\x89PNG\r\n\x1a\n\x00\x00")], sample)
    assert not any(r.usable for r in board.runs) and board.evaluations == {}
    frame = problems_frame(board.runs[0].file.problems)
    assert list(frame.columns) == ["ligne", "gravité", "problème", "code"]
    assert list(frame["problème"]) == [PROBLEMS_FR["bad_score"], PROBLEMS_FR["bad_field_count"]]  # French
    assert list(frame["code"]) == ["bad_score", "bad_field_count"]
    assert list(frame["ligne"]) == [1, 2] and set(frame["gravité"]) == {"erreur"}
    assert "PNG" in " ".join(problem_details(board.runs[1].file.problems)["message"])


def test_score_files_size_limit(sample):
    board = score_files([("big.trec", b"x" * 2048)], sample, limit_bytes=1024)
    (p,) = list(board.runs[0].file.problems)
    assert p.severity == "error" and "au-delà de la limite" in p.message


def test_per_question_curve_comparison_and_drill_down(sample):
    files = [(f"s{i}.trec", sample_run_trec(seed=i, drop=i).encode()) for i in range(3)]
    board = score_files(files, sample)
    pq = per_question_frame(board, sample.questions("test"))
    n = len(sample.questions("test"))
    assert len(pq) == 3 * n and {"run", "qid", "category", "question", "recall@100"} <= set(pq.columns)
    assert pq.loc[pq["qid"] == "1", "question"].iloc[0] == sample.questions("test").iloc[0]["question"]
    cat = pq["category"].iloc[0]
    assert set(filter_categories(pq, [cat])["category"]) == {cat} and len(filter_categories(pq, [])) == len(pq)
    curve = curve_frame(board)
    assert len(curve) == 3 * 500 and list(curve.columns) == ["run", "k", "recall"]
    last = curve[(curve["run"] == "s0.trec") & (curve["k"] == 100)]["recall"].iloc[0]
    assert last == pytest.approx(board.evaluations["s0.trec"].means["recall@100"])
    cmp = comparison(board, "recall@100").pairs
    assert list(zip(cmp["run_a"], cmp["run_b"])) == \
        [("s0.trec", "s1.trec"), ("s0.trec", "s2.trec"), ("s1.trec", "s2.trec")]
    assert all(cmp["wins"] + cmp["ties"] + cmp["losses"] == n)

    run = board.runs[2].file.run  # s2 leaves out the first two questions
    first = sample.questions("test").iloc[0]
    dd = drill_down(sample, "test", first["id"], run)
    assert not dd.in_run and dd.top == [] and [g.rank for g in dd.gold] == [None] * len(first["article_ids"])
    q = sample.questions("test").iloc[5]
    dd = drill_down(sample, "test", q["id"], run, top=7)
    ranking = run[q["id"]]
    assert [t.article_id for t in dd.top] == list(ranking[:7]) and [t.rank for t in dd.top] == list(range(1, 8))
    for g in dd.gold:
        assert g.rank == (ranking.index(g.article_id) + 1 if g.article_id in ranking else None)
        assert g.reference == sample.article(g.article_id)["reference"]
    assert all(t.gold == (t.article_id in q["article_ids"]) for t in dd.top)
    with pytest.raises(KeyError):
        drill_down(sample, "test", "nope", run)


@pytest.mark.parametrize("query_text", ["question", "question+description"])
def test_builtin_run_is_the_retrievers_ranking_and_the_cli_run(sample, tmp_path, monkeypatch, query_text):
    """A built-in run is a Run scored through the same checks as a file: it equals its TREC text
    read back (rankings, scores, problems, every figure), and that text is the file ``python -m
    bsard_demo run`` writes, byte for byte."""
    from bsard_demo.cli.main import main
    from bsard_demo.retrievers.batch import question_texts

    monkeypatch.setenv("BSARD_CACHE", str(tmp_path / "cache"))
    bm25 = build_retriever(RetrieverSpec("bm25"), sample, cache_root=tmp_path / "cache")
    run = builtin_run(sample, "test", bm25, query_text=query_text)
    blob = builtin_run_text(run)
    name = builtin_name("BM25", query_text)
    rf = read_run_bytes(blob, name, qids=sample.qrels("test").keys())
    assert rf.ok and rf.format == "trec" and rf.tags == run.tags
    assert dict(rf.run) == dict(run) and {q: rf.run.scored(q) for q in run} == {q: run.scored(q) for q in run}
    questions = sample.questions("test")
    text = question_texts(questions, query_text=query_text)[3]
    assert list(run[questions.iloc[3]["id"]]) == [h.article_id for h in bm25.search(text, len(sample.articles))]
    assert set(run) == set(questions["id"])
    # scored as a Run and as its file: the same problems and figures
    board = score_files([("file", blob)], sample, "test", runs=[(name, run)])
    as_file, as_run = board.runs
    assert as_run.name == name and as_run.file.format == "trec"
    assert [p.as_dict() for p in as_run.file.problems] == [p.as_dict() for p in as_file.file.problems]
    assert as_run.evaluation.per_question.equals(as_file.evaluation.per_question)
    # the CLI's run file
    out = tmp_path / "bm25.trec"
    assert main(["run", "--data", "sample", "--no-progress", "--query-text", query_text, "--out", str(out)]) == 0
    assert out.read_bytes() == blob


def test_display_metrics_keeps_published_rows_labelled():
    from bsard_demo.evaluation import Evaluation

    ev = Evaluation(pd.DataFrame(), {c: 0.5 for c in cutoff_columns((100, 200, 500))}, (100, 200, 500), 0, 0)
    shown = display_metrics(metrics_table({"run": ev}, published=True))
    assert "BM25 (published)" in shown.index and shown.loc["BM25 (published)", "R@100"] == 51.33
    assert shown.loc["BM25 (published)", "source"].startswith("publié")
    assert shown.loc["run", "R@100"] == 50.0 and shown.loc["run", "source"] == "ce run"


def test_every_problem_code_has_its_french_sentence():
    from bsard_demo.runs.problems import CHECK_CODES, CODES, QRELS_CODES

    assert set(CODES) | set(CHECK_CODES) | set(QRELS_CODES) <= set(PROBLEMS_FR)  # a new code gets its French words here
