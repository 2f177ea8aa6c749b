"""Score page: upload run files (or build a built-in system's run), validate them, score them against a
split, compare them; wiring only (the decisions are in bsard_demo.app.score_page
and its section modules)."""
import hashlib
from functools import partial

import pandas as pd
import streamlit as st

from bsard_demo import settings
from bsard_demo.app import score_ui, ui
from bsard_demo.app.builds import builtin_models
from bsard_demo.app.charts import (
    ab_scatter,
    category_breakdown,
    metric_bars,
    metric_label_fr,
    misses_ab,
    misses_bars,
    per_question_distribution,
    recall_curve_chart,
)
from bsard_demo.app.highlight import md_escape, query_terms
from bsard_demo.app.render import COPY_SCRIPT, question_box, upload_refused_notice
from bsard_demo.app.score_anchors import NOTES_FR, beside_frame, figure_columns
from bsard_demo.app.score_builtin_runs import QUERY_TEXT_FR, BuiltinRun
from bsard_demo.app.score_builtins import builtin_specs
from bsard_demo.app.score_compare import (
    COMPARISON_LABELS,
    NARROW_COMPARISON,
    SELECTION,
    ab_summary,
    ab_view,
    chart_clicked,
    chart_key,
    comparison,
    comparison_shown,
    first_view,
    kept_ab_view,
    permutation_caption,
)
from bsard_demo.app.score_drill import (
    DD_QID,
    DD_RUN,
    PQ_FILTER,
    article_reference,
    article_text_html,
    drill_down,
    gold_heading,
    gold_ranks_frame,
    is_long,
    per_question_headers,
    top_frame,
)
from bsard_demo.app.score_misses import (
    MISSES_HELP,
    MISSES_K,
    board_misses_frame,
    class_labels,
    drill_misses,
    runs_rows,
    totals_line,
)
from bsard_demo.app.score_page import (
    board_downloads,
    builtin_downloads,
    categories,
    compares,
    default_split,
    metrics_caption,
    split_uploads,
    validation_verdict,
)
from bsard_demo.app.score_systems import system_captions
from bsard_demo.app.score_tables import (
    NDCG_HELP,
    RPREC_HELP,
    ci_frame,
    curve_frame,
    filter_categories,
    french_view,
    measure_headers,
    score_tables,
    shown_metrics,
    to_csv_bytes,
)
from bsard_demo.app.score_ui import draw_chart
from bsard_demo.app.score_uploads import (
    DISTANCES_LABEL,
    FORMATS_HELP,
    LABELS_HELP,
    UPLOAD_HELP,
    budget_words,
    prepare_reader,
    problem_details,
    problems_frame,
    too_many_files,
)
from bsard_demo.evaluation import DEFAULT_KS
from bsard_demo.retrievers.batch import DEFAULT_QUERY_TEXT, QUERY_TEXTS
from bsard_demo.runs import quote

settings.prepare_runtime()  # as app.py does: before anything loads faiss, torch or tokenizers



def _labels(data, split: str):
    """The labels file a visitor may give instead of the split's labels: ``None`` without one, ``False`` when it
    has errors (they are shown), else ``(name, sha256, dataset)`` for :func:`score_ui.scoreboard`."""
    with st.expander("Étiquettes d'un fichier (facultatif)"):
        upload = st.file_uploader("Fichier d'étiquettes (qrels)", key="qrels", help=LABELS_HELP)
    if upload is None:
        return None
    name, blob = quote(upload.name, marks=False), upload.getvalue()
    read, labelled = score_ui.labels_of(data, split, name, blob)
    if labelled is None:
        st.error(f"Fichier d'étiquettes « {md_escape(name)} » inutilisable : corrigez les erreurs ci-dessous.")
        st.dataframe(problems_frame(read.problems), hide_index=True)
        return False
    st.info(f"Évalué contre les étiquettes de « {md_escape(name)} » ({len(labelled.questions(split))} questions) "
            "au lieu de celles du split ; les runs intégrés ne sont pas proposés.", icon=":material/label:")
    return name, hashlib.sha256(blob).hexdigest(), labelled


