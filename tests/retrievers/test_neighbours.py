"""The neighbours retriever (label transfer from similar training questions): its formula against
a brute-force reading of the docstring on random data, leave-one-out on its own training
questions, labels outside the corpus, the errors, the registry and hybrid wiring, the similarity threshold
(its 0–1 scale, what it drops and keeps, where the setting is declared) and its figure on the real BSARD
questions (skipped without ../shared)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from bsard_demo.dataset import DataError, Dataset, normalize_articles, normalize_questions
from bsard_demo.evaluation import evaluate
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.retrievers.hybrid_specs import NEIGHBOURS_WEIGHT, hybrid_parts, hybrid_spec, system_labels
from bsard_demo.retrievers.neighbours import (
    DEFAULT_MIN_SIMILARITY,
    NEIGHBOURS,
    NeighboursRetriever,
    SelfScores,
    fold,
    transfer_scores,
)
from bsard_demo.retrievers.ranker import input_spec
from bsard_demo.retrievers.registry import kind, link_params_of

ARTICLES = normalize_articles(pd.DataFrame({
    "id": [str(i) for i in range(1, 9)],
    "article": ["bail neuf ans", "garantie locative deux mois", "préavis trois mois", "aliments parents",
                "divorce désunion", "nationalité déclaration", "enregistrement du bail", "pension alimentaire"],
}))
TRAIN = normalize_questions(pd.DataFrame({
    "id": ["t1", "t2", "t3", "t4"],
    "question": ["Quel est le montant de la garantie locative ?", "Comment résilier mon bail de location ?",
                 "Comment divorcer ?", "Qui paie la pension alimentaire de mon enfant ?"],
    "article_ids": ["2", "3,7", "5,99", "8,4"],  # 99: not in the corpus
}))
TEST = normalize_questions(pd.DataFrame({
    "id": ["q1", "q2"], "question": ["La garantie locative peut-elle dépasser deux mois ?", "xyzzy"],
    "article_ids": ["2", "6"],
}))


def dataset(**splits) -> Dataset:
    return Dataset(name="tiny", kind="local", articles=ARTICLES, splits=splits or {"train": TRAIN, "test": TEST})


def test_transfer_scores_is_the_docstring_formula_on_random_data():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n_train, n_articles, n = rng.integers(1, 30), rng.integers(1, 40), int(rng.integers(0, 12))
        sims = rng.choice([0.0, 0.5, 1.0, 2.0, -1.0, rng.random() * 3], size=n_train)  # ties, zeros, negatives
        labels = [rng.choice(n_articles, size=rng.integers(1, min(5, n_articles) + 1), replace=False)
                  for _ in range(n_train)]
        excluded = rng.random(n_train) < 0.2
        floor = float(rng.choice([0.0, 0.7, 1.5]))
        got = transfer_scores(sims, labels, n_articles, n, excluded=excluded, floor=floor)
        # brute force: the n most similar (stable by position) among the not excluded, positive and >= floor only
        kept = [(s if not e else 0.0, j) for j, (s, e) in enumerate(zip(sims, excluded))]
        chosen = [j for s, j in sorted(kept, key=lambda x: (-x[0], x[1]))[:n] if s > 0 and s >= floor]
        want = np.zeros(n_articles)
        for j in chosen:
            for a in labels[j]:
                want[a] += sims[j]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_it_ranks_the_articles_its_nearest_training_questions_cite():
    r = NeighboursRetriever.build(dataset())
    hits = r.search("La garantie locative peut-elle dépasser deux mois ?", k=5)
    assert hits[0].article_id == "2"  # t1's only article, t1 being by far the closest
    assert all(h.score > 0 for h in hits) and len({h.article_id for h in hits}) == len(hits)
    assert {h.article_id for h in hits} <= {"2", "3", "4", "5", "7", "8"}  # cited and in the corpus (not 99)
    assert r.search("xyzzy", k=5) == []  # no neighbour shares a term: nothing to transfer
    assert r.search_many(["Comment divorcer ?", "xyzzy"], k=3) == [r.search("Comment divorcer ?", 3), []]
    (rows, scores), (none, _) = r.search_rows(["Comment divorcer ?", "xyzzy"], k=3)
    assert [(r.article_ids[i], s) for i, s in zip(rows.tolist(), scores.tolist())] == \
        [(h.article_id, h.score) for h in r.search("Comment divorcer ?", 3)] and len(none) == 0
    assert r.name == f"neighbours n=20 sim>={DEFAULT_MIN_SIMILARITY:g} (train, 4 questions)"


def test_a_training_question_is_not_its_own_neighbour():
    r = NeighboursRetriever.build(dataset())
    # "Comment divorcer ?" is t3: its own labels (5) come back only through another neighbour
    own = {h.article_id for h in r.search("  comment   DIVORCER ? ", k=8)}
    assert "5" not in own
    other = {h.article_id for h in r.search("Comment divorcer vite ?", k=8)}
    assert "5" in other
    assert fold(" A\tb  ") == fold("a b")


def test_errors_name_the_missing_training_labels():
    with pytest.raises(DataError, match="no split 'train'"):
        NeighboursRetriever.build(dataset(test=TEST))
    outside = TRAIN.assign(article_ids=[("99",)] * len(TRAIN))
    with pytest.raises(DataError, match="cites an article of its corpus"):
        NeighboursRetriever.build(dataset(train=outside, test=TEST))
    with pytest.raises(ValueError, match="at least 1"):
        NeighboursRetriever.build(dataset(), n=0)
    with pytest.raises(ValueError, match="unknown option"):
        RetrieverSpec("neighbours", {"encoder": "use"})


def test_registry_and_hybrid_wiring():
    ds = dataset()
    built = build_retriever(RetrieverSpec("neighbours", {"n": 2}), ds)
    assert isinstance(built, NeighboursRetriever) and built.n == 2
    spec = hybrid_spec("neighbours")
    assert [p.kind for p in hybrid_parts(spec)] == ["bm25", "neighbours"]
    assert list(spec.options["weights"]) == [1.0, NEIGHBOURS_WEIGHT]
    three = hybrid_spec("use,NEIGHBOURS")
    assert system_labels(three) == ["bm25", "use", NEIGHBOURS]
    assert list(three.options["weights"]) == [1.0, 0.5, NEIGHBOURS_WEIGHT]
    hybrid = build_retriever(spec, ds)
    hits = hybrid.search("Quel montant pour la garantie locative ?", k=8)
    assert hits[0].article_id == "2"


def test_real_bsard_test_split_figure(real_bsard):
    """The figure docs/effectiveness.md gives for neighbours alone on BSARD's test split: it needs
    only the question files (every article it can rank is cited by a training question, so a
    corpus of the cited ids ranks exactly as the real 22,633 articles would)."""
    cited = sorted({a for split in real_bsard.splits.values() for ids in split["article_ids"] for a in ids}, key=int)
    ds = dataclasses.replace(real_bsard, articles=normalize_articles(pd.DataFrame({"id": cited, "article": ""})))
    r = NeighboursRetriever.build(ds)
    test = ds.questions("test")
    hits = r.search_many(list(test["question"]), k=500)
    scores = evaluate(ds.qrels("test"), {qid: [h.article_id for h in hs] for qid, hs in zip(test["id"], hits)})
    assert round(100 * scores.means["recall@100"], 2) == 77.04  # 77.10 without the similarity threshold


def test_neighbours_are_the_questions_its_scores_come_from():
    """The training questions it names (ids of the split, text, similarity, cited corpus ids) are
    those its scores sum: every hit's score is the sum of the similarities of the named
    questions that cite it, and leave-one-out names no question asked verbatim."""
    r = NeighboursRetriever.build(dataset(), min_similarity=0)
    question = "Comment résilier le bail et payer la garantie locative ?"
    named = r.neighbours(question)
    assert [n.question_id for n in named][:2] == ["t2", "t1"] or [n.question_id for n in named][:2] == ["t1", "t2"]
    assert all(a.similarity >= b.similarity > 0 for a, b in zip(named, named[1:]))
    by_id = {n.question_id: n for n in named}
    assert by_id["t2"].article_ids == ("3", "7") and by_id["t2"].text == "Comment résilier mon bail de location ?"
    for hit in r.search(question, k=8):
        assert hit.score == pytest.approx(sum(n.vote for n in named if hit.article_id in n.article_ids))
    assert "t3" not in {n.question_id for n in r.neighbours(" comment DIVORCER ?")}  # asked verbatim: left out
    assert r.neighbours("xyzzy") == []
    assert [n.question_id for n in NeighboursRetriever.build(dataset(), n=1, min_similarity=0).neighbours(question)] \
        == [named[0].question_id]


# ------------------------------------------------------------------------------ the similarity threshold

THRESHOLD_TRAIN = normalize_questions(pd.DataFrame({
    "id": ["related", "unrelated"],
    "question": ["Mon propriétaire refuse de rendre ma garantie locative à la fin du bail : que faire ?",
                 "Mon employeur peut-il saisir mon salaire pour une amende pénale impayée depuis la fin de l'année ?"],
    "article_ids": ["2", "6"],
}))
DEPOSIT = "Le propriétaire doit-il rendre la garantie locative à la fin du bail, et dans quel délai ?"


def test_similarity_is_within_0_and_1_and_1_for_the_same_words():
    # training questions of one length (2 terms): the same words as one of them, not the same text (leave-one-out
    # compares case- and space-folded texts), is 1; one of two words of equal idf, a half
    even = normalize_questions(pd.DataFrame({
        "id": ["e1", "e2", "e3"], "article_ids": ["2", "3", "5"],
        "question": ["garantie locative ?", "bail résilié ?", "divorce rapide ?"]}))
    r = NeighboursRetriever.build(dataset(train=even, test=TEST), min_similarity=0)
    assert {n.question_id: n.similarity for n in r.neighbours("Garantie locative !")} == {"e1": pytest.approx(1.0)}
    (half,) = r.neighbours("bail divorce ?")[:1]
    assert half.similarity == pytest.approx(0.5)
    r = NeighboursRetriever.build(dataset(), min_similarity=0)
    asked = [q for q in TEST["question"]] + ["bail", "garantie locative garantie locative", "Comment divorcer vite ?",
                                             "Quel est le montant de la garantie locative pour un bail ?"]
    seen = [n for q in asked for n in r.neighbours(q)]
    assert seen and all(0 < n.similarity <= 1 for n in seen)
    for q in asked:  # the same order as BM25, the weight of the votes
        named = r.neighbours(q)
        assert [n.similarity for n in named] == sorted((n.similarity for n in named), reverse=True)
        assert [n.vote for n in named] == sorted((n.vote for n in named), reverse=True)
    assert SelfScores.similarity(3.0, 2.0) == 1.0 and SelfScores.similarity(1.0, 0.0) == 0.0


def test_the_threshold_drops_an_unrelated_neighbour_and_keeps_a_related_one():
    ds = dataset(train=THRESHOLD_TRAIN, test=TEST)
    every = {n.question_id: n for n in NeighboursRetriever.build(ds, min_similarity=0).neighbours(DEPOSIT)}
    assert set(every) == {"related", "unrelated"}  # both share a word with the question
    assert every["unrelated"].similarity < DEFAULT_MIN_SIMILARITY <= every["related"].similarity
    r = NeighboursRetriever.build(ds)
    assert [n.question_id for n in r.neighbours(DEPOSIT)] == ["related"]
    assert [h.article_id for h in r.search(DEPOSIT, k=8)] == ["2"]  # the unrelated one's article gets no vote
    count, best = r.votes(DEPOSIT)
    assert count[r.article_ids.index("6")] == 0 and count[r.article_ids.index("2")] == 1


def test_a_question_with_no_neighbour_above_the_threshold_gets_no_votes():
    ds = dataset(train=THRESHOLD_TRAIN, test=TEST)
    weak = "Que faire de mes congés payés et de mon préavis à la fin du contrat ?"  # a word or two of each
    assert NeighboursRetriever.build(ds, min_similarity=0).neighbours(weak)
    r = NeighboursRetriever.build(ds, min_similarity=0.9)
    assert r.neighbours(weak) == [] and r.search(weak, k=8) == []
    assert not r.votes(weak)[0].any()
    with pytest.raises(ValueError, match="between 0 and 1"):
        NeighboursRetriever.build(ds, min_similarity=1.5)


def test_the_threshold_is_a_setting_of_the_kind_like_n():
    ds = dataset()
    assert {"n", "min_similarity"} <= kind(NEIGHBOURS).options
    built = build_retriever(RetrieverSpec(NEIGHBOURS, {"n": 3, "min_similarity": 0.25}), ds)
    assert (built.n, built.min_similarity) == (3, 0.25)
    assert built.name == "neighbours n=3 sim>=0.25 (train, 4 questions)"  # the settings string, beside n
    default = build_retriever(RetrieverSpec(NEIGHBOURS), ds)
    assert default.min_similarity == DEFAULT_MIN_SIMILARITY
    assert f"sim>={DEFAULT_MIN_SIMILARITY:g}" in build_retriever(hybrid_spec("neighbours"), ds).name
    assert link_params_of([NEIGHBOURS]) == frozenset()  # no link parameter, as n has none
    notes: list[str] = []
    assert kind(NEIGHBOURS).flags_of(RetrieverSpec(NEIGHBOURS, {"n": 3, "min_similarity": 0.25}), notes) == []
    assert notes == ["neighbours option(s) min_similarity, n are not run options"]
    # the learned ranker's neighbours keep no threshold: its trees were fitted on unthresholded votes
    assert input_spec("neighbours") == ("neighbours", {"split": "train", "min_similarity": 0.0})
