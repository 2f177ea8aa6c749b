"""Search page: one question, one or more retrievers side by side, hits with highlights, passages
and why-lines, the already answered questions closest to it, and the results to take away. The
URL holds the search (bsard_demo.app.link_codec): opening a link reproduces it. Sections:
menus, question inputs, system inputs, link, pending builds, similar questions, columns,
downloads; what it decides is bsard_demo.app.search_model's, their logic in bsard_demo.app (search_page,
link_codec, link_policy, link_widgets, answers, passages, render), sections that only draw in search_ui."""
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import streamlit as st

from bsard_demo import settings
from bsard_demo.app import french, ui
from bsard_demo.app.answers import export_csv, export_markdown, export_rows, part_label, with_why_lines
from bsard_demo.app.builds import offered, unavailable_note
from bsard_demo.app.first_builds import BUILD_SPEEDS, dense_index_stored, first_build_note, part_encoder, unbuilt_parts
from bsard_demo.app.highlight import md_escape, query_terms
from bsard_demo.app.link_codec import (
    FUSIONS,
    MAX_K,
    MAX_QUESTION_CHARS,
    MAX_RRF_K,
    MAX_WEIGHT,
    LinkChoices,
    link_params,
    parse_link,
    share_url,
)
from bsard_demo.app.link_widgets import (
    WIDGET_KEYS,
    hybrid_systems,
    query_params_dict,
    same_params,
    setting_key,
    settings_from_state,
    should_apply,
    state_from_settings,
    weight_key,
)
from bsard_demo.app.naming import strip_paths
from bsard_demo.app.passages import group_passages, section_context
from bsard_demo.app.render import COPY_SCRIPT, entry_card, missed_list, question_box
from bsard_demo.app.search_examples import Examples, examples_of
from bsard_demo.app.search_model import link_choices
from bsard_demo.app.search_page import article_codes, build_columns, column_specs, kind_label, run_search
from bsard_demo.app.search_ui import similar_section
from bsard_demo.app.search_words import SCORES_HELP, column_titles, part_words, scores_line
from bsard_demo.app.state import is_built
from bsard_demo.retrievers.ranker import ADAPTER_INPUTS
from bsard_demo.retrievers.registry import BASE_PART, kind as retriever_kind, menu_kinds

settings.prepare_runtime()  # as app.py does: before anything loads faiss, torch or tokenizers

QUESTION, EXAMPLE = WIDGET_KEYS["question"], WIDGET_KEYS["example"]
WRITTEN = "_link_written"     # session: the URL parameters this session wrote last
NOTES = "_link_notes"         # session: (notes on the link opened, the parameters written after it)
CONFIRMED = "_confirmed_builds"  # session: encoders whose first build the visitor asked for
FUSION_LABELS = {"rrf": "par rangs (RRF)", "weighted": "pondérée (scores)"}
DETAILS = "Détails techniques"


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
        cols[i % len(cols)].number_input(f"Poids : {md_escape(part_words(system))}", 0.0, MAX_WEIGHT, step=0.1,
                                         key=weight_key(system), persist_state="session")


@dataclass
class Menus:
    """What the page's menus offer for the active dataset (read once per run)."""

    examples: Examples
    options: list
    keys: list[str]
    labels: dict[str, str]
    targets: dict[str, str]
    adapters: set[str]
    choices: LinkChoices


def _menus(data) -> Menus:
    ds = data.dataset
    examples = examples_of(ds)
    st.session_state["_examples"] = examples.texts
    options = ui.encoder_menu(data)
    menu = offered(options)
    keys = [o.key for o in menu]
    targets = {o.key: o.target for o in menu}
    # what a first visitor (or a link without systems) sees: one rule (retrievers/defaults.py), as
    # run --retriever default
    choices = link_choices(ds, options, codes=article_codes(ds), examples=examples.texts, rankers=ui.rankers_here(data),
                           stored=partial(ui.dense_stored, data))
    return Menus(examples, options, keys, {o.key: o.label for o in menu}, targets, {o.key for o in menu if o.adapter},
                 choices)


