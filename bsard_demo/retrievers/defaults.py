"""The first visitor's system: one rule (:func:`first_visitor`) for the Search page, the Score page's built-ins and
``run --retriever default``, so a figure a script prints is the page's. Decided on frlaw-dev train (docs/
effectiveness.md, "The first visitor's system"): the learned ranker fitted on this corpus when its dense inputs'
embeddings are stored (:func:`inputs_stored`; 73.58 R@100 in 5-fold CV, e5 and its adapter in); else BM25 + an adapter +
neighbours + structure (67.96); else BM25 + use + neighbours + structure (65.03); with no embeddings stored, BM25 +
neighbours + structure (62.62 with the neighbours' similarity threshold, 62.80 before); without labelled training
questions, BM25 + use + structure or BM25 alone. Its facts come from one call (:func:`gather`), to which each front
end may hand its own cached sources, never its own rule (tests/retrievers/test_defaults.py gives the three the same
facts).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..dataset import Dataset
from .dense import DenseRetriever
from .encoders import DEFAULT_ENCODER
from .hybrid_specs import hybrid_spec
from .kinds import HYBRID, RANKER, ranker_folder
from .neighbours import DEFAULT_SPLIT, NEIGHBOURS, labelled_questions
from .ranker import part_specs
from .registry import BASE_PART, RetrieverSpec
from .trained import ADAPTER_MODEL, RANKER_MODEL, articles_fingerprint, trained_for_corpus

_RANKER, _HYBRID = RANKER.name, HYBRID.name

#: ``--retriever default``: not a kind, the best column a first visitor of the Search page sees here.
CHOICE = "default"
CHOICE_HELP = (f"{CHOICE}: what the Search page shows a first visitor here (the index bundle of --index, the models "
               "of $BSARD_MODELS, the stored embeddings), its best column")
#: The keys of :func:`~.trained.trained_for_corpus`'s answer (a model record's kind).
TRAINED_ADAPTERS, TRAINED_RANKERS = ADAPTER_MODEL.record, RANKER_MODEL.record
#: What a first visitor sees with nothing else at hand (and the app tests' first visitor).
BASE_SYSTEMS = (BASE_PART,)


@dataclass(frozen=True)
class FirstVisitor:
    """What a first visitor sees: ``systems`` (the page's columns, the best last), the hybrid's
    parts after BM25 (``hybrid_encoders``: page keys or ``--encoder`` names) with or without the
    structure re-scoring, and the ranker's key when the best column is the learned ranker."""

    systems: tuple[str, ...]
    hybrid_encoders: tuple[str, ...] = ()
    structure: bool = False
    ranker: str | None = None

    @property
    def best(self) -> str:
        return self.systems[-1]

    def spec(self, target: Callable[[str], str] = str) -> RetrieverSpec:
        """The best column's spec; ``target(key)``: what a key stands for (a folder, a bundled name)."""
        if self.best == _RANKER:
            return RetrieverSpec(_RANKER, {"model": target(self.ranker)})
        if self.best == _HYBRID:
            return hybrid_spec([target(e) for e in self.hybrid_encoders], structure=self.structure or None)
        return RetrieverSpec(BASE_PART)

    def keyed(self, key: Callable[[str], str]) -> "FirstVisitor":
        """The same system with its hybrid parts named by ``key`` (a page's menu keys)."""
        return FirstVisitor(self.systems, tuple(key(e) for e in self.hybrid_encoders), self.structure, self.ranker)


def first_visitor(*, rankers: Sequence[str] = (), dense: Sequence[str] = (), use_stored: bool = False,
                  neighbours: bool = False) -> FirstVisitor:
    """The rule. ``rankers``: the keys of the learned rankers fitted on this corpus and offered
    here, preferred first (the index bundle's first); ``dense``: the dense encoders whose
    embeddings of the corpus are stored, preferred first (a query adapter fitted on it, then
    ``use``); ``use_stored``: ``use``'s are (a ranker reads them: without them no ranker is chosen,
    so a first visitor never waits for a build); ``neighbours``: the dataset has labelled training
    questions."""
    if rankers and use_stored:
        return FirstVisitor((*BASE_SYSTEMS, _RANKER), ranker=rankers[0])
    parts = tuple(p for p in (dense[0] if dense else None, NEIGHBOURS if neighbours else None) if p)
    if not parts:
        return FirstVisitor(BASE_SYSTEMS)
    return FirstVisitor((*BASE_SYSTEMS, _HYBRID), parts, structure=True)


@dataclass(frozen=True)
class Facts:
    """What the rule reads, as ``--encoder`` names them: the learned ``rankers`` and query
    ``adapters`` fitted on this corpus (the index bundle's first, then ``$BSARD_MODELS``' folders),
    the encoders among those adapters and ``use`` whose embeddings of the corpus are ``stored``,
    and whether the dataset has labelled training questions (``neighbours``)."""

    rankers: tuple[str, ...] = ()
    adapters: tuple[str, ...] = ()
    stored: frozenset[str] = frozenset()
    neighbours: bool = False

    def first_visitor(self) -> FirstVisitor:
        """:func:`first_visitor` of these facts: the first stored adapter, else ``use`` when stored."""
        dense = [e for e in (*self.adapters, DEFAULT_ENCODER) if e in self.stored]
        return first_visitor(rankers=self.rankers, dense=dense, use_stored=DEFAULT_ENCODER in self.stored,
                             neighbours=self.neighbours)


def gather(dataset: Dataset, *, cache_root=None, trained: Callable[[], Mapping[str, Sequence[str]]] | None = None,
           stored: Callable[[str], bool] | None = None, offered: Callable[[str], bool] | None = None,
           neighbours: bool | None = None) -> Facts:
    """The facts of ``dataset`` here, in one call. Each source may be handed in (a page's cached
    one): ``trained()`` the adapters and rankers fitted on the corpus by kind (default
    :func:`~.trained.trained_for_corpus` of its fingerprint), ``stored(encoder)`` whether
    its embeddings are stored (default :meth:`~.dense.DenseRetriever.is_stored` in ``cache_root``);
    (``trained()``'s keys: :data:`TRAINED_ADAPTERS`, :data:`TRAINED_RANKERS`, as ``trained_for_corpus``'s);
    ``offered(encoder)``: whether a front end offers that encoder (or the neighbours part) at all
    (default: all); ``neighbours``: whether it has labelled training questions, when the front end
    knows already (default: :func:`~.neighbours.labelled_questions` of its train split)."""
    if dataset.articles is None or not len(dataset.articles):
        return Facts()
    offered = offered or (lambda name: True)
    found = trained() if trained is not None else trained_for_corpus(articles_fingerprint(dataset.articles))
    if stored is None:
        def stored(encoder: str, backend: str = "auto") -> bool:
            return DenseRetriever.is_stored(dataset.articles, encoder, cache_root=cache_root, backend=backend)
    adapters = tuple(a for a in found.get(TRAINED_ADAPTERS, ()) if offered(a))
    rankers = tuple(r for r in found.get(TRAINED_RANKERS, ()) if inputs_stored(r, stored))
    return Facts(rankers=rankers, adapters=adapters,
                 stored=frozenset(e for e in (*adapters, DEFAULT_ENCODER) if offered(e) and stored(e)),
                 neighbours=offered(NEIGHBOURS) and (bool(labelled_questions(dataset, DEFAULT_SPLIT)[0])
                                                     if neighbours is None else neighbours))


def inputs_stored(ranker: str, stored: Callable[..., bool]) -> bool:
    """Whether the embeddings of the learned ranker's dense inputs other than ``use`` and its adapter (``e5``, an
    adapter on e5: e5's through ONNX Runtime) are stored (``stored(encoder, backend)``), so that choosing it builds
    nothing (``use``'s: :class:`Facts`). A folder whose record does not read counts as ready: building it then says
    what is wrong."""
    try:
        specs = part_specs(ranker_folder(ranker))
    except (ValueError, OSError):
        return True
    return all(stored(o["encoder"], o.get("backend", "auto"))
               for system, (kind, o) in specs.items() if kind == "dense" and system not in ("use", "adapter"))


def default_spec(dataset: Dataset, cache_root=None, facts: Facts | None = None) -> RetrieverSpec:
    """``run --retriever default``'s spec over ``dataset``: the best column of the first visitor of
    the facts :func:`gather` finds here (or ``facts``)."""
    if dataset.articles is None or not len(dataset.articles):
        return RetrieverSpec(BASE_PART)  # building it says what is missing
    return (facts or gather(dataset, cache_root=cache_root)).first_visitor().spec()
