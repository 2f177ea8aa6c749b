"""Escaping and highlighting of user and dataset text (bsard_demo.app.highlight, bsard_demo.app.render)."""
from __future__ import annotations

import html
import re

import pytest

from _html_fragments import parse
from bsard_demo.analyzer import Analyzer
from bsard_demo.app.highlight import escape_html, highlight_html, matched_terms, md_escape, query_terms
from bsard_demo.app.passages import ContextArticle, Entry
from bsard_demo.app.render import hit_card, missed_list, passage_card, question_box
from bsard_demo.app.search_page import MissedGold, RankMarker, ShownHit

XSS = '<img src=x onerror=alert(1)>'
ALLOWED_TAGS = {"div", "span", "mark", "details", "summary", "br", "b", "ul", "li", "small", "button"}


def marked(fragment: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", fragment)]


def test_terms_of_a_question_match_their_inflections():
    terms = query_terms("garantie locative")
    out = highlight_html("Les garanties locatives et le locatif sont restitués.", terms)
    assert marked(out) == ["garanties", "locatives", "locatif"]


def test_stop_words_and_unrelated_words_are_not_marked():
    terms = query_terms("le bail de la maison")
    out = highlight_html("Le bail de la maison est conclu.", terms)
    assert marked(out) == ["bail", "maison"]


def test_accents_and_case_do_not_matter():
    terms = query_terms("PROPRIETAIRE")
    assert marked(highlight_html("Le propriétaire et les Propriétaires.", terms)) == ["propriétaire", "Propriétaires"]


def test_elided_article_stays_outside_the_mark():
    out = highlight_html("l'appartement", query_terms("appartement"))
    assert out == "l&#x27;<mark>appartement</mark>"


def test_no_terms_gives_plain_escaped_text():
    assert highlight_html("a < b & c", ()) == "a &lt; b &amp; c"


@pytest.mark.parametrize("text", [XSS, '"><script>alert(1)</script>', "<mark>faux</mark> & co", "x' onmouseover='y"])
def test_markup_in_text_is_escaped(text):
    out = highlight_html(text + " garantie", query_terms("garantie"))
    tags = parse(out).tags
    assert [t for t, _ in tags] == ["mark"]  # only the highlight, the text's own tags are inert
    assert html.unescape(re.sub(r"</?mark>", "", out)) == text + " garantie"


def test_newlines_become_br_and_are_kept_out_otherwise():
    assert highlight_html("a\nb\r\nc", ()) == "a<br>b<br>c"
    assert highlight_html("a\nb", (), newlines=False) == "a\nb"


def test_max_chars_cuts_at_a_word_end_and_never_inside_an_entity():
    text = "alpha beta & gamma <delta> epsilon"
    out = highlight_html(text, query_terms("gamma"), max_chars=12)  # right after "&" (escaped as &amp;)
    assert out.endswith(" …")
    body = out[:-2]
    assert html.unescape(re.sub(r"</?mark>", "", body)) == "alpha beta &"
    long_cut = highlight_html(text, query_terms("gamma"), max_chars=15)  # inside "gamma": kept whole
    assert marked(long_cut) == ["gamma"] and long_cut.endswith("gamma</mark> …")
    assert highlight_html("court", (), max_chars=100) == "court"


def test_matched_terms_lists_each_surface_form_once():
    terms = query_terms("locative")
    assert matched_terms("Le locatif, les locatives et le locatif.", terms) == ["locatif", "locatives"]


def test_custom_analyzer_without_stemming_matches_exact_words_only():
    a = Analyzer(stem=False)
    assert marked(highlight_html("locatif locatives", query_terms("locatif", a), a)) == ["locatif"]


def test_escape_html_handles_none_and_quotes():
    assert escape_html(None) == ""
    assert escape_html('"a" & \'b\'') == "&quot;a&quot; &amp; &#x27;b&#x27;"


@pytest.mark.parametrize("text",
                         ["**gras** _it_ `code`", "[lien](http://x) ![i](y)", ":red[rouge] :material/home: $x^2$",
                                  "# titre\n- liste\n1. un", XSS, "a|b ~c~ <b>d</b> &amp;"])
def test_md_escape_backslashes_every_markdown_character(text):
    out = md_escape(text)
    # every special character is escaped, and removing the escapes gives back the text
    assert not re.search(r"(?<!\\)[*_`\[\]()#!|<>~$:&]", re.sub(r"\\\\", "", out))
    assert re.sub(r"\\(.)", r"\1", out) == re.sub(r"\s+", " ", text).strip()


def _hit(**kw) -> ShownHit:
    base = dict(rank=3, article_id="42", score=1.23456, reference="Art. 5, Code civil",
                breadcrumb=("Code civil", "Livre I"), text="Le bail de résidence principale.", gold=None, marker=None)
    base.update(kw)
    return ShownHit(**base)


def test_hit_card_shows_rank_reference_breadcrumb_score_and_marks():
    card = hit_card(_hit(gold=True, marker=RankMarker("up", 2)), query_terms("bail"))
    p = parse(card)
    text = "".join(p.text)
    assert "3." in text and "Art. 5, Code civil" in text and "Code civil › Livre I" in text
    assert "score 1,235" in text and "id 42" in text
    assert "▲2" in text and "✓ pertinent" in text
    assert marked(card) == ["bail"]
    assert 'class="bsard-hit gold"' in card


def test_hit_card_full_text_only_when_the_preview_is_cut():
    short = hit_card(_hit(), (), preview_chars=100)
    assert "<details>" not in short
    long_text = "mot " * 200
    card = hit_card(_hit(text=long_text), query_terms("mot"), preview_chars=50)
    assert "<details><summary>Texte complet</summary>" in card
    full = card.split("<details>")[1]
    assert len(marked(full)) == 200


def test_no_full_text_when_the_preview_runs_to_the_end_of_the_text():
    # 20 characters over the preview's 100, inside the word the preview finishes: the preview is the whole text
    card = hit_card(_hit(text="a" * 95 + " " + "b" * 24), (), preview_chars=100)
    assert "Texte complet" not in card and "…" not in card


def test_the_section_view_only_when_the_section_holds_more_than_the_card():
    section = [ContextArticle("1", "Art. 1", "un", False, 1), ContextArticle("2", "Art. 2", "deux", False, 2)]
    passage = Entry(_hit(article_id="1", rank=1), (_hit(article_id="1", rank=1), _hit(article_id="2", rank=2)))
    assert "Voir la section" not in passage_card(passage, (), context=section)  # the passage is the whole section
    more = [*section, ContextArticle("3", "Art. 3", "trois", False)]
    assert "Voir la section (3 articles)" in passage_card(passage, (), context=more)
    assert "Voir la section (2 articles)" in hit_card(_hit(article_id="1", rank=1), (), context=section)


def test_common_verbs_and_short_words_are_not_highlighted():
    terms = query_terms("Mon propriétaire peut-il garder ma garantie ? Dois-je y aller ?")
    assert marked(highlight_html("Il peut garder la garantie, il doit y aller.", terms)) == ["garder", "garantie"]


def test_hit_card_escapes_every_field_from_the_data():
    card = hit_card(_hit(article_id=XSS, reference=XSS, breadcrumb=(XSS, "<b>x</b>"), text=XSS * 40,
                         marker=RankMarker("new")), query_terms("img"), preview_chars=30)
    p = parse(card)
    assert {t for t, _ in p.tags} <= ALLOWED_TAGS
    for _, attrs in p.tags:
        assert not any(name.startswith("on") for name in attrs)
    assert XSS in "".join(p.text)  # shown literally
    assert "nouveau" in "".join(p.text)


def test_hit_without_reference_shows_the_id():
    assert "Article 42" in "".join(parse(hit_card(_hit(reference=""), ())).text)


def test_missed_list_says_where_each_gold_article_is():
    out = missed_list([MissedGold("7", "Art. 7", 37, True), MissedGold("8", "", None, True),
                       MissedGold(XSS, "", None, False)], k=10, depth=1000)
    text = "".join(parse(out).text)
    assert "absents du top 10" in text
    assert "Art. 7" in text and "rang 37" in text
    assert "Article 8" in text and "au-delà du rang 1000" in text
    assert "absent du corpus" in text and XSS in text
    assert {t for t, _ in parse(out).tags} <= ALLOWED_TAGS
    assert "Tous les articles pertinents" in missed_list([], 5, 100)


def test_question_box_shows_a_hostile_question_literally():
    out = question_box(XSS, query_terms(XSS))
    p = parse(out)
    assert XSS in "".join(p.text)
    assert {t for t, _ in p.tags} <= ALLOWED_TAGS
