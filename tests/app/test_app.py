"""The Streamlit app through ``streamlit.testing.v1.AppTest`` (in-process, no browser).

Every test runs ``app.py`` with ``BSARD_DATA=sample`` and a temporary ``BSARD_CACHE``. Figures on
the Score page are compared with the Scoreboard of :func:`bsard_demo.evaluation.scoring.score_runs` on the
same files, the service ``python -m bsard_demo evaluate`` renders too (tests/evaluation/test_scoring.py).
Only ``test_dense_and_bm25_side_by_side`` builds a dense index.
"""
from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from _app_helpers import assert_clean, column_names, sample_run_trec, set_app_env, start
from bsard_demo.app import french
from bsard_demo.app.data_words import ALLOW_FOLDERS_ENV
from bsard_demo.app.problem_words import PROBLEMS_FR
from bsard_demo.evaluation.measures import column_label, extra_columns
from bsard_demo.evaluation.metrics import compute_metrics
from bsard_demo.evaluation.report import display_columns
from bsard_demo.evaluation.scoring import RunSource, score_runs
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.runs import read_run_bytes
from bsard_demo.sources import load_sample

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(autouse=True)
def app_env(monkeypatch, app_cache):
    # the cache is shared by this session's app tests
    return set_app_env(monkeypatch, app_cache, "sample")


def hit_cards(at: AppTest) -> list[str]:
    return [h.value for h in at.html if h.value.startswith('<div class="bsard-hit')]


def number(cell) -> float:
    """A table cell as a number: a float, or the French text of a column with holes (« 51,33 »; empty: NaN)."""
    if isinstance(cell, str):
        return float(cell.replace("\u202f", "").replace(",", ".")) if cell else float("nan")
    return float(cell)


def metrics_df(at: AppTest):
    frames = [d.value for d in at.dataframe
              if "R@100" in d.value.columns and "Hit@100 (MTEB v1)" not in d.value.columns]  # not the anchors
    assert len(frames) == 1
    return frames[0]


