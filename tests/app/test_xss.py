"""Hostile text in the app: dataset fields, questions, run files and file names are shown as text,
never as markup, and uploads are only ever bytes in memory.

In-process (``streamlit.testing.v1.AppTest``) over the hostile local dataset of
``tests/_hostile_data.py``; the same data in Chromium is ``tests/test_browser_hostile.py``.
Rules checked on every rendered element:

- Markdown bodies (alerts, captions, headings, widget/expander/tab labels) hold no payload
  verbatim and no unescaped ``<tag``; once Markdown escapes are removed, the payload is there;
- ``st.html`` fragments hold only the fixed tags and attributes of ``bsard_demo.app.render``, and the
  payload is their text;
- data-frame cells and chart data carry the payload as a plain value; chart specs mention it only
  as a data value (a ``sort``/``domain`` list), never in a title or an expression.
"""
from __future__ import annotations

import builtins
import contextlib
import gzip
import json
import os
import pickle
import re
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from _app_helpers import REPO, TIMEOUT, sample_run_trec, set_app_env, start

# Wrapped by hand (isort skips it): one name a line would repeat test_browser_hostile.py's imports line for line.
from _hostile_data import (A_JS, BOLD_MD, CATEGORY, EVIL_ARTICLE, EVIL_QID, IMG, LONG, MARKUP, QUESTION, RUN_IMG,  # isort: skip
                           RUN_MD, SCRIPT, SVG, articles, questions, run_json, run_trec, write_dataset)
from _html_fragments import parse
from bsard_demo.app.answers import CitedArticle, SimilarQuestion
from bsard_demo.app.highlight import md_escape, query_terms
from bsard_demo.app.passages import ContextArticle, Entry
from bsard_demo.app.render import (
    COPY_SCRIPT,
    breadcrumb,
    hit_card,
    missed_list,
    passage_card,
    question_box,
    reminder_card,
    section_view,
    similar_panel,
    upload_refused_notice,
)
from bsard_demo.app.search_page import MissedGold, RankMarker, ShownHit

FOLDER = f"données {IMG} {BOLD_MD}"
#: What ``bsard_demo.app.render`` may emit: (tag, allowed attributes).
ALLOWED = {"div": {"class", "data-article", "data-member", "role", "title"}, "span": {"class", "title"}, "mark": set(),
           "details": {"class"}, "summary": set(), "br": set(), "b": set(), "ul": set(), "li": set(), "small": set(),
           "button": {"class", "type", "title", "data-copy"}, "h2": {"class", "data-search"}}
MARKDOWN_TYPES = {"markdown", "caption", "title", "header", "subheader", "error", "warning", "info", "success"}


# --------------------------------------------------------------------------- reading what was rendered

def html_text(fragment: str) -> str:
    """The text a browser shows for one of our fragments (``<br>`` as a line break)."""
    return "".join(parse(fragment.replace("<br>", "\n")).text)


def question_boxes(at) -> list[str]:
    """The text of the searched question's box (its « Modifier la question » button left out)."""
    return [html_text(f).removesuffix("Modifier la question") for f in html_bodies(at) if 'class="bsard-question"' in f]


def unmd(body: str) -> str:
    """A Markdown body with its backslash escapes removed (what the reader sees)."""
    return re.sub(r"\\(.)", r"\1", body)


def nodes(at: AppTest):
    todo = [at._tree]
    while todo:
        node = todo.pop()
        yield node
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            todo.extend(reversed(list(children.values())))


def markdown_bodies(at: AppTest) -> list[str]:
    """Every string Streamlit renders as Markdown: element bodies and widget/expander/tab labels."""
    out = []
    for node in nodes(at):
        if node.type in MARKDOWN_TYPES:
            out.append(node.proto.body)
        label = getattr(node, "label", None)
        if isinstance(label, str):
            out.append(label)
        help_text = getattr(getattr(node, "proto", None), "help", None)
        if isinstance(help_text, str) and help_text:
            out.append(help_text)
    return out


def html_bodies(at: AppTest) -> list[str]:
    """The ``st.html`` fragments, without the app's constant style sheet and copy script."""
    return [n.value for n in at.html if not n.value.lstrip().startswith("<style>") and n.value != COPY_SCRIPT]


