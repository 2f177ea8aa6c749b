"""The Search page's logic (``pages/search.py``): run one question through several retrievers
(:func:`build_columns`), optionally filtered by code, and describe the hits: ranks, rank markers against a
reference column, gold articles and their scores when the question comes from a labelled split.

Conventions: docs/design.md, 'bsard_demo/app/search_page.py'.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from ..dataset import Dataset, hierarchy
from ..evaluation.metrics import compute_metrics
from ..retrievers import RetrieverSpec
from ..retrievers.base import DEFAULT_DEPTH, Hit, Retriever
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_RRF_K
from ..retrievers.registry import ColumnChoice, kind as retriever_kind, menu_kinds, retriever_kinds

NEW = "nouveau"
BREADCRUMB_SEPARATOR = " › "


def breadcrumb_text(parts: Sequence[str]) -> str:
    """``code › livre › … › section`` (plain text; empty headers left out)."""
    return BREADCRUMB_SEPARATOR.join(str(p) for p in parts if str(p).strip())


@dataclass(frozen=True)
class RankMarker:
    """How a hit's rank compares with its rank in the reference column."""

    kind: str  # "up" | "down" | "same" | "new"
    delta: int = 0

    @property
    def label(self) -> str:
        return {"up": f"▲{self.delta}", "down": f"▼{self.delta}", "same": "=", "new": NEW}[self.kind]


def rank_marker(rank: int, reference_rank: int | None) -> RankMarker:
    """Marker of a hit shown at ``rank`` whose rank in the reference top k is ``reference_rank``."""
    if reference_rank is None:
        return RankMarker("new")
    if rank < reference_rank:
        return RankMarker("up", reference_rank - rank)
    if rank > reference_rank:
        return RankMarker("down", rank - reference_rank)
    return RankMarker("same")


@dataclass(frozen=True)
class ShownHit:
    """One hit as the page shows it."""

    rank: int
    article_id: str
    score: float
    reference: str
    breadcrumb: tuple[str, ...]
    text: str
    gold: bool | None = None
    marker: RankMarker | None = None
    why: str = ""  # a hybrid hit: the parts that put it there (bsard_demo.app.answers.why_line)


@dataclass(frozen=True)
class MissedGold:
    """A gold article absent from the shown top k; ``rank`` within the searched depth or None."""

    article_id: str
    reference: str
    rank: int | None
    in_corpus: bool


@dataclass(frozen=True)
class QuestionScores:
    """R@k, AP@k, RR@k of one column, computed on ``n_relevant`` gold articles (those of
    ``code`` when a code filter is set, else all of them)."""

    k: int
    recall: float
    ap: float
    rr: float
    n_relevant: int = 0
    code: str | None = None


@dataclass
class ColumnResult:
    """The results of one retriever for the question."""

    name: str
    hits: list[ShownHit]
    seconds: float
    depth: int
    scores: QuestionScores | None = None
    missed: list[MissedGold] | None = None
    outside: list[MissedGold] | None = None  # gold articles outside the filtered code (filter only)
    parts: list[list[Hit]] | None = None  # a hybrid: each part's own ranking (HybridRetriever.search_parts)


def describe_article(dataset: Dataset, article_id: str) -> tuple[str, tuple[str, ...], str]:
    """``(reference, breadcrumb, text)`` of an article; unknown ids give ``("", (), "")``."""
    row = dataset.article(article_id)
    if row is None:
        return "", (), ""
    return str(row.get("reference", "") or ""), tuple(hierarchy(row)), str(row.get("article", "") or "")


