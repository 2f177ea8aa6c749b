"""Shareable links of the Search page (``pages/search.py``): a search as URL parameters
(:data:`LINK_PARAMS`), and back (:func:`parse_link`, which never raises); and what a first visitor sees
(:func:`first_visitor_here`, :func:`default_hybrid_encoders`: the rule of :mod:`bsard_demo.retrievers.defaults`).

Conventions: docs/design.md, 'bsard_demo/app/search_links.py'.
"""
from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Collection, Mapping, Sequence

from ..retrievers import hybrid
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, FUSION_METHODS, FusionConfig, FusionError
from ..retrievers.registry import default_weights
from .search_page import KIND_LABELS

DEFAULT_SYSTEMS = ("bm25",)
#: Whether the default hybrid fuses BM25 with the index bundle's fine-tuned model trained on this
#: corpus (when the bundle carries one) rather than with ``use``. Off: with the fine-tuning recipe
#: of the time, BM25 + the trained MiniLM gave 70.83 R@100 against 72.20 for BM25 + use on
#: frlaw-dev's test sub-corpus (docs/effectiveness.md, "Defaults decided from these figures"); a
#: bundle's model may have been trained with any recipe, so it is offered and labelled, not chosen
#: for the visitor (a query adapter is: :data:`PREFER_BUNDLED_ADAPTER`).
PREFER_BUNDLED_MODEL = False
#: Whether the default hybrid fuses BM25 with a query adapter fitted on this corpus (the index
#: bundle's, else one of ``$BSARD_MODELS``: :func:`bsard_demo.app.builds.builtin_models`) rather
#: than with ``use``. On: on frlaw-dev's train split (5-fold
#: cross-validation), BM25 + the use adapter gave 59.27 R@100 and 22.29 MAP@100 against 55.01 and
#: 18.81 for BM25 + use (docs/effectiveness.md, "Query-side adapter").
PREFER_BUNDLED_ADAPTER = True
#: Whether a first visitor sees more than BM25: the system of the one rule (:func:`first_visitor_here`), which
#: never needs a build. Off, BM25 alone (the app tests that share one cache turn it off).
SHOW_STORED_HYBRID = True
DEFAULT_K, MAX_K = 10, 100
MAX_QUESTION_CHARS = 2000
#: The fusions a link may hold (:data:`bsard_demo.retrievers.hybrid.FUSION_METHODS`).
FUSIONS = FUSION_METHODS
#: The default RRF constant (:class:`~bsard_demo.retrievers.hybrid.FusionConfig`'s), an integer
#: in a link; a link's k is an integer from 1 to ``MAX_RRF_K``.
DEFAULT_RRF_K, MAX_RRF_K = int(hybrid.DEFAULT_RRF_K), 1000
MAX_WEIGHT = 100.0
#: URL parameter -> what it holds. Lists (``systems``, ``henc``, ``w``) are read repeated
#: (``systems=bm25&systems=dense``) or comma-separated (``systems=bm25,dense``) and written repeated.
LINK_PARAMS = {
    "q": "la question", "systems": "les systèmes (bm25, dense, hybrid, ranker)", "k": f"top-k (1 à {MAX_K})",
    "code": "le filtre par code", "enc": "l'encodeur du système dense", "henc": "les encodeurs de l'hybride",
    "fusion": "la fusion hybride (rrf, weighted)", "rrfk": f"la constante k de RRF (1 à {MAX_RRF_K})",
    "alpha": "α, poids de BM25 (fusion pondérée de deux systèmes)",
    "w": f"un poids par système de l'hybride (0 à {MAX_WEIGHT:g})", "ex": "l'exemple de question (son identifiant)",
    "struct": "la structure du code dans l'hybride (1 : oui, 0 : non)",
}
_LIST_PARAMS = frozenset({"systems", "henc", "w"})
#: Streamlit's own parameters: never ours to complain about.
_STREAMLIT_PARAMS = frozenset({"embed", "embed_options"})
#: A link's weights that the fusion refuses (:class:`~bsard_demo.retrievers.hybrid.FusionError`
#: codes), in the page's words.
_WEIGHT_NOTES = {
    "weight_count": "{given} poids pour {n} systèmes de l'hybride (BM25 puis {encoders}) : poids par défaut pris.",
    "weights_zero": "Poids tous nuls : poids par défaut pris.",
}
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True)
class SearchSettings:
    """Everything a search link holds. ``weights``: one per hybrid system (BM25 first, then
    ``hybrid_encoders``), ``None`` for the defaults (:func:`default_hybrid_weights`); a weighted
    fusion of two systems takes ``alpha`` (the weight of BM25) instead (:attr:`uses_alpha`)."""

    question: str = ""
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    k: int = DEFAULT_K
    code: str | None = None
    encoder: str = "use"
    hybrid_encoders: tuple[str, ...] = ("use",)
    fusion: str = DEFAULT_FUSION
    rrf_k: int = DEFAULT_RRF_K
    alpha: float = DEFAULT_ALPHA
    weights: tuple[float, ...] | None = None
    example: str | None = None
    structure: bool = False

    @property
    def uses_alpha(self) -> bool:
        """A weighted fusion of two systems is set by α; every other hybrid by its weights."""
        return self.fusion == "weighted" and len(self.hybrid_encoders) == 1

    @property
    def hybrid_weights(self) -> tuple[float, ...]:
        """The weights the hybrid uses: :attr:`weights`, else the defaults."""
        return self.weights if self.weights is not None else default_hybrid_weights(self.fusion, self.hybrid_encoders)

    def canonical(self, default_encoder: str = "use", default_hybrid: Sequence[str] | None = None) -> "SearchSettings":
        """The same search with the settings its systems do not use reset to their defaults
        (``default_hybrid``: the hybrid's encoders, default ``(default_encoder,)``; and no example
        without a question: a link's example fills an absent question)."""
        s, hybrid = self, "hybrid" in self.systems
        if not s.question.strip():
            s = replace(s, example=None)
        if "dense" not in s.systems:
            s = replace(s, encoder=default_encoder)
        if not hybrid:
            return replace(s, hybrid_encoders=tuple(default_hybrid or (default_encoder,)), fusion=DEFAULT_FUSION,
                           rrf_k=DEFAULT_RRF_K, alpha=DEFAULT_ALPHA, weights=None, structure=False)
        if s.fusion != "rrf":
            s = replace(s, rrf_k=DEFAULT_RRF_K)
        # the weights are spelled out, so a link keeps its results if the default weights change
        return replace(s, weights=None) if s.uses_alpha else replace(s, alpha=DEFAULT_ALPHA, weights=s.hybrid_weights)