def _builtins(data, split: str) -> BuiltinRun:
    ds = data.dataset
    builtin = BuiltinRun(st.session_state, data.key, split)
    st.markdown("**Systèmes intégrés**", help="Les systèmes de la page Rechercher (mêmes index), appliqués à toutes "
                "les questions du split comme `python -m bsard_demo run` ; le run obtenu est évalué comme un fichier "
                "déposé. Un index déjà construit (ou fourni dans un paquet d'index) rend le calcul immédiat ; sinon "
                "sa construction s'affiche.")
    menu = ui.encoder_menu(data)  # once per rerun: it lists $BSARD_MODELS and the bundle's models
    rankers = ui.rankers_here(data)
    specs = builtin_specs(data.dataset, menu, rankers, stored=partial(ui.dense_stored, data))
    label = st.selectbox("Système intégré", list(specs), key="builtin_system", placeholder="Choisir…")
    if label in specs:  # what the chosen system runs, each model by its own record
        for line in system_captions(specs[label], builtin_models(menu), score_ui.ranker_captions(rankers)):
            st.caption(md_escape(line))
    query_text = st.radio("Texte des questions", QUERY_TEXTS, index=QUERY_TEXTS.index(DEFAULT_QUERY_TEXT),
                          format_func=QUERY_TEXT_FR.get, key="builtin_query_text",
                          help="`--query-text` de `python -m bsard_demo run` : l'article BSARD interroge avec la "
                               "question seule, MTEB avec la question suivie de sa description.")
    builtin.settle(ds.articles is not None,
                   lambda lb, qt: score_ui.make_builtin(data, specs, split, lb, qt))  # a click's request
    st.button("Évaluer ce système intégré", icon=":material/play_arrow:", key="builtin",
              disabled=ds.articles is None or builtin.has(label, query_text), on_click=BuiltinRun.request,
              args=(st.session_state, split, label, query_text),
              help="Classe toutes les questions du split avec ce système et ajoute ce run à l'évaluation.")
    if builtin.present:
        st.button("Retirer les runs intégrés", key="drop_builtin", on_click=BuiltinRun.drop, args=(st.session_state,))
    return builtin


