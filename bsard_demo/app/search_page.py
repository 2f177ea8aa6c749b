"""The Search page's logic (``pages/search.py``): run one question through several retrievers
(:func:`build_columns`), optionally filtered by code, and describe the hits: ranks, rank markers against a
reference column, gold articles and their scores when the question comes from a labelled split.

Conventions: docs/design.md, 'bsard_demo/app/search_page.py'.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from ..dataset import Dataset, hierarchy
from ..evaluation.metrics import compute_metrics
from ..retrievers import RetrieverSpec
from ..retrievers.base import DEFAULT_DEPTH, Hit, Retriever
from ..retrievers.hybrid import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_RRF_K, FusionConfig, FusionError
from ..retrievers.neighbours import NEIGHBOURS
from ..retrievers.registry import hybrid_spec

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


def example_questions(dataset: Dataset, split: str = "test") -> pd.DataFrame:
    """The split's questions with labels: columns ``id, question, category, article_ids``
    (questions with an empty text dropped), in split order."""
    if split not in dataset.splits:
        return pd.DataFrame(columns=["id", "question", "category", "article_ids"])
    q = dataset.questions(split)
    q = q[q["question"].str.strip() != ""]
    return q[["id", "question", "category", "article_ids"]].reset_index(drop=True)



class _KindLabels(Mapping[str, str]):
    """The systems menu: every kind of the registry offered as a column
    (:func:`~bsard_demo.retrievers.registry.retriever_kinds`), in its order, by the page's word for
    it (a kind without one shows its name)."""

    WORDS = {"bm25": "BM25", "dense": "Dense", "hybrid": "Hybride"}

    def _kinds(self) -> list[str]:
        from ..retrievers.registry import retriever_kinds

        return [name for name, kind in retriever_kinds().items() if kind.column]

    def __getitem__(self, kind: str) -> str:
        if kind not in self._kinds():
            raise KeyError(kind)
        return self.WORDS.get(kind, kind)

    def __iter__(self):
        return iter(self._kinds())

    def __len__(self) -> int:
        return len(self._kinds())


#: The systems menu, kind -> label: read from the registry at each use.
KIND_LABELS: Mapping[str, str] = _KindLabels()
#: The column of the neighbours retriever, chosen as the dense column's "encoder".
NEIGHBOURS_COLUMN = "Questions voisines (train)"
#: The learned ranker's system (offered when a ranker folder fitted on the corpus is at hand).
RANKER_LABEL = "Classement appris"
STRUCTURE_WORDS = " + structure du code"


def kind_label(kind: str) -> str:
    """The systems menu's word for ``kind`` (:data:`KIND_LABELS`, and the ranker's)."""
    return RANKER_LABEL if kind == "ranker" else KIND_LABELS.get(kind, kind)
#: The page's words for a fusion (:meth:`~bsard_demo.retrievers.hybrid.FusionConfig.label`).
FUSION_WORDS = {"rrf": "RRF", "weighted": "pondéré", "alpha": "α"}


def hybrid_column(encoders: Sequence[str], *, fusion: str = DEFAULT_FUSION, rrf_k: float = DEFAULT_RRF_K,
                  alpha: float = DEFAULT_ALPHA, weights: Sequence[float] | None = None,
                  targets: Mapping[str, str] | None = None, structure: bool = False) -> tuple[str, RetrieverSpec]:
    """``(label, spec)`` of a hybrid column fusing BM25 with a dense part per encoder (keys,
    mapped to what the dense retriever takes by ``targets``; default: the key itself). The spec
    is :func:`~bsard_demo.retrievers.registry.hybrid_spec`'s, so a column with the default
    settings is the CLI's ``run --retriever hybrid``.

    ``fusion="rrf"``: reciprocal rank fusion with constant ``rrf_k`` and ``weights`` (one per
    system, BM25 first; ``None``: the product's defaults, BM25 1, a built-in zero-shot encoder
    0.5, any other 1); ``"weighted"``: min-max normalised scores, ``alpha`` the weight of BM25
    when there are two systems and no ``weights``, else ``weights`` (default all 1). The label
    (:meth:`~bsard_demo.retrievers.hybrid.FusionConfig.label` in :data:`FUSION_WORDS`) shows the
    weights unless all are 1. Raises :class:`ValueError` on an unknown fusion, no encoder, or a
    wrong number of weights (checked by :meth:`~bsard_demo.retrievers.hybrid.FusionConfig.validate`).
    ``structure``: with the code's structure re-scoring (:mod:`bsard_demo.retrievers.structure`)."""
    encoders = list(dict.fromkeys(encoders))
    if not encoders:
        raise ValueError("a hybrid needs at least one dense encoder")
    n = 1 + len(encoders)
    targets = targets or {}
    by_alpha = FusionConfig(fusion, weights=weights).takes_alpha(n)
    try:
        spec = hybrid_spec([targets.get(e, e) for e in encoders], method=fusion,
                           rrf_k=float(rrf_k) if fusion == "rrf" else None,
                           weights=None if weights is None else [float(w) for w in weights],
                           alpha=float(alpha) if by_alpha else None, structure=True if structure else None)
    except FusionError as exc:
        if exc.code == "weight_count":  # the systems by the page's keys, not the models' folders
            raise ValueError(f"{exc.params['given']} weights for {n} systems (BM25, {', '.join(encoders)})") from None
        raise
    label = FusionConfig.from_options(spec.options, n).label(n, FUSION_WORDS)
    return f"Hybride {label} ({' + '.join(encoders)}){STRUCTURE_WORDS if structure else ''}", spec


