"""Label transfer from similar training questions: the ``neighbours`` retriever (:class:`NeighboursRetriever`) ranks
the articles cited by the training questions most similar (BM25) to the one asked, weighted by their similarity
(:func:`transfer_scores`), those at least :data:`DEFAULT_MIN_SIMILARITY` similar only (0–1, :class:`SelfScores`).
BSARD's test questions cite, on average, articles of which 90 % are cited by some training question (frlaw-dev:
47 %); alone it misses every other article, so it is meant to be fused with BM25
(:func:`bsard_demo.retrievers.hybrid_specs.hybrid_spec`, the part named :data:`NEIGHBOURS`). Defaults decided on
frlaw-dev's train split, leave-one-out (docs/effectiveness.md, "Label transfer from training questions").

The formula, leave-one-out and defaults: docs/design.md, 'bsard_demo/retrievers/neighbours.py'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..dataset import DataError, Dataset, parse_splits
from .base import Hit, clip_k, id_ranks, rank_rows, ranked_hits
from .bm25 import BM25Retriever, BM25Settings
from .bm25_weights import IDF, length_norm, tf_saturation

#: The part name of this retriever in a hybrid's list (``--encoder use,neighbours``, ``henc=``).
NEIGHBOURS = "neighbours"
DEFAULT_SPLIT = "train"
DEFAULT_NEIGHBOURS = 20
#: The least similarity (0–1, :class:`SelfScores`) of a training question drawn on: the highest threshold whose
#: R@100 and MAP@100 are not significantly below no threshold's on frlaw-dev train (BM25 + neighbours + structure,
#: 62.62 / 21.63 against 62.80 / 21.70) and on BSARD train (neighbours alone, 76.09 against 76.26; 0.15: p 0.031);
#: it keeps 17.0 of the 18.7 neighbours a question drew on (docs/effectiveness.md, "Similarity threshold").
DEFAULT_MIN_SIMILARITY = 0.1


def fold(text: str) -> str:
    """The form two question texts are compared in for leave-one-out: case and white space folded."""
    return " ".join(str(text or "").split()).casefold()


def chosen(similarities: np.ndarray, n: int, excluded: np.ndarray | None = None, floor: float = 0.0) -> np.ndarray:
    """The positions of the training questions a question draws on: the ``n`` most similar with a
    positive similarity of at least ``floor``, most similar first (ties by position, stable); ``excluded``: a boolean
    mask of training questions never used (leave-one-out)."""
    sims = np.asarray(similarities, dtype=np.float64).copy()
    if excluded is not None:
        sims[np.asarray(excluded, dtype=bool)] = 0.0
    order = np.argsort(-sims, kind="stable")[:max(int(n), 0)]
    kept = sims[order]
    return order[(kept > 0) & (kept >= floor)]


def transfer_scores(similarities: np.ndarray, labels: Sequence[np.ndarray], n_articles: int, n: int,
                    excluded: np.ndarray | None = None, floor: float = 0.0) -> np.ndarray:
    """Scores over the corpus (``n_articles``, corpus order) from one question's similarities to
    the training questions (``similarities[j]``; ``labels[j]``: corpus positions of question
    ``j``'s relevant articles): ``score[a] = sum of similarities[j]`` over the questions
    :func:`chosen` keeps that cite ``a``."""
    scores = np.zeros(n_articles, dtype=np.float64)
    for j in chosen(similarities, n, excluded, floor):
        np.add.at(scores, labels[j], float(similarities[j]))
    return scores


class SelfScores:
    """The BM25 score a question's terms would get in a training question of average length that holds each of them
    as often as the question does (same idf, ``k1``; a term no training question holds counts with document
    frequency 0): ``BM25 / self score`` (:meth:`similarity`) is then the share of the question's weighted terms a
    training question matches, 0–100 % whatever the question's length (1: all of them, as often, in a question of
    average length; more, clipped at 1, in a shorter one). It keeps BM25's order of the training questions, hence
    the retriever's rankings: a threshold on it is a floor on BM25 of ``threshold × self score``."""

    def __init__(self, tokens: Sequence[Sequence[str]], settings: BM25Settings):
        self.settings = settings
        self.n_docs = len(tokens)
        self.doc_freq: dict[str, int] = {}
        for doc in tokens:
            for term in set(doc):
                self.doc_freq[term] = self.doc_freq.get(term, 0) + 1

    def of(self, query_tokens: Sequence[str]) -> float:
        """The self score of a question (analysed); 0 for a question without terms."""
        s = self.settings
        idf = IDF[s.method]
        norm = length_norm(1.0, 1.0, s.k1, s.b)  # an average length
        counts: dict[str, int] = {}
        for term in query_tokens:
            counts[term] = counts.get(term, 0) + 1
        # a repeated query term counts each time, as in BM25Retriever.score_matrix
        return float(sum(c * idf(self.doc_freq.get(t, 0), self.n_docs) * tf_saturation(c, norm)
                         for t, c in sorted(counts.items())))

    @staticmethod
    def similarity(score: float, self_score: float) -> float:
        """``score / self_score`` within 0–1 (0 when the question has no self score)."""
        return min(max(float(score) / float(self_score), 0.0), 1.0) if self_score > 0 else 0.0