def frame_texts(at: AppTest) -> list[str]:
    out = []
    for d in at.dataframe:
        df = d.value
        out += [str(v) for v in df.index] + [str(c) for c in df.columns]
        out += [str(v) for col in df.columns for v in df[col]]
    return out


def assert_no_live_markup(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    for body in markdown_bodies(at):
        assert not re.search(r"(?<!\\)<[A-Za-z/!?]", body), body[:300]
        for payload in MARKUP:
            assert payload not in body, (payload, body[:300])
    for fragment in html_bodies(at):
        for tag, attrs in parse(fragment).tags:
            assert tag in ALLOWED, (tag, fragment[:300])
            assert set(attrs) <= ALLOWED[tag], (tag, attrs)


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def chart_frames(chart):
    """The rows a chart draws (its Arrow datasets) as DataFrames."""
    import pyarrow as pa

    return [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets]


def click_point(at: AppTest, chart, qid: str) -> None:
    """What a click on the A-vs-B chart's point ``qid`` sends (its selection state), then a rerun."""
    states = at._tree.get_widget_states()
    state = states.widgets.add()
    state.id = chart.proto.id
    state.string_value = json.dumps({"selection": {"question": [{"qid": qid}]}})
    at._run(states)


def strings_in(value, path=()):
    """``(path, string)`` for every string inside a JSON value."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings_in(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings_in(v, path + (i,))


# --------------------------------------------------------------------------- the app over hostile data

@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("xss") / FOLDER)


@pytest.fixture(autouse=True)
def app_env(monkeypatch, tmp_path_factory, hostile_dir):
    return set_app_env(monkeypatch, tmp_path_factory.getbasetemp() / "xss-cache", str(hostile_dir))


def cards(at: AppTest) -> dict[str, str]:
    """Hit cards by article id (their ``data-article``), as the text the reader sees."""
    out = {}
    for fragment in html_bodies(at):
        p = parse(fragment)
        if p.tags and p.tags[0][0] == "div" and p.tags[0][1].get("class", "").startswith("bsard-hit"):
            out[p.tags[0][1]["data-article"]] = html_text(fragment)
    return out


def test_search_page_shows_every_hostile_field_as_text(hostile_dir):
    at = start()
    side = " ".join(unmd(m.value) for m in at.sidebar.markdown)
    # the folder's name, itself hostile, and not its path: the server chose it (BSARD_DATA)
    assert hostile_dir.name in side and str(hostile_dir.parent) not in side
    at.slider(key="top_k").set_value(12)
    at.selectbox(key="example_qid").select("1").run()
    assert_no_live_markup(at)
    assert at.text_area(key="question").value == QUESTION
    boxes = question_boxes(at)
    assert boxes == [QUESTION]
    shown = cards(at)
    assert len(shown) == 12 and EVIL_ARTICLE in shown
    for art in articles():
        card = shown[art["id"]]
        for field in ("reference", "article", "code", "book", "chapter"):
            assert art[field] in card, (art["id"], field)
        assert " › ".join(art[c] for c in ("code", "book", "chapter")) in card  # the breadcrumb
    assert LONG in shown["11"] and LONG in shown["12"]
    captions = " ".join(unmd(c.value) for c in at.caption)
    assert f"catégorie {CATEGORY}" in captions
    assert any(o.startswith(f"n° {EVIL_QID} · Famille {IMG} · {SCRIPT}")
               for o in at.selectbox(key="example_qid").options)

    # a short top k lists the missed gold articles (reference and id, both hostile)
    at.slider(key="top_k").set_value(1).run()
    assert_no_live_markup(at)
    top = list(cards(at))
    gold = questions()[0]["article_ids"].split(",")
    missed = [html_text(f) for f in html_bodies(at) if f.startswith('<div class="bsard-missed"')]
    assert len(missed) == 1
    reference = {a["id"]: a["reference"] for a in articles()}
    for a in gold:
        assert (f"{reference[a]} (id {a}," in missed[0]) == (a not in top), a

    # the code filter names a hostile code
    code = f"Code {SCRIPT}"
    at.selectbox(key="code").select(code).run()
    assert_no_live_markup(at)
    assert any(unmd(c.value) == f"Filtre : seuls les articles du code « {code} » sont classés." for c in at.caption)
    codes = {a["id"]: a["code"] for a in articles()}
    outside = [a for a in gold if codes.get(a) != code]
    assert outside  # the hostile question has gold articles of other codes: listed apart, by their hostile reference
    missed = [html_text(f) for f in html_bodies(at) if f.startswith('<div class="bsard-missed"')]
    assert len(missed) == 1 and f"Articles pertinents hors du code filtré « {code} »" in missed[0]
    for a in outside:
        where = 'hors du code filtré' if a in codes else 'absent du corpus'
        assert f"{reference[a] or 'Article ' + a} (id {a}, {where})" in missed[0]


def test_typed_long_hostile_question(hostile_dir):
    question = f"{SCRIPT} garantie {'Z' * 1900} {IMG}"  # the box takes up to 2,000 characters
    at = start()
    at.text_area(key="question").input(question).run()
    assert_no_live_markup(at)
    boxes = question_boxes(at)
    assert boxes == [question]
    assert cards(at)


def test_panel_passages_and_why_lines_show_hostile_data_as_text(tmp_path, monkeypatch):
    """The similar questions' texts, ids and categories, the cited articles (those outside the
    corpus too), passage titles and why-lines of hostile data are text: the hostile dataset with
    one code for all (consecutive articles make passages) and hostile train questions."""
    import csv

    folder = write_dataset(tmp_path / f"train {IMG}")
    rows = [dict(a, code=f"Code {SCRIPT}") for a in articles()]
    train = [{"id": f"t{i} {IMG}", "category": CATEGORY, "subcategory": "", "question": f"garantie locative {payload}",
              "extra_description": "", "article_ids": f"1,2,{EVIL_ARTICLE},{SVG}"} for i, payload in enumerate(MARKUP)]
    for name, table in (("articles.csv", rows), ("questions_train.csv", train)):
        with open(folder / name, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
    monkeypatch.setenv("BSARD_DATA", str(folder))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"q": QUESTION, "systems": ["bm25", "hybrid"], "henc": "neighbours", "k": "12"})
    at.run()
    assert_no_live_markup(at)
    (panel,) = [html_text(f) for f in html_bodies(at) if f.startswith('<div class="bsard-similar"')]
    assert panel.count(CATEGORY) == 5 and panel.count("n° t") == 5
    shown_questions = [q for q in train if f"n° {q['id']} ·" in panel]
    assert len(shown_questions) == 5 and all(q["question"] in panel for q in shown_questions)
    reference = {a["id"]: a["reference"] for a in rows}
    assert reference[EVIL_ARTICLE] in panel and f"Article {SVG} absent du corpus" in panel
    shown = cards(at)
    whys = [f for f in html_bodies(at) if 'class="bsard-why"' in f]
    assert whys and all("BM25 n° " in html_text(f) for f in whys)
    passages = [f for f in html_bodies(at) if f.startswith('<div class="bsard-hit bsard-passage')]
    assert passages  # their « Voir la section », when the section has more, is text too (assert_no_live_markup)
    assert any(reference[EVIL_ARTICLE] in html_text(f) for f in passages + [shown[EVIL_ARTICLE]])


def test_a_hostile_link_is_shown_as_text(hostile_dir, tmp_path, monkeypatch):
    """Query parameters are visitor input too: a link's question, values and parameter names, and
    the trained models' folder names and records, are shown as text (Search page links)."""
    import urllib.parse

    models = tmp_path / "models"
    good = models / f"m {IMG}"
    good.mkdir(parents=True)
    (good / "bsard_training.json").write_text(json.dumps({"dataset": {"name": SCRIPT, "split": BOLD_MD},
                                                          "base": {"name": IMG}}))
    (good / "modules.json").write_text("[]")
    broken = models / f"{BOLD_MD} {IMG}"
    broken.mkdir()
    (broken / "bsard_training.json").write_text(SCRIPT)
    monkeypatch.setenv("BSARD_MODELS", str(models))
    code = f"Code {SCRIPT}"
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"q": SCRIPT, "systems": ["bm25", IMG], "k": BOLD_MD, "code": code, "enc": IMG, "henc": SVG,
                            "ex": EVIL_QID, IMG: BOLD_MD, "fusion": A_JS})
    at.run()
    assert_no_live_markup(at)
    assert question_boxes(at) == [SCRIPT]
    assert at.selectbox(key="code").value == code and at.selectbox(key="example_qid").value == EVIL_QID
    (note,) = [unmd(w.value) for w in at.warning if "Lien corrigé" in w.value]
    for payload in (IMG, BOLD_MD, SVG):  # the unknown values and the unknown parameter's name, as text
        assert payload in note, payload
    captions = " ".join(unmd(c.value) for c in at.caption)
    assert f"{BOLD_MD} {IMG} (illisible" in captions  # the unreadable model, named as text
    labels = at.selectbox(key="encoder").options
    assert f"m {IMG} — {IMG} affiné sur {SCRIPT} (split {BOLD_MD}, ? paires, ? époque(s))" in labels
    (link,) = [c.value for c in at.code]
    assert "<" not in link and urllib.parse.parse_qs(link[1:])["q"] == [SCRIPT]
    # the address bar holds the corrected search: the hostile question and code, nothing else
    assert at.query_params["q"] == SCRIPT and at.query_params["code"] == code and IMG not in at.query_params