def service_summary(dataset, split: str, *sources) -> dict:
    """``{"questions", "runs": {name: means + missing/unknown counts}}`` of the scoring service's
    Scoreboard (what ``evaluate --format json`` prints of it)."""
    board = score_runs(dataset, split, list(sources))
    return {"questions": board.labelled, "runs": {name: ev.summary() for name, ev in board.evaluations.items()}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two run files (TREC, and the same layout gzipped with two questions left out) and the
    scoring service's figures of them (``cli``: what ``evaluate --format json`` prints)."""
    folder = tmp_path_factory.mktemp("runs")
    a = folder / "systeme_a.trec"
    a.write_text(sample_run_trec(seed=11))
    b = folder / "systeme_b.trec.gz"
    b.write_bytes(gzip.compress(sample_run_trec(seed=12, drop=2).encode()))
    return {"a": a, "b": b, "cli": service_summary(load_sample(), "test", RunSource.file(a), RunSource.file(b))}


# --------------------------------------------------------------------------- shell


def test_sidebar_shows_the_sample_and_its_fictional_notice_on_every_page():
    at = start()
    side = " ".join(m.value for m in at.sidebar.markdown)
    ds = load_sample()
    assert "Échantillon fictif" in side and f"{len(ds.articles)} articles" in side
    assert f"{len(ds.questions('test'))} questions (test)" in side
    assert any("FICTIFS" in w.value for w in at.main.warning)
    assert "Articles fictifs" in side and not at.sidebar.warning  # one notice: the main area's
    at.switch_page("pages/score.py").run()
    assert_clean(at)
    assert any("FICTIFS" in w.value for w in at.main.warning)
    assert at.title[0].value == "Évaluer des runs"


def test_unreachable_hub_falls_back_to_the_sample_with_the_reason(monkeypatch):
    from bsard_demo import sources
    from bsard_demo.app import sidebar

    def unreachable(spec):
        if spec == "hub":  # the real loader, with the hub unreachable and nothing cached
            return sources.load_hub(reachable=lambda: False,
                                    download=lambda **kw: (_ for _ in ()).throw(OSError("offline")))
        return sources.load_dataset(spec)

    monkeypatch.delenv("BSARD_DATA")
    monkeypatch.setattr(sidebar, "load_uncached", unreachable)
    sidebar.failure_memo().forget(("hub",))
    at = start()
    # one notice, in French: the data shown and why; the loader's English message is the sidebar's details
    assert not at.main.info and len(at.main.warning) == 1
    banner = at.main.warning[0].value
    assert "hub Hugging Face" in banner and "échantillon fictif" in banner and "FICTIFS" in banner
    assert "hub is unreachable" not in banner.replace("\\", "")
    details = [e for e in at.sidebar.expander if e.label == "Détails techniques"]
    assert "hub is unreachable and the file is not in the local cache" in details[0].caption[0].value.replace("\\", "")
    assert at.sidebar.radio(key="data_choice").value == "sample"  # the source loaded, not the one that failed
    sidebar.failure_memo().forget(("hub",))


def small_folder(folder: Path) -> Path:
    """A local dataset: the sample's first 30 articles and 3 test questions."""
    folder.mkdir(exist_ok=True)
    ds = load_sample()
    ds.articles.head(30).to_csv(folder / "articles.csv", index=False)
    q = ds.questions("test").head(3).copy()
    q["article_ids"] = [",".join(ids) for ids in q["article_ids"]]
    q.to_csv(folder / "questions_test.csv", index=False)
    return folder


def unmd(body: str) -> str:
    """Markdown as read: backslash escapes removed."""
    return re.sub(r"\\(.)", r"\1", body)


SOURCES = ["BSARD (hub Hugging Face)", "Échantillon fictif (démo)"]


def test_switching_to_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(ALLOW_FOLDERS_ENV, "1")
    small_folder(tmp_path)
    at = start()
    assert at.sidebar.radio(key="data_choice").options == SOURCES + ["Dossier local"]
    at.sidebar.radio(key="data_choice").set_value("local").run()
    at.sidebar.text_input(key="data_folder").input(str(tmp_path)).run()
    at.sidebar.button(key="load_folder").click().run()
    assert_clean(at)
    side = " ".join(m.value for m in at.sidebar.markdown)
    assert "Dossier local" in side and "30 articles" in side and "3 questions (test)" in side
    assert not any("FICTIFS" in w.value for w in at.warning)


def test_no_folder_choice_unless_the_server_allows_it(tmp_path):
    small_folder(tmp_path)
    at = start()
    assert at.sidebar.radio(key="data_choice").options == SOURCES
    assert not at.sidebar.text_input and not at.sidebar.button
    assert any("ne propose pas de dossier local" in c.value for c in at.sidebar.caption)
    assert not any("BSARD_" in c.value for c in at.sidebar.caption)  # no server setting told to a visitor
    at.session_state["data_spec"] = str(tmp_path)  # even a forged request does not load it
    at.run()
    assert_clean(at)
    side = " ".join(m.value for m in at.sidebar.markdown)
    assert "Échantillon fictif" in side and "Dossier local" not in side


def test_the_folder_named_by_bsard_data_is_the_only_one_offered(tmp_path, monkeypatch):
    folder = small_folder(tmp_path / "jeu")
    monkeypatch.setenv("BSARD_DATA", str(folder))
    at = start()
    radio = at.sidebar.radio(key="data_choice")
    assert radio.options == SOURCES + ["Dossier local"] and radio.value == "local"
    assert not at.sidebar.text_input  # no path to type
    # named, not shown by its path: the server chose it (a public page shows no path of the server)
    assert any(folder.name in unmd(c.value) for c in at.sidebar.caption)
    assert not any(str(folder.parent) in unmd(c.value) for c in [*at.sidebar.caption, *at.sidebar.markdown])
    at.session_state["data_spec"] = str(small_folder(tmp_path / "autre"))  # another folder: refused
    at.run()
    side = unmd(" ".join(m.value for m in at.sidebar.markdown))
    assert f"Dossier local : {folder.name}**" in side and "autre" not in side  # the default stays
    at.sidebar.radio(key="data_choice").set_value("sample").run()
    assert "Échantillon fictif" in " ".join(m.value for m in at.sidebar.markdown)
    at.sidebar.radio(key="data_choice").set_value("local").run()
    assert_clean(at)
    side = " ".join(m.value for m in at.sidebar.markdown)
    assert "Dossier local" in side and "30 articles" in side


# --------------------------------------------------------------------------- search page


def test_typed_question_returns_hits():
    at = start()
    at.text_area(key="question").input("Mon propriétaire peut-il garder ma garantie locative ?").run()
    assert_clean(at)
    cards = hit_cards(at)
    assert len(cards) == 10
    assert all("bsard-badge gold" not in c for c in cards)  # a typed question has no labels
    assert "<mark>" in "".join(cards)
    assert column_names(at) == ["BM25"]
    assert any("ms (serveur)" in c.value for c in at.caption)
    assert not at.metric and not [c for c in at.caption if c.value.startswith("R@")]  # no labels: no scores
    # the question and its results are still there after a visit to the other page
    at.switch_page("pages/score.py").run()
    at.switch_page("pages/search.py").run()
    assert at.text_area(key="question").value.startswith("Mon propriétaire") and len(hit_cards(at)) == 10


def test_example_question_fills_the_box_and_marks_gold_articles():
    ds = load_sample()
    q = ds.questions("test").iloc[3]
    at = start()
    at.slider(key="top_k").set_value(20)
    at.selectbox(key="example_qid").select(q["id"]).run()
    assert_clean(at)
    assert at.text_area(key="question").value == q["question"]
    # expected values from the library directly: BM25 over the sample, compute_metrics at k=20
    bm25 = build_retriever(RetrieverSpec("bm25"), ds, cache_root=Path(os.environ["BSARD_CACHE"]))
    ranking = [h.article_id for h in bm25.search(q["question"], len(ds.articles))]
    recall, ap, rr = compute_metrics(q["article_ids"], ranking, 20)
    lines = [c.value for c in at.caption if c.value.startswith("R@")]  # in French percentages, as the page shows
    assert lines == [f"R@20 {french.percent(recall)} · AP@20 {french.percent(ap)} · RR@20 {french.percent(rr)}"]
    cards = hit_cards(at)
    gold_in_top = [a for a in ranking[:20] if a in q["article_ids"]]
    assert gold_in_top, "choose a question whose gold articles BM25 finds"
    assert [c for c in cards if "bsard-badge gold" in c] == \
        [c for c in cards if any(f'data-article="{a}"' in c for a in gold_in_top)]
    missed = [h.value for h in at.html if h.value.startswith('<div class="bsard-missed"')]
    assert len(missed) == 1
    for a in q["article_ids"]:
        assert (f"id {a}," in missed[0]) == (a not in ranking[:20])


def test_hostile_question_is_shown_literally():
    at = start()
    at.text_area(key="question").input(XSS).run()
    assert_clean(at)
    shown = [h.value for h in at.html if 'class="bsard-question"' in h.value]
    assert len(shown) == 1 and "<img" not in shown[0]
    assert "&lt;img src=x onerror=alert(1)&gt;" in re.sub(r"</?mark>", "", shown[0])
    assert all("<img" not in h.value for h in at.html)


def test_code_filter_keeps_only_that_code():
    ds = load_sample()
    code = sorted(set(ds.articles["code"]))[0]
    at = start()
    at.selectbox(key="code").select(code)
    at.text_area(key="question").input("divorce pension alimentaire").run()
    assert_clean(at)
    cards = hit_cards(at)
    assert cards
    for c in cards:
        article = c.split('data-article="')[1].split('"')[0]
        assert ds.article(article)["code"] == code


def test_dense_and_bm25_side_by_side():
    at = start()
    at.multiselect(key="kinds").select("dense")
    at.text_area(key="question").input("Mon propriétaire peut-il garder ma garantie locative ?").run()
    assert_clean(at)
    if any(b.key == "build:use" for b in at.button):  # use not stored by an earlier test: its first build waits
        at.button(key="build:use").click().run()
    assert column_names(at) == ["BM25", "Dense \\(use\\)"]
    cards = hit_cards(at)
    assert len(cards) == 20
    markers = [c for c in cards[10:] if "bsard-badge " in c]
    assert len(markers) == 10  # every dense hit says how its rank compares with BM25's
    assert at.selectbox(key="reference").value == "BM25"


# --------------------------------------------------------------------------- score page


def test_score_page_without_files_invites_to_upload():
    at = start("pages/score.py")
    assert any("Déposez" in i.value for i in at.info)


def test_uploaded_runs_match_the_cli_and_get_compared(runs):
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    uploader.upload("systeme_a.trec", runs["a"].read_bytes(), "text/plain")
    uploader.upload("systeme_b.trec.gz", runs["b"].read_bytes(), "application/gzip")
    at.run()
    assert_clean(at)
    table = metrics_df(at)
    cli = runs["cli"]["runs"]
    assert list(table.index) == ["systeme_a.trec", "systeme_b.trec.gz"]
    for name, row in table.iterrows():
        for key in display_columns((100, 200, 500), extra_columns()):  # every measure column the table shows
            assert f"{row[column_label(key)]:.2f}" == f"{100 * cli[name][key]:.2f}", (name, key)
        assert row["manquantes"] == cli[name]["missing_questions"]
        assert row["inconnues"] == cli[name]["unknown_questions"]
    assert cli["systeme_b.trec.gz"]["missing_questions"] == 2
    columns = [column_label(c) for c in display_columns((100, 200, 500), extra_columns())]  # the CLI table's
    assert list(table.columns[:len(columns)]) == columns
    # charts (4 + the A-vs-B scatter), per-question table, drill-down, comparison and downloads are all there
    assert len(at.get("vega_lite_chart")) == 7  # + where misses land, per run and for A against B
    assert [h.value for h in at.header] == ["Validation des fichiers", "Mesures", "Graphiques", "Par question",
                                            "Comparaison deux à deux"]
    comparison = [d.value for d in at.dataframe if "run A" in d.value.columns]
    assert len(comparison) == 1 and len(comparison[0]) == 1
    row = comparison[0].iloc[0]
    assert (row["run A"], row["run B"]) == ("systeme_a.trec", "systeme_b.trec.gz")
    assert row["A gagne"] + row["égalités"] + row["A perd"] == runs["cli"]["questions"]
    assert "p test t" not in comparison[0].columns  # the page's table fits; every test is in its download
    assert list(comparison[0].columns)[2].startswith("significatif")  # the verdict in view on a phone too
    assert len(at.get("download_button")) == 5
    (download,) = [b for b in at.get("download_button") if b.proto.label.startswith("Télécharger la comparaison")]
    assert download.proto.label == "Télécharger la comparaison (CSV, tous les tests)"


def test_at_most_ten_files_are_scored_the_others_are_not_read():
    from bsard_demo.app.score_uploads import MAX_FILES

    assert MAX_FILES == 10
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    names = [f"run{i:02d}.trec" for i in range(11)]
    for i, name in enumerate(names):
        uploader.upload(name, sample_run_trec(seed=i, depth=5).encode(), "text/plain")
    at.run()
    assert not at.exception
    (warning,) = [unmd(w.value) for w in at.warning if "Au plus 10 fichiers" in w.value]
    assert "1 fichier(s) en trop n'ont pas été lus (« run10.trec »)" in warning
    assert list(metrics_df(at).index) == names[:10]
    assert not any("run10" in s.value for s in at.success)  # the 11th file was neither read nor validated


def test_per_question_filter_and_drill_down(runs):
    ds = load_sample()
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("systeme_a.trec", runs["a"].read_bytes()).run()
    category = ds.questions("test")["category"].iloc[-1]
    at.multiselect(key="pq_categories").select(category).run()
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "question" in d.value.columns and "recall@100" in d.value.columns)
    assert set(table["category"]) == {category}
    q = ds.questions("test")
    q = q[q["category"] == category].iloc[0]
    assert at.selectbox(key="dd_qid").value == q["id"]
    gold = next(d.value
                for d in at.dataframe if list(d.value.columns) == ["article", "référence", "rang · systeme_a.trec"])
    assert list(gold["article"]) == list(q["article_ids"])
    assert list(gold["référence"]) == [ds.article(a)["reference"] for a in q["article_ids"]]
    ranking = list(read_run_bytes(runs["a"].read_bytes(), "a", qids=ds.qrels("test").keys()).run[q["id"]])
    assert list(gold["rang · systeme_a.trec"]) == [str(ranking.index(a) + 1) if a in ranking else "—"
                                                   for a in q["article_ids"]]
    assert "comparaison" not in " ".join(h.value for h in at.header).lower()  # one run: no comparison


