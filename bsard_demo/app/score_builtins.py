"""The Score page's built-in systems: which retrievers the page offers to run over a split, by their
Search page label (:func:`baseline_specs`)."""
from __future__ import annotations

from typing import Mapping, Sequence

from ..retrievers import RetrieverSpec

#: The built-in systems (the Search page's columns).
BASELINE_KINDS = ("bm25", "dense", "hybrid")


def baseline_specs(encoder: str = "use", models: Mapping[str, str] | None = None,
                   neighbours: bool = False, adapters: Sequence[str] = (),
                   rankers: Sequence[str] = ()) -> dict[str, RetrieverSpec]:
    """The built-in systems offered, by their Search page label: BM25, the dense ``encoder`` and
    their RRF hybrid; when ``neighbours`` (the dataset has labelled training questions:
    :func:`bsard_demo.app.builds.neighbours_option`), the neighbours retriever and the three-way
    hybrid BM25 + ``encoder`` + neighbours (``run --retriever hybrid --encoder use,neighbours``);
    then the dense column and the hybrid with BM25 of each of ``models`` (encoder key -> target,
    e.g. ``{"bundle:NAME": "NAME"}``: the index bundle's models), the specs of
    :func:`bsard_demo.app.search_page.column_specs` (so an index built for one page serves the
    other); for each of them that is one of ``adapters`` (a query adapter), with ``neighbours``, also
    the hybrid BM25 + adapter + neighbours, the system the Search page shows a first visitor, and
    that hybrid re-scored along the code's structure (``run --structure``: :data:`STRUCTURE_LABEL`);
    last, the learned ranker of each of ``rankers`` (their ``--encoder``: a bundled name or a folder)."""
    from ..retrievers.neighbours import NEIGHBOURS
    from ..retrievers.structure import StructureSettings
    from .search_page import column_specs

    specs = column_specs(BASELINE_KINDS, encoder=encoder)
    if neighbours:
        specs.update(column_specs(("dense", "hybrid"), encoder=NEIGHBOURS, hybrid_encoders=[encoder, NEIGHBOURS]))
    for key, target in (models or {}).items():
        specs.update(column_specs(("dense", "hybrid"), encoder=key, targets={key: target}))
        if neighbours and key in adapters:
            three = column_specs(("hybrid",), encoder=key, hybrid_encoders=[key, NEIGHBOURS], targets={key: target})
            specs.update(three)
            structure = StructureSettings().as_dict()
            specs.update({f"{label} {STRUCTURE_LABEL}":
                          RetrieverSpec("hybrid", {**spec.options, "structure": structure})
                          for label, spec in three.items()})
    for ranker in rankers:
        specs.update(column_specs(("ranker",), ranker=ranker))
    return specs


#: How a built-in hybrid re-scored along the code's structure is named (after its hybrid's label).
STRUCTURE_LABEL = "+ structure du code"