def search_depth(k: int, corpus_size: int, filtered: bool, depth: int = DEFAULT_DEPTH) -> int:
    """How many articles to fetch per retriever (see the module conventions)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    return corpus_size if filtered else min(corpus_size, max(k, depth))


def filter_by_code(hits: Sequence[Hit], dataset: Dataset, code: str | None) -> list[Hit]:
    """The hits whose article belongs to ``code`` (all of them when ``code`` is None/empty)."""
    if not code:
        return list(hits)
    a = dataset.articles
    if a is None or "code" not in a:
        return []
    wanted = set(a.loc[a["code"] == code, "id"])
    return [h for h in hits if h.article_id in wanted]


def split_gold_by_code(gold: Sequence[str], dataset: Dataset, code: str | None) -> tuple[list[str], list[str]]:
    """``(inside, outside)``: the distinct gold ids (in gold order) of ``code`` and the others
    (other codes, or not in the corpus). Without a code, every gold id is inside."""
    distinct = list(dict.fromkeys(gold))
    if not code:
        return distinct, []
    a = dataset.articles
    wanted = set() if a is None or "code" not in a else set(a.loc[a["code"] == code, "id"])
    return [g for g in distinct if g in wanted], [g for g in distinct if g not in wanted]


def article_codes(dataset: Dataset) -> list[str]:
    """The distinct non-empty codes of the corpus, sorted."""
    if dataset.articles is None or "code" not in dataset.articles:
        return []
    codes = dataset.memo("article_codes", lambda: sorted({c for c in dataset.articles["code"] if str(c).strip()}))
    return list(codes)  # once per dataset object: a walk of 29k articles at every visit before


def run_search(retrievers: Mapping[str, Retriever], dataset: Dataset, question: str, k: int, *,
               gold: Sequence[str] | None = None, code: str | None = None, reference: str | None = None,
               depth: int = DEFAULT_DEPTH, clock: Callable[[], float] = time.perf_counter) -> list[ColumnResult]:
    """Search ``question`` with every retriever (columns in mapping order) and describe the hits.

    ``gold`` (the question's relevant article ids, when it comes from a split) turns on gold
    marks, missed gold articles and the per-question scores. ``reference`` names the column the
    rank markers compare with (default: the first); with one column there are no markers.
    """
    if dataset.articles is None:
        raise ValueError(f"{dataset.name}: no article corpus to search")
    size = len(dataset.articles)
    fetch = search_depth(k, size, bool(code), depth)
    k = min(k, size)
    columns: list[ColumnResult] = []
    rankings: dict[str, list[Hit]] = {}
    for name, retriever in retrievers.items():
        start = clock()
        parts = None
        if hasattr(retriever, "search_parts"):
            hits, parts = retriever.search_parts(question, fetch)
        else:
            hits = retriever.search(question, fetch)
        seconds = clock() - start
        rankings[name] = filter_by_code(hits, dataset, code)
        parts = None if parts is None else [filter_by_code(p, dataset, code) for p in parts]
        columns.append(ColumnResult(name=name, hits=[], seconds=seconds, depth=fetch, parts=parts))
    ref = reference if reference in rankings else (next(iter(rankings)) if rankings else None)
    ref_ranks = {h.article_id: i for i, h in enumerate(rankings[ref][:k], 1)} if ref is not None else {}
    gold_set = frozenset(gold) if gold is not None else None
    inside, outside = split_gold_by_code(gold, dataset, code) if gold is not None else ([], [])
    known = dataset.article_ids or frozenset()
    for column in columns:
        ranked = rankings[column.name]
        show_marker = len(rankings) > 1 and column.name != ref
        for rank, hit in enumerate(ranked[:k], 1):
            reference_text, crumbs, text = describe_article(dataset, hit.article_id)
            column.hits.append(ShownHit(
                rank=rank, article_id=hit.article_id, score=float(hit.score), reference=reference_text,
                breadcrumb=crumbs, text=text,
                gold=None if gold_set is None else hit.article_id in gold_set,
                marker=rank_marker(rank, ref_ranks.get(hit.article_id)) if show_marker else None,
            ))
        if gold is not None:
            ids = [h.article_id for h in ranked]
            if inside or not code:
                recall, ap, rr = compute_metrics(inside, ids, k)
                column.scores = QuestionScores(k, recall, ap, rr, len(inside), code or None)
            column.missed = missed_gold(inside, ids, k, dataset)
            if code:
                column.outside = [MissedGold(doc, describe_article(dataset, doc)[0], None, doc in known)
                                  for doc in outside]
    return columns


def missed_gold(gold: Sequence[str], ranking: Sequence[str], k: int, dataset: Dataset) -> list[MissedGold]:
    """The gold articles not in ``ranking[:k]``, in gold order, with their rank in ``ranking``."""
    position = {doc: i for i, doc in reversed(list(enumerate(ranking, 1)))}
    known = dataset.article_ids or frozenset()
    out = []
    for doc in dict.fromkeys(gold):
        rank = position.get(doc)
        if rank is not None and rank <= k:
            continue
        out.append(MissedGold(doc, describe_article(dataset, doc)[0], rank, doc in known))
    return out


class _KindLabels(Mapping[str, str]):
    """The systems menu: every kind of the registry offered always
    (:func:`~bsard_demo.retrievers.registry.menu_kinds`), in its order, by its registered label."""

    def __getitem__(self, name: str) -> str:
        if name not in menu_kinds():
            raise KeyError(name)
        return retriever_kind(name).title

    def __iter__(self):
        return iter(menu_kinds())

    def __len__(self) -> int:
        return len(menu_kinds())


#: The systems menu, kind -> label: read from the registry at each use.
KIND_LABELS: Mapping[str, str] = _KindLabels()


def kind_label(name: str) -> str:
    """The systems menu's words for the kind ``name`` (its registered title; an unknown name as it is)."""
    found = retriever_kinds().get(name)
    return found.title if found is not None else name



def column_specs(kinds: Sequence[str], *, encoder: str = "use", fusion: str = DEFAULT_FUSION,
                 rrf_k: float = DEFAULT_RRF_K, alpha: float = DEFAULT_ALPHA,
                 hybrid_encoders: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None, targets: Mapping[str, str] | None = None,
                 structure: bool = False, ranker: str | None = None,
                 settings: Mapping[str, str] | None = None) -> dict[str, RetrieverSpec]:
    """One :class:`RetrieverSpec` per chosen kind, keyed by its French column label: each kind's
    own column (:meth:`~bsard_demo.retrievers.registry.RetrieverKind.column_of`) of what the page
    chose (:class:`~bsard_demo.retrievers.registry.ColumnChoice`: the dense ``encoder``, the
    hybrid's ``hybrid_encoders``, default ``[encoder]``, and fusion; ``targets`` maps an encoder key
    to what the dense retriever takes, e.g. a trained model's folder; ``ranker``: the learned
    model offered here; ``settings``: a registered kind's link settings). A kind the menu does
    not offer raises :class:`ValueError`."""
    choice = ColumnChoice(encoder=encoder, hybrid_encoders=hybrid_encoders, fusion=fusion, rrf_k=rrf_k, alpha=alpha,
                          weights=weights, targets=targets or {}, structure=structure, model=ranker,
                          settings=settings or {})
    offered = menu_kinds(with_model=True)
    out: dict[str, RetrieverSpec] = {}
    for name in dict.fromkeys(kinds):
        if name not in offered:
            raise ValueError(f"unknown retriever kind {name!r}; choose {', '.join(KIND_LABELS)}")
        label, spec = retriever_kind(name).column_of(choice)
        out[label] = spec
    return out


def build_columns(specs: Mapping[str, RetrieverSpec], build: Callable[[str, RetrieverSpec], Retriever]
                  ) -> tuple[dict[str, Retriever], dict[str, str]]:
    """``(retrievers, failures)``: ``build(label, spec)`` for every column, in order; a build
    raising ``ValueError`` or ``OSError`` puts the label and its message in ``failures``."""
    retrievers: dict[str, Retriever] = {}
    failures: dict[str, str] = {}
    for label, spec in specs.items():
        try:
            retrievers[label] = build(label, spec)
        except (ValueError, OSError) as exc:  # an encoder that cannot be loaded here, a full disk…
            failures[label] = str(exc)
    return retrievers, failures