def test_malformed_file_lists_its_problems_with_line_numbers():
    name = f"casse{XSS}**gras**.trec"  # a hostile file name is shown literally too
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload(name, b"1 Q0 23 1 pas_un_nombre tag\n1 Q0 24\n").run()
    assert not at.exception
    (error,) = at.error
    assert "2 erreur(s)" in error.value and "ce run n'est pas évalué" in error.value
    inner = error.value[2:error.value.index("** : ")]  # the bold file name
    assert re.sub(r"\\(.)", r"\1", inner) == name
    assert not re.search(r"(?<!\\)[<>*]", inner)  # every markup character is escaped
    problems = next(d.value for d in at.dataframe if "problème" in d.value.columns)
    assert list(problems["ligne"]) == [1, 2] and set(problems["gravité"]) == {"erreur"}
    assert any("Aucun run utilisable" in w.value for w in at.warning)


def test_unreadable_and_oversized_uploads_get_a_clear_message():
    from streamlit import config

    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("image.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png").run()
    assert not at.exception
    problems = next(d.value for d in at.dataframe if "problème" in d.value.columns)
    assert list(problems["problème"]) == [PROBLEMS_FR["binary_file"]]  # in French; the reader's words in the details
    details = next(d.value for d in at.dataframe if "message" in d.value.columns)
    assert "PNG" in " ".join(details["message"])
    previous = config.get_option("server.maxUploadSize")
    config.set_option("server.maxUploadSize", 1)
    try:
        at2 = start("pages/score.py")
        at2.file_uploader(key="runs").upload("enorme.trec", b"1 Q0 1 1 1.0 t\n" * 80_000).run()
        assert not at2.exception
        problems = next(d.value for d in at2.dataframe if "problème" in d.value.columns)
        assert "au-delà de la limite de 1 Mo" in problems["problème"].iloc[0]
    finally:
        config.set_option("server.maxUploadSize", previous)


