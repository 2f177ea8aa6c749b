"""Batch retrieval: every question of a split through one retriever, as ``python -m bsard_demo
run`` and the Score page's built-in run do it (same question text, batches and run tag)."""
from __future__ import annotations

import re
from typing import Callable, Sequence

from .base import Hit, Retriever, Step

#: Append a question's ``extra_description`` (its topic path on the source website) to it? Off:
#: the published BSARD baselines search the question alone, so scores stay comparable. On the
#: bundled sample it helps a lot (BM25 test recall@10 61 -> 92 %, MAP@100 38 -> 71 %;
#: ``bench/bm25_quality.py sample`` at 7ebdb43), but there the fictional articles' ``description`` headers
#: copy the questions' topic paths, so that gain is inflated.
DEFAULT_WITH_DESCRIPTION = False
#: The texts a built-in run may search (``--query-text``): the question alone (the BSARD paper's
#: protocol) or the question followed by its ``extra_description`` (what MTEB's BSARDRetrieval
#: searches).
QUERY_TEXTS = ("question", "question+description")
DEFAULT_QUERY_TEXT = QUERY_TEXTS[1] if DEFAULT_WITH_DESCRIPTION else QUERY_TEXTS[0]
_SEARCH_BATCH = 64


def run_tag(name: str, query_text: str = DEFAULT_QUERY_TEXT) -> str:
    """A TREC run tag from a retriever name: no whitespace, only ``[A-Za-z0-9._=+,:/-]``. A run
    searched with another text than :data:`DEFAULT_QUERY_TEXT` says so (``..._question+description``),
    so its file tells the two protocols apart."""
    if query_text != DEFAULT_QUERY_TEXT:
        name = f"{name} {query_text}"
    tag = re.sub(r"\s+", "_", name.strip())
    tag = re.sub(r"[^A-Za-z0-9._=+,:/-]", "", tag)
    return tag or "run"


def with_description_of(query_text: str) -> bool:
    """Whether a :data:`QUERY_TEXTS` choice appends the ``extra_description``; ValueError else."""
    if query_text not in QUERY_TEXTS:
        raise ValueError(f"unknown query text {query_text!r}; choose from {', '.join(QUERY_TEXTS)}")
    return query_text == "question+description"


def question_texts(questions, with_description: bool = DEFAULT_WITH_DESCRIPTION, *,
                   query_text: str | None = None) -> list[str]:
    """The text searched for each question: ``question``, plus ``extra_description`` if asked
    (``with_description``, or ``query_text`` from :data:`QUERY_TEXTS`, which wins when given)."""
    if query_text is not None:
        with_description = with_description_of(query_text)
    texts = []
    for q, extra in zip(questions["question"], questions["extra_description"]):
        q, extra = str(q or "").strip(), str(extra or "").strip()
        texts.append(f"{q}\n{extra}" if with_description and extra else q)
    return texts


def search_all(retriever: Retriever, texts: Sequence[str], depth: int,
               progress: Callable[[int, int, str], None] | None = None) -> list[list[Hit]]:
    """``retriever.search_many`` over ``texts`` in batches, reporting progress."""
    out: list = []
    for start in range(0, len(texts), _SEARCH_BATCH):
        if progress:
            progress(start, len(texts), Step("searching_questions"))
        out.extend(retriever.search_many(texts[start:start + _SEARCH_BATCH], depth))
    if progress:
        progress(len(texts), len(texts), Step("searching_questions"))
    return out


def ranked_pairs(hits: Sequence[Sequence[Hit]]) -> list[list[tuple[str, float]]]:
    """Each question's hits as ``(article id, score)`` pairs, the rankings
    :func:`bsard_demo.runs.write.format_run` writes."""
    return [[(h.article_id, h.score) for h in hs] for hs in hits]