def test_score_page_shows_hostile_runs_as_text():
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    uploader.upload(RUN_IMG, run_trec(), "text/plain")
    uploader.upload(RUN_MD, run_trec(reverse=True), "text/plain")
    uploader.upload("evil.json", run_json(), "application/json")
    at.run()
    assert_no_live_markup(at)
    names = [RUN_IMG, RUN_MD, "evil.json"]
    alerts = [unmd(w.value) for w in at.warning]
    for name in names:
        assert any(a.startswith(f"**{name}** : format") for a in alerts), (name, alerts)
        assert any(unmd(e.label) == f"Problèmes de {name}" for e in at.expander), name
    problems = " ".join(" ".join(d.value["message"]) for d in at.dataframe if "message" in d.value.columns)  # details
    assert SCRIPT in problems  # the run tags
    assert SVG in problems and IMG in problems  # unknown article ids, from the TREC and the JSON files

    metrics = next(d.value for d in at.dataframe if "R@100" in d.value.columns)
    assert list(metrics.index) == names
    per_q = next(d.value for d in at.dataframe if "question" in d.value.columns and "run" in d.value.columns)
    assert CATEGORY in set(per_q["category"]) and QUESTION in set(per_q["question"])
    assert CATEGORY in at.multiselect(key="pq_categories").options
    comparison = next(d.value for d in at.dataframe if "run A" in d.value.columns)
    assert set(comparison["run A"]) | set(comparison["run B"]) == set(names)

    # charts: the hostile names are data values, never part of a title or an expression
    specs = chart_specs(at)
    assert len(specs) == 7  # four charts, the A-vs-B scatter and where misses land (per run, A against B)
    seen = 0
    for spec in specs:
        for path, text in strings_in(spec):
            if "__xss" in text or text in names:
                seen += 1
                assert any(p in ("sort", "domain", "values", "datasets") for p in path if isinstance(p, str)), path
                assert not any(p in ("title", "expr", "labelExpr", "calculate", "filter") for p in path), path
    assert seen
    for chart in at.get("vega_lite_chart"):
        assert chart.proto.datasets  # the rows travel as Arrow data, not inside the spec

    # the A-vs-B scatter: question texts (tooltips) and run names are plain data values
    (ab,) = [c for c in at.get("vega_lite_chart") if "ab_chart" in (c.proto.id or "")]
    rows = max(chart_frames(ab), key=len)
    assert QUESTION in set(rows["question"]) and CATEGORY in set(rows["category"]) and EVIL_QID in set(rows["qid"])
    assert set(rows["run_a"]) == {RUN_IMG} and set(rows["run_b"]) == {RUN_MD}
    tooltip_fields = {t.get("field") for layer in json.loads(ab.proto.spec)["layer"] for t in
                      layer.get("encoding", {}).get("tooltip", [])}
    assert {"question", "run_a", "run_b"} <= tooltip_fields
    assert any(unmd(m.value).startswith(f"A = **{RUN_IMG}**, B = **{RUN_MD}**") for m in at.markdown)
    # a click on the hostile question's point opens it
    click_point(at, ab, EVIL_QID)
    assert_no_live_markup(at)
    assert at.selectbox(key="dd_qid").value == EVIL_QID and at.selectbox(key="dd_run").value == RUN_IMG

    # drill-down of the question whose id, category and text are hostile
    at.selectbox(key="dd_run").select(RUN_MD)
    at.selectbox(key="dd_qid").select(EVIL_QID).run()
    assert_no_live_markup(at)
    q = next(r for r in questions() if r["id"] == EVIL_QID)
    boxes = question_boxes(at)
    assert boxes == [q["question"]]
    assert any(unmd(c.value).startswith(f"Catégorie : {q['category']}") for c in at.caption)
    at.selectbox(key="dd_qid").select("1").run()
    assert_no_live_markup(at)
    gold = next(d.value for d in at.dataframe if list(d.value.columns)[:2] == ["article", "référence"])
    assert list(gold.columns[2:]) == [f"rang · {n}" for n in names]
    reference = {a["id"]: a["reference"] for a in articles()}
    assert list(gold["article"]) == ["1", EVIL_ARTICLE, "12"]
    assert list(gold["référence"]) == [reference[a] for a in gold["article"]]
    # the gold articles' text: escaped fragments, the payloads as text; long ones whole behind an expander
    text = {a["id"]: a["article"] for a in articles()}
    shown = [html_text(f) for f in html_bodies(at) if f.startswith('<div class="bsard-text">')]
    for article_id in ("1", EVIL_ARTICLE):
        assert text[article_id] in shown, article_id
    assert any(t.startswith(text["12"][:300]) and t.endswith("…") for t in shown)  # 5,000 Z: shortened…
    assert text["12"] in shown  # …and whole in the expander
    assert any(e.label == "Lire l'article entier" for e in at.expander)
    top = next(d.value for d in at.dataframe if "pertinent" in d.value.columns)
    assert SVG in set(top["article"]) and EVIL_ARTICLE in set(top["article"])