def test_builtin_retriever_scores_like_the_cli(tmp_path):
    """The built-in BM25 run is rendered from the service's Scoreboard of that Run (equal to its
    TREC file and to the CLI's ``run`` file: tests/app/test_search_logic.py)."""
    from bsard_demo.app.score_builtin_runs import builtin_run
    from bsard_demo.app.score_builtins import baseline_specs

    at = start("pages/score.py")
    at.button(key="builtin").click().run()
    assert_clean(at)
    table = metrics_df(at)
    assert list(table.index) == ["BM25 intégré"]
    ds = load_sample()
    bm25 = build_retriever(baseline_specs()["BM25"], ds, cache_root=Path(os.environ["BSARD_CACHE"]))
    expected = service_summary(ds, "test", RunSource.built("BM25 intégré", builtin_run(ds, "test", bm25)))
    expected = expected["runs"]["BM25 intégré"]
    assert f"{table.loc['BM25 intégré', 'R@100']:.2f}" == f"{100 * expected['recall@100']:.2f}"
    assert f"{table.loc['BM25 intégré', 'MRR@100']:.2f}" == f"{100 * expected['mrr@100']:.2f}"
    assert any(b.label.startswith("Télécharger le run intégré") for b in at.get("download_button"))


def test_unexpected_error_shows_a_short_french_message(monkeypatch, runs):
    import bsard_demo.app.score_tables

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(bsard_demo.app.score_tables, "ci_frame", broken)
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("systeme_a.trec", runs["a"].read_bytes()).run()
    assert not at.exception
    (error,) = at.error
    assert "erreur inattendue" in error.value and "RuntimeError" in error.value and "Traceback" not in error.value