def column_specs(kinds: Sequence[str], *, encoder: str = "use", fusion: str = DEFAULT_FUSION,
                 rrf_k: float = DEFAULT_RRF_K, alpha: float = DEFAULT_ALPHA,
                 hybrid_encoders: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None, targets: Mapping[str, str] | None = None,
                 structure: bool = False, ranker: str | None = None) -> dict[str, RetrieverSpec]:
    """One :class:`RetrieverSpec` per chosen kind, keyed by its French column label.

    The dense column uses ``encoder``; the hybrid fuses BM25 with ``hybrid_encoders`` (default:
    ``[encoder]``), see :func:`hybrid_column`. ``targets`` maps an encoder key to what the dense
    retriever takes (a trained model's folder); ``structure``: the hybrid's structure re-scoring;
    ``ranker``: the learned ranker's ``--encoder`` (its column needs it)."""
    targets = targets or {}
    out: dict[str, RetrieverSpec] = {}
    for kind in dict.fromkeys(kinds):
        if kind == "bm25":
            out["BM25"] = RetrieverSpec("bm25")
        elif kind == "dense" and targets.get(encoder, encoder) == NEIGHBOURS:
            out[NEIGHBOURS_COLUMN] = RetrieverSpec("neighbours")  # not an encoder: its own retriever
        elif kind == "dense":
            out[f"Dense ({encoder})"] = RetrieverSpec("dense", {"encoder": targets.get(encoder, encoder)})
        elif kind == "hybrid":
            label, spec = hybrid_column(hybrid_encoders or [encoder], fusion=fusion, rrf_k=rrf_k, alpha=alpha,
                                        weights=weights, targets=targets, structure=structure)
            out[label] = spec
        elif kind == "ranker":
            if not ranker:
                raise ValueError("no learned ranker is offered here (train --ranker writes one)")
            out[f"{RANKER_LABEL} ({Path(ranker).name})"] = RetrieverSpec("ranker", {"model": ranker})
        elif kind in KIND_LABELS:  # a kind registered with its defaults only
            out[KIND_LABELS[kind]] = RetrieverSpec(kind)
        else:
            raise ValueError(f"unknown retriever kind {kind!r}; choose {', '.join(KIND_LABELS)}")
    return out


@dataclass(frozen=True)
class ExampleGold:
    """The labels of the chosen example question, while the question box still holds its text."""

    qid: str
    split: str
    category: str
    article_ids: list[str]


@dataclass
class Examples:
    """The example questions offered on the Search page: those of ``split`` (None: no split)."""

    split: str | None
    frame: pd.DataFrame
    texts: dict[str, str] = field(default_factory=dict)  # qid -> question text
    labels: dict[str, str] = field(default_factory=dict)  # qid -> the selectbox line

    def gold_for(self, chosen: str | None, question: str) -> ExampleGold | None:
        """The labels of example ``chosen`` when ``question`` is its text (stripped), else None."""
        if chosen is None or not self.split or self.texts.get(chosen, "").strip() != question:
            return None
        row = self.frame[self.frame["id"] == chosen].iloc[0]
        return ExampleGold(str(chosen), self.split, str(row["category"] or ""), list(row["article_ids"]))


def examples_of(dataset: Dataset) -> Examples:
    """The example questions of ``dataset``: its ``test`` split, else its first split."""
    split = "test" if "test" in dataset.splits else (dataset.split_names[0] if dataset.split_names else None)
    frame = example_questions(dataset, split) if split else example_questions(dataset)
    texts = dict(zip(frame["id"], frame["question"]))
    labels = {row.id: f"n° {row.id} · {row.category or 'sans catégorie'} · {row.question[:110]}"
              for row in frame.itertuples()}
    return Examples(split, frame, texts, labels)


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
