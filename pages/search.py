"""Search page: one question, one or more retrievers side by side, hits with highlights. The URL
holds the search (bsard_demo.app.search_links): opening a link reproduces it."""
import streamlit as st

from bsard_demo import settings
from bsard_demo.app import ui
from bsard_demo.app.builds import (SLOW_ENCODERS, builtin_models, dense_index_stored, first_build_note, offered,
                                   slow_parts, unavailable_note)
from bsard_demo.app.highlight import md_escape, query_terms
from bsard_demo.app.render import hit_card, missed_list, question_box
from bsard_demo.app.search_links import (FUSIONS, MAX_K, MAX_QUESTION_CHARS, MAX_RRF_K, MAX_WEIGHT, WIDGET_KEYS,
                                         LinkChoices, default_hybrid_encoders, default_systems,
                                         hybrid_systems, link_params, parse_link, query_params_dict, same_params,
                                         settings_from_state, share_url, should_apply, state_from_settings, weight_key)
from bsard_demo.app.search_page import KIND_LABELS, article_codes, build_columns, column_specs, examples_of, run_search
from bsard_demo.app.state import is_built
from bsard_demo.retrievers import RetrieverSpec

settings.prepare_runtime()  # as app.py does: before anything loads faiss, torch or tokenizers

QUESTION, EXAMPLE = WIDGET_KEYS["question"], WIDGET_KEYS["example"]
WRITTEN = "_link_written"     # session: the URL parameters this session wrote last
NOTES = "_link_notes"         # session: (notes on the link opened, the parameters written after it)
CONFIRMED = "_confirmed_builds"  # session: slow encoders whose first build the visitor asked for
FUSION_LABELS = {"rrf": "RRF (rangs)", "weighted": "pondérée (scores)"}


def _fill_from_example() -> None:
    qid = st.session_state.get(EXAMPLE)
    examples = st.session_state.get("_examples", {})
    if qid is not None and qid in examples:
        st.session_state[QUESTION] = examples[qid]


def _confirm(encoder: str) -> None:
    st.session_state.setdefault(CONFIRMED, set()).add(encoder)


def _sync_state(choices: LinkChoices, encoder_keys: list[str]) -> None:
    """Take the settings from the URL when it holds a search this session did not write, then
    make every widget value valid here (defaults where missing)."""
    current = query_params_dict(st.query_params)
    if should_apply(current, st.session_state.get(WRITTEN)):
        settings, notes = parse_link(current, choices)
        st.session_state.update(state_from_settings(settings, encoder_keys))
        st.session_state[NOTES] = (notes, link_params(settings, choices.default_encoder))
    settings = settings_from_state(st.session_state, choices)
    st.session_state.update({k: v for k, v in state_from_settings(settings, encoder_keys).items()
                             if k not in st.session_state or k in (WIDGET_KEYS["code"], WIDGET_KEYS["encoder"],
                                                                     WIDGET_KEYS["hybrid_encoders"], EXAMPLE)})


