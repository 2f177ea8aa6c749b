"""The French words of a build's progress (:func:`progress_text`: a :class:`~bsard_demo.progress.Step` from its
kind and parameters) and its bar's fraction. (Split from :mod:`.state`.)"""
from __future__ import annotations

from ..retrievers.dense import CACHE_KIND as DENSE_CACHE

#: The French words of a build's :class:`~bsard_demo.progress.Step`, by kind; a cache step's by
#: kind and entry (the cache kind: ``bm25s``, ``dense``); a parameter in parentheses follows (engine, encoder).
STEP_FR = {
    "analysing_articles": "analyse des articles",
    "indexing": "indexation",
    "embedding_articles": "encodage des articles",
    "embedding_questions": "encodage des questions",
    "searching_questions": "recherche des questions",
    "fitting_adapter": "ajustement de l'adaptateur des questions",
    "fitting_ranker": "ajustement du classement appris",
}
ENTRY_STEP_FR = {
    ("saving", "bm25s"): "enregistrement de l'index BM25",
    ("saving", DENSE_CACHE): "enregistrement des plongements",
    ("loaded_cached", "bm25s"): "index BM25 chargé depuis le cache",
    ("loaded_cached", DENSE_CACHE): "plongements chargés depuis le cache",
    ("loaded_bundle", "bm25s"): "index BM25 chargé",
    ("loaded_bundle", DENSE_CACHE): "plongements chargés",
}
#: Where a ``loaded_bundle`` step loaded from.
FROM_BUNDLE_FR = " depuis les index préconstruits"


def progress_text(message: str) -> str:
    """French wording of a library progress message: a :class:`~bsard_demo.progress.Step` from
    its kind and parameters (an unknown kind keeps its English words); any other text as it is."""
    kind, params = getattr(message, "kind", None), getattr(message, "params", {})
    if kind in STEP_FR:
        detail = params.get("engine") or params.get("encoder")
        return STEP_FR[kind] + (f" ({detail})" if detail else "")
    words = ENTRY_STEP_FR.get((kind, params.get("entry")))
    if words is None:
        return str(message)
    subject = params.get("subject")
    return words + (f" ({subject})" if subject else "") + (FROM_BUNDLE_FR if kind == "loaded_bundle" else "")


def progress_fraction(done: int, total: int) -> float:
    """``done / total`` clipped to [0, 1] (0 when ``total`` is not positive)."""
    return 0.0 if total <= 0 else min(1.0, max(0.0, done / total))