def page() -> None:
    prepare_reader()
    data = ui.current_data()
    ds = data.dataset
    st.title("Évaluer des runs")
    st.caption("Déposez les classements produits par vos systèmes : l'application les valide, calcule R@k, MAP, "
               "R-Précision, nDCG@10 et MRR, et compare les systèmes question par question.")
    if not ds.split_names:
        st.warning("Ce jeu de données n'a aucun split de questions : rien à évaluer.")
        return

    left, right = st.columns([3, 2], gap="large")
    with right:
        splits = ds.split_names
        split = st.selectbox("Split de questions évalué", splits, index=default_split(splits),
                             key="score_split", persist_state="session", placeholder="Choisir…",
                             format_func=lambda s: f"{s} ({len(ds.questions(s))} questions)")
        labels = _labels(data, split)
        builtin = _builtins(data, split)
    with left:
        budget = score_ui.upload_budget_bytes()
        uploads = st.file_uploader(budget_words(score_ui.upload_limit_bytes() // 2**20, budget // 2**20),
                                   accept_multiple_files=True, key="runs", help=UPLOAD_HELP)
        st.html(upload_refused_notice(score_ui.upload_limit_bytes() // 2**20, max(DEFAULT_KS)))
        st.html(COPY_SCRIPT, unsafe_allow_javascript=True)  # the uploader's French names (fixed text)
        uploads, ignored = split_uploads(list(uploads or []), budget=budget)
        lower = [st.checkbox(f"« {md_escape(quote(u.name, marks=False))} » : {DISTANCES_LABEL} (plus petit = meilleur)",
                             key=f"lower_{u.file_id}",
                             help="`--lower-is-better` : les articles sont classés par score croissant (égalités "
                                  "comme pour des similarités).") for u in uploads]
        with st.expander("Formats acceptés et conventions"):
            st.markdown(FORMATS_HELP)

    if ignored:  # the extra files are not read (their bytes stay untouched)
        st.warning(too_many_files([md_escape(quote(u.name, marks=False)) for u in ignored], budget_mb=budget // 2**20),
                   icon=":material/warning:")
    if labels is False:  # a labels file with errors: said above, nothing is scored against it
        return
    built = builtin.built() if labels is None else []  # a built-in run searches the split's questions, not a file's
    files = [(quote(u.name, marks=False), u.getvalue()) for u in uploads]  # a client-given name, bounded once
    if not files and not built:
        st.info("Déposez un ou plusieurs fichiers de run, ou cliquez sur « Évaluer ce système intégré » pour voir la "
                "page fonctionner sans fichier.")
        return

    board, stamp, misses = score_ui.scoreboard(data, split, files, lower, built, labels)
    _validation(board)
    evaluations = board.evaluations
    if not evaluations:
        st.warning("Aucun run utilisable : corrigez les erreurs signalées ci-dessus puis déposez à nouveau le fichier.")
        return
    tables = score_tables(board)  # once per board, as every chart and download below
    _metrics(board, data, split, tables, stamp)
    k, misses_shown = _charts(board, tables, misses)
    _per_question(board, ds, split, tables, misses, k, misses_shown)
    if compares(board):
        _comparison(board)
    for d in builtin_downloads(built, split):
        st.download_button(d.label, d.data, file_name=d.file_name, mime=d.mime, key=d.key)


def _validation(board) -> None:
    st.header("Validation des fichiers", anchor=False)
    for run in board.runs:
        problems = run.file.problems
        level, line = validation_verdict(run)
        {"error": st.error, "warning": st.warning, "success": st.success}[level](line)
        if problems:
            with st.expander(f"Problèmes de {md_escape(run.name)}", expanded=level == "error"):
                st.dataframe(problems_frame(problems), hide_index=True, width="stretch",
                             column_config={"ligne": st.column_config.NumberColumn("ligne", format="%d"),
                                            "code": st.column_config.TextColumn(
                                                "code", help="Code stable du problème (README, tableau des codes)"),
                                            "problème": st.column_config.TextColumn("problème", width="large")})
            with st.expander(f"Détails techniques des problèmes de {md_escape(run.name)} (messages du lecteur)"):
                st.dataframe(problem_details(problems), hide_index=True, width="stretch",
                             column_config={"ligne": st.column_config.NumberColumn("ligne", format="%d")})


def _metrics(board, data, split, tables, stamp) -> None:
    st.header("Mesures", anchor=False)
    st.caption(metrics_caption(score_ui.dataset_label(data), split, board))
    shown = tables.shown
    helps = {"nDCG@10": NDCG_HELP, "R-Prec": RPREC_HELP}
    config = {c: st.column_config.Column(c, help=helps.get(c)) for c in measure_headers(shown)}
    score_ui.kept_dataframe(board, "measures", partial(french_view, shown, percents=measure_headers(shown)),
                            width="stretch", column_config=config)
    st.caption("nDCG@10 : le chiffre que rapporte MTEB (gains binaires, 10 premiers articles) ; R-Prec : la précision "
               "au rang R (R = nombre d'articles pertinents), le « MRP » des travaux récents.", help=NDCG_HELP)
    row = st.container(horizontal=True)
    for d in board_downloads(board, stamp):
        row.download_button(d.label, d.data, file_name=d.file_name, mime=d.mime, key=d.key)
    if board.published:
        _state_of_the_art(tables, board)


def _state_of_the_art(tables, board) -> None:
    st.subheader("Vos runs et l'état de l'art publié (BSARD, split test)", anchor=False)
    table = beside_frame(tables.metrics, board.ks)
    config = {"lu dans": st.column_config.TextColumn("lu dans", width="medium")}
    score_ui.kept_dataframe(board, "state of the art", partial(french_view, table, percents=figure_columns(table)),
                            width="stretch", column_config=config)
    st.caption("  \n".join(NOTES_FR) + "  \nLe même tableau : `python -m bsard_demo anchors` ; "
               "`python -m bsard_demo evaluate --anchors` l'imprime sous vos runs.")


def _charts(board, tables, misses) -> tuple[int, pd.DataFrame | None]:
    """The charts; the misses' cut-off chosen, and the misses' chart data at it (``None`` without articles)."""
    st.header("Graphiques", anchor=False)
    metrics = shown_metrics(board)
    per_q = tables.per_question
    metric = st.columns([1, 2])[0].selectbox("Mesure des graphiques « par catégorie » et « par question »", metrics,
                                             key="chart_metric", persist_state="session", placeholder="Choisir…",
                                             format_func=metric_label_fr)
    t1, t2, t3, t4, t5 = st.tabs(["Mesures (IC 95 %)", "Rappel@k", "Par catégorie", "Par question",
                                  "Articles manqués"])
    with t1:
        draw_chart(board, ("bars", tuple(metrics)), lambda: metric_bars(ci_frame(board, metrics)))
        st.caption("Barres : moyenne sur les questions ; traits : intervalle de confiance à 95 % (bootstrap, 2 000 "
                   "tirages).")
    with t2:
        draw_chart(board, "curve", lambda: recall_curve_chart(curve_frame(board, max_k=max(500, max(board.ks)))))
        st.caption("Rappel moyen quand on lit les k premiers articles de chaque classement (k = 1 … 500).")
    with t3:
        draw_chart(board, ("categories", metric), lambda: category_breakdown(per_q, metric))
    with t4:
        draw_chart(board, ("distribution", metric), lambda: per_question_distribution(per_q, metric))
        st.caption("Nombre de questions par tranche de valeur ; 0 (rien trouvé) et 1 (parfait) ont leur propre barre.")
    with t5:
        k = st.columns([1, 2])[0].selectbox("Articles manqués dans le top k", list(board.ks), key=MISSES_K,
                                            index=list(board.ks).index(min(board.ks)), format_func=lambda v: f"top {v}")
        frame = None if misses is None else board_misses_frame(board, misses, k)
        if frame is None:
            st.info("Placer les articles manqués demande le corpus d'articles, que ce jeu de données n'a pas.")
        else:
            draw_chart(board, ("misses", k), lambda: misses_bars(frame, class_labels()))
            st.caption(md_escape(totals_line(frame, k)) + "  \n" + MISSES_HELP)
    return k, frame


def _per_question(board, ds, split, tables, misses, k, misses_shown) -> None:
    st.header("Par question", anchor=False)
    table = tables.per_question_text
    chosen = st.multiselect("Filtrer par catégorie", categories(table), key=PQ_FILTER,
                            placeholder="toutes les catégories")
    shown = filter_categories(table, chosen)
    measures, headers = per_question_headers(shown)
    config = {c: st.column_config.Column(label) for c, label in headers.items()}
    config["question"] = st.column_config.TextColumn("texte", width="medium")
    score_ui.kept_dataframe(board, None if chosen else "per question", partial(french_view, shown, fractions=measures),
                            hide_index=True, width="stretch", column_config=config, height=320)
    st.caption("Cliquez sur un en-tête pour trier.")
    if compares(board):
        _a_versus_b(board, tables, misses_shown, k)
    _drill_down(board, ds, split, table, shown, misses, k)


def _a_versus_b(board, tables, misses_shown, k) -> None:
    """Run A against run B; where their misses land, from the per-run chart's ``misses_shown`` (at ``k``)."""
    st.subheader("Run A contre run B, question par question", anchor=False)
    runs = list(board.evaluations)
    c1, c2, c3 = st.columns(3)
    metric = c1.selectbox("Mesure", shown_metrics(board), key="ab_metric", format_func=metric_label_fr)
    a = c2.selectbox("Run A", runs, key="ab_a")
    b = c3.selectbox("Run B", [r for r in runs if r != a], key="ab_b")
    current = st.session_state.get(DD_QID)
    first = first_view(board, a, b, metric, current)  # every visitor's first render: kept with the board
    view = (kept_ab_view if first else ab_view)(board, tables.per_question_text, a, b, metric)
    key = chart_key(view, current)
    draw_chart(board, ("A-B", a, b, metric) if first else None,
               partial(ab_scatter, view.points, metric, current=current),
               key=key, on_select=partial(chart_clicked, st.session_state, key, view), selection_mode=SELECTION)
    st.markdown(ab_summary(a, b, metric, view))
    st.caption("Un point par question ; au-dessus de la diagonale, B fait mieux. Cliquez sur un point pour examiner "
               "la question ci-dessous (cerclée) ; des questions de mêmes valeurs se superposent.")
    if misses_shown is not None:
        st.markdown(f"**Où tombent les articles pertinents que A et B manquent** (top {k})")
        # kept for the first two runs only, as the scatter (a view per pair picked would keep runs² of them)
        draw_chart(board, ("misses A-B", k, a, b) if first else None,
                   partial(misses_ab, runs_rows(misses_shown, [a, b]), class_labels()))


def _drill_down(board, ds, split, table, shown, misses, k) -> None:
    st.subheader("Examiner une question", anchor=False)
    runs = list(board.evaluations)
    qids = list(dict.fromkeys(shown["qid"]))
    if not qids:
        st.info("Aucune question dans ce filtre.")
        return
    texts = dict(zip(table["qid"], table["question"]))
    c1, c2 = st.columns([1, 3])
    run_name = c1.selectbox("Run", runs, key=DD_RUN, placeholder="Choisir…")
    qid = c2.selectbox("Question", qids, key=DD_QID, placeholder="Choisir…",
                       format_func=lambda q: f"n° {q} · {texts.get(q, '')[:120]}")
    usable = {r.name: r.file.run for r in board.runs if r.usable}
    dd = drill_down(ds, split, qid, usable[run_name])
    st.html(question_box(dd.question, ()))
    st.caption(f"Catégorie : {md_escape(dd.category or '—')}"
               + ("" if dd.in_run else " · question absente du run (score 0)"))
    line, notes = drill_misses(misses, run_name, qid, k, partial(article_reference, ds))
    if line is not None:
        st.caption(md_escape(line))
    st.markdown("**Articles pertinents et leur rang dans chaque run** (— : absent du classement)")
    score_ui.kept_dataframe(board, ("gold ranks", run_name, qid), lambda: french_view(gold_ranks_frame(dd, usable)),
                            hide_index=True, width="stretch")
    if ds.articles is None:
        st.caption("Textes et références indisponibles : ce jeu de données n'a pas de corpus d'articles.")
    else:
        terms = query_terms(dd.question)
        for g in dd.gold:
            st.markdown(gold_heading(g, run_name, notes))
            if not g.text:
                st.caption("Article absent du corpus.")
                continue
            # escaped: article_text_html is highlight_html (every character escaped) in a fixed <div>
            st.html(article_text_html(g.text, terms))
            if is_long(g.text):
                with st.expander("Lire l'article entier"):
                    # escaped: as above, the whole text
                    st.html(article_text_html(g.text, terms, max_chars=None))
    st.markdown(f"**Premiers articles du run « {md_escape(run_name)} »** ({len(dd.top)})")
    score_ui.kept_dataframe(board, ("top", run_name, qid), partial(french_view, top_frame(dd), decimals=["score"]),
                            hide_index=True, width="stretch")


def _comparison(board) -> None:
    st.header("Comparaison deux à deux", anchor=False)
    metric = st.columns([1, 2])[0].selectbox("Mesure comparée", shown_metrics(board), key="cmp_metric",
                                             persist_state="session", placeholder="Choisir…",
                                             format_func=metric_label_fr)
    table = comparison(board, metric).pairs
    # the page's table: the means and their difference in %, the corrected permutation p and the verdict (every
    # column, the t-test's included, in the download)
    shown = comparison_shown(table)
    narrow = {v: st.column_config.Column(v, width="small") for v in NARROW_COMPARISON}
    score_ui.kept_dataframe(board, ("comparison", metric), partial(
        french_view, shown, fractions=[COMPARISON_LABELS[c] for c in ("mean_a", "mean_b", "diff")],
        decimals=[COMPARISON_LABELS["p_permutation_holm"]]), hide_index=True, width="stretch", column_config=narrow)
    st.caption(permutation_caption())
    st.download_button("Télécharger la comparaison (CSV, tous les tests)", to_csv_bytes(table),
                       file_name=f"comparaison_{metric.replace('@', '_')}.csv", mime="text/csv", key="dl_comparison",
                       on_click="ignore")


ui.ensure_shell()
with ui.guard("page Évaluer"):
    page()