def test_real_bsard_test_split_adds_the_published_rows(monkeypatch, real_bsard_dir, real_bsard, tmp_path):
    """With the real BSARD questions (no corpus), the Score page works and adds the paper's rows."""
    import numpy as np

    rng = np.random.default_rng(5)
    lines = []
    for qid, gold in real_bsard.qrels("test").items():
        ids = [str(a) for a in rng.choice(22633, size=120, replace=False) + 1]
        for g in gold:
            ids.insert(int(rng.integers(0, 150)), g)
        ids = list(dict.fromkeys(ids))
        lines += [f"{qid} Q0 {doc} {r} {len(ids) - r + 1} synth" for r, doc in enumerate(ids, 1)]
    run_file = tmp_path / "synth.trec"
    run_file.write_text("\n".join(lines) + "\n")
    expected = service_summary(real_bsard, "test", RunSource.file(run_file))["runs"]["synth.trec"]

    monkeypatch.setenv("BSARD_DATA", str(real_bsard_dir))
    at = start()
    assert any("pas de corpus" in w.value for w in at.warning)  # the Search page cannot search
    at.switch_page("pages/score.py").run()
    assert at.button(key="builtin").disabled
    at.file_uploader(key="runs").upload("synth.trec", run_file.read_bytes()).run()
    assert not at.exception
    table = metrics_df(at)
    assert list(table.index) == ["synth.trec", "BM25 (published)", "siamese bi-encoder (published)",
                                 "two-tower bi-encoder (published)"]
    # a column with holes is shown as French text, its holes empty (french_view): read both as numbers
    assert number(table.loc["BM25 (published)", "R@100"]) == 51.33
    assert f"{number(table.loc['synth.trec', 'R@100']):.2f}" == f"{100 * expected['recall@100']:.2f}"
    assert f"{number(table.loc['synth.trec', 'MAP@100']):.2f}" == f"{100 * expected['map@100']:.2f}"
    # the published state of the art beside the run: recall in recall columns, MTEB v1's hit rate apart
    beside = next(d.value for d in at.dataframe if "Hit@100 (MTEB v1)" in d.value.columns)
    assert number(beside.loc["synth.trec", "R@100"]) == number(table.loc["synth.trec", "R@100"])
    assert number(beside.loc["BM25", "R@100"]) == 51.33 and beside.loc["BM25", "source"] == "publié"
    e5 = beside.loc["intfloat/multilingual-e5-large"]
    assert number(e5["Hit@100 (MTEB v1)"]) == 63.06 and all(e5[c] == "" for c in ("R@100", "R@200", "R@500"))
    assert number(beside.loc["QABISAR", "R@100"]) == 83.7 and beside.loc["QABISAR", "Hit@100 (MTEB v1)"] == ""
    assert all(beside.loc["G-DSR", c] == "" for c in ("R@100", "Hit@100 (MTEB v1)"))  # listed, no figure read
    assert any("mteb#2906" in c.value for c in at.caption)