def test_unloadable_hostile_folder_is_named_as_text(monkeypatch, tmp_path):
    folder = tmp_path / f"absent {IMG} [x](javascript:window.__xss=1)"
    monkeypatch.setenv("BSARD_DATA", str(folder))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    assert_no_live_markup(at)
    banner = " ".join(unmd(i.value) for i in [*at.main.info, *at.main.warning])
    details = " ".join(unmd(c.value) for e in at.sidebar.expander for c in e.caption)
    # named as text by its last part, never by the server's path; the loader's message in the sidebar's details
    assert f"Le dossier « {folder.name} » n'a pas pu être chargé" in banner and "no such folder" in details
    assert str(tmp_path) not in details
    assert str(tmp_path) not in banner


# --------------------------------------------------------------------------- the renderers alone

@pytest.mark.parametrize("payload", MARKUP + (LONG,), ids=lambda p: p[:20])
def test_each_renderer_keeps_a_payload_as_text(payload):
    hit = ShownHit(rank=1, article_id=payload, score=1.0, reference=payload, breadcrumb=(payload, payload),
                   text=f"garantie {payload} " * 30, gold=True, marker=RankMarker("up", 2), why=f"{payload} n° 3")
    other = ShownHit(rank=4, article_id=payload + "2", score=0.5, reference=payload, breadcrumb=(payload,),
                     text=payload, why=payload)
    context = [ContextArticle(payload, payload, payload, True, 1), ContextArticle(payload, "", payload, False)]
    similar = [SimilarQuestion(payload, payload, payload, 1.5, (CitedArticle(payload, payload, (payload,), True,
                                                                             ((payload, 2),)),
                                                                CitedArticle(payload, "", (), False)))]
    fragments = [hit_card(hit, query_terms(payload + " garantie"), preview_chars=40, context=context),
                 passage_card(Entry(hit, (hit, other), payload), query_terms(payload), context=context),
                 reminder_card(Entry(other, title=payload, lead=hit)), section_view(context, query_terms(payload)),
                 similar_panel(similar),
                 missed_list([MissedGold(payload, payload, 3, True), MissedGold(payload, "", None, False)], 1, 10),
                 missed_list([], 1, 10, [MissedGold(payload, payload, None, True)], payload),
                 question_box(payload, query_terms(payload)), breadcrumb([payload, payload])]
    for fragment in fragments:
        p = parse(fragment)
        for tag, attrs in p.tags:
            assert tag in ALLOWED and set(attrs) <= ALLOWED[tag], (tag, attrs)
        assert payload in html_text(fragment)
    copies = [attrs["data-copy"] for tag, attrs in parse(fragments[0]).tags if tag == "button"]
    assert copies == [f"{payload} — {payload} › {payload}"]  # the copied text is the data, as text
    if payload != LONG:
        assert payload not in md_escape(payload)
    assert unmd(md_escape(payload)) == payload


