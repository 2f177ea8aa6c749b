"""The Search page's model (what ``pages/search.py`` decides, without Streamlit): what its menus offer and show
before any choice (:func:`link_choices`: the first visitor's system by the one rule of
:mod:`bsard_demo.retrievers.defaults`, the link choices), and the columns of a first visit
(:func:`visitor_columns`, also the Score page's built-in of that system). Its sections' logic: :mod:`.search_page`
(columns, hits), :mod:`.link_codec`, :mod:`.link_policy`, :mod:`.link_widgets`, :mod:`.answers`, :mod:`.passages`.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ..retrievers import RetrieverSpec
from ..retrievers.defaults import FirstVisitor
from .builds import EncoderOption, builtin_models, offered
from .link_codec import LinkChoices
from .link_policy import default_hybrid_encoders, default_structure, first_visitor_here
from .search_page import column_specs


def link_choices(dataset, options: Sequence[EncoderOption], *, codes=(), examples=None, rankers: Sequence[str] = (),
                 stored: Callable[..., bool] = lambda target, backend="auto": False) -> LinkChoices:
    """What the Search page offers and shows before any choice (:class:`~.link_codec.LinkChoices`),
    from the encoder menu ``options``, the corpus ``codes``, the ``examples`` (id -> text), the
    learned ``rankers`` fitted on this corpus and ``stored(target)``: the first visitor's systems
    (:func:`first_visitor_here`), the hybrid's encoders when a visitor picks it
    (:func:`default_hybrid_encoders`), its structure re-scoring, the ranker offered."""
    menu = offered(options)
    keys = [o.key for o in menu]
    here = [o for o in builtin_models(menu) if o.this_corpus]
    parts = default_hybrid_encoders(keys, [o.key for o in here if not o.adapter], [o.key for o in here if o.adapter])
    visitor = first_visitor_here(dataset, options, rankers=rankers, stored=stored)
    return LinkChoices(codes=frozenset(codes), encoders=keys, examples=examples or {}, systems=visitor.systems,
                       hybrid_encoders=visitor.hybrid_encoders or parts, structure=default_structure(),
                       ranker=rankers[0] if rankers else None)


def visitor_columns(visitor: FirstVisitor, targets: Mapping[str, str] | None = None) -> dict[str, RetrieverSpec]:
    """The columns a first visitor sees (:func:`~.search_page.column_specs` of its systems, its
    hybrid's parts by the page's keys mapped to ``targets``), the best last."""
    return column_specs(visitor.systems, hybrid_encoders=visitor.hybrid_encoders or None, targets=targets,
                        structure=visitor.structure, ranker=visitor.ranker)


def first_visit(dataset, options: Sequence[EncoderOption], *, rankers: Sequence[str] = (),
                stored: Callable[..., bool] = lambda target, backend="auto": False) -> dict[str, RetrieverSpec]:
    """:func:`visitor_columns` of the first visitor here (:func:`~.link_policy.first_visitor_here`)."""
    visitor = first_visitor_here(dataset, options, rankers=rankers, stored=stored)
    return visitor_columns(visitor, {o.key: o.target for o in offered(options)})
