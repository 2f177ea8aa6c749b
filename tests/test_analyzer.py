"""The French analyzer: elisions, accents, stop words, stems, numbers, spans, indexed text."""
from __future__ import annotations

import unicodedata

import Stemmer
from hypothesis import given, settings, strategies as st

from bsard_demo.analyzer import DEFAULT_FIELDS, FRENCH_STOPWORDS, TEXT_ONLY, Analyzer, article_text, article_texts, fold

A = Analyzer()
RAW = Analyzer(stem=False, stopwords=False)
SNOWBALL = Stemmer.Stemmer("french")


def test_elisions_with_both_apostrophes_are_cut_off():
    for apostrophe in ("'", "’"):
        text = (f"l{apostrophe}article d{apostrophe}un jusqu{apostrophe}au lorsqu{apostrophe}il qu{apostrophe}elle "
                f"puisqu{apostrophe}on s{apostrophe}engage")
        assert RAW.tokens(text) == ["article", "un", "au", "il", "elle", "on", "engage"]
    assert RAW.tokens("L’État, C'est") == ["etat", "est"]
    # an apostrophe not followed by a word is not an elision: the letter stays a word
    assert RAW.tokens("l' article") == ["l", "article"]
    # only a whole leading word is elided: aujourd'hui is not d' + hui
    assert RAW.tokens("aujourd'hui") == ["aujourd", "hui"]


def test_lowercase_and_accent_folding():
    assert RAW.tokens("ÉTÉ Propriété CŒUR naïve") == ["ete", "propriete", "coeur", "naive"]
    decomposed = unicodedata.normalize("NFD", "propriété séjour")
    assert RAW.tokens(decomposed) == RAW.tokens("propriété séjour") == ["propriete", "sejour"]
    assert fold("Œuvre à côté") == "OEuvre a cote"


def test_stemming_groups_inflections_as_snowball_does():
    words = ["locative", "locatives", "locatif", "locatifs", "Locatives"]
    expected = SNOWBALL.stemWord("locative")
    assert expected == "locat"
    assert A.tokens(" ".join(words)) == [expected] * len(words)
    # stemming happens on the accented word (Snowball uses the accents), then the stem is folded
    assert A.tokens("nationalité") == [fold(SNOWBALL.stemWord("nationalité"))] == ["national"]
    assert A.tokens("propriétaires") == ["proprietair"]
    assert Analyzer(stem=False).tokens("locatives") == ["locatives"]


def test_stop_words_are_dropped_accent_insensitively():
    text = "Le bail de la maison et les droits du locataire à été"
    assert A.tokens(text) == ["bail", "maison", "droit", "locatair"]
    assert "ete" in FRENCH_STOPWORDS and "a" in FRENCH_STOPWORDS
    assert all(w == fold(w) for w in FRENCH_STOPWORDS)
    kept = Analyzer(stopwords=False, stem=False).tokens(text)
    assert kept == ["le", "bail", "de", "la", "maison", "et", "les", "droits", "du", "locataire", "a", "ete"]


def test_numbers_kept_or_dropped():
    text = "article 1382, alinéa 1er, loi du 20 février 1991"
    stems = [fold(SNOWBALL.stemWord(w)) for w in ("article", "alinéa", "loi", "février")]
    assert stems == ["articl", "aline", "loi", "fevri"]
    assert A.tokens(text) == [stems[0], "1382", stems[1], "1er", stems[2], "20", stems[3], "1991"]
    assert Analyzer(keep_numbers=False).tokens(text) == stems


