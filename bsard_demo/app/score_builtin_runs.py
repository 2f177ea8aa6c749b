"""The Score page's built-in runs: a built-in system (:func:`bsard_demo.app.score_builtins.baseline_specs`)
run over every question of a split as ``python -m bsard_demo run`` makes it (same question text, depth and
tag rule, same TREC file byte for byte), and the session protocol that builds one per click
(:class:`BuiltinRun`), keeping only the runs of the dataset and split shown: memory stays bounded.
"""
from __future__ import annotations

from typing import Callable, Hashable, MutableMapping

from ..dataset import Dataset
from ..evaluation import DEFAULT_KS
from ..retrievers.base import Retriever
from ..retrievers.batch import DEFAULT_QUERY_TEXT, question_texts, ranked_pairs, run_tag, search_all
from ..runs import Entry, Run, format_run

#: The French names of the question texts.
QUERY_TEXT_FR = {"question": "question seule (protocole de l'article BSARD)",
                 "question+description": "question + description (comme MTEB)"}


def builtin_run(dataset: Dataset, split: str, retriever: Retriever, depth: int = max(DEFAULT_KS),
                progress=None, query_text: str = DEFAULT_QUERY_TEXT) -> Run:
    """The run of ``retriever`` over every question of ``split``, as ``python -m bsard_demo run
    --query-text QUERY_TEXT`` makes it (same question text, depth and tag rule), as a
    :class:`~bsard_demo.runs.Run` (its only tag the run tag); :func:`builtin_run_text` is its file."""
    questions = dataset.questions(split)
    size = len(dataset.articles) if dataset.articles is not None else depth
    hits = search_all(retriever, question_texts(questions, query_text=query_text), min(depth, size), progress)
    entries = (Entry(str(qid), doc, score, rank) for qid, pairs in zip(questions["id"], ranked_pairs(hits))
               for rank, (doc, score) in enumerate(pairs, 1))
    return Run.from_entries(entries, by="score", tags=(run_tag(retriever.name, query_text),))


def builtin_run_text(run: Run) -> bytes:
    """The TREC file of a :func:`builtin_run`, byte for byte what ``python -m bsard_demo run``
    writes (:func:`bsard_demo.runs.format_run`: a retriever's rankings are already in the run's
    order, score descending, ties by article id descending)."""
    return format_run(list(run), [run.scored(q) for q in run], "trec", run.tags[0]).encode("utf-8")


def builtin_name(label: str, query_text: str = DEFAULT_QUERY_TEXT) -> str:
    """The run name of a built-in system: ``"BM25 intégré"``, ``"Dense (use) intégré (question +
    description)"``…"""
    return f"{label} intégré" + ("" if query_text == "question" else " (question + description)")


class BuiltinRun:
    """The Score page's built-in runs in a session (``st.session_state`` or any dict).

    Protocol: the button's callback :meth:`request` asks for one system (its label) and question
    text on one split; the next page run calls :meth:`settle`, which builds that run (once) when
    it was asked for on the split shown and the dataset has articles, and forgets the request
    either way; :meth:`built` are the runs ``[(name, Run, TREC bytes)]`` built for the
    session's dataset and split, in build order (runs built for another dataset or split are
    dropped when a new one is built: memory stays bounded); :meth:`drop` removes one or all.
    """

    STORED = "builtin_runs"
    WANTED = "builtin_wanted"

    def __init__(self, session: MutableMapping, data_key: Hashable, split: str):
        self.session, self.key, self.split = session, (data_key, split), split

    def _stored(self) -> dict:
        return {n: v for n, v in (self.session.get(self.STORED) or {}).items() if v["key"] == self.key}

    def built(self) -> list[tuple[str, Run, bytes]]:
        """``(name, run, its TREC file)`` of each run built for this dataset and split."""
        return [(name, v["run"], v["bytes"]) for name, v in self._stored().items()]

    def has(self, label: str, query_text: str = DEFAULT_QUERY_TEXT) -> bool:
        return builtin_name(label, query_text) in self._stored()

    @property
    def present(self) -> bool:
        return bool(self._stored())

    @classmethod
    def request(cls, session: MutableMapping, split: str, label: str = "BM25",
                query_text: str = DEFAULT_QUERY_TEXT) -> None:
        """Button callback: build the run of system ``label`` for ``split`` on the next page run."""
        session[cls.WANTED] = (split, label, query_text)

    @classmethod
    def drop(cls, session: MutableMapping, name: str | None = None) -> None:
        """Button callback: forget the built run ``name`` (all of them when None)."""
        if name is None:
            session.pop(cls.STORED, None)
        else:
            (session.get(cls.STORED) or {}).pop(name, None)

    def settle(self, can_build: bool, build: Callable[[str, str], tuple[Run, bytes] | None]) -> bool:
        """Build the requested run if it is for this split, absent and can be built (``build(label,
        query_text)`` returns its :func:`builtin_run` and that run's :func:`builtin_run_text`, or None
        when it failed); True when any run is present."""
        wanted = self.session.pop(self.WANTED, None)
        if wanted and wanted[0] == self.split and can_build and not self.has(wanted[1], wanted[2]):
            made = build(wanted[1], wanted[2])
            if made is not None:
                stored = self._stored()
                stored[builtin_name(wanted[1], wanted[2])] = {"key": self.key, "run": made[0], "bytes": made[1]}
                self.session[self.STORED] = stored
        return self.present