@dataclass(frozen=True)
class LinkChoices:
    """The valid values of a link here: the corpus's codes, the encoders offered (the first is
    the dense column's default) and the example questions (id -> text); and what a search
    without them shows: ``systems`` (:func:`default_systems`) and ``hybrid_encoders``
    (:func:`default_hybrid_encoder`; empty: the default encoder)."""

    codes: Collection[str] = ()
    encoders: Sequence[str] = ("use",)
    examples: Mapping[str, str] = field(default_factory=dict)
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    hybrid_encoders: tuple[str, ...] = ()
    #: The hybrid's structure re-scoring by default; the learned ranker offered here (its
    #: ``--encoder``: a bundled name or a folder), ``None`` when there is none.
    structure: bool = False
    ranker: str | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The systems a link may hold here: the menu's kinds, and ``ranker`` when one is offered."""
        return (*KIND_LABELS, *(("ranker",) if self.ranker else ()))

    @property
    def default_encoder(self) -> str:
        return self.encoders[0] if self.encoders else "use"

    @property
    def default_hybrid(self) -> tuple[str, ...]:
        """The hybrid's encoders by default: :attr:`hybrid_encoders` offered here, else the default encoder."""
        chosen = tuple(e for e in self.hybrid_encoders if e in self.encoders)
        return chosen or (self.default_encoder,)


def default_hybrid_encoder(encoders: Sequence[str], bundled: Sequence[str] = (), adapters: Sequence[str] = ()) -> str:
    """The encoder of a first visitor's hybrid: the first of ``adapters`` (the keys of the query
    adapters fitted on the active corpus and offered here, the index bundle's first) when
    :data:`PREFER_BUNDLED_ADAPTER`, else the first of ``bundled`` (its models trained on the active
    corpus) when :data:`PREFER_BUNDLED_MODEL`, else ``use`` when offered, else the first encoder
    offered."""
    if PREFER_BUNDLED_ADAPTER:
        for key in adapters:
            if key in encoders:
                return key
    if PREFER_BUNDLED_MODEL:
        for key in bundled:
            if key in encoders:
                return key
    if "use" in encoders or not encoders:
        return "use"
    return encoders[0]


