"""Shareable links of the Search page (bsard_demo.app.link_codec, link_widgets), without Streamlit: a search
and its URL parameters round-trip, both list forms are read, every invalid value falls back to
its default with a note, and the page's widget values map to the same search."""
from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given, strategies as st

from bsard_demo.retrievers.hybrid_specs import hybrid_spec

# Wrapped by hand (isort skips it): one name a line would repeat pages/search.py's imports line for line.
from bsard_demo.app.link_codec import (DEFAULT_K, DEFAULT_RRF_K, MAX_QUESTION_CHARS, LinkChoices, SearchSettings,  # isort: skip
                                       link_params, link_query, parse_link, share_url)
from bsard_demo.app.link_widgets import (same_params, settings_from_state, should_apply,  # isort: skip
                                         state_from_settings, weight_key)

CODES = ("Code civil", "Code <script>alert(1)</script>", "Code, virgule & co")
ENCODERS = ("use", "e5", "minilm", "trained:mon modèle", "trained:a,b")
EXAMPLES = {"1": "Mon propriétaire peut-il garder ma garantie ?", "x&y=z": "Question « hostile » <b>"}
CHOICES = LinkChoices(codes=CODES, encoders=ENCODERS, examples=EXAMPLES)


def parse_query(query: str) -> dict[str, list[str]]:
    """What a browser hands Streamlit for a query string."""
    return urllib.parse.parse_qs(query.lstrip("?"), keep_blank_values=True)


questions = st.one_of(st.just(""), st.text(min_size=1, max_size=MAX_QUESTION_CHARS).filter(lambda t: t.strip()))
systems = st.lists(st.sampled_from(["bm25", "dense", "hybrid"]), min_size=1, max_size=3, unique=True).map(tuple)
encoders = st.lists(st.sampled_from(ENCODERS), min_size=1, max_size=4, unique=True).map(tuple)


@st.composite
def settings(draw):
    henc = draw(encoders)
    weights = draw(st.one_of(st.none(), st.lists(st.floats(0, 100), min_size=len(henc) + 1,
                                                  max_size=len(henc) + 1).filter(lambda w: any(x > 0 for x in w))))
    example = draw(st.one_of(st.none(), st.sampled_from(sorted(EXAMPLES))))
    return SearchSettings(question=draw(questions), systems=draw(systems), k=draw(st.integers(1, 100)),
                          code=draw(st.one_of(st.none(), st.sampled_from(CODES))),
                          encoder=draw(st.sampled_from(ENCODERS)),
                          hybrid_encoders=henc, fusion=draw(st.sampled_from(["rrf", "weighted"])),
                          rrf_k=draw(st.integers(1, 1000)), alpha=draw(st.floats(0, 1)),
                          weights=None if weights is None else tuple(weights), example=example)


@given(settings())
def test_a_search_round_trips_through_its_link(s):
    expected = s.canonical()
    params = link_params(s)
    assert parse_link(params, CHOICES) == (expected, [])
    # the same through a real query string, as a browser decodes it
    assert parse_link(parse_query(link_query(s)), CHOICES) == (expected, [])
    # a canonical search is its own link's search, and canonical is idempotent
    assert parse_link(link_params(expected), CHOICES)[0] == expected == expected.canonical()


@given(settings())
def test_the_canonical_search_keeps_what_the_systems_use(s):
    c = s.canonical()
    assert (c.question, c.systems, c.k, c.code) == (s.question, s.systems, s.k, s.code)
    assert c.example == (s.example if s.question.strip() else None)
    if "dense" in s.systems:
        assert c.encoder == s.encoder
    if "hybrid" in s.systems:
        assert (c.hybrid_encoders, c.fusion) == (s.hybrid_encoders, s.fusion)
        assert c.rrf_k == (s.rrf_k if s.fusion == "rrf" else DEFAULT_RRF_K)
        # the weights are spelled out: the defaults when the search had none
        assert (c.alpha if s.uses_alpha else c.weights) == (s.alpha if s.uses_alpha else s.hybrid_weights)
    else:
        assert c.hybrid_encoders == ("use",) and c.weights is None


def test_a_bm25_link_holds_no_dense_setting():
    s = SearchSettings(question="garantie locative", systems=("bm25",), k=5, encoder="e5", fusion="weighted")
    assert link_params(s) == {"q": "garantie locative", "systems": ["bm25"], "k": "5"}
    assert link_query(s) == "?q=garantie%20locative&systems=bm25&k=5"


