"""The Search page's answers for a citizen: the « Questions proches déjà traitées » panel,
passages and « Voir la section », why-lines of hybrid hits and the downloads.

Page models (bsard_demo.app.answers, .passages) without Streamlit on a tiny corpus, then the page
under AppTest on the sample (BM25 + the neighbours part: no dense encoder to build), its figures
checked against the library's own retrievers, and on datasets without labelled train questions.
Escaping of the same fragments over hostile data: tests/app/test_xss.py.
"""
from __future__ import annotations

import csv
import html
import io
import re
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from _app_helpers import REPO, TIMEOUT, assert_clean, set_app_env
from _html_fragments import parse
from bsard_demo.app.answers import (
    EXPORT_COLUMNS,
    PANEL_TITLE,
    cite_counts,
    export_csv,
    export_markdown,
    export_rows,
    panel_reason,
    part_label,
    similar_questions,
    why_line,
    with_why_lines,
)
from bsard_demo.app.passages import group_passages, passage_title, section_context
from bsard_demo.app.search_page import ColumnResult, ShownHit
from bsard_demo.dataset import Dataset, normalize_articles, normalize_questions
from bsard_demo.retrievers import build_retriever
from bsard_demo.retrievers.base import Hit
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.retrievers.neighbours import DEFAULT_MIN_SIMILARITY, NEIGHBOURS, Neighbour, NeighboursRetriever
from bsard_demo.sources import load_sample

SECTION = ("Code civil", "Livre III", "Section 1")
OTHER = ("Code civil", "Livre III", "Section 2")
ARTICLES = normalize_articles(pd.DataFrame({
    "id": [str(i) for i in range(1, 9)],
    "reference": [f"Art. {945 + i}, Code civil" for i in range(1, 9)],
    "article": [f"texte {i} " + "mot " * 150 for i in range(1, 9)],
    "code": ["Code civil"] * 8, "book": ["Livre III"] * 8,
    "section": ["Section 1"] * 5 + ["Section 2"] * 3,
}))
TRAIN = normalize_questions(pd.DataFrame({"id": ["t1", "t2"], "category": ["Famille", ""], "question": ["a ?", "b ?"],
                                          "article_ids": ["2,3,99", "7"]}))
TINY = Dataset(name="tiny", kind="local", articles=ARTICLES, splits={"train": TRAIN})


def hit(rank: int, article: str, why: str = "") -> ShownHit:
    row = TINY.article(article)
    crumbs = SECTION if row["section"] == "Section 1" else OTHER
    return ShownHit(rank=rank, article_id=article, score=1.0 / rank, reference=row["reference"], breadcrumb=crumbs,
                    text=row["article"], why=why)


# --------------------------------------------------------------------------- passages

def test_consecutive_hits_of_one_section_are_one_passage_in_rank_order():
    hits = [hit(1, "3"), hit(2, "7"), hit(3, "2"), hit(4, "5"), hit(5, "6"), hit(6, "4")]
    entries = group_passages(hits, TINY)
    assert [e.hit.rank for e in entries] == [1, 2, 3, 4, 5, 6]  # one entry per hit, in rank order
    assert [e.kind for e in entries] == ["passage", "passage", "reminder", "reminder", "reminder", "reminder"]
    lead = entries[0]
    assert [m.article_id for m in lead.members] == ["2", "3", "4", "5"]  # corpus order, 5 | 6 is a section break
    assert lead.title == "Art. 947–950, Code civil" and [m.rank for m in lead.members] == [3, 1, 6, 4]
    assert [m.article_id for m in entries[1].members] == ["6", "7"] and entries[1].title == "Art. 951–952, Code civil"
    assert entries[2].lead is lead.hit and entries[4].lead is entries[1].hit
    # no run: every hit alone
    assert [e.kind for e in group_passages([hit(1, "1"), hit(2, "3"), hit(3, "8")], TINY)] == ["hit"] * 3
    assert passage_title(["Art. L1, Code du travail", "Art. L3, Code du travail"]) == "Art. L1–L3, Code du travail"
    assert passage_title(["Article premier", "Titre II"]) == "Article premier – Titre II"