def default_hybrid_encoders(encoders: Sequence[str], bundled: Sequence[str] = (),
                            adapters: Sequence[str] = ()) -> tuple[str, ...]:
    """The hybrid's parts after BM25 when a visitor picks it: :func:`default_hybrid_encoder`, and
    the neighbours part with it when offered (decided on frlaw-dev train, leave-one-out: BM25 +
    adapter + neighbours 62.19 R@100 against 59.27 without, BM25 + use + neighbours 60.06 against
    55.01; docs/effectiveness.md, "Query-side adapter", "Label transfer from training questions")."""
    from ..retrievers.neighbours import NEIGHBOURS

    first = default_hybrid_encoder(encoders, bundled, adapters)
    return (first, NEIGHBOURS) if NEIGHBOURS in encoders else (first,)


def default_structure() -> bool:
    """Whether the hybrid re-scores with the code's structure by default: yes (decided on frlaw-dev
    train for every base: +4.2 to +5.8 R@100; docs/effectiveness.md, "Structure-aware re-scoring"),
    unless :data:`SHOW_STORED_HYBRID` is off (the first visitor's defaults of the app tests)."""
    return SHOW_STORED_HYBRID


def first_visitor_here(encoders: Sequence[str], *, dense: Sequence[str] = (), rankers: Sequence[str] = (),
                       use_stored: bool = False):
    """What a first visitor sees (and a link without ``systems``):
    :func:`bsard_demo.retrievers.defaults.first_visitor` of the page's menu (``encoders``: its
    keys; ``dense``: the hybrid's preferred encoder, :func:`default_hybrid_encoder`, when its
    embeddings are stored; ``rankers``: the rankers fitted on this corpus; ``use_stored``:
    ``use``'s embeddings are stored), so ``run --retriever default`` ranks as its best column;
    BM25 alone when :data:`SHOW_STORED_HYBRID` is off."""
    from ..retrievers.defaults import FirstVisitor, first_visitor
    from ..retrievers.neighbours import NEIGHBOURS

    if not SHOW_STORED_HYBRID:
        return FirstVisitor(DEFAULT_SYSTEMS)
    return first_visitor(rankers=rankers, dense=[e for e in dense if e in encoders and e != NEIGHBOURS],
                         use_stored=use_stored and "use" in encoders, neighbours=NEIGHBOURS in encoders)


def default_hybrid_weights(fusion: str, hybrid_encoders: Sequence[str]) -> tuple[float, ...]:
    """A hybrid's weights when none are given, BM25 first: the CLI's (``run --retriever
    hybrid``), :func:`~bsard_demo.retrievers.registry.default_weights` (RRF: BM25 1, a built-in
    zero-shot encoder 0.5, a query adapter its base's 0.5, a trained model 1; weighted: all 1),
    read for what each page key stands for (:func:`weight_target`), as the columns are built."""
    return tuple(default_weights([weight_target(e) for e in hybrid_encoders], fusion))


def weight_target(key: str) -> str:
    """What :func:`~bsard_demo.retrievers.registry.default_weights` is given for the page's encoder
    ``key``: a bundled model (``bundle:NAME``) by its name, as ``--encoder NAME``; a trained one
    (``trained:NAME``) by its folder in ``$BSARD_MODELS``; any other key as it is. (Given the key
    itself, an adapter read as "a trained model, 1": the link and the weight inputs said 1 while
    the column fused it at 0.5.)"""
    from .builds import BUNDLE_PREFIX, TRAINED_PREFIX

    if key.startswith(BUNDLE_PREFIX):
        return key[len(BUNDLE_PREFIX):]
    if key.startswith(TRAINED_PREFIX):
        from ..training import models_folder

        return str(models_folder() / key[len(TRAINED_PREFIX):])
    return key


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def link_params(settings: SearchSettings, default_encoder: str = "use") -> dict[str, str | list[str]]:
    """The URL parameters of a search (its :meth:`~SearchSettings.canonical` form)."""
    s = settings.canonical(default_encoder)
    out: dict[str, str | list[str]] = {}
    if s.question:
        out["q"] = s.question
    out["systems"] = list(s.systems)
    out["k"] = str(s.k)
    if s.code:
        out["code"] = s.code
    if "dense" in s.systems:
        out["enc"] = s.encoder
    if "hybrid" in s.systems:
        out["henc"] = list(s.hybrid_encoders)
        out["struct"] = "1" if s.structure else "0"
        out["fusion"] = s.fusion
        if s.fusion == "rrf":
            out["rrfk"] = str(s.rrf_k)
        if s.uses_alpha:
            out["alpha"] = _number_text(s.alpha)
        elif s.weights is not None:
            out["w"] = [_number_text(w) for w in s.weights]
    if s.example:
        out["ex"] = s.example
    return out