def test_a_giant_word_does_not_make_a_giant_preview():
    text = f"garantie {LONG} fin"
    card = hit_card(ShownHit(rank=1, article_id="1", score=1.0, reference="", breadcrumb=(), text=text),
                    query_terms("garantie"), preview_chars=300)
    preview = html_text(card.split('<div class="bsard-text">')[1].split("</div>")[0])
    assert preview == text[:300] + " …"
    full = html_text(card.split('<div class="bsard-full">')[1].split("</div>")[0])
    assert full == text  # the whole text stays one click away


def test_upload_refused_notice_is_fixed_markup():
    fragment = upload_refused_notice(50, 500)
    assert {t for t, _ in parse(fragment).tags} == {"div", "b"}
    assert "limite de 50 Mo par fichier" in html_text(fragment) and "500 premiers articles" in html_text(fragment)


# --------------------------------------------------------------------------- uploads stay in memory

MARKER = "PWNED_b5e1c0"


class _EvilPickle:
    """Unpickling this runs ``exec``, which sets ``builtins.<MARKER>``."""

    def __reduce__(self):
        return exec, (f"import builtins; setattr(builtins, {MARKER!r}, True)",)


def _hostile_uploads() -> list[tuple[str, bytes]]:
    code = f"__import__('builtins').__setattr__({MARKER!r}, True)"
    return [
        ("../../../escape.trec", sample_run_trec(seed=1).encode()),  # a path in the name
        ("/etc/bsard-upload.trec", sample_run_trec(seed=2).encode()),
        (f"{IMG}.pkl", pickle.dumps(_EvilPickle())),
        ("evil.pkl.gz", gzip.compress(pickle.dumps(_EvilPickle()))),
        ("evil.json", ("{'1': {" + code + ": 1.0}}").encode()),  # a Python literal, not JSON
        ("evil.jsonl", json.dumps({"qid": "1", "docid": code, "score": 1}).encode()),
        ("evil.csv", f"qid,docid,score\n1,\"{code}\",=1+1\n".encode()),
    ]


