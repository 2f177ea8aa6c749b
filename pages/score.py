"""Score page: upload run files, validate them, score them against a split, compare them."""
import streamlit as st

from bsard_demo.app import ui
from bsard_demo.app.charts import (category_breakdown, metric_bars, metric_label_fr, per_question_distribution,
                                   recall_curve_chart)
from bsard_demo.app.highlight import md_escape
from bsard_demo.app.render import question_box, upload_refused_notice
from bsard_demo.app.score_page import (MAX_FILES, BuiltinRun, builtin_run_text, ci_frame, comparison_frame, curve_frame,
                                       display_metrics, drill_down, filter_categories, metrics_frame, problems_frame,
                                       score_tables, to_csv_bytes, too_many_files)
from bsard_demo.app.state import display_name
from bsard_demo.evaluation import DEFAULT_KS
from bsard_demo.report import display_columns, render_table
from bsard_demo.retrievers import RetrieverSpec

FORMATS_HELP = """
Formats reconnus (détectés d'après le contenu, fichiers `.gz` acceptés) :

- **TREC** : `qid Q0 docid rang score tag` (6 colonnes) ;
- **3 colonnes** : `qid docid rang` ou `qid docid score` ;
- **CSV** avec en-tête : `qid`, `docid`, `score` et/ou `rank` ;
- **JSON** : `{"qid": {"docid": score}}` ou `{"qid": ["docid", …]}` ;
- **JSON Lines** : `{"qid": …, "docid": …, "score": …}` par ligne.

Chaque question du split compte (absente du run : 0). Les articles sont classés par score décroissant,
égalités départagées par identifiant décroissant (règle de trec_eval). Les valeurs sont celles de
`python -m bsard_demo evaluate`.
"""
COMPARISON_LABELS = {
    "run_a": "run A", "run_b": "run B", "mean_a": "moyenne A", "mean_b": "moyenne B", "diff": "A − B",
    "wins": "A gagne", "ties": "égalités", "losses": "A perd", "p_permutation": "p permutation",
    "p_ttest": "p test t", "p_permutation_holm": "p permutation (Holm)", "p_ttest_holm": "p test t (Holm)",
    "significant": "significatif (α = 0,05)",
}
PER_QUESTION_LABELS = {"run": "run", "qid": "question", "category": "catégorie", "question": "texte",
                       "n_relevant": "pertinents", "n_retrieved": "retournés", "missing": "absente du run"}


def _make_builtin(data, split: str) -> bytes:
    bm25 = ui.retriever(data, RetrieverSpec("bm25"), "BM25")
    update, clear = ui.progress_bar(f"BM25 sur les questions du split {split}")
    try:
        return builtin_run_text(data.dataset, split, bm25, progress=update)
    finally:
        clear()


