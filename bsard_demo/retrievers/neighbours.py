"""Label transfer from similar training questions: the ``neighbours`` retriever (:class:`NeighboursRetriever`) ranks
the articles cited by the training questions most similar (BM25) to the one asked, weighted by their similarity
(:func:`transfer_scores`). BSARD's test questions cite, on average, articles of which 90 % are cited by some training
question (frlaw-dev: 47 %); alone it misses every other article, so it is meant to be fused with BM25
(:func:`bsard_demo.retrievers.registry.hybrid_spec`, the part named :data:`NEIGHBOURS`). Defaults decided on
frlaw-dev's train split, leave-one-out (docs/effectiveness.md, "Label transfer from training questions").

The formula, leave-one-out and defaults: docs/design.md, 'bsard_demo/retrievers/neighbours.py'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..dataset import DataError, Dataset, parse_splits
from .base import Hit, clip_k, id_ranks, rank_rows, ranked_hits
from .bm25 import BM25Retriever, BM25Settings

#: The part name of this retriever in a hybrid's list (``--encoder use,neighbours``, ``henc=``).
NEIGHBOURS = "neighbours"
DEFAULT_SPLIT = "train"
DEFAULT_NEIGHBOURS = 20


def fold(text: str) -> str:
    """The form two question texts are compared in for leave-one-out: case and white space folded."""
    return " ".join(str(text or "").split()).casefold()


def chosen(similarities: np.ndarray, n: int, excluded: np.ndarray | None = None) -> np.ndarray:
    """The positions of the training questions a question draws on: the ``n`` most similar with a
    positive similarity, most similar first (ties by position, stable); ``excluded``: a boolean
    mask of training questions never used (leave-one-out)."""
    sims = np.asarray(similarities, dtype=np.float64).copy()
    if excluded is not None:
        sims[np.asarray(excluded, dtype=bool)] = 0.0
    order = np.argsort(-sims, kind="stable")[:max(int(n), 0)]
    return order[sims[order] > 0]


def transfer_scores(similarities: np.ndarray, labels: Sequence[np.ndarray], n_articles: int, n: int,
                    excluded: np.ndarray | None = None) -> np.ndarray:
    """Scores over the corpus (``n_articles``, corpus order) from one question's similarities to
    the training questions (``similarities[j]``; ``labels[j]``: corpus positions of question
    ``j``'s relevant articles): ``score[a] = sum of similarities[j]`` over the questions
    :func:`chosen` keeps that cite ``a``."""
    scores = np.zeros(n_articles, dtype=np.float64)
    for j in chosen(similarities, n, excluded):
        np.add.at(scores, labels[j], float(similarities[j]))
    return scores


@dataclass(frozen=True)
class Neighbour:
    """A training question the retriever drew on for a question (:meth:`NeighboursRetriever.neighbours`):
    its key (its id; ``split:id`` over several splits), its text, its similarity to the question and the corpus
    ids it cites."""

    question_id: str
    text: str
    similarity: float
    article_ids: tuple[str, ...]


def labelled_questions(dataset: Dataset, split: str = DEFAULT_SPLIT) -> tuple[list[str], list[np.ndarray]]:
    """The questions of ``split`` (one split or several, ``"train,synthetic"``: their union, in that order) that
    have a text and cite articles of the corpus, and the corpus positions they cite (articles outside the corpus
    left out); empty without corpus or when a split is absent."""
    _, texts, labels = labelled_with_keys(dataset, split)
    return texts, labels


def labelled_with_keys(dataset: Dataset, split: str) -> tuple[list[str], list[str], list[np.ndarray]]:
    """:func:`labelled_questions` with the questions' keys first (their ids; ``split:id`` over several splits,
    :meth:`bsard_demo.dataset.Dataset.questions_of`)."""
    names = parse_splits(split)
    if dataset.articles is None or dataset.absent_splits(names):
        return [], [], []
    position = {str(a): i for i, a in enumerate(dataset.articles["id"])}
    ids, texts, labels = [], [], []
    questions = dataset.questions_of(names)
    for qid, text, cited in zip(questions["key"], questions["question"], questions["article_ids"]):
        rows = np.array(sorted({position[a] for a in cited if a in position}), dtype=np.int64)
        if len(rows) and str(text or "").strip():
            ids.append(str(qid))
            texts.append(str(text))
            labels.append(rows)
    return ids, texts, labels


class NeighboursRetriever:
    """The ``neighbours`` retriever over a dataset's corpus and labelled training questions (one split or several).
    Leave-one-out holds across splits: a question never draws on a training question of the same text
    (:func:`fold`), whichever split either comes from."""

    def __init__(self, article_ids: Sequence[str], texts: Sequence[str], labels: Sequence[np.ndarray], *,
                 n: int = DEFAULT_NEIGHBOURS, split: str = DEFAULT_SPLIT, question_ids: Sequence[str] | None = None):
        """``question_ids``: the training questions' keys (default: their positions); ``split``: the split name(s)
        they come from, as given to :meth:`build`."""
        if int(n) < 1:
            raise ValueError(f"neighbours: n must be at least 1, not {n}")
        self.article_ids = [str(a) for a in article_ids]
        self.n, self.split = int(n), split
        self.labels = list(labels)
        self.texts = [str(t) for t in texts]
        self.question_ids = [str(q) for q in question_ids] if question_ids is not None else \
            [str(i) for i in range(len(texts))]
        if len(self.question_ids) != len(self.texts):
            raise ValueError(f"neighbours: {len(self.question_ids)} question ids for {len(self.texts)} questions")
        self._folded = np.array([fold(t) for t in texts], dtype=object)
        ids = [str(i) for i in range(len(texts))]
        frame = pd.DataFrame({"id": ids, "reference": ids, "article": list(texts)})
        self._questions = BM25Retriever.build(frame, BM25Settings(fields=("article",)), use_cache=False)
        self._id_rank = id_ranks(self.article_ids)
        self.name = f"neighbours n={self.n} ({split}, {len(texts)} questions)"

    @property
    def size(self) -> int:
        return len(self.article_ids)

    @classmethod
    def build(cls, dataset: Dataset, *, split: str = DEFAULT_SPLIT,
              n: int = DEFAULT_NEIGHBOURS) -> "NeighboursRetriever":
        """Over ``dataset``'s articles, from the questions of ``split`` (a name, or several comma-separated:
        ``"train,synthetic"``) and their labels (articles outside the corpus are left out). :class:`DataError`
        when a split is absent or none of their questions cites an article of the corpus."""
        split = dataset.check_splits(split, "the neighbours retriever needs labelled training questions")
        ids, texts, labels = labelled_with_keys(dataset, split)
        if not texts:
            raise DataError(f"the neighbours retriever needs labelled training questions: no question of split "
                            f"'{split}' of {dataset.name} cites an article of its corpus")
        return cls(dataset.articles["id"], texts, labels, n=n, split=split, question_ids=ids)

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def _similarities(self, questions: Sequence[str]) -> np.ndarray:
        return self._questions.score_matrix([self._questions.analyzer.tokens(q) for q in questions])

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        return [ranked_hits(rows, scores, self.article_ids) for rows, scores in self.search_rows(questions, k)]

    def search_rows(self, questions: Sequence[str], k: int = 100) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search_many` as arrays: each question's ``(corpus rows, scores)`` (:func:`~.base.rank_rows`),
        the articles of positive score only."""
        k = clip_k(k, self.size)
        out = []
        for question, sims in zip(questions, self._similarities(questions)):
            scores = transfer_scores(sims, self.labels, self.size, self.n, excluded=self._folded == fold(question))
            rows = np.flatnonzero(scores > 0)
            out.append(rank_rows(scores[rows], self._id_rank, min(k, len(rows)), rows=rows))
        return out

    def votes(self, question: str) -> tuple[np.ndarray, np.ndarray]:
        """Over the corpus (corpus order): how many of the training questions :meth:`search` draws on
        for ``question`` cite each article, and the best similarity among them (0 when none) —
        the learned ranker's neighbour features (:mod:`.ranker`)."""
        sims = self._similarities([question])[0]
        count, best = np.zeros(self.size), np.zeros(self.size)
        for j in chosen(sims, self.n, excluded=self._folded == fold(question)):
            count[self.labels[j]] += 1.0
            best[self.labels[j]] = np.maximum(best[self.labels[j]], float(sims[j]))
        return count, best

    def neighbours(self, question: str) -> list[Neighbour]:
        """The training questions :meth:`search` draws on for ``question`` (the ``n`` most similar
        with a positive similarity, leave-one-out), most similar first."""
        sims = self._similarities([question])[0]
        return [Neighbour(self.question_ids[j], self.texts[j], float(sims[j]),
                          tuple(self.article_ids[a] for a in self.labels[j]))
                for j in chosen(sims, self.n, excluded=self._folded == fold(question))]


def options_of(options: Mapping[str, object]) -> dict:
    """The :meth:`NeighboursRetriever.build` keywords of a spec's options (``split``, ``n``)."""
    return {name: options[name] for name in ("split", "n") if options.get(name) is not None}