@contextlib.contextmanager
def audit(events: list):
    """Record, while inside, file writes/creations and any code compiled, run or unpickled that
    mentions :data:`MARKER` (Python's audit hooks see every ``open``, ``exec``, ``compile``…)."""
    active = [True]
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event, args):
        if not active[0]:
            return
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags)
            if writes and isinstance(path, (str, bytes, os.PathLike)):
                events.append(("write", os.fsdecode(path)))
        elif event in ("os.rename", "os.replace", "shutil.copyfile", "shutil.move"):
            events.append(("write", os.fsdecode(args[1])))
        elif event in ("os.mkdir", "os.symlink", "os.link", "os.truncate"):
            events.append(("write",
                           os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else str(args[0])))
        elif event == "pickle.find_class":
            events.append(("unpickle", f"{args[0]}.{args[1]}"))
        elif event in ("exec", "compile"):
            source = args[0]
            text = source.decode(errors="replace") if isinstance(source, bytes) else str(source)
            if hasattr(source, "co_consts"):
                text = " ".join(map(str, source.co_consts)) + " ".join(source.co_names)
            if MARKER in text:
                events.append((event, text[:200]))

    sys.addaudithook(hook)  # hooks cannot be removed: this one goes quiet on exit
    try:
        yield events
    finally:
        active[0] = False


