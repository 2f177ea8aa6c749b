"""The article graph derived from a corpus (sections, positions, siblings, cross-references) and the
structure re-scoring, on a tiny hand-made corpus whose answers are read off by hand, plus the
re-scoring against a brute-force reading of its formula (docs/design.md,
'bsard_demo/retrievers/structure.py') on random rankings."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from bsard_demo.dataset import normalize_articles
from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.structure import (
    MAX_WINDOW,
    ArticleGraph,
    StructureSettings,
    article_number,
    rescore,
    section_keys,
)

# Two codes; code A has a chapter with two sections (s1 holds ids 1-3, s2 ids 4-5), then id 6 of s1
# again, out of corpus order; code B: ids 7-8 in one chapter; id 9 has no header at all.
ARTICLES = normalize_articles(pd.DataFrame({
    "id": [str(i) for i in range(1, 10)],
    "reference": ["Art. L1-1, A", "Art. L1-2, A", "Art. L1-3, A", "Art. R2-1, A", "Art. R2-2, A", "Art. L1-4, A",
                  "Art. 7, B", "Art. 8, B", "Art. 9"],
    "article": ["premier", "voir l'article L. 1-3 et l'article R. 2-2", "troisième", "quatrième",
                "cinquième, selon les articles L. 1-1 et 7", "sixième", "septième, cf. article L. 1-1", "huitième",
                "neuvième"],
    "code": ["A", "A", "A", "A", "A", "A", "B", "B", ""],
    "chapter": ["c1", "c1", "c1", "c1", "c1", "c1", "c9", "c9", ""],
    "section": ["s1", "s1", "s1", "s2", "s2", "s1", "", "", ""],
}))


@pytest.fixture(scope="module")
def graph() -> ArticleGraph:
    return ArticleGraph(ARTICLES)


def test_sections_positions_and_sizes(graph):
    assert section_keys(ARTICLES)[0][:1] == ("A",)
    s = graph.section
    assert s[0] == s[1] == s[2] == s[5] and s[3] == s[4] and s[6] == s[7]
    assert len({s[0], s[3], s[6], s[8]}) == 4
    assert graph.n_sections == 4
    assert graph.position.tolist() == [0, 1, 2, 0, 1, 3, 0, 1, 0]
    assert graph.section_size[graph.section].tolist() == [4, 4, 4, 2, 2, 4, 2, 2, 1]


def test_two_articles_without_headers_are_two_sections():
    frame = normalize_articles(pd.DataFrame({"id": ["a", "b"], "article": ["x", "y"]}))
    g = ArticleGraph(frame)
    assert g.n_sections == 2 and g.neighbours_within(0, 1) == []


def test_siblings_follow_corpus_order_within_the_section(graph):
    assert graph.neighbours_within(0, 1) == [1]
    assert graph.neighbours_within(1, 1) == [0, 2]
    assert graph.neighbours_within(2, 1) == [1, 5]  # id 6 follows id 3 in section s1, across s2
    assert graph.neighbours_within(0, 3) == [1, 2, 5]
    assert graph.neighbours_within(3, MAX_WINDOW) == [4]
    assert graph.neighbours_within(8, MAX_WINDOW) == []


def test_cross_references_parse_within_the_code(graph):
    assert article_number("L. 2242-1") == "L2242-1" and article_number(" r.7343 -10") == "R7343-10"
    # "L. 1-3" and "R. 2-2" of code A; "L. 1-1" and "7" cited by id 5 (7 is code B's, not A's)
    assert graph.cites[1].tolist() == [2, 4]
    assert graph.cites[4].tolist() == [0]
    assert graph.cites[6].tolist() == []  # code B has no L1-1
    assert all(len(c) == 0 for i, c in enumerate(graph.cites) if i not in (1, 4))
    assert all(len(c) == 0 for c in ArticleGraph(ARTICLES, cross_references=False).cites)


def test_rescore_by_hand(graph):
    hits = [Hit("2", 0.04), Hit("4", 0.02)]
    # n: id2 1, id4 0.5. sibling 0.5, window 1: ids 1 and 3 get 0.5, id 5 gets 0.25
    out = rescore(graph, hits, StructureSettings(sibling=0.5, section=0.0, refs=0.0), k=10)
    assert [(h.article_id, round(h.score, 9)) for h in out] == [("2", 1.0), ("4", 0.5), ("3", 0.5), ("1", 0.5),
                                                                ("5", 0.25)]
    # section 0.2 only lifts the ranked: ids 2 and 4 are alone in their sections among the ranked
    same = rescore(graph, hits, StructureSettings(sibling=0.0, section=0.2, refs=0.0), k=10)
    assert [(h.article_id, h.score) for h in same] == [("2", 1.0), ("4", 0.5)]
    two = rescore(graph, [Hit("1", 2.0), Hit("3", 1.0)], StructureSettings(sibling=0.0, section=0.2, refs=0.0), k=10)
    assert [(h.article_id, round(h.score, 9)) for h in two] == [("1", 1.1), ("3", 0.7)]
    # refs: id 2 cites ids 3 and 5
    refs = rescore(graph, hits, StructureSettings(sibling=0.0, section=0.0, refs=0.1), k=10)
    assert [(h.article_id, round(h.score, 9)) for h in refs] == [("2", 1.0), ("4", 0.5), ("5", 0.1), ("3", 0.1)]
    assert rescore(graph, hits, StructureSettings(sibling=0.0, section=0.0, refs=0.0), k=1) == hits[:1]
    assert rescore(graph, [], StructureSettings(), k=5) == []


def test_rescore_against_brute_force(graph):
    rng = np.random.default_rng(0)
    ids = graph.article_ids
    for _ in range(40):
        chosen = rng.choice(len(ids), size=rng.integers(1, len(ids) + 1), replace=False)
        hits = [Hit(ids[r], float(s)) for r, s in zip(chosen, rng.random(len(chosen)) + 0.01)]
        st = StructureSettings(sibling=float(rng.choice([0, 0.3])), section=float(rng.choice([0, 0.2])),
                               refs=float(rng.choice([0, 0.1])), window=int(rng.integers(1, 4)), decay=0.5)
        n = {h.article_id: h.score / max(x.score for x in hits) for h in hits}
        expected = {}
        for b in range(len(ids)):
            sib = max([n.get(ids[a], 0) * st.decay ** (d - 1) for d in range(1, st.window + 1)
                       for a in graph.neighbours_within(b, d) if a not in graph.neighbours_within(b, d - 1)] or [0])
            sec = max([n[ids[a]] for a in range(len(ids)) if a != b and graph.section[a] == graph.section[b]
                       and ids[a] in n] or [0]) if ids[b] in n else 0
            ref = max([n[ids[a]] for a in range(len(ids)) if b in graph.cites[a] and ids[a] in n] or [0])
            total = n.get(ids[b], 0) + st.sibling * sib + st.section * sec + st.refs * ref
            if ids[b] in n or total > 0:
                expected[ids[b]] = total
        got = rescore(graph, hits, st, k=len(ids)) if (st.sibling or st.section or st.refs) else None
        if got is None:
            continue
        assert {h.article_id for h in got} == set(expected)
        for h in got:
            assert h.score == pytest.approx(expected[h.article_id], abs=1e-12)
        assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)


@pytest.mark.parametrize("bad", [{"sibling": -1}, {"window": 0}, {"window": MAX_WINDOW + 1}, {"decay": 2},
                                 {"depth": 0}, {"sibling": float("nan")}])
def test_bad_settings_are_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="^structure: ") as info:
        StructureSettings.from_options(bad)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="unknown option"):
        StructureSettings.from_options({"siblings": 1})


# -- the post-step in the product: hybrid spec option, registry, run --structure ---------------

def _dataset(tmp_path):
    from _tiny_corpus import QUESTIONS, make_data
    from bsard_demo.sources import load_dataset

    frame = ARTICLES.assign(article=["bail neuf ans", "garantie locative deux mois", "préavis trois mois du bail",
                                     "aliments parents", "divorce désunion", "nationalité déclaration",
                                     "enregistrement du bail", "pension alimentaire", "autre chose"])
    folder = make_data(tmp_path / "data", frame, QUESTIONS)
    QUESTIONS.to_csv(folder / "questions_train.csv", index=False)
    return folder, load_dataset(str(folder))


def test_a_hybrid_with_structure_is_its_hybrid_rescored(tmp_path):
    from bsard_demo.retrievers import build_retriever
    from bsard_demo.retrievers.hybrid_specs import hybrid_spec, make_hybrid
    from bsard_demo.retrievers.structure import StructureRetriever, graph_of

    _, ds = _dataset(tmp_path)
    plain = hybrid_spec("neighbours")
    spec = hybrid_spec("neighbours", structure=True)
    assert spec.options["structure"] == StructureSettings().as_dict()
    assert hybrid_spec("neighbours", structure={"sibling": 1.0}).options["structure"]["sibling"] == 1.0
    assert "structure" not in plain.options and "structure" not in hybrid_spec("neighbours", structure=False).options
    with pytest.raises(ValueError, match="^structure: unknown option"):
        hybrid_spec("neighbours", structure={"sibling_weight": 1})
    retriever = build_retriever(spec, ds)
    assert isinstance(retriever, StructureRetriever) and "structure sibling=" in retriever.name
    base = build_retriever(plain, ds)
    graph = graph_of(ds.articles)
    assert graph_of(ds.articles.copy()) is graph  # built once per corpus
    for q in ("Comment résilier mon bail ?", "garantie locative"):
        assert retriever.search(q, 5) == rescore(graph, base.search(q, 1000), StructureSettings(), 5)
    with pytest.raises(ValueError, match="needs the corpus"):
        make_hybrid(spec, base.retrievers, corpus_size=9)


def test_run_structure_writes_the_rescored_run_and_other_commands_refuse_it(tmp_path, capsys):
    from _tiny_corpus import run_cli, without_bundle  # noqa: F401

    folder, _ = _dataset(tmp_path)
    out = tmp_path / "run.trec"
    common = ["--data", str(folder), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert run_cli("run", "--retriever", "hybrid", "--encoder", "neighbours", "--structure", *common,
                   "--out", str(out)) == 0
    lines = out.read_text().splitlines()
    assert lines and lines[0].split()[-1].endswith("_+_" + StructureSettings().label().replace(" ", "_"))
    assert run_cli("run", "--retriever", "bm25", "--structure", *common, "--out", str(out)) == 2
    assert "--structure" in capsys.readouterr().err
    assert run_cli("tune", "--retriever", "hybrid", "--encoder", "neighbours", "--structure", *common,
                   "--split", "test") == 2
    assert "not searched by tune" in capsys.readouterr().err


# -- mentions: findall's answer, the pattern tried where "article" starts only ----------------

MENTION_CASES = ["", "article 5", "xarticle 5", "l'article 12 et les articles L. 2242-1, 3", "ARTICLES 7-8",
                 "particle 5 article article 9", "articles\n12", "article_5 article 6", "Article R.** 4",
                 "artİcle 3 artıcle 4 ARTİCLE 5", "articlearticle 6", "\u00e9article 7 _article 8 1article 9"]


@pytest.mark.parametrize("text", MENTION_CASES)
def test_mentions_are_findall_of_the_mention_pattern(text):
    from bsard_demo.retrievers.structure import MENTION, mentions

    assert mentions(text) == MENTION.findall(text)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(["article", "Article", "ARTICLES", "articles", "art", "icle", " ", "\n", "-",
                                       "L.", "R", "**", "12", "3", "_", "é", "x", "İ", "ı", "ſ", ",", "‑"]),
                      max_size=14))
def test_mentions_equal_findall_on_random_texts(parts):
    from bsard_demo.retrievers.structure import MENTION, mentions

    text = "".join(parts)
    assert mentions(text) == MENTION.findall(text)


def test_graph_of_fingerprints_a_frame_once_and_still_tells_an_edited_corpus():
    from bsard_demo.retrievers import structure

    frame = ARTICLES.copy()
    graph = structure.graph_of(frame)
    assert structure.graph_of(frame) is graph and structure.graph_of(frame.copy()) is graph
    edited = frame.copy()
    edited.loc[0, "section"] = "autre section"
    other = structure.graph_of(edited)
    assert graph.section[0] == graph.section[1] and other.section[0] != other.section[1]


FIRST_GRAPH = """
import gc
import pandas as pd
from bsard_demo import cache
from bsard_demo.retrievers import structure
hashed = []
real = cache.fingerprint
cache.fingerprint = lambda rows, settings: hashed.append(settings) or real(rows, settings)
frame = pd.DataFrame({"id": ["1", "2", "3"], "reference": ["Art. 1", "Art. 2", "Art. 3"],
                      "article": ["voir l'article 2", "texte", "article 1"], "code": ["C", "C", "C"]})
graph = structure.graph_of(frame)
assert hashed == [] and structure.graph_of(frame) is graph, hashed  # a cold start compares with nothing
assert structure.graph_of(frame.copy()) is graph and len(hashed) == 2  # the second frame keys both
edited = frame.copy()
edited.loc[0, "article"] = "texte"
assert structure.graph_of(edited) is not graph and len(hashed) == 3
del frame, edited
gc.collect()
again = pd.DataFrame({"id": ["9"], "reference": ["Art. 9"], "article": ["x"], "code": ["D"]})
assert len(structure.graph_of(again)) == 1
"""


def test_the_first_graph_of_a_process_is_fingerprinted_only_when_another_frame_comes():
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", FIRST_GRAPH], check=True)