def test_the_section_around_a_hit_is_bounded_and_marks_the_hits():
    context = section_context(TINY, [hit(2, "3")], {"3": 2, "5": 7}, around=2, chars=40)
    assert [c.article_id for c in context] == ["1", "2", "3", "4", "5"]
    assert [c.rank for c in context] == [None, None, 2, None, 7]
    assert all(len(c.text) == 40 and c.cut for c in context)
    # stops at the section's edge, around a passage as a whole
    edge = section_context(TINY, [hit(1, "6"), hit(2, "7")], {}, around=2)
    assert [c.article_id for c in edge] == ["6", "7", "8"]
    assert section_context(TINY, [ShownHit(1, "404", 1.0, "", (), "")]) == []


# --------------------------------------------------------------------------- why-lines and the panel

def test_why_lines_name_each_parts_rank_and_the_neighbours_count():
    parts = [("BM25", {"a": 3, "b": 1}), ("adaptateur", {"a": 12}), (NEIGHBOURS, {"a": 1, "b": 2})]
    assert why_line("a", parts, {"a": 2}) == "BM25 n° 3 · adaptateur n° 12 · 2 questions proches"
    assert why_line("b", parts, {"b": 1}) == "BM25 n° 1 · 1 question proche"
    assert why_line("b", parts, None) == "BM25 n° 1 · questions proches n° 2"  # counts unknown: its rank
    assert why_line("z", parts, {}) == ""
    assert part_label("bm25") == "BM25" and part_label("bundle:x", ["bundle:x"]) == "adaptateur"
    assert part_label("use") == "use"
    column = ColumnResult("Hybride", [hit(1, "2"), hit(2, "3")], 0.0, 10,
                          parts=[[Hit("3", 2.0), Hit("2", 1.0)], [Hit("2", 5.0)]])
    lines = [h.why for h in with_why_lines(column, ["BM25", NEIGHBOURS], {"2": 1}).hits]
    assert lines == ["BM25 n° 2 · 1 question proche", "BM25 n° 1"]
    assert with_why_lines(ColumnResult("BM25", [hit(1, "2")], 0.0, 10), ["BM25"]).hits[0].why == ""  # not a hybrid


def test_similar_questions_list_their_cited_articles_where_they_are_shown():
    neighbours = [Neighbour("t1", "a ?", 0.9, ("2", "3"), 4.5), Neighbour("t2", "b ?", 0.625, ("7",), 1.25)]
    columns = [ColumnResult("BM25", [hit(1, "3"), hit(2, "8")], 0.0, 10),
               ColumnResult("Hybride RRF k=60 (use + neighbours)", [hit(1, "2")], 0.0, 10)]
    panel = similar_questions(neighbours, TINY, columns, top=5)
    assert [(q.qid, q.category, q.similarity, q.percent) for q in panel] == [("t1", "Famille", 0.9, 90),
                                                                              ("t2", "", 0.625, 62)]
    first = panel[0]
    assert [c.article_id for c in first.cited] == ["2", "3", "99"]  # as labelled, the one outside the corpus too
    assert [c.shown for c in first.cited] == [(("Hybride", 1),), (("BM25", 1),), ()]
    assert [c.in_corpus for c in first.cited] == [True, True, False] and first.cited_shown == 2
    assert first.cited[0].reference == "Art. 947, Code civil" and first.cited[0].breadcrumb == SECTION
    assert similar_questions(neighbours, TINY, columns, top=1) == panel[:1]
    assert cite_counts(neighbours + [Neighbour("t3", "c ?", 1.0, ("2", "2"))]) == {"2": 2, "3": 1, "7": 1}


def test_the_panel_shows_no_question_under_the_threshold_and_says_so():
    """Whatever the part that found them (the learned ranker's neighbours have no threshold), the panel shows
    only questions at least DEFAULT_MIN_SIMILARITY similar; with none, one line instead."""
    low, high = DEFAULT_MIN_SIMILARITY / 2, (1 + DEFAULT_MIN_SIMILARITY) / 2
    neighbours = [Neighbour("t1", "a ?", high, ("2",), 3.0), Neighbour("t2", "b ?", low, ("7",), 1.0)]
    shown = similar_questions(neighbours, TINY, [])
    assert [q.qid for q in shown] == ["t1"] and panel_reason(TINY, True, shown) is None
    none = similar_questions(neighbours[1:], TINY, [])
    reason = panel_reason(TINY, True, none)
    assert none == [] and reason.startswith(PANEL_TITLE) and "aucune question déjà traitée ne ressemble" in reason
    assert f"au moins {round(100 * DEFAULT_MIN_SIMILARITY)} %" in reason
    assert similar_questions(neighbours, TINY, [], min_similarity=0) != shown  # the threshold, not the top
    # from the retriever itself: a question far from every training question gets no panel, and the reason
    part = NeighboursRetriever.build(TINY)
    assert panel_reason(TINY, True, similar_questions(part.neighbours("b"), TINY, [])) is None  # t2's words
    far_question = "b zzz yyy xxx www vvv uuu ttt sss rrr qqq"  # t2's one word among ten others
    assert NeighboursRetriever.build(TINY, min_similarity=0).neighbours(far_question)
    far = similar_questions(part.neighbours(far_question), TINY, [])
    assert panel_reason(TINY, True, far) == reason
    assert part.search(far_question, k=5) == [] and not part.votes(far_question)[0].any()  # and no votes