def link_query(settings: SearchSettings, default_encoder: str = "use") -> str:
    """``?q=…&systems=…``: the query string of :func:`link_params` (spaces as ``%20``)."""
    return "?" + urllib.parse.urlencode(link_params(settings, default_encoder), doseq=True,
                                        quote_via=urllib.parse.quote)


def share_url(base: str | None, settings: SearchSettings, default_encoder: str = "use") -> str:
    """The full link: ``base`` (the page's address without its query, e.g. ``st.context.url``)
    followed by :func:`link_query`; only the query when ``base`` is unknown."""
    base = (base or "").split("?", 1)[0].split("#", 1)[0]
    return base + link_query(settings, default_encoder)


def _shown(value: str, limit: int = 40) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


class _LinkReader:
    """A link's parameters read one by one, each value not valid here replaced by its default
    with a French note (:func:`parse_link`)."""

    def __init__(self, params: Mapping[str, str | Sequence[str]]):
        self.params = params
        self.notes: list[str] = []

    def values(self, name: str) -> list[str]:
        raw = self.params.get(name)
        return [] if raw is None else [raw] if isinstance(raw, str) else [str(v) for v in raw]

    def single(self, name: str) -> str | None:
        got = self.values(name)
        if len(got) > 1:
            self.notes.append(f"« {name} » figure {len(got)} fois dans le lien : la dernière valeur est prise.")
        return got[-1] if got else None

    def items(self, name: str, whole: Collection[str] = ()) -> list[str]:
        # a value that is itself a choice stays whole (a trained model's name may hold a comma)
        return [part.strip() for v in self.values(name) for part in ([v] if v.strip() in whole else v.split(","))
                if part.strip()]

    def number(self, name: str, lo: float, hi: float, default, integer: bool):
        text = self.single(name)
        if text is None or not text.strip():
            return default
        t = text.strip()
        ok = re.fullmatch(r"\d+", t) if integer else _NUMBER.fullmatch(t)
        value = (int(t) if integer else float(t)) if ok else None
        if value is None or not lo <= value <= hi:
            kind = "un entier" if integer else "un nombre"
            self.notes.append(f"{name}=« {_shown(t)} » n'est pas {kind} de {_number_text(lo)} à {_number_text(hi)} : "
                              f"{_number_text(default)} est pris.")
            return default
        return value

    def pick(self, name: str, offered: Sequence[str], default: tuple[str, ...], what: str) -> tuple[str, ...]:
        asked = self.items(name, offered)
        if not self.values(name):
            return default
        good = tuple(dict.fromkeys(v for v in asked if v in offered))
        bad = [v for v in dict.fromkeys(asked) if v not in offered]
        instead = "" if good else f" ; {', '.join(default)} est pris"
        if bad:
            self.notes.append(f"{what} inconnu(s) ou indisponible(s) ici, ignoré(s) : "
                              + ", ".join(f"« {_shown(b)} »" for b in bad)
                              + f" (choix : {', '.join(offered)}){instead}.")
        elif not good:
            self.notes.append(f"« {name} » est vide{instead}.")
        return good or default

    def unknown_names(self) -> None:
        unknown = [n for n in self.params if n not in LINK_PARAMS and n not in _STREAMLIT_PARAMS]
        if unknown:
            self.notes.append("Paramètre(s) inconnu(s) ignoré(s) : " + ", ".join(f"« {_shown(n)} »" for n in unknown)
                              + ".")

    def question_and_example(self, examples: Mapping[str, str]) -> tuple[str, str | None]:
        question = self.single("q") or ""
        if len(question) > MAX_QUESTION_CHARS:
            self.notes.append(f"Question tronquée à {MAX_QUESTION_CHARS} caractères.")
            question = question[:MAX_QUESTION_CHARS]
        example = (self.single("ex") or "").strip() or None
        if example is not None and example not in examples:
            self.notes.append(f"Exemple n° « {_shown(example)} » absent de ce jeu de données : ignoré.")
            example = None
        if example is not None and not question.strip():
            question = examples[example]
        return question, example

    def code(self, codes: Collection[str]) -> str | None:
        code = self.single("code")
        if code is not None and not code.strip():
            return None
        if code is not None and code not in codes:
            self.notes.append(f"Code « {_shown(code)} » absent de ce corpus : tous les codes sont pris.")
            return None
        return code

    def flag(self, name: str, default: bool) -> bool:
        text = (self.single(name) or "").strip()
        if not text:
            return default
        if text not in ("0", "1"):
            self.notes.append(f"{name}=« {_shown(text)} » n'est ni 1 ni 0 : {int(default)} est pris.")
            return default
        return text == "1"

    def fusion(self) -> str:
        fusion = self.single("fusion")
        if fusion is None or not fusion.strip():
            return DEFAULT_FUSION
        if fusion.strip() not in FUSIONS:
            self.notes.append(f"Fusion « {_shown(fusion)} » inconnue (choix : {', '.join(FUSIONS)}) : "
                              f"{DEFAULT_FUSION} est prise.")
            return DEFAULT_FUSION
        return fusion.strip()

    def weights(self, fusion: str, hybrid_encoders: Sequence[str]) -> tuple[float, ...] | None:
        if not self.values("w"):
            return None
        asked = self.items("w")
        parsed = [float(w) if _NUMBER.fullmatch(w) else None for w in asked]
        n = 1 + len(hybrid_encoders)
        weights = None
        if any(w is None or not 0 <= w <= MAX_WEIGHT for w in parsed):  # the link's range
            self.notes.append("Poids « " + _shown(",".join(asked)) + f" » : des nombres de 0 à {MAX_WEIGHT:g} sont "
                              "attendus ; poids par défaut pris.")
        else:
            try:  # the fusion's own rules (one weight per system, not all 0), worded here in French
                weights = FusionConfig(fusion, weights=parsed).validate(n).weights
            except FusionError as exc:
                self.notes.append(_WEIGHT_NOTES.get(exc.code, _WEIGHT_NOTES["weights_zero"]).format(
                    given=len(parsed), n=n, encoders=", ".join(hybrid_encoders)))
        if weights is not None and fusion == "weighted" and len(hybrid_encoders) == 1:
            self.notes.append("Fusion pondérée de deux systèmes : α fixe leurs poids, « w » est ignoré.")
            return None
        return weights