def _question_inputs(m: Menus) -> None:
    """The left half: example, question box, button."""
    by_id = m.examples.texts
    st.selectbox("Exemple de question du jeu de données", list(by_id), key=EXAMPLE,
                 persist_state="session", index=None, placeholder="Choisir une question du jeu de données…",
                 format_func=m.examples.labels.get, on_change=_fill_from_example, disabled=not by_id)
    st.text_area("Votre question", key=QUESTION, persist_state="session", height=110, max_chars=MAX_QUESTION_CHARS,
                 placeholder="Ex. : Mon propriétaire peut-il garder ma garantie locative ?")
    st.button("Rechercher", type="primary", icon=":material/search:")


def _system_inputs(m: Menus) -> None:
    """The right half: systems, top-k, code filter, and the dense and hybrid settings."""
    keys, labels = m.keys, m.labels
    st.multiselect("Systèmes (côte à côte)", list(m.choices.kinds), format_func=kind_label, key=WIDGET_KEYS["systems"],
                   persist_state="session", placeholder="Choisir un ou plusieurs systèmes")
    st.slider("Nombre de résultats", 1, MAX_K, key=WIDGET_KEYS["k"], persist_state="session")
    st.selectbox("Filtrer par code", sorted(m.choices.codes), key=WIDGET_KEYS["code"], persist_state="session",
                 index=None, placeholder="Tous les codes")
    with st.expander("Réglages avancés (encodeurs, fusion)"):
        st.selectbox("Encodeur dense", keys, key=WIDGET_KEYS["encoder"], persist_state="session",
                     format_func=labels.get)
        st.multiselect("Encodeurs de l'hybride (fusionnés avec BM25)", keys, key=WIDGET_KEYS["hybrid_encoders"],
                       persist_state="session", format_func=labels.get, placeholder="Au moins un encodeur")
        fusion = st.radio("Fusion du classement combiné", list(FUSIONS), horizontal=True, key=WIDGET_KEYS["fusion"],
                          persist_state="session", format_func=FUSION_LABELS.get)
        st.number_input("Constante k de la fusion par rangs", 1, MAX_RRF_K, key=WIDGET_KEYS["rrf_k"],
                        persist_state="session", disabled=fusion != "rrf")
        st.checkbox("Structure du code : remonter les articles voisins, la section et les renvois des meilleurs "
                    "résultats du classement combiné", key=WIDGET_KEYS["structure"], persist_state="session")
        settings = settings_from_state(st.session_state, m.choices)
        if settings.uses_alpha:
            st.slider("α : poids des mots de la question (fusion pondérée)", 0.0, 1.0, step=0.05,
                      key=WIDGET_KEYS["alpha"], persist_state="session")
        else:
            st.caption("Poids de chaque système dans la fusion par rangs. Par défaut : mots de la question 1, "
                       "encodeur pré-entraîné 0,5, modèle entraîné 1 ; 1 partout : fusion simple.")
            _weights_inputs(hybrid_systems(settings))
        _kind_settings()
        note = unavailable_note(m.options)
        if note:
            st.caption(md_escape(note))


def _kind_settings() -> None:
    """A registered kind's own settings (:class:`~bsard_demo.retrievers.registry.Setting`), one menu each."""
    for name in menu_kinds(with_model=True):
        for setting in retriever_kind(name).settings:
            st.selectbox(setting.words or setting.param, list(setting.choices), key=setting_key(setting.param),
                         persist_state="session")


def _link(settings, choices: LinkChoices) -> str:
    """Write the search into the address bar; returns its link to show ("" without a question)."""
    if not settings.systems:
        return ""
    params = link_params(settings, choices.default_encoder)
    if not same_params(query_params_dict(st.query_params), params):
        st.query_params.from_dict(params)
    st.session_state[WRITTEN] = params
    notes, after = st.session_state.get(NOTES) or ([], None)
    if notes and after is not None and same_params(after, params):
        st.warning("Lien corrigé : " + "  \n".join(md_escape(n) for n in notes), icon=":material/link_off:")
    if not settings.question.strip():
        return ""
    return share_url(st.context.url, settings, choices.default_encoder)


def _link_box(link: str) -> None:
    """The search's link, to share it (its settings are in it), one tap away."""
    with st.expander("Partager cette recherche"):
        _link_text(link)


def _link_text(link: str) -> None:
    st.caption("Lien de cette recherche, avec tous ses réglages (bouton « copier » à droite)"
               if "://" in link else
               "Lien de cette recherche, relatif à l'adresse de cette page (bouton « copier » à droite)")
    st.code(link, language=None, wrap_lines=True)


