"""The Search page's widgets and a search (:class:`~.link_codec.SearchSettings`) both ways: the session-state
keys (:data:`WIDGET_KEYS`), the widget values that show a search (:func:`state_from_settings`), the search the
widgets show (:func:`settings_from_state`), and whether a URL's search must be applied (:func:`should_apply`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION
from ..retrievers.registry import BASE_PART, kind as retriever_kind, kind_settings
from .link_codec import DEFAULT_K, DEFAULT_RRF_K, FUSIONS, LinkChoices, SearchSettings
from .link_policy import default_hybrid_weights

#: Session-state keys of the Search page's widgets, by setting.
WIDGET_KEYS = {"question": "question", "systems": "kinds", "k": "top_k", "code": "code", "encoder": "encoder",
               "hybrid_encoders": "hybrid_encoders", "fusion": "fusion", "rrf_k": "rrf_k", "alpha": "alpha",
               "example": "example_qid", "structure": "hybrid_structure"}


def weight_key(system: str) -> str:
    """Session-state key of a hybrid system's weight (BM25's, ``BASE_PART``, or an encoder key)."""
    return f"weight:{system}"


def hybrid_systems(settings: SearchSettings) -> list[str]:
    """The hybrid's systems in weight order: BM25, then its encoders."""
    return [BASE_PART, *settings.hybrid_encoders]


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
    for system in dict.fromkeys([BASE_PART, *encoders, *s.hybrid_encoders]):
        state[weight_key(system)] = 1.0 if system == BASE_PART else default_hybrid_weights(s.fusion, [system])[1]
    if s.weights is not None:
        for system, w in zip(hybrid_systems(s), s.weights):
            state[weight_key(system)] = float(w)
    chosen = dict(s.options)
    for param, setting in kind_settings().items():
        state[setting_key(param)] = chosen.get(param, setting.default)
    return state


def setting_key(param: str) -> str:
    """Session-state key of a registered kind's setting (:class:`~bsard_demo.retrievers.registry.Setting`)."""
    return f"setting:{param}"


def _options(state: Mapping[str, object], systems: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The registered kinds' settings of ``systems`` the widgets show (a value not offered: its default)."""
    out = []
    for kind_name in systems:
        for setting in retriever_kind(kind_name).settings:
            value = state.get(setting_key(setting.param))
            out.append((setting.param, value if value in setting.choices else setting.default))
    return tuple(sorted(out))


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
        example=example if example in choices.examples else None, structure=bool(get("structure", choices.structure)),
        options=_options(state, systems))
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


def query_params_dict(query_params) -> dict[str, list[str]]:
    """``{name: [values]}`` of a Streamlit ``st.query_params`` (or any mapping with ``get_all``)."""
    return {name: list(query_params.get_all(name)) for name in query_params}


def same_params(a: Mapping[str, str | Sequence[str]], b: Mapping[str, str | Sequence[str]]) -> bool:
    """Whether two parameter mappings hold the same values (a lone value equals a list of it)."""
    def norm(m):
        return {k: [v] if isinstance(v, str) else list(v) for k, v in m.items()}
    return norm(a) == norm(b)