def test_spans_map_back_to_the_original_text():
    text = "Les garanties locatives (art. 1382) s’appliquent jusqu'à l’État."
    spans = A.spans(text)
    assert [(text[s:e], t) for s, e, t in spans] == [
        ("garanties", "garant"), ("locatives", "locat"), ("art", "art"), ("1382", "1382"),
        ("appliquent", "appliquent"), ("État", "etat"),
    ]
    # highlighting: question terms found in the article
    question = set(A.tokens("Quelle garantie locative ?"))
    assert [text[s:e] for s, e, t in spans if t in question] == ["garanties", "locatives"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcdeéèêàçôœ' ’-.,1290LÉDQUJS\u0301")), max_size=60))
def test_spans_agree_with_tokens(text):
    spans = A.spans(text)
    assert [t for *_, t in spans] == A.tokens(text)
    ends = -1
    for s, e, t in spans:
        assert ends <= s < e <= len(text)
        assert A.term(text[s:e]) == t
        ends = e


def test_article_text_fields_order_and_defaults():
    row = {"id": "1", "article": "Le bail est conclu.", "reference": "Art. 2, Code du logement",
           "code": "Code du logement", "book": "", "chapter": "Chapitre II", "section": None,
           "description": "Code du logement", "law_type": "regional"}
    assert article_text(row) == "Art. 2, Code du logement\nCode du logement\nChapitre II\nLe bail est conclu."
    assert article_text(row, TEXT_ONLY) == "Le bail est conclu."
    assert article_text(row, ("article", "reference")) == "Le bail est conclu.\nArt. 2, Code du logement"
    assert article_text({"article": float("nan")}) == ""
    assert DEFAULT_FIELDS[-1] == "article" and "law_type" not in DEFAULT_FIELDS


def test_article_texts_over_a_dataframe():
    import pandas as pd

    df = pd.DataFrame({"id": ["1", "2"], "article": ["un", "deux"], "code": ["C", ""]})
    assert article_texts(df) == ["C\nun", "deux"]
    assert article_texts(df, ("missing",)) == ["", ""]


def test_settings_name_the_stemmer_and_word_lists(monkeypatch):
    import importlib.metadata

    from bsard_demo import analyzer as module

    s = A.settings()
    assert s["stemmer"] == f"pystemmer-{importlib.metadata.version('PyStemmer')}"
    assert Analyzer(stem=False).settings()["stemmer"] is None
    assert s["stopwords_digest"] and Analyzer(stopwords=False).settings()["stopwords_digest"] is None
    # the digests follow the lists' content, not their order
    monkeypatch.setattr(module, "FRENCH_STOPWORDS", frozenset(sorted(FRENCH_STOPWORDS, reverse=True)))
    assert A.settings() == s
    monkeypatch.setattr(module, "FRENCH_STOPWORDS", FRENCH_STOPWORDS - {"dans"})
    assert A.settings()["stopwords_digest"] != s["stopwords_digest"]


cells = st.one_of(st.none(), st.just(float("nan")), st.just(""), st.just("  "),
                  st.sampled_from(["a", " a ", "b", "Code"]),
                  st.integers(0, 3), st.text(max_size=6))


@settings(deadline=None)  # the first example imports pandas
@given(rows=st.lists(st.fixed_dictionaries({"article": cells, "code": cells, "reference": cells}), max_size=6),
       fields=st.lists(st.sampled_from(["article", "code", "reference", "missing"]), max_size=4))
def test_article_texts_is_article_text_of_every_row(rows, fields):
    import pandas as pd

    df = pd.DataFrame(rows, columns=["article", "code", "reference"], dtype=object)
    columns = [f for f in fields if f in df.columns]
    assert article_texts(df, fields) == [article_text(row, columns) for row in df.to_dict("records")]


def test_article_texts_are_held_while_keeping_and_a_copy_is_handed_out():
    import pandas as pd

    from bsard_demo.frame_memo import keeping

    df = pd.DataFrame({"id": ["1", "2"], "article": ["un", "deux"]})
    with keeping():
        first = article_texts(df)
        first.append("changed by a caller")
        assert article_texts(df) == ["un", "deux"]
        assert article_texts(df, ("article", "id")) == ["un\n1", "deux\n2"]  # another key