def _ready_specs(data, specs: dict, targets: dict[str, str]) -> dict:
    """The columns that can be searched now: any dense index neither built nor stored (e5's, use's, a trained
    model's, whatever a link asked for) waits for the visitor's go, named by its menu key (never a folder)."""
    ds = data.dataset
    registry, confirmed = ui.index_registry(), st.session_state.get(CONFIRMED, set())
    names = {target: key for key, target in targets.items()}

    def ready(part) -> bool:
        encoder = part_encoder(part)
        return (encoder in confirmed or is_built(registry, data, part)
                or dense_index_stored(ds.articles, encoder, backend=str(part.options.get("backend", "auto"))))

    # a column built already needs nothing (a warm visit reads no ranker record, checks no embeddings)
    waiting = unbuilt_parts({label: spec for label, spec in specs.items() if not is_built(registry, data, spec)},
                            ready)
    for encoder in dict.fromkeys(e for needed in waiting.values() for e in needed):
        name = names.get(encoder, Path(encoder).name)
        columns = ", ".join(f"« {md_escape(label)} »" for label, needed in waiting.items() if encoder in needed)
        with st.container(border=True):
            st.warning(md_escape(first_build_note(name, len(ds.articles), BUILD_SPEEDS.get(name)))
                       + f"  \nColonne(s) en attente : {columns}.", icon=":material/hourglass_top:")
            st.button(f"Calculer l'index {md_escape(name)} maintenant", key=f"build:{encoder}", on_click=_confirm,
                      args=(encoder,))
    return {label: spec for label, spec in specs.items() if label not in waiting}


def _question_captions(settings, example, gold) -> None:
    if example is not None:
        st.caption(f"Question n° {md_escape(example.qid)} du jeu de données (série {md_escape(example.split)}) · "
                   f"catégorie {md_escape(example.category or '—')} · {len(gold)} article(s) pertinent(s) selon ses "
                   "juristes")
    if settings.code:
        st.caption(f"Filtre : seuls les articles du code « {md_escape(settings.code)} » sont classés.")


def _column(ds, result, title: str, retriever, terms, gold, shown_k: int, code) -> None:
    """One system's column: its title (the kind's), time, the question's scores, then its hits (passages
    grouped), and its settings in « Détails techniques »."""
    st.subheader(md_escape(title), anchor=False)
    st.caption(f"recherche : {french.decimal(result.seconds * 1000, 1)} ms (serveur)")
    if result.scores is not None:
        st.caption(scores_line(result.scores, shown_k), help=SCORES_HELP)
        if result.scores.code:
            n = result.scores.n_relevant
            st.caption("Scores calculés sur "
                       f"{'le seul article pertinent' if n == 1 else f'les {n} articles pertinents'} de ce code (sur "
                       f"{len(set(gold))} pour la question).")
    elif gold is not None and code:
        st.caption("Aucun article pertinent de la question dans ce code : pas de score.")
    if not result.hits:
        st.info("Aucun article.")
    ranks = {h.article_id: h.rank for h in result.hits}
    for entry in group_passages(result.hits, ds):
        context = () if entry.kind == "reminder" else section_context(ds, entry.members or (entry.hit,), ranks)
        st.html(entry_card(entry, terms, context))
    if result.missed is not None:
        st.html(missed_list(result.missed, shown_k, result.depth, result.outside or (), code))
    with st.expander(DETAILS):
        st.caption(md_escape(result.name))
        st.caption(md_escape(retriever.name))


def _downloads(question: str, results: list, link: str) -> None:
    rows = export_rows(question, results, link)
    if not rows:
        return
    st.caption("Emporter ces résultats (question, système, rang, référence, fil d'Ariane, score, pourquoi, lien) :")
    left, right = st.columns(2)
    left.download_button("Télécharger (CSV)", export_csv(rows), file_name="bsard-recherche.csv", mime="text/csv",
                         icon=":material/download:", on_click="ignore", key="download_csv")
    right.download_button("Télécharger (Markdown)", export_markdown(question, rows, link),
                          file_name="bsard-recherche.md",
                          mime="text/markdown", icon=":material/download:", on_click="ignore", key="download_md")


