"""The Score page's built-in systems: which retrievers the page offers to run over a split, by their
Search page label (:func:`baseline_specs`)."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ..dataset import DataError
from ..retrievers import RetrieverSpec
from ..retrievers.kinds import DENSE, HYBRID, RANKER, STRUCTURE_WORDS
from ..retrievers.neighbours import NEIGHBOURS
from ..retrievers.registry import menu_kinds
from .builds import builtin_models, offered
from .search_model import first_visit
from .search_page import column_specs

#: What building a built-in system may raise that the page reports as « indisponible » (an encoder that cannot
#: be loaded here, a full disk…).
BUILD_ERRORS = (DataError, ValueError, OSError)


def builtin_specs(dataset, menu, rankers: Sequence[str] = (), *,
                  stored: Callable[..., bool]) -> dict[str, RetrieverSpec]:
    """The built-in systems, from the one encoder menu (its built-in models and its neighbours entry),
    the learned rankers fitted on this corpus and the Search page's first visitor's system (the one
    resolver of retrievers/defaults.py, as run --retriever default); ``stored``: whether a model's
    embeddings are stored here (:func:`~.search_model.first_visit`)."""
    models = builtin_models(menu)
    first = first_visit(dataset, menu, rankers=rankers, stored=stored)
    return baseline_specs(models={o.key: o.target for o in models},
                          neighbours=any(o.key == NEIGHBOURS for o in offered(menu)),
                          adapters=[o.key for o in models if o.adapter], rankers=rankers, first=first)


def baseline_specs(encoder: str = "use", models: Mapping[str, str] | None = None,
                   neighbours: bool = False, adapters: Sequence[str] = (),
                   rankers: Sequence[str] = (), first: Mapping[str, RetrieverSpec] | None = None
                   ) -> dict[str, RetrieverSpec]:
    """The built-in systems offered, by their Search page label: the column of every kind the
    Search page's menu offers (:func:`~bsard_demo.retrievers.registry.menu_kinds`: BM25, the dense
    ``encoder`` and their RRF hybrid, then any kind registered since, with its defaults); when
    ``neighbours`` (the dataset has labelled training questions:
    :func:`bsard_demo.app.builds.neighbours_option`), the neighbours retriever and the three-way
    hybrid BM25 + ``encoder`` + neighbours (``run --retriever hybrid --encoder use,neighbours``);
    then the dense column and the hybrid with BM25 of each of ``models`` (encoder key -> target,
    e.g. ``{"bundle:NAME": "NAME"}``: the index bundle's models), the specs of
    :func:`bsard_demo.app.search_page.column_specs` (so an index built for one page serves the
    other); for each of them that is one of ``adapters`` (a query adapter), with ``neighbours``, also
    the hybrid BM25 + adapter + neighbours, and that hybrid re-scored along the code's structure
    (``run --structure``: :data:`STRUCTURE_LABEL`); the learned ranker of each of ``rankers`` (their
    ``--encoder``: a bundled name or a folder); last, the columns of ``first``
    (:func:`bsard_demo.app.search_model.first_visit`: what the Search page shows a first visitor,
    ``run --retriever default``) that are not built-ins already."""
    specs = column_specs(menu_kinds(), encoder=encoder)
    if neighbours:
        specs.update(column_specs((DENSE.name, HYBRID.name), encoder=NEIGHBOURS, hybrid_encoders=[encoder, NEIGHBOURS]))
    for key, target in (models or {}).items():
        specs.update(column_specs((DENSE.name, HYBRID.name), encoder=key, targets={key: target}))
        if neighbours and key in adapters:
            for structure in (False, True):
                specs.update(column_specs((HYBRID.name,), hybrid_encoders=[key, NEIGHBOURS], targets={key: target},
                                          structure=structure))
    for ranker in rankers:
        specs.update(column_specs((RANKER.name,), ranker=ranker))
    specs.update({label: spec for label, spec in (first or {}).items() if spec not in specs.values()})
    return specs


#: How a built-in hybrid re-scored along the code's structure is named (after its hybrid's label).
STRUCTURE_LABEL = STRUCTURE_WORDS.strip()
