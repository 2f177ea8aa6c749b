"""Search page: one question, one or more retrievers side by side, hits with highlights."""
import streamlit as st

from bsard_demo.app import ui
from bsard_demo.app.highlight import md_escape, query_terms
from bsard_demo.app.render import hit_card, missed_list, question_box
from bsard_demo.app.search_page import KIND_LABELS, article_codes, build_columns, column_specs, examples_of, run_search
from bsard_demo.retrievers.encoders import DEFAULT_ENCODER, ENCODER_CHOICES

QUESTION = "question"
EXAMPLE = "example_qid"


def _fill_from_example() -> None:
    qid = st.session_state.get(EXAMPLE)
    examples = st.session_state.get("_examples", {})
    if qid is not None and qid in examples:
        st.session_state[QUESTION] = examples[qid]


def page() -> None:
    data = ui.current_data()
    ds = data.dataset
    st.title("Rechercher des articles de loi")
    st.caption("Posez une question en français : chaque système classe les articles du corpus. "
               "Les mots de la question (et leurs variantes : « locatif » ↔ « locatives ») sont surlignés.")
    if ds.articles is None or len(ds.articles) == 0:
        st.warning("Ce jeu de données n'a pas de corpus d'articles (articles.csv) : la recherche est impossible. "
                   "La page « Évaluer des runs » fonctionne sans corpus.")
        return

    examples = examples_of(ds)
    split, by_id = examples.split, examples.texts
    st.session_state["_examples"] = by_id

    left, right = st.columns([3, 2], gap="large")
    with left:
        st.selectbox(f"Exemple de question (split {split or '—'})", list(by_id), key=EXAMPLE, persist_state="session", index=None,
                     placeholder="Choisir une question du jeu de données…", format_func=examples.labels.get,
                     on_change=_fill_from_example, disabled=not by_id)
        st.text_area("Votre question", key=QUESTION, persist_state="session", height=110, max_chars=2000,
                     placeholder="Ex. : Mon propriétaire peut-il garder ma garantie locative ?")
        st.button("Rechercher", type="primary", icon=":material/search:")
    with right:
        kinds = st.multiselect("Systèmes (côte à côte)", list(KIND_LABELS), default=["bm25"],
                               format_func=KIND_LABELS.get, key="kinds", persist_state="session", placeholder="Choisir un ou plusieurs systèmes")
        k = st.slider("Nombre de résultats (top-k)", 1, 100, 10, key="top_k", persist_state="session")
        codes = article_codes(ds)
        code = st.selectbox("Filtrer par code", codes, key="code", persist_state="session", index=None, placeholder="Tous les codes")
        with st.expander("Réglages des systèmes dense et hybride"):
            encoder = st.selectbox("Encodeur dense", list(ENCODER_CHOICES), key="encoder", persist_state="session", placeholder="Choisir…",
                                   index=list(ENCODER_CHOICES).index(DEFAULT_ENCODER),
                                   format_func=lambda e: f"{e} — {ENCODER_CHOICES[e]}")
            fusion = st.radio("Fusion hybride", ["rrf", "weighted"], horizontal=True, key="fusion", persist_state="session",
                              format_func={"rrf": "RRF (rangs)", "weighted": "pondérée (scores)"}.get)
            rrf_k = st.number_input("Constante k de RRF", 1, 1000, 60, key="rrf_k", persist_state="session", disabled=fusion != "rrf")
            alpha = st.slider("α : poids de BM25 (fusion pondérée)", 0.0, 1.0, 0.5, 0.05, key="alpha", persist_state="session",
                              disabled=fusion != "weighted")

    question = (st.session_state.get(QUESTION) or "").strip()
    if not kinds:
        st.info("Choisissez au moins un système.")
        return
    if not question:
        st.info("Tapez une question ou choisissez un exemple, puis « Rechercher ».")
        return

    example = examples.gold_for(st.session_state.get(EXAMPLE), question)
    gold = example.article_ids if example is not None else None

    specs = column_specs(kinds, encoder=encoder, fusion=fusion, rrf_k=float(rrf_k), alpha=float(alpha))
    retrievers, failures = build_columns(specs, lambda label, spec: ui.retriever(data, spec, label))
    for label, message in failures.items():
        st.error(f"{md_escape(label)} indisponible : {md_escape(message)}")
    if not retrievers:
        return

    reference = next(iter(retrievers))
    if len(retrievers) > 1:
        reference = st.columns([2, 3])[0].selectbox(
            "Référence des écarts de rang", list(retrievers), key="reference", placeholder="Choisir…",
            help="▲n : classé n places plus haut que dans la colonne de référence ; ▼n : plus bas ; "
                 "= : même rang ; nouveau : absent du top-k de la référence.")
    terms = query_terms(question)
    st.html(question_box(question, terms))
    if example is not None:
        st.caption(f"Question n° {md_escape(example.qid)} du split {md_escape(example.split)} · catégorie "
                   f"{md_escape(example.category or '—')} · {len(gold)} article(s) pertinent(s) selon le jeu de données")
    if code:
        st.caption(f"Filtre : seuls les articles du code « {md_escape(code)} » sont classés.")

    results = run_search(retrievers, ds, question, k, gold=gold, code=code, reference=reference)
    shown_k = min(k, len(ds.articles))
    for column, result in zip(st.columns(len(results), gap="medium"), results):
        with column:
            st.subheader(md_escape(result.name), anchor=False)
            st.caption(f"{md_escape(retrievers[result.name].name)}  \nrecherche : {result.seconds * 1000:.1f} ms (serveur)")
            if result.scores is not None:
                m1, m2, m3 = st.columns(3)
                m1.metric(f"R@{shown_k}", f"{result.scores.recall:.3f}")
                m2.metric(f"AP@{shown_k}", f"{result.scores.ap:.3f}")
                m3.metric(f"RR@{shown_k}", f"{result.scores.rr:.3f}")
                if result.scores.code:
                    n = result.scores.n_relevant
                    st.caption(f"Scores calculés sur {'le seul article pertinent' if n == 1 else f'les {n} articles pertinents'} "
                               f"de ce code (sur {len(set(gold))} pour la question).")
            elif gold is not None and code:
                st.caption("Aucun article pertinent de la question dans ce code : pas de score.")
            if not result.hits:
                st.info("Aucun article.")
            for hit in result.hits:
                st.html(hit_card(hit, terms))
            if result.missed is not None:
                st.html(missed_list(result.missed, shown_k, result.depth, result.outside or (), code))


ui.ensure_shell()
with ui.guard("page Rechercher"):
    page()
