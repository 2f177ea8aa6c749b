"""The Score page's issue-11 parts through ``AppTest``: built-in runs of every system (and both
question texts) rendered from the scoring service's Scoreboard and written as the CLI's ``run``
writes them, the A-vs-B scatter whose click opens the drill-down, the gold articles' text and
ranks, coded problems, nDCG@10 with its note, and the distances toggle."""
from __future__ import annotations

import json
import re

import pytest

from _app_helpers import assert_clean, sample_run_trec, set_app_env, start
from bsard_demo.app.score_builtin_runs import BuiltinRun
from bsard_demo.app.score_compare import SELECTION
from bsard_demo.app.score_drill import DD_QID, RANK_PREFIX
from bsard_demo.app.score_tables import NDCG_HELP
from bsard_demo.app.score_uploads import score_files
from bsard_demo.evaluation.scoring import BOARD_BYTES
from bsard_demo.retrievers.kinds import NEIGHBOURS_COLUMN
from bsard_demo.runs import read_run_bytes
from bsard_demo.sources import load_sample


@pytest.fixture(autouse=True)
def app_env(monkeypatch, app_cache):
    return set_app_env(monkeypatch, app_cache, "sample")


def metrics_df(at):
    (frame,) = [d.value for d in at.dataframe if "R@100" in d.value.columns]
    return frame


def test_builtin_runs_of_every_system_equal_the_cli(tmp_path, monkeypatch, capsys):
    import bsard_demo.app.ui as ui
    from bsard_demo.cli.main import main

    bars = []
    real = ui.progress_bar

    def recording(label):
        bars.append(label)
        return real(label)

    monkeypatch.setattr(ui, "progress_bar", recording)
    ui.index_registry().clear()  # indexes built by earlier tests of this process (the disk cache stays)
    at = start("pages/score.py")
    hybrid, three_way = "Hybride RRF k=60 w=1,0.5 (use)", "Hybride RRF k=60 w=1,0.5,0.5 (use + neighbours)"
    # the sample has labelled train questions: the neighbours retriever and its three-way hybrid too
    named = ["BM25", "Dense (use)", hybrid, NEIGHBOURS_COLUMN, three_way]  # among the registry's built-ins, in order
    assert [o for o in at.selectbox(key="builtin_system").options if o in named] == named
    built_first = ("Dense (use)", hybrid, NEIGHBOURS_COLUMN, three_way)
    for label in built_first:
        at.selectbox(key="builtin_system").select(label).run()
        at.button(key="builtin").click().run()
        assert_clean(at)
        assert at.button(key="builtin").disabled  # built: not again
    at.selectbox(key="builtin_system").select("BM25").run()
    at.radio(key="builtin_query_text").set_value("question+description").run()
    at.button(key="builtin").click().run()
    assert_clean(at)
    table = metrics_df(at)
    names = [f"{label} intégré" for label in built_first] + ["BM25 intégré (question + description)"]
    assert list(table.index) == names
    # the page renders the scoring service's figures of its built-in Runs (which score as their
    # TREC files do: tests/app/test_search_logic.py), and those files are what the CLI's run writes
    built = {name: v for name, v in at.session_state[BuiltinRun.STORED].items()}
    board = score_files([], load_sample(), "test", runs=[(name, built[name]["run"]) for name in names])
    for name in names:
        want = board.evaluations[name].means
        for col, key in (("R@100", "recall@100"), ("MAP@100", "map@100"), ("nDCG@10", "ndcg@10")):
            assert f"{table.loc[name, col]:.2f}" == f"{100 * want[key]:.2f}", (name, col)
    for name, args in zip(names, (["--retriever", "dense"], ["--retriever", "hybrid"], ["--retriever", "neighbours"],
                                  ["--retriever", "hybrid", "--encoder", "use,neighbours"],
                                  ["--query-text", "question+description"])):
        out = tmp_path / "run.trec"  # in-process: the indexes the page built are in the same BSARD_CACHE
        assert main(["run", "--data", "sample", "--no-progress", "--out", str(out),
                     *args]) == 0, capsys.readouterr().err
        assert out.read_bytes() == built[name]["bytes"], name
    # a first build shows its progress: the dense index, the hybrid (whose BM25 part is built
    # then), the neighbours, the three-way hybrid; BM25 alone is then ready at once
    builds = [b for b in bars if b.startswith("Construction de l'index")]
    assert [b.split("« ")[1][:8] for b in builds] == ["Dense \\(", "Hybride ", "Question", "Hybride "], builds
    assert "neighbours" in builds[3]
    assert [b.split(" sur ")[0][:6] for b in bars if "sur les questions du split test" in b] == [
        "Dense ", "Hybrid", "Questi", "Hybrid", "BM25"]
    downloads = [b.label for b in at.get("download_button") if b.label.startswith("Télécharger le run intégré")]
    assert len(downloads) == 5
    at.button(key="drop_builtin").click().run()
    assert any("Déposez" in i.value for i in at.info)