def test_the_panel_says_in_one_line_why_it_is_absent():
    assert panel_reason(TINY, active=True) is None
    assert "ajoutez « Questions proches »" in panel_reason(TINY, active=False)
    no_train = Dataset(name="t", kind="local", articles=ARTICLES, splits={"test": TRAIN})
    assert "n'a pas de questions d'entraînement" in panel_reason(no_train, active=False)
    outside = Dataset(name="t", kind="local", articles=ARTICLES,
                      splits={"train": TRAIN.assign(article_ids=[("99",)] * 2)})
    assert "aucune question du split « train » ne cite un article" in panel_reason(outside, active=False)
    for reason in (panel_reason(no_train, False), panel_reason(outside, False), panel_reason(TINY, False)):
        assert "\n" not in reason


# --------------------------------------------------------------------------- downloads

def test_downloads_hold_every_displayed_hit_with_its_why_line_and_the_link():
    hostile = ShownHit(2, "=cmd", 0.5, "=HYPERLINK(\"x\")", ("<b>Code</b>",), "")
    columns = [ColumnResult("BM25", [hit(1, "3"), hostile], 0.0, 10),
               ColumnResult("Hybride | x", [hit(1, "2", why="BM25 n° 2 · 1 question proche")], 0.0, 10)]
    rows = export_rows("Ma question ?", columns, "https://demo/search?q=x")
    table = list(csv.DictReader(io.StringIO(export_csv(rows).decode("utf-8-sig"))))
    assert list(table[0]) == list(EXPORT_COLUMNS) and len(table) == 3
    assert [(r["système"], r["rang"], r["référence"]) for r in table] == [
        ("BM25", "1", "Art. 948, Code civil"), ("BM25", "2", "'=HYPERLINK(\"x\")"),
        ("Hybride | x", "1", "Art. 947, Code civil")]
    assert table[2]["pourquoi"] == "BM25 n° 2 · 1 question proche" and table[0]["fil d'Ariane"] == " › ".join(SECTION)
    assert {r["lien"] for r in table} == {"https://demo/search?q=x"} and \
        {r["question"] for r in table} == {"Ma question ?"}
    md = export_markdown("Ma *question* ?", rows, "https://demo/search?q=x")
    assert md.startswith("# Recherche : Ma \\*question\\* ?") and "<https://demo/search?q=x>" in md
    assert "## Hybride \\| x" in md and \
        "| 1 | Art. 947, Code civil | Code civil › Livre III › Section 1 | 1 | BM25 n° 2" in md
    assert "&lt;b&gt;Code&lt;/b&gt;" in md and "<b>" not in md


# --------------------------------------------------------------------------- the page (AppTest)

QUESTION = "Mon propriétaire peut-il garder ma garantie locative ?"


def fragments(at: AppTest, css: str) -> list[str]:
    return [h.value for h in at.html if h.value.startswith(f'<div class="{css}')]


def text_of(fragment: str) -> str:
    return "".join(parse(fragment).text)


def why_of(card: str) -> str:
    found = re.search(r'<div class="bsard-why"[^>]*>(.*?)</div>', card)
    return html.unescape(found.group(1)) if found else ""


def open_search(params: dict) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    assert_clean(at)
    return at


