"""What a Search page shows a visitor who has not chosen (and a link without the setting): the first visitor's
columns (:func:`first_visitor_here`: the one rule of :mod:`bsard_demo.retrievers.defaults`, its facts gathered by
:func:`bsard_demo.retrievers.defaults.gather`), the hybrid's encoders when a visitor picks it
(:func:`default_hybrid_encoders`), its structure re-scoring and its weights (:func:`default_hybrid_weights`).
The link codec (:mod:`.link_codec`) and the widgets (:mod:`.link_widgets`) read this policy; nothing here parses.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..retrievers.defaults import BASE_SYSTEMS, TRAINED_ADAPTERS, TRAINED_RANKERS, FirstVisitor, gather
from ..retrievers.hybrid_specs import default_weights
from ..retrievers.neighbours import NEIGHBOURS
from ..training import models_folder
from .builds import BUNDLE_PREFIX, TRAINED_PREFIX, EncoderOption, builtin_models, offered

#: The systems of a search that names none, when the one rule is off (:data:`SHOW_STORED_HYBRID`).
DEFAULT_SYSTEMS = BASE_SYSTEMS
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
    first = default_hybrid_encoder(encoders, bundled, adapters)
    return (first, NEIGHBOURS) if NEIGHBOURS in encoders else (first,)


def default_structure() -> bool:
    """Whether the hybrid re-scores with the code's structure by default: yes (decided on frlaw-dev
    train for every base: +4.2 to +5.8 R@100; docs/effectiveness.md, "Structure re-scoring (`run --structure`)"),
    unless :data:`SHOW_STORED_HYBRID` is off (the first visitor's defaults of the app tests)."""
    return SHOW_STORED_HYBRID


def first_visitor_here(dataset, options: Sequence[EncoderOption], *, rankers: Sequence[str] = (),
                       stored: Callable[..., bool] = lambda target, backend="auto": False) -> FirstVisitor:
    """What a first visitor sees (and a link without ``systems``), by the page's keys: the rule of
    :mod:`bsard_demo.retrievers.defaults` on the facts :func:`~bsard_demo.retrievers.defaults.gather`
    finds, handed the page's own sources: the encoder menu ``options`` (what is offered; the query
    adapters fitted on this corpus among its built-in models, when :data:`PREFER_BUNDLED_ADAPTER`),
    ``rankers`` (the learned rankers fitted on it) and ``stored(target)`` (its embeddings are
    stored), so ``run --retriever default`` ranks as its best column. BM25 alone when
    :data:`SHOW_STORED_HYBRID` is off."""
    if not SHOW_STORED_HYBRID:
        return FirstVisitor(DEFAULT_SYSTEMS)
    menu = offered(options)
    key_of = {o.target: o.key for o in menu}
    ours = [o for o in builtin_models(menu) if o.this_corpus]
    # the preferred dense parts, in the order of default_hybrid_encoder: adapters, then (when preferred) other models
    preferred = ([o.target for o in ours if o.adapter] if PREFER_BUNDLED_ADAPTER else []) + \
        ([o.target for o in ours if not o.adapter] if PREFER_BUNDLED_MODEL else [])
    facts = gather(dataset, trained=lambda: {TRAINED_ADAPTERS: preferred, TRAINED_RANKERS: list(rankers)},
                   stored=stored, offered=key_of.__contains__, neighbours=NEIGHBOURS in key_of)
    return facts.first_visitor().keyed(lambda target: key_of.get(target, target))


def default_hybrid_weights(fusion: str, hybrid_encoders: Sequence[str]) -> tuple[float, ...]:
    """A hybrid's weights when none are given, BM25 first: the CLI's (``run --retriever
    hybrid``), :func:`~bsard_demo.retrievers.hybrid_specs.default_weights` (RRF: BM25 1, a built-in
    zero-shot encoder 0.5, a query adapter its base's 0.5, a trained model 1; weighted: all 1),
    read for what each page key stands for (:func:`weight_target`), as the columns are built."""
    return tuple(default_weights([weight_target(e) for e in hybrid_encoders], fusion))


def weight_target(key: str) -> str:
    """What :func:`~bsard_demo.retrievers.hybrid_specs.default_weights` is given for the page's encoder
    ``key``: a bundled model (``bundle:NAME``) by its name, as ``--encoder NAME``; a trained one
    (``trained:NAME``) by its folder in ``$BSARD_MODELS``; any other key as it is. (Given the key
    itself, an adapter read as "a trained model, 1": the link and the weight inputs said 1 while
    the column fused it at 0.5.)"""
    if key.startswith(BUNDLE_PREFIX):
        return key[len(BUNDLE_PREFIX):]
    if key.startswith(TRAINED_PREFIX):
        return str(models_folder() / key[len(TRAINED_PREFIX):])
    return key