@pytest.mark.parametrize("params", [
    {"systems": ["bm25", "hybrid"]},
    {"systems": "bm25,hybrid"},
    {"systems": ["bm25,hybrid"]},
    {"systems": [" bm25 ", "hybrid,bm25"]},  # spaces, a repeat
    {"systems": ["bm25,", ",hybrid"]},  # empty items
])
def test_systems_repeated_or_comma_separated(params):
    s, notes = parse_link(params, CHOICES)
    assert s.systems == ("bm25", "hybrid") and notes == []


def test_both_forms_in_a_real_query_string():
    for query in ("systems=bm25&systems=dense", "systems=bm25,dense", "systems=bm25%2Cdense",
                  "systems=bm25&systems=dense,bm25"):
        assert parse_link(parse_query(query), CHOICES) == (SearchSettings(systems=("bm25", "dense")), []), query


def test_a_choice_holding_a_comma_stays_whole():
    s, notes = parse_link({"systems": "hybrid", "henc": ["trained:a,b", "use,e5"]}, CHOICES)
    assert s.hybrid_encoders == ("trained:a,b", "use", "e5") and notes == []
    assert parse_link(link_params(s), CHOICES)[0] == s.canonical()


def test_the_example_fills_an_absent_question():
    s, notes = parse_link({"ex": "1"}, CHOICES)
    assert (s.example, s.question, notes) == ("1", EXAMPLES["1"], [])
    s, _ = parse_link({"ex": "1", "q": "ma question à moi"}, CHOICES)
    assert (s.example, s.question) == \
        ("1", "ma question à moi")  # kept: the page scores it only while it is the example's text


def test_an_empty_link_is_the_default_search_without_notes():
    assert parse_link({}, CHOICES) == (SearchSettings(), [])
    assert parse_link({"code": "", "k": "", "fusion": "", "q": ""}, CHOICES) == (SearchSettings(), [])
    assert parse_link({"embed": "true", "embed_options": "light_theme"}, CHOICES) == (SearchSettings(), [])


DEFAULT = SearchSettings()
PARAM = {"question": "q", "systems": "systems", "k": "k", "code": "code", "encoder": "enc", "hybrid_encoders": "henc",
         "fusion": "fusion", "rrf_k": "rrfk", "alpha": "alpha", "weights": "w", "example": "ex"}
INVALID = [
    ({"systems": "tfidf"}, "systems", DEFAULT.systems, "tfidf"),
    ({"systems": ""}, "systems", DEFAULT.systems, "« systems » est vide"),
    ({"systems": "bm25,tfidf"}, "systems", ("bm25",), "tfidf"),
    ({"systems": ["dense", "BM25"]}, "systems", ("dense",), "BM25"),
    ({"k": "0"}, "k", DEFAULT_K, "k="),
    ({"k": "101"}, "k", DEFAULT_K, "101"),
    ({"k": "dix"}, "k", DEFAULT_K, "dix"),
    ({"k": "2.5"}, "k", DEFAULT_K, "2.5"),
    ({"k": "-3"}, "k", DEFAULT_K, "-3"),
    ({"k": ["5", "7"]}, "k", 7, "2 fois"),
    ({"code": "Code pénal"}, "code", None, "Code pénal"),
    ({"enc": "gpt"}, "encoder", "use", "gpt"),
    ({"enc": "use,e5"}, "encoder", "use", "Un seul encodeur"),
    ({"henc": "gpt"}, "hybrid_encoders", ("use",), "gpt"),
    ({"henc": ","}, "hybrid_encoders", ("use",), "« henc » est vide"),
    ({"henc": "e5,gpt"}, "hybrid_encoders", ("e5",), "gpt"),
    ({"fusion": "max"}, "fusion", "rrf", "max"),
    ({"rrfk": "0"}, "rrf_k", DEFAULT_RRF_K, "rrfk"),
    ({"rrfk": "1001"}, "rrf_k", DEFAULT_RRF_K, "1001"),
    ({"rrfk": "6e1"}, "rrf_k", DEFAULT_RRF_K, "6e1"),
    ({"alpha": "1.5"}, "alpha", 0.5, "1.5"),
    ({"alpha": "nan"}, "alpha", 0.5, "nan"),
    ({"alpha": "inf"}, "alpha", 0.5, "inf"),
    ({"alpha": "1e999"}, "alpha", 0.5, "1e999"),
    ({"alpha": "1_0"}, "alpha", 0.5, "1_0"),
    ({"alpha": "-0.1"}, "alpha", 0.5, "-0.1"),
    ({"systems": "hybrid", "w": "1,x"}, "weights", None, "1,x"),
    ({"systems": "hybrid", "w": "1,-1"}, "weights", None, "1,-1"),
    ({"systems": "hybrid", "w": "1,101"}, "weights", None, "1,101"),
    ({"systems": "hybrid", "w": "1,nan"}, "weights", None, "1,nan"),
    ({"systems": "hybrid", "w": "1,2,3"}, "weights", None, "3 poids pour 2"),
    ({"systems": "hybrid", "w": "0,0"}, "weights", None, "nuls"),
    ({"systems": "hybrid", "fusion": "weighted", "w": "1,2"}, "weights", None, "α fixe"),
    ({"ex": "999"}, "example", None, "999"),
    ({"q": "é" * (MAX_QUESTION_CHARS + 5)}, "question", "é" * MAX_QUESTION_CHARS, "tronquée"),
    ({"sytems": "bm25"}, "systems", DEFAULT.systems, "sytems"),
]