def chart_click(at, qid: str):
    """What a click on the A-vs-B chart's point ``qid`` sends: its selection state, then a rerun."""
    (chart,) = [c for c in at.get("vega_lite_chart") if "ab_chart" in (c.proto.id or "")]
    states = at._tree.get_widget_states()
    state = states.widgets.add()
    state.id = chart.proto.id
    state.string_value = json.dumps({"selection": {SELECTION: [{"qid": qid}]}})
    at._run(states)
    return at


def ab_spec(at) -> dict:
    (chart,) = [c for c in at.get("vega_lite_chart") if "ab_chart" in (c.proto.id or "")]
    return json.loads(chart.proto.spec)


def misses_rows(at) -> list[list[tuple]]:
    """``(run, class, count, share)`` of each chart of where misses land, in page order: per run, then A
    against B."""
    import pyarrow as pa

    out = []
    for chart in at.get("vega_lite_chart"):
        for data in chart.proto.datasets:  # the rows travel as Arrow data
            rows = pa.ipc.open_stream(data.data.data).read_all().to_pandas()
            if {"run", "class", "count", "share"} <= set(rows.columns):
                out.append(list(rows[["run", "class", "count", "share"]].itertuples(index=False, name=None)))
    return out


def test_scatter_click_opens_the_drill_down(tmp_path):
    ds = load_sample()
    a, b = sample_run_trec(seed=21).encode(), sample_run_trec(seed=22, drop=4).encode()
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    uploader.upload("a.trec", a, "text/plain")
    uploader.upload("b.trec", b, "text/plain")
    at.run()
    assert_clean(at)
    assert [s.value for s in at.subheader][:2] == ["Run A contre run B, question par question", "Examiner une question"]
    assert (at.selectbox(key="ab_a").value, at.selectbox(key="ab_b").value) == ("a.trec", "b.trec")
    assert at.selectbox(key="ab_b").options == ["b.trec"]  # B is another run than A
    spec = ab_spec(at)
    assert any(p.get("name") == SELECTION for p in spec.get("params", []))
    # the counts under the chart are the comparison table's for that pair
    (pairs,) = [d.value for d in at.dataframe if "run A" in d.value.columns]
    row = pairs.iloc[0]
    (counts,) = [m.value for m in at.markdown if "A meilleur sur" in m.value]
    assert (f"A meilleur sur **{row['A gagne']}** questions, égalité sur **{row['égalités']}**, B meilleur sur "
            f"**{row['A perd']}**") in counts
    # filter on one category, then click a question of another one: the filter goes, the question opens
    q = ds.questions("test").iloc[-1]
    other = next(c for c in ds.questions("test")["category"] if c != q["category"])
    at.multiselect(key="pq_categories").select(other).run()
    at.selectbox(key="ab_a").select("b.trec").run()  # the drill-down then shows run A's ranking
    per_run, pair = misses_rows(at)  # A against B: the per-run chart's rows of B (now A), then of A (now B)
    assert pair == [r for r in per_run if r[0] == "b.trec"] + [r for r in per_run if r[0] == "a.trec"]
    assert {r[0] for r in per_run} == {"a.trec", "b.trec"} and any(r[2] for r in pair)
    chart_click(at, q["id"])
    assert_clean(at)
    assert at.selectbox(key=DD_QID).value == q["id"] and at.selectbox(key="dd_run").value == "b.trec"
    assert at.multiselect(key="pq_categories").value == []
    gold = next(d.value for d in at.dataframe if list(d.value.columns)[:2] == ["article", "référence"])
    assert list(gold["article"]) == list(q["article_ids"])
    assert list(gold.columns[2:]) == [RANK_PREFIX + "a.trec", RANK_PREFIX + "b.trec"]
    ring = [layer for layer in ab_spec(at)["layer"] if layer["mark"].get("type") == "point"]
    assert len(ring) == 1  # the question shown is ringed in the new chart
    # the selectbox still drives the drill-down on its own
    q2 = ds.questions("test").iloc[2]
    at.selectbox(key=DD_QID).select(q2["id"]).run()
    assert_clean(at)
    gold = next(d.value for d in at.dataframe if list(d.value.columns)[:2] == ["article", "référence"])
    assert list(gold["article"]) == list(q2["article_ids"])


