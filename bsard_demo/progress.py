"""Progress steps as codes and parameters, for every long build of the library.

Builds report ``progress(done, total, message)`` (:data:`bsard_demo.retrievers.base.Progress`);
the library's own steps pass a :class:`Step` as the message: a code (:attr:`Step.kind`) and its
parameters, which each front end words (the app in French from the kind and parameters, never by
reading the text). A step is also a ``str``, its English wording (:data:`STEP_WORDS`), which the
CLI's progress bars and any callback that only shows a text use as it is.
"""
from __future__ import annotations

#: The steps of a build (:attr:`Step.kind`) with the parameters each takes, and their default
#: English wording (the CLI's; the app words the kind and parameters in French).
STEP_WORDS = {
    "analysing_articles": "analysing articles",
    "indexing": "indexing ({engine})",                   # engine: "bm25s", "rank_bm25"
    "embedding_articles": "embedding articles ({encoder})",
    "embedding_questions": "embedding questions ({encoder})",
    "searching_questions": "searching questions",
    "fitting_adapter": "fitting the query adapter ({encoder})",
    "fitting_ranker": "fitting the learned ranker",
    "saving": "saving {what}",                           # a cache entry: entry (its kind), subject,
    "loaded_cached": "loaded cached {what}",             # and ``what``, the cache's English name
    "loaded_bundle": "loaded {what} from the index bundle",
}


class Step(str):
    """A progress step as a code and parameters: :attr:`kind` (a key of :data:`STEP_WORDS`) and
    :attr:`params` (e.g. ``engine``, ``encoder``; a cache step: ``entry``, the cache kind such as
    ``"bm25s"`` or ``"dense"``, ``subject``, e.g. the encoder, and ``what``). As a ``str`` it is its
    English wording, so a callback that only shows a text needs nothing else; a front end that
    words steps itself reads the kind and parameters, never the text."""

    kind: str
    params: dict

    def __new__(cls, kind: str, **params: str) -> "Step":
        step = super().__new__(cls, STEP_WORDS[kind].format(**params))
        step.kind, step.params = kind, dict(params)
        return step

    def __reduce__(self):
        return (_step, (self.kind, self.params))


def _step(kind: str, params: dict) -> Step:
    return Step(kind, **params)