@pytest.mark.parametrize("params,name,expected,said", INVALID, ids=[repr(p) for p, *_ in INVALID])
def test_an_invalid_value_falls_back_with_a_note(params, name, expected, said):
    s, notes = parse_link(params, CHOICES)
    assert getattr(s, name) == expected
    assert len(notes) == 1 and said in notes[0], notes
    # everything else is the default search (plus what the link validly held)
    valid_rest = {k: v for k, v in params.items() if k != PARAM[name]}
    assert s == SearchSettings(**{**parse_link(valid_rest, CHOICES)[0].__dict__, name: expected})


def test_every_problem_of_a_link_is_noted_at_once():
    s, notes = parse_link({"systems": "tfidf", "k": "0", "code": "?", "enc": "gpt", "fusion": "max", "zz": "1"},
                          CHOICES)
    assert s == SearchSettings() and len(notes) == 6


def test_a_huge_value_is_shortened_in_its_note():
    _, notes = parse_link({"code": "x" * 10_000}, CHOICES)
    assert len(notes) == 1 and len(notes[0]) < 200


def test_share_url():
    s = SearchSettings(question="a&b=c #1", systems=("dense",), encoder="e5")
    assert share_url("http://127.0.0.1:8501/", s) == \
        "http://127.0.0.1:8501/?q=a%26b%3Dc%20%231&systems=dense&k=10&enc=e5"
    assert share_url("https://x.streamlit.app/search?old=1#top", s).startswith("https://x.streamlit.app/search?q=")
    assert share_url(None, s) == link_query(s) and share_url("", s).startswith("?q=")


# --------------------------------------------------------------------------- the page's widgets

@given(settings())
def test_widget_values_show_the_same_search(s):
    state = state_from_settings(s, ENCODERS)
    c = s.canonical()
    got = settings_from_state(state, CHOICES)
    assert got.canonical() == c


def test_a_link_resets_earlier_weights():
    state = {weight_key("e5"): 3.0, weight_key("bm25"): 2.0}
    state.update(state_from_settings(SearchSettings(systems=("hybrid",), hybrid_encoders=("use",)), ENCODERS))
    # each widget shows its RRF default: BM25 and trained models 1, built-in encoders 0.5
    assert [state[weight_key(e)] for e in ("bm25", *ENCODERS)] == [1.0, 0.5, 0.5, 0.5, 1.0, 1.0]
    assert settings_from_state(state, CHOICES).weights is None
    assert settings_from_state(state, CHOICES).hybrid_weights == (1.0, 0.5) == tuple(hybrid_spec().options["weights"])


def test_widget_values_no_longer_valid_become_defaults():
    state = {"kinds": ["bm25", "tfidf"], "code": "Code d'un autre jeu", "encoder": "minilm", "hybrid_encoders": [],
             "fusion": "weird", "example_qid": "999", "question": "q"}
    got = settings_from_state(state, LinkChoices(codes=CODES, encoders=("use", "e5"), examples=EXAMPLES))
    assert got == SearchSettings(question="q", systems=("bm25",))


def test_when_the_url_is_applied():
    link = {"q": ["x"], "systems": ["bm25"], "k": ["10"]}
    assert should_apply(link, None)  # a link opened: a new session
    assert not should_apply(link, {"q": "x", "systems": "bm25", "k": "10"})  # what this session wrote
    assert should_apply(link, {"q": "y", "systems": "bm25", "k": "10"})  # another search (back button, edited URL)
    assert not should_apply({}, link)  # back from the other page, URL empty: keep the session's search
    assert not should_apply({}, None)


def test_same_params():
    assert same_params({"a": "1", "b": ["x", "y"]}, {"b": ["x", "y"], "a": ["1"]})
    assert not same_params({"b": ["y", "x"]}, {"b": ["x", "y"]}) and not same_params({"a": "1"}, {"a": "1", "b": "2"})