def test_drill_down_shows_the_gold_articles_text():
    ds = load_sample()
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("a.trec", sample_run_trec(seed=3).encode()).run()
    q = ds.questions("test").iloc[0]
    at.selectbox(key=DD_QID).select(q["id"]).run()
    assert_clean(at)
    texts = [h.value for h in at.html if h.value.startswith('<div class="bsard-text">')]
    shown = [ds.article(a)["article"] for a in q["article_ids"]]
    assert len([t for t in texts]) >= len(shown)
    for text in shown:
        assert any(text[:60].split()[0] in t for t in texts)
    long_ones = [t for t in shown if len(t) > 500]
    assert len([e for e in at.expander if e.label == "Lire l'article entier"]) == len(long_ones)
    gold = next(d.value for d in at.dataframe if list(d.value.columns)[:2] == ["article", "référence"])
    ranking = list(read_run_bytes(sample_run_trec(seed=3).encode(), "a", qids=ds.qrels("test").keys()).run[q["id"]])
    assert list(gold[RANK_PREFIX + "a.trec"]) == [str(ranking.index(a) + 1) if a in ranking else "—"
                                                   for a in q["article_ids"]]


def test_problem_table_has_codes_and_ndcg_its_note():
    ds = load_sample()
    shifted = "".join(f"{q} Q0 {int(d) - 1} {r} {50 - r} t\n" for q, gold in ds.qrels("test").items()
                      for r, d in enumerate(sorted(gold, key=int), 1))
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("shifted.trec", shifted.encode()).run()
    assert_clean(at)
    problems = next(d.value for d in at.dataframe if "problème" in d.value.columns)
    assert list(problems.columns) == ["ligne", "gravité", "problème", "code"] and "ids_shifted" in set(problems["code"])
    (note,) = [c for c in at.caption if c.value.startswith("nDCG@10 : le chiffre que rapporte MTEB")]
    assert note.proto.help == NDCG_HELP
    assert "un seul article pertinent" in NDCG_HELP and "2025" in NDCG_HELP and "extra_description" in NDCG_HELP
    assert "nDCG@10" in metrics_df(at).columns