def _files(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        # the test tools' own state: hypothesis writes .hypothesis/ when another worker runs a property test
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__", ".pytest_cache", ".hypothesis")]
        for f in filenames:
            p = os.path.join(dirpath, f)
            with contextlib.suppress(OSError):
                st = os.stat(p)
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def test_scoring_uploads_writes_nothing_and_evaluates_nothing(monkeypatch, tmp_path, app_env):
    """The Score page over hostile uploads (path-like names, pickles, Python literals, CSV
    formulas), run with a fresh working directory and HOME: no file is created or changed
    anywhere except under BSARD_CACHE and the temporary directory, nothing is unpickled and
    no uploaded text is compiled or run."""
    import tempfile

    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("BSARD_DATA", "sample")
    monkeypatch.chdir(cwd)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/score.py").run()  # imports and caches warmed up before recording
    watched = {root: _files(root) for root in (home, cwd, REPO)}
    events: list = []
    with audit(events):
        uploader = at.file_uploader(key="runs")
        for name, blob in _hostile_uploads():
            uploader.upload(name, blob)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not hasattr(builtins, MARKER)
    allowed = [Path(os.environ["BSARD_CACHE"]).resolve(), Path(tempfile.gettempdir()).resolve()]
    outside = [(kind, what) for kind, what in events if kind != "write"
               or not any(Path(what).resolve().is_relative_to(a) for a in allowed)]
    assert outside == []
    for root, before in watched.items():
        assert _files(root) == before, root
    # the page did read them: the runs are scored, the pickles and the Python literal refused
    scored = list(next(d.value for d in at.dataframe if "R@100" in d.value.columns).index)
    assert scored[:2] == ["../../../escape.trec", "/etc/bsard-upload.trec"]
    refused = " ".join(unmd(e.value) for e in at.error)
    for name in (f"{IMG}.pkl", "evil.pkl.gz", "evil.json"):
        assert f"**{name}** : " in refused and name not in scored, name


def test_a_compressed_upload_may_not_inflate_past_the_upload_limit(monkeypatch):
    """A gzip upload under ``server.maxUploadSize`` whose content is above it is refused by the
    reader (a run costs ~20 times its text in memory: the limit bounds memory either way)."""
    from streamlit import config

    monkeypatch.setenv("BSARD_DATA", "sample")
    text = sample_run_trec(seed=5).replace(" ", " " * 60).encode()  # any whitespace separates TREC fields
    assert 2**20 < len(text) < 2 * 2**20
    blob = gzip.compress(text)
    assert len(blob) < 2**20
    previous = config.get_option("server.maxUploadSize")
    config.set_option("server.maxUploadSize", 1)
    try:
        at = start("pages/score.py")
        at.file_uploader(key="runs").upload("gros.trec.gz", blob).run()
    finally:
        config.set_option("server.maxUploadSize", previous)
    assert not at.exception
    problems = " ".join(" ".join(d.value["message"]) for d in at.dataframe if "message" in d.value.columns)  # details
    assert "larger than the limit of 1.0 MB" in problems
    # the same file is fine under the default limit
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("gros.trec.gz", blob).run()
    assert not at.exception and not at.error


def test_the_audit_sees_writes_unpickling_and_evaluation(tmp_path):
    """The recorder above can fail: it catches a write, an unpickle and code from the data."""
    events: list = []
    with audit(events):
        (tmp_path / "written.txt").write_text("x")
        pickle.loads(pickle.dumps(_EvilPickle()))
    try:
        assert ("write", str(tmp_path / "written.txt")) in events
        assert ("unpickle", "builtins.exec") in events
        assert any(kind in ("exec", "compile") for kind, _ in events)
        assert getattr(builtins, MARKER) is True
    finally:
        delattr(builtins, MARKER)
