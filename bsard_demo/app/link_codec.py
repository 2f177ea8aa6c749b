"""Shareable links of the Search page (``pages/search.py``): a search as URL parameters (:data:`LINK_PARAMS`),
and back (:func:`parse_link`, which never raises, each value not valid here replaced by its default with a French
note). Only the codec: what a link without a setting means is :mod:`.link_policy`'s, the widgets are
:mod:`.link_widgets`'.

Conventions: docs/design.md, 'bsard_demo/app/link_codec.py'.
"""
from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Collection, Mapping, Sequence

from ..retrievers import hybrid
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, FUSION_METHODS, FusionConfig, FusionError
from ..retrievers.registry import kind_settings, link_params_of, menu_kinds
from .link_policy import DEFAULT_SYSTEMS, default_hybrid_weights

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
    #: A registered kind's own settings (:class:`~bsard_demo.retrievers.registry.Setting`), by link parameter.
    options: tuple[tuple[str, str], ...] = ()

    def reads(self, param: str) -> bool:
        """Whether a system of this search reads the link parameter ``param`` (its kind's)."""
        return param in link_params_of(self.systems)

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
        s, hybrid = self, self.reads("henc")
        if not s.question.strip():
            s = replace(s, example=None)
        s = replace(s, options=tuple(sorted((p, v) for p, v in s.options if s.reads(p))))
        if not s.reads("enc"):
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
        """The systems a link may hold here: the menu's kinds, and those offered with a model (the learned
        ranker) when one is offered (:attr:`ranker`)."""
        return tuple(menu_kinds(with_model=self.ranker is not None))

    @property
    def default_encoder(self) -> str:
        return self.encoders[0] if self.encoders else "use"

    @property
    def default_hybrid(self) -> tuple[str, ...]:
        """The hybrid's encoders by default: :attr:`hybrid_encoders` offered here, else the default encoder."""
        chosen = tuple(e for e in self.hybrid_encoders if e in self.encoders)
        return chosen or (self.default_encoder,)


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
    if s.reads("enc"):
        out["enc"] = s.encoder
    if s.reads("henc"):
        out["henc"] = list(s.hybrid_encoders)
        out["struct"] = "1" if s.structure else "0"
        out["fusion"] = s.fusion
        if s.fusion == "rrf":
            out["rrfk"] = str(s.rrf_k)
        if s.uses_alpha:
            out["alpha"] = _number_text(s.alpha)
        elif s.weights is not None:
            out["w"] = [_number_text(w) for w in s.weights]
    out.update(s.options)
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
        unknown = [n for n in self.params
                   if n not in LINK_PARAMS and n not in _STREAMLIT_PARAMS and n not in kind_settings()]
        if unknown:
            self.notes.append("Paramètre(s) inconnu(s) ignoré(s) : " + ", ".join(f"« {_shown(n)} »" for n in unknown)
                              + ".")

    def options(self) -> tuple[tuple[str, str], ...]:
        """The registered kinds' settings the link holds (:func:`~bsard_demo.retrievers.registry.kind_settings`)."""
        out = []
        for param, setting in kind_settings().items():
            value = self.single(param)
            if value is None:
                continue
            if value not in setting.choices:
                self.notes.append(f"{param}=« {_shown(value)} » inconnu (choix : {', '.join(setting.choices)}) : "
                                  f"{setting.default} est pris.")
                value = setting.default
            out.append((param, value))
        return tuple(sorted(out))

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
                              weights=weights, example=example, structure=structure, options=read.options())
    return settings, read.notes