def _why_labels(retriever, hybrid_labels: list[str]) -> list[str]:
    """The why-line names of a column's parts: the input systems a retriever names itself (the learned
    ranker's), else the hybrid's."""
    systems = getattr(retriever, "systems", None)
    if systems:
        return [part_label(s, tuple(ADAPTER_INPUTS.values())) for s in systems]
    return hybrid_labels


def _results(data, settings, m: Menus, link: str) -> None:
    """Search the question with every chosen system and show the columns side by side."""
    ds, question = data.dataset, settings.question.strip()
    example = m.examples.gold_for(settings.example, question)
    gold = example.article_ids if example is not None else None
    specs = column_specs(settings.systems, encoder=settings.encoder, fusion=settings.fusion,
                         rrf_k=float(settings.rrf_k), alpha=settings.alpha, hybrid_encoders=settings.hybrid_encoders,
                         weights=settings.weights, targets=m.targets, structure=settings.structure,
                         ranker=m.choices.ranker, settings=dict(settings.options))
    specs = _ready_specs(data, specs, m.targets)
    if not specs:
        return
    retrievers, failures = build_columns(specs, lambda label, spec: ui.retriever(data, spec, label))
    for label, message in failures.items():  # in French; the builder's own (English) words in the details
        st.error(f"« {md_escape(kind_label(specs[label].kind))} » est indisponible sur ce serveur : son index ou "
                 "son modèle n'a pas pu être chargé.")
        with st.expander(f"{DETAILS} de l'erreur"):
            st.caption(f"{md_escape(label)} : {md_escape(strip_paths(message))}")
    if not retrievers:
        return
    titles = column_titles({label: specs[label] for label in retrievers})
    terms = query_terms(question)
    # the question heads the results (scrolled into view once per question: COPY_SCRIPT), the columns
    # follow; the similar questions, the rank reference, the link and the downloads come after them
    st.html(question_box(question, terms, search=True))
    _question_captions(settings, example, gold)
    columns = st.columns(len(retrievers), gap="medium")
    similar_box, after = st.container(), st.container()
    reference = next(iter(retrievers))
    if len(retrievers) > 1:
        reference = after.columns([2, 3])[0].selectbox(
            "Référence des écarts de rang", list(retrievers), key="reference", placeholder="Choisir…",
            format_func=lambda label: titles.get(label, label),
            help="▲n : classé n places plus haut que dans la colonne de référence ; ▼n : plus bas ; "
                 "= : même rang ; nouveau : absent des premiers résultats de la référence.")
    results = run_search(retrievers, ds, question, settings.k, gold=gold, code=settings.code, reference=reference)
    with similar_box:
        counts = similar_section(ds, question, retrievers, [replace(r, name=titles[r.name]) for r in results])
    parts = [part_label(p, m.adapters) for p in [BASE_PART, *dict.fromkeys(settings.hybrid_encoders)]]
    results = [with_why_lines(r, _why_labels(retrievers[r.name], parts), counts) for r in results]
    shown_k = min(settings.k, len(ds.articles))
    for column, result in zip(columns, results):
        with column:
            _column(ds, result, titles[result.name], retrievers[result.name], terms, gold, shown_k, settings.code)
    with after:
        if link:
            _link_box(link)
        _downloads(question, results, link)
    st.html(COPY_SCRIPT, unsafe_allow_javascript=True)


def page() -> None:
    data = ui.current_data()
    ds = data.dataset
    st.title("Rechercher des articles de loi")
    st.caption("Posez une question en français : chaque système classe les articles de loi, les mots de votre "
               "question sont surlignés.")
    if ds.articles is None or len(ds.articles) == 0:
        st.warning("Ce jeu de données n'a pas de corpus d'articles (articles.csv) : la recherche est impossible. "
                   "La page « Évaluer des runs » fonctionne sans corpus.")
        return
    m = _menus(data)
    _sync_state(m.choices, m.keys)
    left, right = st.columns([3, 2], gap="large")
    with left:
        _question_inputs(m)
    with right:
        _system_inputs(m)
    settings = settings_from_state(st.session_state, m.choices)
    link = _link(settings, m.choices)
    if not settings.systems:
        st.caption("Choisissez au moins un système.")  # a caption: the data's notice stays the page's one notice
    elif not settings.question.strip():
        st.caption("Tapez une question ou choisissez un exemple, puis « Rechercher ».")
    else:
        _results(data, settings, m, link)


ui.ensure_shell()
with ui.guard("page Rechercher"):
    page()