def _weights_inputs(systems: list[str]) -> None:
    cols = st.columns(min(len(systems), 4))
    for i, system in enumerate(systems):
        cols[i % len(cols)].number_input(f"Poids {md_escape(system)}", 0.0, MAX_WEIGHT, step=0.1, key=weight_key(system),
                                         persist_state="session")


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
    options = ui.encoder_menu(data)
    menu = offered(options)
    keys = [o.key for o in menu]
    labels, targets = {o.key: o.label for o in menu}, {o.key: o.target for o in menu}
    # what a first visitor (or a link without systems) sees: one rule, search_links.default_systems
    here = [o for o in builtin_models(menu) if o.this_corpus]
    hybrid_parts = default_hybrid_encoders(keys, [o.key for o in here if not o.adapter], [o.key for o in here if o.adapter])
    hybrid_default = hybrid_parts[0]
    first_systems = default_systems(ui.dense_stored(data, targets.get(hybrid_default, hybrid_default)))
    choices = LinkChoices(codes=frozenset(article_codes(ds)), encoders=keys, examples=by_id, systems=first_systems,
                          hybrid_encoders=hybrid_parts)
    _sync_state(choices, keys)

    left, right = st.columns([3, 2], gap="large")
    with left:
        st.selectbox(f"Exemple de question (split {split or '—'})", list(by_id), key=EXAMPLE, persist_state="session",
                     index=None, placeholder="Choisir une question du jeu de données…", format_func=examples.labels.get,
                     on_change=_fill_from_example, disabled=not by_id)
        st.text_area("Votre question", key=QUESTION, persist_state="session", height=110, max_chars=MAX_QUESTION_CHARS,
                     placeholder="Ex. : Mon propriétaire peut-il garder ma garantie locative ?")
        st.button("Rechercher", type="primary", icon=":material/search:")
        link_box = st.container()
    with right:
        st.multiselect("Systèmes (côte à côte)", list(KIND_LABELS), format_func=KIND_LABELS.get, key=WIDGET_KEYS["systems"],
                       persist_state="session", placeholder="Choisir un ou plusieurs systèmes")
        st.slider("Nombre de résultats (top-k)", 1, MAX_K, key=WIDGET_KEYS["k"], persist_state="session")
        st.selectbox("Filtrer par code", sorted(choices.codes), key=WIDGET_KEYS["code"], persist_state="session",
                     index=None, placeholder="Tous les codes")
        with st.expander("Réglages des systèmes dense et hybride"):
            st.selectbox("Encodeur dense", keys, key=WIDGET_KEYS["encoder"], persist_state="session",
                         format_func=labels.get)
            st.multiselect("Encodeurs de l'hybride (fusionnés avec BM25)", keys, key=WIDGET_KEYS["hybrid_encoders"],
                           persist_state="session", format_func=labels.get, placeholder="Au moins un encodeur")
            fusion = st.radio("Fusion hybride", list(FUSIONS), horizontal=True, key=WIDGET_KEYS["fusion"],
                              persist_state="session", format_func=FUSION_LABELS.get)
            st.number_input("Constante k de RRF", 1, MAX_RRF_K, key=WIDGET_KEYS["rrf_k"], persist_state="session",
                            disabled=fusion != "rrf")
            settings = settings_from_state(st.session_state, choices)
            if settings.uses_alpha:
                st.slider("α : poids de BM25 (fusion pondérée)", 0.0, 1.0, step=0.05, key=WIDGET_KEYS["alpha"],
                          persist_state="session")
            else:
                st.caption("Poids de chaque système dans la fusion. Par défaut en RRF : BM25 1, encodeur pré-entraîné "
                           "(use, e5, minilm) 0,5, modèle entraîné (trained:…, bundle:…) 1, comme `run --retriever hybrid` ; "
                           "1 partout : fusion simple.")
                _weights_inputs(hybrid_systems(settings))
            note = unavailable_note(options)
            if note:
                st.caption(md_escape(note))

    settings = settings_from_state(st.session_state, choices)
    if settings.systems:
        params = link_params(settings, choices.default_encoder)
        if not same_params(query_params_dict(st.query_params), params):
            st.query_params.from_dict(params)
        st.session_state[WRITTEN] = params
        notes, after = st.session_state.get(NOTES) or ([], None)
        if notes and after is not None and same_params(after, params):
            st.warning("Lien corrigé : " + "  \n".join(md_escape(n) for n in notes), icon=":material/link_off:")
        if settings.question.strip():
            with link_box:
                base = st.context.url
                st.caption("Lien de cette recherche (bouton « copier » à droite)" if base else
                           "Lien de cette recherche, relatif à l'adresse de cette page (bouton « copier » à droite)")
                st.code(share_url(base, settings, choices.default_encoder), language=None, wrap_lines=True)

    question = settings.question.strip()
    if not settings.systems:
        st.info("Choisissez au moins un système.")
        return
    if not question:
        st.info("Tapez une question ou choisissez un exemple, puis « Rechercher ».")
        return

    example = examples.gold_for(settings.example, question)
    gold = example.article_ids if example is not None else None

    specs = column_specs(settings.systems, encoder=settings.encoder, fusion=settings.fusion,
                         rrf_k=float(settings.rrf_k), alpha=settings.alpha, hybrid_encoders=settings.hybrid_encoders,
                         weights=settings.weights, targets=targets)
    registry, confirmed = ui.index_registry(), st.session_state.get(CONFIRMED, set())

    def ready(encoder: str) -> bool:
        return (encoder in confirmed or is_built(registry, data, RetrieverSpec("dense", {"encoder": encoder}))
                or dense_index_stored(ds.articles, encoder))

    waiting = slow_parts(specs, ready)
    for encoder in dict.fromkeys(e for needed in waiting.values() for e in needed):
        columns = ", ".join(f"« {md_escape(label)} »" for label, needed in waiting.items() if encoder in needed)
        with st.container(border=True):
            st.warning(md_escape(first_build_note(encoder, len(ds.articles), SLOW_ENCODERS.get(encoder)))
                       + f"  \nColonne(s) en attente : {columns}.", icon=":material/hourglass_top:")
            st.button(f"Calculer l'index {md_escape(encoder)} maintenant", key=f"build:{encoder}", on_click=_confirm,
                      args=(encoder,))
    specs = {label: spec for label, spec in specs.items() if label not in waiting}
    if not specs:
        return

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
    code = settings.code
    if code:
        st.caption(f"Filtre : seuls les articles du code « {md_escape(code)} » sont classés.")

    k = settings.k
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