def test_the_page_shows_the_panel_passages_and_why_lines_of_the_library(monkeypatch, tmp_path_factory):
    cache = set_app_env(monkeypatch, tmp_path_factory.getbasetemp() / "answers-cache", "sample")
    at = open_search({"q": QUESTION, "systems": ["bm25", "hybrid"], "henc": NEIGHBOURS, "k": "10"})
    ds = load_sample()
    hybrid = build_retriever(hybrid_spec(NEIGHBOURS), ds, cache_root=Path(cache))  # the column's own spec
    neighbours = hybrid.retrievers[1].neighbours(QUESTION)
    bm25_ranks = {h.article_id: r for r, h in enumerate(hybrid.retrievers[0].search(QUESTION, len(ds.articles)), 1)}
    counts = cite_counts(neighbours)

    (panel,) = fragments(at, "bsard-similar")
    shown = text_of(panel)
    assert neighbours and shown.count("similarité") == len(neighbours[:5])  # those above the threshold only
    assert all(n.similarity >= DEFAULT_MIN_SIMILARITY for n in neighbours)
    for n in neighbours[:5]:
        assert n.text in shown and f"n° {n.question_id} ·" in shown
    assert all(n.text not in shown for n in neighbours[5:])

    cards = fragments(at, "bsard-hit")
    hybrid_cards = cards[10:]
    top = [h.article_id for h in hybrid.search(QUESTION, 10)]
    assert [c.split('data-article="')[1].split('"')[0] for c in hybrid_cards] == top
    for article, card in zip(top, hybrid_cards):
        expected = [f"BM25 n° {bm25_ranks[article]}"] if article in bm25_ranks else []
        if counts.get(article):
            expected.append(f"{counts[article]} question proche" + ("s" if counts[article] > 1 else ""))
        assert why_of(card) == " · ".join(expected), article
    assert all("bsard-why" not in c for c in cards[:10])  # BM25 alone: no why-line
    passages = [c for c in cards if "bsard-passage" in c]
    assert passages  # « Voir la section » only where the section has more than the passage (test_highlight.py)
    assert any("bsard-reminder" in c for c in cards)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Télécharger (CSV)", "Télécharger (Markdown)"]

    # a question no training question resembles: one line instead of the panel
    at.text_area(key="question").input("xyzzy").run()
    assert_clean(at) and not fragments(at, "bsard-similar")
    assert any("aucune question d'entraînement ne ressemble" in c.value for c in at.caption)


@pytest.mark.parametrize("split", ["test", "train"])
def test_without_labelled_train_questions_the_panel_is_one_line(monkeypatch, tmp_path, split):
    """A corpus whose only split is ``test`` (no neighbours offered), or whose ``train`` questions
    cite no article of it: the Search page works and says in one line why there is no panel."""
    ds = load_sample()
    folder = tmp_path / "data"
    folder.mkdir()
    ds.articles.to_csv(folder / "articles.csv", index=False)
    questions = ds.questions("test").assign(article_ids=lambda q: q["article_ids"].map(",".join))
    if split == "train":
        questions = questions.assign(article_ids="no-such-article")
    questions.to_csv(folder / f"questions_{split}.csv", index=False)
    set_app_env(monkeypatch, tmp_path / "cache", str(folder))
    at = open_search({"q": QUESTION, "systems": "bm25"})
    assert not fragments(at, "bsard-similar") and len(fragments(at, "bsard-hit")) == 10
    lines = [c.value for c in at.caption if "Questions proches déjà traitées" in c.value]
    assert len(lines) == 1 and "indisponibles" in lines[0]
    assert NEIGHBOURS not in at.multiselect(key="hybrid_encoders").options


# --------------------------------------------------------------------------- an unknown path

def test_an_unknown_path_runs_the_default_page_without_streamlits_modal(monkeypatch):
    """ui.unknown_path clears the run's intended page when its URL path is no page's (then
    st.navigation runs the default page and sends no « Page not found »), and leaves a page's path,
    a menu click (a page hash) and the root alone."""
    import streamlit.runtime.scriptrunner as runner

    from bsard_demo.app import ui

    class Manager:  # what ui.unknown_path reads of Streamlit's PagesManager (its public properties)
        intended_page_script_hash = intended_page_name = None

        def set_script_intent(self, page_script_hash, page_name):
            self.intended_page_script_hash, self.intended_page_name = page_script_hash, page_name

    class Ctx:
        pages_manager = Manager()

    monkeypatch.setattr(runner, "get_script_run_ctx", lambda: Ctx)
    monkeypatch.setattr(ui, "get_script_run_ctx", lambda: Ctx)  # ui imports the name at its top
    manager = Ctx.pages_manager
    known = ["", "search", "score"]
    for page_hash, name, expected in (("", "nulle-part", "nulle-part"), ("", "search", None), ("", "", None),
                                      ("abc", "nulle-part", None)):
        manager.set_script_intent(page_hash, name)
        assert ui.unknown_path(known) == expected
        assert manager.intended_page_name == ("" if expected else name)