def test_distances_toggle_scores_like_the_similarities():
    sim = sample_run_trec(seed=8)
    dist = "".join(f"{q} Q0 {d} {r} {-float(s)} t\n" for q, _, d, r, s, _ in (ln.split() for ln in sim.splitlines()))
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    uploader.upload("sim.trec", sim.encode(), "text/plain")
    uploader.upload("dist.trec", dist.encode(), "text/plain")
    at.run()
    boxes = [c for c in at.checkbox if "scores = distances" in c.label]
    assert [re.sub(r"\\(.)", r"\1", b.label).split(" : ")[0] for b in boxes] == ["« sim.trec »", "« dist.trec »"]
    before = metrics_df(at)
    assert before.loc["dist.trec", "R@100"] != before.loc["sim.trec", "R@100"]
    problems = " ".join(" ".join(d.value["code"]) for d in at.dataframe if "code" in d.value.columns)
    assert "scores_ascending" in problems
    boxes[1].check().run()
    assert_clean(at)
    after = metrics_df(at)
    assert list(after.loc["dist.trec"].iloc[:6]) == list(after.loc["sim.trec"].iloc[:6])
    problems = " ".join(" ".join(d.value["code"]) for d in at.dataframe if "code" in d.value.columns)
    assert "scores_ascending" not in problems