def parse_link(params: Mapping[str, str | Sequence[str]], choices: LinkChoices) -> tuple[SearchSettings, list[str]]:
    """The search a link holds and the notes (French, one line each) on what it held that is not
    valid here: each such value is replaced by its default, nothing raises. ``params``: name ->
    value or list of values (a repeated parameter)."""
    read = _LinkReader(params)
    read.unknown_names()
    question, example = read.question_and_example(choices.examples)
    systems = read.pick("systems", list(choices.kinds), tuple(choices.systems), "Système(s)")
    k = read.number("k", 1, MAX_K, DEFAULT_K, True)
    code = read.code(choices.codes)
    encoder = read.pick("enc", list(choices.encoders), (choices.default_encoder,), "Encodeur(s)")
    if len(encoder) > 1:
        read.notes.append(f"Un seul encodeur pour le système dense : « {encoder[0]} » est pris.")
    hybrid_encoders = read.pick("henc", list(choices.encoders), choices.default_hybrid, "Encodeur(s)")
    fusion = read.fusion()
    rrf_k = read.number("rrfk", 1, MAX_RRF_K, DEFAULT_RRF_K, True)
    alpha = read.number("alpha", 0, 1, DEFAULT_ALPHA, False)
    weights = read.weights(fusion, hybrid_encoders)
    structure = read.flag("struct", choices.structure)
    settings = SearchSettings(question=question, systems=systems, k=k, code=code, encoder=encoder[0],
                              hybrid_encoders=hybrid_encoders, fusion=fusion, rrf_k=rrf_k, alpha=float(alpha),
                              weights=weights, example=example, structure=structure)
    return settings, read.notes


def query_params_dict(query_params) -> dict[str, list[str]]:
    """``{name: [values]}`` of a Streamlit ``st.query_params`` (or any mapping with ``get_all``)."""
    return {name: list(query_params.get_all(name)) for name in query_params}


def same_params(a: Mapping[str, str | Sequence[str]], b: Mapping[str, str | Sequence[str]]) -> bool:
    """Whether two parameter mappings hold the same values (a lone value equals a list of it)."""
    def norm(m):
        return {k: [v] if isinstance(v, str) else list(v) for k, v in m.items()}
    return norm(a) == norm(b)


