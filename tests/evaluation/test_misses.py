"""Where misses land (bsard_demo.evaluation.misses): a hand-made corpus with every class and missing levels,
the 2021 layout and a corpus without any header, random corpora against a naive reference written here,
and a real BM25 run on frlaw-dev through ``evaluate --misses`` (its table, its JSON and its file)."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import Phase, given, settings, strategies as st

from bsard_demo.cli import evaluate as cli_evaluate, retrieval as cli_retrieval
from bsard_demo.cli.main import main
from bsard_demo.dataset import Dataset, normalize_articles
from bsard_demo.evaluation.misses import (
    CLASSES,
    LINE_COLUMNS,
    WINDOW,
    Hierarchy,
    board_misses,
    hierarchy_of,
    misses_table,
    where_misses_land,
)
from bsard_demo.evaluation.scoring import RunSource, score_runs
from bsard_demo.evaluation.stamp import read_stamp, sha256_file, strip_stamp
from bsard_demo.runs import Run, read_run_path
from bsard_demo.sources import load_dataset

FRLAW = Path(__file__).resolve().parents[3] / "shared" / "data" / "frlaw-dev"
HEADERS = ("code", "book", "part", "act", "chapter", "section", "subsection")


def naive(articles: pd.DataFrame, qrels, run, ks, window: int = WINDOW) -> pd.DataFrame:
    """The classes written out from the definition, one miss and one retrieved article at a time."""
    cols = [c for c in HEADERS if c in articles.columns]
    rec = {str(r["id"]): {c: str(r[c]).strip() for c in cols}  # rows as dicts: iterrows took 6 of frlaw-dev's 12 s
           for r in articles[["id", *cols]].to_dict("records")}
    path = {a: tuple(v[c] for c in cols) for a, v in rec.items()}
    position, seen = {}, {}
    for a in rec:  # corpus order within a section (an article without header: a section of its own)
        key = path[a] if any(path[a]) else ("own", a)
        path[a] = key
        position[a] = seen[key] = seen.get(key, -1) + 1

    def same(g, d, upto, own):
        up = [c for c in HEADERS[:HEADERS.index(upto) + 1] if c in cols]
        return any(rec[g].get(c) for c in own) and all(rec[g][c] == rec[d][c] for c in up)

    def cls(g, d):
        if path[g] == path[d] and abs(position[g] - position[d]) <= window:
            return "section"
        if same(g, d, "chapter", ("chapter",)):
            return "chapter"
        if same(g, d, "act", ("book", "part", "act")):
            return "book"
        if same(g, d, "code", ("code",)):
            return "code"
        return "elsewhere"

    rows = []
    order = {a: i for i, a in enumerate(rec)}
    for qid, gold in qrels.items():
        gold = sorted(set(gold), key=lambda g: (order.get(g, len(order)), g))
        ranking = list(dict.fromkeys(run.get(qid, ())))
        for k in sorted(set(ks)):
            top = ranking[:k]
            for g in gold:
                if g in top:
                    continue
                if g not in rec:
                    rows.append((qid, k, g, "unknown", "", None))
                    continue
                best = ("elsewhere", "", None)
                for rank, d in enumerate(top, start=1):
                    if d in rec and CLASSES.index(cls(g, d)) < CLASSES.index(best[0]):
                        best = (cls(g, d), d, rank)
                rows.append((qid, k, g, *best))
    return pd.DataFrame(rows, columns=list(LINE_COLUMNS))


def as_records(frame: pd.DataFrame) -> list[tuple]:
    return [(q, int(k), a, c, n, None if pd.isna(r) else int(r)) for q, k, a, c, n, r in
            frame[list(LINE_COLUMNS)].itertuples(index=False)]


def hand_corpus() -> pd.DataFrame:
    rows = [dict(id=str(i), article="t", code="A", book="B1", chapter="C1", section="S1") for i in range(1, 9)]
    rows += [dict(id=str(i), article="t", code="A", book="B1", chapter="C2", section="S2") for i in (9, 10)]
    rows += [dict(id="11", article="t", code="A", book="B2", chapter="C1", section="S1"),  # same names, other book
             dict(id="12", article="t", code="Z", book="", chapter="", section=""),  # no book, chapter, section
             dict(id="13", article="t", code="A", book="", chapter="", section=""),
             dict(id="14", article="t", code="", book="", chapter="", section="")]  # no header at all
    return normalize_articles(pd.DataFrame(rows))


def test_every_class_on_a_hand_made_corpus():
    h = Hierarchy(hand_corpus())
    qrels = {"q": ["2", "6", "10", "11", "12", "99", "14", "2"], "m": ["1"], "none": []}
    run = {"q": ["1", "9", "x", "13", "5", "12", "14"], "other": ["1"]}
    m = where_misses_land(h, qrels, run, [5, 1, 2])
    at = lambda k: {a: (c, n, r) for q, kk, a, c, n, r in as_records(m.lines) if kk == k and q == "q"}  # noqa: E731
    assert at(1) == {"2": ("section", "1", 1),  # 1 article away in S1
                     "6": ("chapter", "1", 1),  # 5 away in S1: farther than WINDOW, same chapter
                     "10": ("book", "1", 1),  # chapter C2 of the same book
                     "11": ("code", "1", 1),  # chapter "C1", section "S1" of another book: only the code
                     "12": ("elsewhere", "", None), "99": ("unknown", "", None),
                     "14": ("elsewhere", "", None)}
    assert at(2)["10"] == ("section", "9", 2) and at(2)["6"] == ("chapter", "1", 1)
    assert at(5)["6"] == ("section", "5", 5) and at(5)["11"] == ("code", "1", 1)
    assert "12" in at(5)  # retrieved at rank 6 only: still missed at 5, and no level is shared
    assert [a for q, k, a, *_ in as_records(m.lines) if q == "m"] == ["1", "1", "1"]  # absent from the run
    assert m.questions == 2 and m.ks == (1, 2, 5)
    assert as_records(m.lines) == as_records(naive(hand_corpus(), qrels, run, [1, 2, 5]))
    counts = m.counts()
    assert list(counts.columns) == ["missed", *CLASSES] and list(counts.index) == [1, 2, 5]
    assert counts.loc[1].to_dict() == {"missed": 8, "section": 1, "chapter": 1, "book": 1, "code": 1,
                                       "elsewhere": 3, "unknown": 1}
    assert m.shares().loc[1, "elsewhere"] == pytest.approx(3 / 8) and m.shares().sum(axis=1).tolist() == [1, 1, 1]
    # per question and class at k: the drill-down's line (the question's lines at k)
    assert (m.question_lines("q", 5)["class"] == "section").sum() == 3
    assert m.question_lines("m", 5)["class"].tolist() == ["elsewhere"]
    assert m.question_lines("m")["k"].tolist() == [1, 2, 5] and len(m.question_lines("q", 2)) == 7
    table = misses_table({"r": m})
    assert table.loc[("r", 2), "section"] == 2 and table.loc[("r", 2), "section_share"] == pytest.approx(2 / 8)
    assert table[list(CLASSES)].to_numpy().sum() == table["missed"].sum() == 24  # every k and class
    assert table.loc[[("r", k) for k in (1, 2, 5)], [f"{c}_share" for c in CLASSES]].sum(axis=1).tolist() \
        == pytest.approx([1, 1, 1])


def test_levels_missing_from_the_corpus():
    """The 2021 layout (code only): a neighbour in corpus order within the code is the near class (the
    code is the narrowest header, hence the section), chapter and book are never matched on blanks."""
    legacy = normalize_articles(pd.DataFrame({
        "id": [str(i) for i in range(1, 11)], "article": "t", "code": ["A"] * 6 + ["B"] * 4,
        "article_no": [str(i) for i in range(1, 11)], "description": "", "law_type": ""}))
    qrels = {"q": ["1", "6", "7"]}
    m = where_misses_land(Hierarchy(legacy), qrels, {"q": ["3", "10"]}, [2])
    assert as_records(m.lines) == [("q", 2, "1", "section", "3", 1), ("q", 2, "6", "section", "3", 1),
                                   ("q", 2, "7", "section", "10", 2)]
    m = where_misses_land(Hierarchy(legacy), qrels, {"q": ["2"]}, [1])
    assert [c for c in m.lines["class"]] == ["section", "code", "elsewhere"]
    # no header column at all: every article is its own section, so every miss is elsewhere
    bare = pd.DataFrame({"id": ["1", "2", "3"], "article": ["a", "b", "c"]})
    m = where_misses_land(Hierarchy(bare), {"q": ["1", "2"]}, {"q": ["3"]}, [1])
    assert m.lines["class"].tolist() == ["elsewhere", "elsewhere"]


header_paths = st.lists(st.fixed_dictionaries({c: st.sampled_from(["", "x", "y"]) for c in HEADERS}),
                        min_size=1, max_size=4)
#: a few header paths, repeated and interleaved in corpus order, so sections have several articles
corpus_rows = header_paths.flatmap(lambda paths: st.lists(st.sampled_from(paths), min_size=2, max_size=25))


@settings(max_examples=200, deadline=None, phases=[p for p in Phase if p != Phase.explain])  # explain: minutes
@given(rows=corpus_rows, data=st.data(), drop=st.sets(st.sampled_from(HEADERS)))
def test_equals_the_naive_reference_on_random_corpora(rows, data, drop):
    """Random corpora (blank levels, dropped columns, repeated paths out of corpus order), gold lists with
    unknown ids and repeats, runs with unknown ids and repeats, questions absent from the run."""
    frame = pd.DataFrame(rows).drop(columns=sorted(drop))
    frame.insert(0, "id", [str(i) for i in range(len(frame))])
    frame["article"] = "t"
    ids = st.sampled_from(list(frame["id"]) + ["zz"])
    # "c" is absent from the run, "d" is not a question; "a" and "b" are in both
    qrels = data.draw(st.fixed_dictionaries({q: st.lists(ids, min_size=1, max_size=8) for q in "abc"}))
    run = data.draw(st.fixed_dictionaries({q: st.lists(ids, min_size=1, max_size=30) for q in "abd"}))
    window = data.draw(st.integers(0, 3))
    ks = data.draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    m = where_misses_land(Hierarchy(frame), qrels, run, ks, window=window)
    assert as_records(m.lines) == as_records(naive(frame, qrels, run, ks, window))


def test_bad_arguments_and_the_board_needs():
    h = Hierarchy(hand_corpus())
    with pytest.raises(ValueError, match="positive"):
        where_misses_land(h, {"q": ["1"]}, {}, [0])
    with pytest.raises(ValueError, match="window"):
        where_misses_land(h, {"q": ["1"]}, {}, [1], window=-1)
    questions = pd.DataFrame({"id": ["q"], "question": ["?"], "article_ids": [("2", "9")], "category": [""]})
    ds = Dataset("hand", "local", hand_corpus(), {"test": questions})
    board = score_runs(ds, "test", [RunSource.built("r", Run.from_rankings({"q": ["1", "5"]}))], (1, 2))
    (m,) = board_misses(board).values()
    assert as_records(m.lines) == [("q", 1, "2", "section", "1", 1), ("q", 1, "9", "book", "1", 1),
                                   ("q", 2, "2", "section", "1", 1), ("q", 2, "9", "book", "1", 1)]
    lean = score_runs(ds, "test", [RunSource.built("r", Run.from_rankings({"q": ["1"]}))], (1,), keep_runs=False)
    with pytest.raises(Exception, match="keep_runs"):
        board_misses(lean)
    assert hierarchy_of(ds.articles) is hierarchy_of(ds.articles)  # built once per corpus


@pytest.fixture(scope="module")
def frlaw_bm25(tmp_path_factory) -> dict:
    """A real BM25 run of frlaw-dev's test split, written by the ``run`` command (``"run"``: its path), and the
    dataset that command read (``"dataset"``: frlaw-dev with its corpus, ~1 CPU s a read)."""
    if not (FRLAW / "articles.csv").is_file():
        pytest.skip(f"frlaw-dev not found at {FRLAW} (../shared is absent)")
    folder = tmp_path_factory.mktemp("frlaw-bm25")
    out, read = folder / "bm25.trec", []

    def load(spec, **kwargs):
        read.append(load_dataset(spec, **kwargs))
        return read[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BSARD_CACHE", str(folder / "cache"))
        mp.setattr(cli_retrieval, "load_dataset", load)
        assert main(["run", "--retriever", "bm25", "--data", str(FRLAW), "--split", "test", "--out", str(out),
                     "--no-progress"]) == 0
    [dataset] = read
    assert dataset.articles is not None
    return {"run": out, "dataset": dataset}


@pytest.mark.slow  # builds frlaw-dev's BM25 index (29k articles) in a private cache
def test_frlaw_dev_bm25_through_evaluate(frlaw_bm25, tmp_path, capsys, monkeypatch):
    """The file's lines equal the naive reference; the printed table and the JSON are the file's counts;
    each k's misses are the gold articles recall@k leaves out."""
    # frlaw-dev read once, by the ``run`` that wrote the run file (the fixture): both ``evaluate`` (its table, its
    # JSON) and the reference take that dataset, with its corpus' hierarchy built once (each read and hierarchy
    # of the 29k articles: ~1 CPU s)
    frlaw_bm25, loaded = frlaw_bm25["run"], [frlaw_bm25["dataset"]]

    def read_once(spec, **kwargs):
        assert spec == str(FRLAW) and kwargs == {"need_corpus": True}, (spec, kwargs)
        return loaded[0]

    monkeypatch.setattr(cli_evaluate, "load_dataset", read_once)
    file = tmp_path / "misses.csv"
    base = ["evaluate", str(frlaw_bm25), "--data", str(FRLAW), "--k", "10", "100", "--misses", str(file)]
    assert main(base) == 0
    table_out = capsys.readouterr().out
    [ds] = loaded
    qrels = ds.qrels("test")
    assert read_stamp(file.read_text())["runs"] == {"bm25.trec": sha256_file(frlaw_bm25)}  # the stamp on top
    lines = pd.read_csv(io.StringIO(strip_stamp(file.read_text())), dtype=str, keep_default_na=False)
    assert list(lines.columns) == ["run", *LINE_COLUMNS] and set(lines["run"]) == {"bm25.trec"}
    run = read_run_path(frlaw_bm25, qids=qrels.keys()).run
    ours = [(q, int(k), a, c, n, int(r) if r else None) for _, q, k, a, c, n, r in lines.itertuples(index=False)]
    assert ours == as_records(naive(ds.articles, qrels, run, (10, 100)))
    assert main(base + ["--format", "json"]) == 0
    js = json.loads(capsys.readouterr().out)
    for record in js["misses"]["bm25.trec"]:
        k = record["k"]
        at = lines[lines["k"] == str(k)]
        missed = sum(len(g - set(run.get(q, ())[:k])) for q, g in qrels.items())
        assert record["missed"] == len(at) == missed
        recall = js["runs"]["bm25.trec"][f"recall@{k}"]
        assert recall == pytest.approx(sum(1 - len(g - set(run.get(q, ())[:k])) / len(g)
                                           for q, g in qrels.items() if g) / len(qrels), abs=1e-9)
        for c in CLASSES:
            assert record[c] == (at["class"] == c).sum()
            row = next(ln.split() for ln in table_out.splitlines() if ln.startswith("bm25.trec") and ln.split()[1]
                       == str(k) and "(" in ln)
            assert f"{record[c]} ({100 * record[f'{c}_share']:.1f}" in " ".join(row)
    assert {"section", "chapter", "book", "code"} <= set(lines["class"])  # the real corpus has every level
    rows = list(csv.reader(io.StringIO(strip_stamp(file.read_text()))))
    assert len(rows) == len(lines) + 1