def test_the_pages_downloads_carry_the_stamp_evaluate_writes(tmp_path, monkeypatch, capsys):
    """Every table the page offers for download is stamped, and its stamp is the one ``evaluate`` writes
    for the same file (``stamps A B`` would find no difference); under the stamp, the CLI's table."""
    from streamlit.delta_generator import DeltaGenerator

    from bsard_demo.cli.main import main
    from bsard_demo.evaluation.stamp import read_stamp, stamp_differences, strip_stamp

    offered = {}
    real = DeltaGenerator.download_button

    def recording(self, label, data, *args, **kwargs):
        offered[kwargs.get("file_name")] = data.decode("utf-8") if isinstance(data, bytes) else data
        return real(self, label, data, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", recording)
    run = tmp_path / "systeme_a.trec"
    run.write_text(sample_run_trec(seed=3))
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload(run.name, run.read_bytes()).run()
    assert_clean(at)
    assert set(offered) == {"mesures_test.csv", "mesures_test.md", "mesures_test.tex", "par_question_test.csv"}
    assert main(["evaluate", str(run), "--data", "sample", "--format", "csv"]) == 0
    cli = capsys.readouterr().out
    for name, text in offered.items():
        stamp = read_stamp(text)
        assert stamp is not None and stamp_differences(stamp, read_stamp(cli)) == [], name
    assert strip_stamp(offered["mesures_test.csv"]) == strip_stamp(cli)


def test_a_builtin_run_is_stamped_by_the_trec_file_the_page_offers(monkeypatch):
    """The stamp names a built-in run by the sha256 of the TREC file offered for it (what ``evaluate``
    would stamp for that download), not of another rendering of the same run."""
    import hashlib

    import streamlit as st
    from streamlit.delta_generator import DeltaGenerator

    from bsard_demo.evaluation.stamp import read_stamp

    offered = {}
    real = DeltaGenerator.download_button

    def recording(self, label, data, *args, **kwargs):
        offered[kwargs.get("file_name")] = data if isinstance(data, bytes) else data.encode("utf-8")
        return real(self, label, data, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", recording)
    main_button = st.download_button  # the run downloads are drawn by st.download_button itself
    monkeypatch.setattr(st, "download_button", lambda label, data, *a, **kw: (
        offered.__setitem__(kw.get("file_name"), data), main_button(label, data, *a, **kw))[1])
    at = start("pages/score.py")
    at.selectbox(key="builtin_system").select("BM25").run()
    at.button(key="builtin").click().run()
    assert_clean(at)
    [trec] = [data for name, data in offered.items() if name.endswith(".trec")]
    stamp = read_stamp(offered["mesures_test.csv"].decode("utf-8"))
    assert stamp["runs"] == {"BM25 intégré": hashlib.sha256(trec).hexdigest()}


def test_a_builtin_run_is_made_once_per_process(monkeypatch):
    """Two visitors who ask for the same built-in system get one run made once (score_ui.builtin): the
    second visitor's click searches nothing and stores the very same run and TREC file."""
    import bsard_demo.app.score_ui as score_ui

    made = []
    real = score_ui.builtin_run

    def counting(*args, **kwargs):
        made.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(score_ui, "builtin_run", counting)
    stored = []
    for _ in range(2):  # two sessions, one after the other
        at = start("pages/score.py")
        at.button(key="builtin").click().run()
        assert_clean(at)
        stored.append(at.session_state[BuiltinRun.STORED]["BM25 intégré"])
    assert made in ([], ["test"])  # [] when an earlier test of this process made it
    assert stored[0]["run"] is stored[1]["run"] and stored[0]["bytes"] is stored[1]["bytes"]


def test_a_second_visitor_draws_the_kept_charts(monkeypatch):
    """A board's charts are converted once (score_ui.chart_spec): a second session that scores the same
    built-in run converts none, and its chart elements are byte for byte the first session's."""
    import bsard_demo.app.score_ui as score_ui

    converted = []
    real = score_ui.altair_to_spec

    def counting(chart):
        converted.append(1)
        return real(chart)

    monkeypatch.setattr(score_ui, "altair_to_spec", counting)
    charts, after_first = [], None
    for _ in range(2):  # two sessions, one after the other
        at = start("pages/score.py")
        at.button(key="builtin").click().run()
        assert_clean(at)
        charts.append([c.proto.SerializeToString() for c in at.get("vega_lite_chart")])
        after_first = len(converted) if after_first is None else after_first
    assert len(converted) == after_first  # none when an earlier test of this process scored the same run
    assert len(charts[0]) == 5 and charts[0] == charts[1]


def test_a_kept_chart_is_the_element_st_altair_chart_sends():
    """``st.vega_lite_chart`` of :func:`score_ui.chart_spec`'s conversion sends what ``st.altair_chart``
    sends for the same chart (a layered chart with its data as a named Arrow dataset)."""
    from streamlit.testing.v1 import AppTest

    def script():
        import pandas as pd
        import streamlit as st

        from bsard_demo.app.charts import ab_scatter, metric_bars, recall_curve_chart
        from bsard_demo.app.score_ui import altair_to_spec

        bars = pd.DataFrame({"run": ["a", "b"], "metric": ["recall@100"] * 2, "value": [0.5, 0.6],
                             "ci_low": [0.4, 0.5], "ci_high": [0.6, 0.7]})
        curve = pd.DataFrame({"run": ["a"] * 3, "k": [1, 2, 3], "recall": [0.1, 0.2, 0.3]})
        for chart in (metric_bars(bars), recall_curve_chart(curve)):
            st.altair_chart(chart, width="stretch")
            st.vega_lite_chart(spec=altair_to_spec(chart), width="stretch")
        points = pd.DataFrame({"qid": ["1", "2"], "category": ["c", "c"], "question": ["q1", "q2"], "run_a": "a",
                               "run_b": "b", "a": [0.5, 1.0], "b": [0.0, 1.0], "outcome": ["A meilleur", "égalité"]})
        scatter = ab_scatter(points, "recall@100")  # a point selection: a widget with its own key
        st.altair_chart(scatter, width="stretch", key="one", on_select="rerun", selection_mode="question")
        st.vega_lite_chart(spec=altair_to_spec(scatter), width="stretch", key="two", on_select="rerun",
                           selection_mode="question")

    at = AppTest.from_function(script).run()
    assert not at.exception
    sent = [c.proto for c in at.get("vega_lite_chart")]
    assert len(sent) == 6 and sent[0] == sent[1] and sent[2] == sent[3] and sent[0] != sent[2]
    assert sent[4].id != sent[5].id  # the keys differ, and so the widgets' ids; the rest is the same
    sent[4].ClearField("id")
    sent[5].ClearField("id")
    assert sent[4] == sent[5] and list(sent[4].selection_mode) == ["question"]


def test_a_scoring_goes_one_way_each_step_once_and_a_rerun_reads_nothing_again(monkeypatch):
    """upload -> sources -> read and score -> stamp and misses -> page: each step once per scoring (one
    ``run_sources``), and a rerun of the same files (a widget moved) is served from the process's kept board."""
    from bsard_demo.app import score_ui

    calls = {"run_sources": 0, "score_sources": 0, "board_stamp": 0, "board_misses": 0}
    for name in calls:
        real = getattr(score_ui, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(score_ui, name, counted)
    monkeypatch.setattr(score_ui, "_BOARDS", type(score_ui._BOARDS)(budget=2**30, weigh=lambda s: s.weight))
    at = start("pages/score.py")
    at.file_uploader(key="runs").upload("one_way.trec", sample_run_trec(seed=11).encode()).run()
    assert_clean(at)
    assert calls == {"run_sources": 1, "score_sources": 1, "board_stamp": 1, "board_misses": 1}
    at.run()
    assert calls == {"run_sources": 1, "score_sources": 1, "board_stamp": 1, "board_misses": 1}


def test_kept_scoreboards_stay_within_their_memory_budget(monkeypatch):
    from bsard_demo.app import score_ui

    kept = type(score_ui._BOARDS)(budget=1, weigh=lambda s: s.weight)  # room for the newest board only
    monkeypatch.setattr(score_ui, "_BOARDS", kept)
    for seed in (21, 22):  # two visitors, two boards
        at = start("pages/score.py")
        at.file_uploader(key="runs").upload(f"r{seed}.trec", sample_run_trec(seed=seed).encode()).run()
        assert_clean(at)
    assert len(kept) == 1 and kept.weight > BOARD_BYTES  # the newest board, its runs included


def test_a_labels_file_is_scored_like_evaluate_qrels_and_a_bad_one_is_refused(tmp_path, capsys):
    """The Score page's labels upload (issue 39 item 2): a run scored against a qrels file gives ``evaluate --qrels``'s
    figures; a labels file with errors is refused with its problems and nothing is scored against it."""
    import json

    from bsard_demo.cli.main import main

    ds = load_sample()
    lines = [f"{q} 0 {a} 2" for q, ids in zip(ds.questions("test")["id"][:12], ds.questions("test")["article_ids"][:12])
             for a in ids]
    qrels, run = tmp_path / "mine.qrels", tmp_path / "r.trec"
    qrels.write_text("\n".join(lines) + "\n")
    run.write_text(sample_run_trec(seed=31))
    assert main(["evaluate", str(run), "--qrels", str(qrels), "--data", "sample", "--format", "json"]) == 0
    want = json.loads(capsys.readouterr().out)["runs"]["r.trec"]
    at = start("pages/score.py")
    at.file_uploader(key="qrels").upload("mine.qrels", qrels.read_bytes()).run()
    at.file_uploader(key="runs").upload("r.trec", run.read_bytes()).run()
    assert_clean(at)
    table = metrics_df(at)
    for col, key in (("R@100", "recall@100"), ("MAP@100", "map@100"), ("nDCG@10", "ndcg@10")):
        assert f"{table.loc['r.trec', col]:.2f}" == f"{100 * want[key]:.2f}", col
    assert any("mine\\.qrels" in i.value and "(12 questions)" in i.value for i in at.info), [i.value for i in at.info]
    bad = start("pages/score.py")
    bad.file_uploader(key="qrels").upload("bad.qrels", b"1 0 a x\n").run()
    bad.file_uploader(key="runs").upload("r.trec", run.read_bytes()).run()
    assert any("inutilisable" in e.value for e in bad.error) and not [d for d in bad.dataframe
                                                                       if "R@100" in d.value.columns]
