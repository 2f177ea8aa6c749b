"""The Search page's sections that draw what a model of :mod:`bsard_demo.app` decided, called by
``pages/search.py``'s ``_results`` (each at most 80 lines; a new one: docs/extending.md, 'A Search page section'):
the « Questions proches déjà traitées » panel (:func:`similar_section`).
"""
from __future__ import annotations

import streamlit as st

from .answers import PANEL_TITLE, cite_counts, neighbours_part, panel_reason, similar_questions
from .highlight import md_escape
from .render import similar_panel


def similar_section(ds, question: str, retrievers: dict, results: list):
    """The « Questions proches déjà traitées » panel (or its one-line reason); returns the
    neighbours' counts of citations for the why-lines (None without the neighbours part)."""
    part = neighbours_part(retrievers.values())
    if part is None:
        reason = panel_reason(ds, active=False)
        if reason:
            st.caption(md_escape(reason))
        return None
    neighbours = part.neighbours(question)
    panel = similar_questions(neighbours, ds, results)
    if panel:
        st.html(similar_panel(panel))
    else:
        st.caption(f"{PANEL_TITLE} : aucune question d'entraînement ne ressemble à la vôtre.")
    return cite_counts(neighbours)