@dataclass(frozen=True)
class Neighbour:
    """A training question the retriever drew on for a question (:meth:`NeighboursRetriever.neighbours`):
    its key (its id; ``split:id`` over several splits), its text, its similarity to the question (0–1,
    :class:`SelfScores`), the corpus ids it cites and the weight of its votes (its BM25 score; default: the
    similarity)."""

    question_id: str
    text: str
    similarity: float
    article_ids: tuple[str, ...]
    weight: float | None = None

    @property
    def vote(self) -> float:
        """What it adds to the score of each article it cites (:func:`transfer_scores`)."""
        return self.similarity if self.weight is None else self.weight


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
                 n: int = DEFAULT_NEIGHBOURS, split: str = DEFAULT_SPLIT, question_ids: Sequence[str] | None = None,
                 min_similarity: float = DEFAULT_MIN_SIMILARITY):
        """``question_ids``: the training questions' keys (default: their positions); ``split``: the split name(s)
        they come from, as given to :meth:`build`; ``min_similarity``: the least similarity (0–1,
        :class:`SelfScores`) of a training question drawn on."""
        if int(n) < 1:
            raise ValueError(f"neighbours: n must be at least 1, not {n}")
        if not 0 <= float(min_similarity) <= 1:
            raise ValueError(f"neighbours: min_similarity must be between 0 and 1, not {min_similarity}")
        self.article_ids = [str(a) for a in article_ids]
        self.n, self.split, self.min_similarity = int(n), split, float(min_similarity)
        self.labels = list(labels)
        self.texts = [str(t) for t in texts]
        self.question_ids = [str(q) for q in question_ids] if question_ids is not None else \
            [str(i) for i in range(len(texts))]
        if len(self.question_ids) != len(self.texts):
            raise ValueError(f"neighbours: {len(self.question_ids)} question ids for {len(self.texts)} questions")
        self._folded = np.array([fold(t) for t in texts], dtype=object)
        ids = [str(i) for i in range(len(texts))]
        frame = pd.DataFrame({"id": ids, "reference": ids, "article": list(texts)})
        settings = BM25Settings(fields=("article",))
        self._questions = BM25Retriever.build(frame, settings, use_cache=False)
        self._self_scores = SelfScores([self._questions.analyzer.tokens(t) for t in self.texts], settings)
        self._id_rank = id_ranks(self.article_ids)
        self.name = f"neighbours n={self.n} sim>={self.min_similarity:g} ({split}, {len(texts)} questions)"

    @property
    def size(self) -> int:
        return len(self.article_ids)

    @classmethod
    def build(cls, dataset: Dataset, *, split: str = DEFAULT_SPLIT, n: int = DEFAULT_NEIGHBOURS,
              min_similarity: float = DEFAULT_MIN_SIMILARITY) -> "NeighboursRetriever":
        """Over ``dataset``'s articles, from the questions of ``split`` (a name, or several comma-separated:
        ``"train,synthetic"``) and their labels (articles outside the corpus are left out). :class:`DataError`
        when a split is absent or none of their questions cites an article of the corpus."""
        split = dataset.check_splits(split, "the neighbours retriever needs labelled training questions")
        ids, texts, labels = labelled_with_keys(dataset, split)
        if not texts:
            raise DataError(f"the neighbours retriever needs labelled training questions: no question of split "
                            f"'{split}' of {dataset.name} cites an article of its corpus")
        return cls(dataset.articles["id"], texts, labels, n=n, split=split, question_ids=ids,
                   min_similarity=min_similarity)

    def search(self, question: str, k: int = 100) -> list[Hit]:
        return self.search_many([question], k)[0]

    def _similarities(self, questions: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each question's BM25 scores of the training questions (rows) and its :meth:`SelfScores.of`."""
        tokens = [self._questions.analyzer.tokens(q) for q in questions]
        return self._questions.score_matrix(tokens), np.array([self._self_scores.of(t) for t in tokens])

    def _chosen(self, question: str, sims: np.ndarray, self_score: float) -> np.ndarray:
        """:func:`chosen` for ``question``: leave-one-out, at least :attr:`min_similarity` similar (a BM25 floor of
        ``min_similarity × self score``; a question without terms has no neighbour)."""
        return chosen(sims, self.n, excluded=self._folded == fold(question), floor=self.min_similarity * self_score)

    def search_many(self, questions: Sequence[str], k: int = 100) -> list[list[Hit]]:
        return [ranked_hits(rows, scores, self.article_ids) for rows, scores in self.search_rows(questions, k)]

    def search_rows(self, questions: Sequence[str], k: int = 100) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search_many` as arrays: each question's ``(corpus rows, scores)`` (:func:`~.base.rank_rows`),
        the articles of positive score only."""
        k = clip_k(k, self.size)
        out = []
        for question, sims, own in zip(questions, *self._similarities(questions)):
            scores = transfer_scores(sims, self.labels, self.size, self.n, excluded=self._folded == fold(question),
                                     floor=self.min_similarity * own)
            rows = np.flatnonzero(scores > 0)
            out.append(rank_rows(scores[rows], self._id_rank, min(k, len(rows)), rows=rows))
        return out

    def votes(self, question: str) -> tuple[np.ndarray, np.ndarray]:
        """Over the corpus (corpus order): how many of the training questions :meth:`search` draws on
        for ``question`` cite each article, and the best similarity (BM25) among them (0 when none) —
        the learned ranker's neighbour features (:mod:`.ranker`)."""
        (sims,), (own,) = self._similarities([question])
        count, best = np.zeros(self.size), np.zeros(self.size)
        for j in self._chosen(question, sims, own):
            count[self.labels[j]] += 1.0
            best[self.labels[j]] = np.maximum(best[self.labels[j]], float(sims[j]))
        return count, best

    def neighbours(self, question: str) -> list[Neighbour]:
        """The training questions :meth:`search` draws on for ``question`` (the ``n`` most similar
        with a positive similarity of at least :attr:`min_similarity`, leave-one-out), most similar first."""
        (sims,), (own,) = self._similarities([question])
        return [Neighbour(self.question_ids[j], self.texts[j], SelfScores.similarity(sims[j], own),
                          tuple(self.article_ids[a] for a in self.labels[j]), float(sims[j]))
                for j in self._chosen(question, sims, own)]

