"""The Search page's words for a citizen (``pages/search.py``): a column headed by its kind's registered title
(:attr:`~bsard_demo.retrievers.registry.RetrieverKind.title`, its settings being the technical details), a
hybrid part named by its kind's title, the question's scores in French percentages."""
from __future__ import annotations

from typing import Mapping

from ..retrievers import RetrieverSpec
from ..retrievers.kinds import BM25, NEIGHBOURS_KIND
from ..retrievers.neighbours import NEIGHBOURS
from ..retrievers.registry import BASE_PART
from .french import percent
from .search_page import QuestionScores, kind_label

SCORES_HELP = ("Pour une question du jeu de données : R@k, la part de ses articles pertinents parmi les k premiers "
               "résultats ; AP@k, la précision moyenne (les pertinents classés tôt comptent plus) ; RR@k, 1 / le rang "
               "du premier pertinent.")


def column_titles(specs: Mapping[str, RetrieverSpec]) -> dict[str, str]:
    """``{column label: heading}``: each column headed by its kind's title (a citizen's words; the
    label, with its settings, is the technical detail)."""
    return {label: kind_label(spec.kind) for label, spec in specs.items()}


def part_words(name: str) -> str:
    """A hybrid part's name for a citizen (a weight's label): the registered title of its kind
    (« Mots de la question (BM25) », « Questions proches »), else the encoder key."""
    if name == BASE_PART:
        return BM25.title
    return NEIGHBOURS_KIND.title if name == NEIGHBOURS else name


def scores_line(scores: QuestionScores, k: int) -> str:
    """The column's line of the question's scores, in French percentages (« R@10 50 % · AP@10 … »)."""
    return " · ".join(f"{name}@{k} {percent(value)}" for name, value in
                      (("R", scores.recall), ("AP", scores.ap), ("RR", scores.rr)))