def page() -> None:
    data = ui.current_data()
    ds = data.dataset
    st.title("Évaluer des runs")
    st.caption("Déposez les classements produits par vos systèmes : l'application les valide, calcule R@k, MAP et MRR, "
               "et compare les systèmes question par question.")
    if not ds.split_names:
        st.warning("Ce jeu de données n'a aucun split de questions : rien à évaluer.")
        return

    left, right = st.columns([3, 2], gap="large")
    with right:
        splits = ds.split_names
        split = st.selectbox("Split de questions évalué", splits, index=splits.index("test") if "test" in splits else 0,
                             key="score_split", persist_state="session", placeholder="Choisir…",
                             format_func=lambda s: f"{s} ({len(ds.questions(s))} questions)")
        builtin = BuiltinRun(st.session_state, data.key, split)
        st.button("Évaluer un système intégré (BM25)", icon=":material/play_arrow:", key="builtin",
                  disabled=ds.articles is None or builtin.present, on_click=BuiltinRun.request,
                  args=(st.session_state, split),
                  help="Classe toutes les questions du split avec BM25 et ajoute ce run à l'évaluation.")
        has_builtin = builtin.settle(ds.articles is not None, lambda: _make_builtin(data, split))
        if has_builtin:
            st.button("Retirer le run intégré", key="drop_builtin", on_click=BuiltinRun.drop, args=(st.session_state,))
    with left:
        uploads = st.file_uploader(f"Fichiers de run (jusqu'à {MAX_FILES} fichiers de "
                                   f"{ui.upload_limit_bytes() // 2**20} Mo chacun)",
                                   accept_multiple_files=True, key="runs")
        st.html(upload_refused_notice(ui.upload_limit_bytes() // 2**20, max(DEFAULT_KS)))
        with st.expander("Formats acceptés et conventions"):
            st.markdown(FORMATS_HELP)

    uploads = list(uploads or [])
    if len(uploads) > MAX_FILES:  # the extra files are not read (their bytes stay untouched)
        st.warning(too_many_files([md_escape(u.name) for u in uploads[MAX_FILES:]]), icon=":material/warning:")
    files = [(u.name, u.getvalue()) for u in uploads[:MAX_FILES]] + builtin.files()
    if not files:
        st.info("Déposez un ou plusieurs fichiers de run, ou cliquez sur « Évaluer un système intégré (BM25) » "
                "pour voir la page fonctionner sans fichier.")
        return

    board = ui.scoreboard(data, split, files)
    _validation(board)
    evaluations = board.evaluations
    if not evaluations:
        st.warning("Aucun run utilisable : corrigez les erreurs signalées ci-dessus puis déposez à nouveau le fichier.")
        return
    tables = score_tables(board, ds.questions(split))
    _metrics(board, data, split, tables)
    _charts(board, tables)
    _per_question(board, ds, split, tables)
    if len(evaluations) >= 2:
        _comparison(board)
    if has_builtin:
        st.download_button("Télécharger le run intégré (TREC)", builtin.files()[0][1],
                           file_name=f"bm25_{split}.trec", mime="text/plain", key="dl_builtin")


def _validation(board) -> None:
    st.header("Validation des fichiers", anchor=False)
    for run in board.runs:
        problems = run.file.problems
        n_err, n_warn = problems.count("error"), problems.count("warning")
        name = f"**{md_escape(run.name)}**"
        fmt = md_escape(run.file.format) + (" (gzip)" if run.file.compressed else "")
        if n_err:
            st.error(f"{name} : {n_err} erreur(s), {n_warn} avertissement(s) — ce run n'est pas évalué.")
        elif n_warn:
            st.warning(f"{name} : format {fmt}, {n_warn} avertissement(s) — le run est évalué quand même.")
        else:
            st.success(f"{name} : format {fmt}, {len(run.file.run)} questions, aucun problème.")
        if problems:
            with st.expander(f"Problèmes de {md_escape(run.name)}", expanded=bool(n_err)):
                st.dataframe(problems_frame(problems), hide_index=True, width="stretch",
                             column_config={"ligne": st.column_config.NumberColumn("ligne", format="%d"),
                                            "problème": st.column_config.TextColumn("problème", width="large")})


def _metrics(board, data, split, tables) -> None:
    st.header("Mesures", anchor=False)
    table = metrics_frame(board)
    st.caption(f"{md_escape(display_name(data))} · split {md_escape(split)} · {len(board.qrels)} questions · valeurs en %, "
               "identiques à `python -m bsard_demo evaluate`"
               + (" · lignes « published » : résultats publiés (Louis & Spanakis, ACL 2022)" if board.published else ""))
    shown = display_metrics(table)
    st.dataframe(shown, width="stretch",
                 column_config={c: st.column_config.NumberColumn(c, format="%.2f") for c in shown.columns if "@" in c})
    plain = tables.metrics  # downloads: the CLI's own rows (no published rows)
    row = st.container(horizontal=True)
    row.download_button("Mesures (CSV)", render_table(plain, "csv"), file_name=f"mesures_{split}.csv", mime="text/csv")
    row.download_button("Mesures (Markdown)", render_table(plain, "markdown"), file_name=f"mesures_{split}.md",
                       mime="text/markdown")
    row.download_button("Mesures (LaTeX)", render_table(plain, "latex"), file_name=f"mesures_{split}.tex",
                       mime="application/x-tex")
    row.download_button("Par question (CSV)", to_csv_bytes(tables.per_question), file_name=f"par_question_{split}.csv",
                       mime="text/csv")


def _charts(board, tables) -> None:
    st.header("Graphiques", anchor=False)
    metrics = display_columns(board.ks)
    per_q = tables.per_question
    metric = st.columns([1, 2])[0].selectbox("Mesure des graphiques « par catégorie » et « par question »", metrics,
                                             key="chart_metric", persist_state="session", placeholder="Choisir…", format_func=metric_label_fr)
    t1, t2, t3, t4 = st.tabs(["Mesures (IC 95 %)", "Rappel@k", "Par catégorie", "Par question"])
    with t1:
        st.altair_chart(metric_bars(ci_frame(board, metrics)), width="stretch")
        st.caption("Barres : moyenne sur les questions ; traits : intervalle de confiance à 95 % (bootstrap, 2 000 tirages).")
    with t2:
        st.altair_chart(recall_curve_chart(curve_frame(board, max_k=max(500, max(board.ks)))), width="stretch")
        st.caption("Rappel moyen quand on lit les k premiers articles de chaque classement (k = 1 … 500).")
    with t3:
        st.altair_chart(category_breakdown(per_q, metric), width="stretch")
    with t4:
        st.altair_chart(per_question_distribution(per_q, metric), width="stretch")
        st.caption("Nombre de questions par tranche de valeur ; 0 (rien trouvé) et 1 (parfait) ont leur propre barre.")


def _per_question(board, ds, split, tables) -> None:
    st.header("Par question", anchor=False)
    table = tables.per_question_text
    categories = sorted(c for c in table["category"].unique() if c) if "category" in table else []
    chosen = st.multiselect("Filtrer par catégorie", categories, key="pq_categories", placeholder="toutes les catégories")
    shown = filter_categories(table, chosen)
    config = {c: st.column_config.NumberColumn(metric_label_fr(c), format="%.3f") for c in shown.columns if "@" in c}
    config.update({c: st.column_config.Column(label) for c, label in PER_QUESTION_LABELS.items() if c in shown.columns})
    config["question"] = st.column_config.TextColumn("texte", width="medium")
    st.dataframe(shown, hide_index=True, width="stretch", column_config=config, height=320)
    st.caption("Cliquez sur un en-tête pour trier.")

    st.subheader("Examiner une question", anchor=False)
    runs = list(board.evaluations)
    qids = list(dict.fromkeys(shown["qid"]))
    if not qids:
        st.info("Aucune question dans ce filtre.")
        return
    texts = dict(zip(table["qid"], table["question"]))
    c1, c2 = st.columns([1, 3])
    run_name = c1.selectbox("Run", runs, key="dd_run", placeholder="Choisir…")
    qid = c2.selectbox("Question", qids, key="dd_qid", placeholder="Choisir…", format_func=lambda q: f"n° {q} · {texts.get(q, '')[:120]}")
    run = next(r for r in board.runs if r.name == run_name).file.run
    dd = drill_down(ds, split, qid, run)
    st.html(question_box(dd.question, ()))
    st.caption(f"Catégorie : {md_escape(dd.category or '—')}" + ("" if dd.in_run else " · question absente du run (score 0)"))
    g, t = st.columns([2, 3])
    with g:
        st.markdown("**Articles pertinents et leur rang dans le run**")
        st.dataframe([{"article": a.article_id, "référence": a.reference,
                       "rang": "absent du run" if a.rank is None else str(a.rank)} for a in dd.gold],
                     hide_index=True, width="stretch")
    with t:
        st.markdown(f"**Premiers articles du run** ({len(dd.top)})")
        st.dataframe([{"rang": r.rank, "article": r.article_id, "score": r.score, "référence": r.reference,
                       "pertinent": r.gold} for r in dd.top], hide_index=True, width="stretch")
    if ds.articles is None:
        st.caption("Références indisponibles : ce jeu de données n'a pas de corpus d'articles.")


def _comparison(board) -> None:
    st.header("Comparaison deux à deux", anchor=False)
    metrics = display_columns(board.ks)
    metric = st.columns([1, 2])[0].selectbox("Mesure comparée", metrics, key="cmp_metric", persist_state="session", placeholder="Choisir…",
                                             format_func=metric_label_fr)
    table = comparison_frame(board, metric)
    st.dataframe(table.rename(columns=COMPARISON_LABELS), hide_index=True, width="stretch",
                 column_config={v: st.column_config.NumberColumn(v, format="%.4f")
                                for k, v in COMPARISON_LABELS.items() if k.startswith(("mean", "diff", "p_"))})
    st.caption("Test de permutation apparié (10 000 tirages) et test t apparié, p-valeurs corrigées par Holm sur "
               "toutes les paires ; « significatif » : p permutation (Holm) < 0,05. « A gagne / égalités / A perd » : "
               "nombre de questions où A fait mieux, pareil ou moins bien que B.")


ui.ensure_shell()
with ui.guard("page Évaluer"):
    page()