# --------------------------------------------------------------------------- the page's widgets

#: Session-state keys of the Search page's widgets, by setting.
WIDGET_KEYS = {"question": "question", "systems": "kinds", "k": "top_k", "code": "code", "encoder": "encoder",
               "hybrid_encoders": "hybrid_encoders", "fusion": "fusion", "rrf_k": "rrf_k", "alpha": "alpha",
               "example": "example_qid", "structure": "hybrid_structure"}


def weight_key(system: str) -> str:
    """Session-state key of a hybrid system's weight (``"bm25"`` or an encoder key)."""
    return f"weight:{system}"


def hybrid_systems(settings: SearchSettings) -> list[str]:
    """The hybrid's systems in weight order: BM25, then its encoders."""
    return ["bm25", *settings.hybrid_encoders]


def state_from_settings(settings: SearchSettings, encoders: Sequence[str] = ()) -> dict[str, object]:
    """The widget values showing ``settings``. Every weight is set (its default for the fusion
    of ``settings`` unless ``settings`` has one for it), those of the other ``encoders`` too, so
    no earlier weight survives a link."""
    s = settings
    state: dict[str, object] = {WIDGET_KEYS["question"]: s.question, WIDGET_KEYS["systems"]: list(s.systems),
                                WIDGET_KEYS["k"]: s.k, WIDGET_KEYS["code"]: s.code, WIDGET_KEYS["encoder"]: s.encoder,
                                WIDGET_KEYS["hybrid_encoders"]: list(s.hybrid_encoders),
                                WIDGET_KEYS["fusion"]: s.fusion,
                                WIDGET_KEYS["rrf_k"]: s.rrf_k, WIDGET_KEYS["alpha"]: s.alpha,
                                WIDGET_KEYS["example"]: s.example, WIDGET_KEYS["structure"]: s.structure}
    for system in dict.fromkeys(["bm25", *encoders, *s.hybrid_encoders]):
        state[weight_key(system)] = 1.0 if system == "bm25" else default_hybrid_weights(s.fusion, [system])[1]
    if s.weights is not None:
        for system, w in zip(hybrid_systems(s), s.weights):
            state[weight_key(system)] = float(w)
    return state


def settings_from_state(state: Mapping[str, object], choices: LinkChoices) -> SearchSettings:
    """The search the widgets show, every value checked against ``choices`` (a value no longer
    valid, e.g. a code of another dataset, becomes its default; no hybrid encoder: the default
    one). ``weights`` is ``None`` when they are the defaults (:func:`default_hybrid_weights`)."""
    def get(name, default):
        value = state.get(WIDGET_KEYS[name])
        return default if value is None else value

    offered = list(choices.encoders)
    default = choices.default_encoder
    systems = tuple(k for k in dict.fromkeys(get("systems", list(choices.systems))) if k in choices.kinds)
    code = get("code", None)
    encoder = get("encoder", default)
    hybrid = (tuple(e for e in dict.fromkeys(get("hybrid_encoders", list(choices.default_hybrid))) if e in offered)
              or choices.default_hybrid)
    example = get("example", None)
    s = SearchSettings(
        question=str(get("question", "")), systems=systems, k=int(get("k", DEFAULT_K)),
        code=code if code in choices.codes else None, encoder=encoder if encoder in offered else default,
        hybrid_encoders=hybrid,
        fusion=get("fusion", DEFAULT_FUSION) if get("fusion", DEFAULT_FUSION) in FUSIONS else DEFAULT_FUSION,
        rrf_k=int(get("rrf_k", DEFAULT_RRF_K)), alpha=float(get("alpha", DEFAULT_ALPHA)),
        example=example if example in choices.examples else None, structure=bool(get("structure", choices.structure)))
    if s.uses_alpha:
        return s
    defaults = default_hybrid_weights(s.fusion, s.hybrid_encoders)
    weights = tuple(float(state.get(weight_key(system), default) or 0.0)
                    for system, default in zip(hybrid_systems(s), defaults))
    return replace(s, weights=None if weights == defaults else weights)


def should_apply(current: Mapping[str, str | Sequence[str]], written: Mapping[str, str | Sequence[str]] | None) -> bool:
    """Whether the page must take its settings from the URL: it holds a search (not empty: a
    visit from the other page comes back without one) that this session did not write itself."""
    return bool(current) and (written is None or not same_params(current, written))
