"""Score orientation: ``lower_is_better`` (distances, ordered ascending, ties as for
similarities), and the reader's ``scores_ascending`` / ``scores_descending`` warnings, which
see the file's own order."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bsard_demo.app.score_uploads import DISTANCES_LABEL, PROBLEM_HINTS as PAGE_HINTS
from bsard_demo.cli.common import PROBLEM_HINTS as CLI_HINTS
from bsard_demo.evaluation import evaluate
from bsard_demo.runs import Run, read_run_bytes

#: The orientation hints as both front ends have always shown them, word for word.
ORIENTATION_HINT = "use --lower-is-better (CLI) / tick « scores = distances » under the file (Score page)"
SIMILARITY_HINT = ("if higher scores are better, drop --lower-is-better (CLI) / untick « scores = distances » "
                   "(Score page)")


def codes(rf) -> list[str]:
    return [p.code for p in rf.problems]


def files(scores: dict[str, dict[str, float]]) -> dict[str, bytes]:
    """The same ``{qid: {docid: score}}`` in every score format (TREC lines in dict order, ranked
    1, 2, ... in that order)."""
    trec = "".join(f"{q} Q0 {d} {r} {s!r} t\n" for q, docs in scores.items()
                   for r, (d, s) in enumerate(docs.items(), 1))
    return {
        "trec": trec.encode(),
        "3col-score": "".join(f"{q}\t{d}\t{s!r}\n" for q, docs in scores.items() for d, s in docs.items()).encode(),
        "csv": ("qid,docid,score\n" + "".join(f"{q},{d},{s!r}\n" for q, docs in scores.items()
                                              for d, s in docs.items())).encode(),
        "json-scores": json.dumps(scores).encode(),
        "jsonl": "".join(json.dumps({"qid": q, "docid": d, "score": s}) + "\n" for q, docs in scores.items()
                         for d, s in docs.items()).encode(),
    }


_id = st.text(alphabet="0123456789ab", min_size=1, max_size=3)
_runs = st.dictionaries(_id, st.dictionaries(_id, st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.25, -3.0, 7.0]), min_size=1,
                                             max_size=8), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(_runs)
def test_distances_rank_exactly_like_the_negated_similarities(distances):
    """Ties (many: 7 values) included: a distance run read with lower_is_better has the rankings
    of the same run given as similarities (-distance), in every format, and keeps its own scores."""
    similarities = {q: {d: -s for d, s in docs.items()} for q, docs in distances.items()}
    expected = Run.from_scores(similarities)
    for fmt, data in files(distances).items():
        rf = read_run_bytes(data, "d", lower_is_better=True)
        assert rf.ok and rf.format == fmt, [str(p) for p in rf.problems]
        assert rf.run.rankings == expected.rankings, fmt
        assert rf.run.scores == {q: tuple(-s for s in v) for q, v in expected.scores.items()}, fmt
        assert rf.run.lower_is_better


def test_ties_are_broken_by_article_id_descending_as_for_similarities():
    rf = read_run_bytes(b"1 Q0 10 1 0.5 t\n1 Q0 9 2 0.5 t\n1 Q0 3 3 0.1 t\n", "d", lower_is_better=True)
    assert rf.run["1"] == ("3", "9", "10")  # 0.1 best; "9" > "10" as strings
    assert rf.run.scores["1"] == (0.1, 0.5, 0.5)


def test_evaluate_scores_a_distance_run_like_its_similarity_twin(real_bsard):
    """On the real test labels: a distance run (FAISS-like L2, ascending, ties) read with
    lower_is_better gives the same figures as the same ranking written as similarities."""
    qrels = real_bsard.qrels("test")
    lines_d, lines_s = [], []
    for i, (q, gold) in enumerate(qrels.items()):
        docs = sorted(gold) + [str(1000 + (i * 7 + j) % 20000) for j in range(30)]
        for r, d in enumerate(docs, 1):
            dist = round(r / 7, 1)  # ties every few ranks
            lines_d.append(f"{q} Q0 {d} {r} {dist!r} faiss")
            lines_s.append(f"{q} Q0 {d} {r} {-dist!r} faiss")
    dist = read_run_bytes("\n".join(lines_d).encode(), "d", qids=qrels.keys(), lower_is_better=True)
    sim = read_run_bytes("\n".join(lines_s).encode(), "s", qids=qrels.keys())
    assert dist.run.rankings == sim.run.rankings
    a, b = evaluate(qrels, dist.run, (10, 100)), evaluate(qrels, sim.run, (10, 100))
    assert a.means == b.means and a.per_question.equals(b.per_question)
    assert "scores_ascending" not in codes(dist) and "rank_score_order" not in codes(dist)
    wrong = read_run_bytes("\n".join(lines_d).encode(), "d", qids=qrels.keys())
    assert "scores_ascending" in codes(wrong) and evaluate(qrels, wrong.run, (100,)).means != a.means


def test_rank_score_contradictions_respect_the_orientation():
    data = b"1 Q0 a 1 0.1 t\n1 Q0 b 2 0.4 t\n1 Q0 c 3 0.9 t\n"
    plain = read_run_bytes(data, "d")
    assert "rank_score_order" in codes(plain) and plain.run["1"] == ("c", "b", "a")
    flipped = read_run_bytes(data, "d", lower_is_better=True)
    assert "rank_score_order" not in codes(flipped) and flipped.run["1"] == ("a", "b", "c")
    bad = read_run_bytes(b"1 Q0 a 1 0.9 t\n1 Q0 b 2 0.4 t\n", "d", lower_is_better=True)
    assert [p.message for p in bad.problems if p.code == "rank_score_order"] == [
        "question '1': rank 1 (line 1, score 0.9) has a higher score than rank 2 (line 2, score 0.4); "
        "articles are ordered by score, ascending (lower is better)"]


def test_scores_ascending_names_the_fix_and_is_not_given_with_lower_is_better():
    data = b"".join(b"%d Q0 d%d %d %.1f t\n" % (q, r, r, r / 10) for q in range(5) for r in range(1, 6))
    rf = read_run_bytes(data, "d")
    [p] = [p for p in rf.problems if p.code == "scores_ascending"]
    assert p.severity == "warning" and p.line is None
    assert p.message == \
        "scores grow with rank for 5 of 5 questions (100.0 %): they look like distances (lower = better)"
    assert p.hint == "read_as_distances" and "--lower-is-better" not in p.message  # the core names no front end
    for hints in (CLI_HINTS, PAGE_HINTS):  # each front end words the hint; the text shown is the same
        assert p.text(hints) == f"{p.message}; {ORIENTATION_HINT}" == p.as_dict(hints)["message"]
    assert "scores_ascending" not in codes(read_run_bytes(data, "d", lower_is_better=True))


def test_similarities_read_as_distances_get_scores_descending():
    data = b"".join(b"%d Q0 d%d %d %.1f t\n" % (q, r, r, 10 - r / 10) for q in range(4) for r in range(1, 6))
    assert not {"scores_ascending", "scores_descending"} & set(codes(read_run_bytes(data, "s")))
    rf = read_run_bytes(data, "s", lower_is_better=True)
    [p] = [p for p in rf.problems if p.code == "scores_descending"]
    assert p.message == ("scores fall with rank for 4 of 4 questions (100.0 %), yet they are read as distances "
                         "(lower is better), which puts each question's best-scored articles last")
    assert p.hint == "read_as_similarities"
    for hints in (CLI_HINTS, PAGE_HINTS):
        assert p.text(hints) == f"{p.message}; {SIMILARITY_HINT}"


def test_rank_only_formats_ignore_lower_is_better():
    data = b'{"1": ["a", "b", "c"]}'
    assert read_run_bytes(data, "r", lower_is_better=True).run.rankings == read_run_bytes(data, "r").run.rankings
    assert not read_run_bytes(data, "r", lower_is_better=True).run.lower_is_better
    three = b"q a 1\nq b 2\nq c 3\n"
    assert read_run_bytes(three, "r", lower_is_better=True).run["q"] == ("a", "b", "c")


_questions = st.dictionaries(st.sampled_from(["1", "2", "3", "4", "5"]),
                             st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.5, 0.8, 1.0]), min_size=1, max_size=7),
                             min_size=1, max_size=5)


def ascending_rule(file_entries) -> tuple[int, int] | None:
    """``(ascending, counted)`` questions when most questions' scores rise along the rank order
    (``(rank, score)`` pairs in file order; rank None: line order), else None. A reference written
    out here (it was diagnostics.check_scores_ascending, which nothing but this test used)."""
    counted = ascending = 0
    for pairs in file_entries.values():
        ranks = [r for r, _ in pairs]
        s = np.array([v for _, v in pairs], dtype=float)
        if None not in ranks:
            s = s[np.argsort(np.array(ranks, dtype=np.int64), kind="stable")]
        s = s[np.isfinite(s)]
        if len(s) < 2 or s.min() == s.max():
            continue
        steps = np.diff(s)
        counted += 1
        ascending += int(np.count_nonzero(steps > 0) > np.count_nonzero(steps < 0))
    return (ascending, counted) if counted and ascending * 2 > counted else None


@settings(max_examples=200, deadline=None)
@given(_questions, st.booleans(), st.randoms(use_true_random=False))
def test_scores_ascending_agrees_with_the_rule(scores_by_q, with_ranks, rnd):
    """The reader's warning is the rule of the README (more than half of the questions with two
    distinct scores have more rising than falling steps in rank order), :func:`ascending_rule`
    on the file's (rank, score) pairs, lines shuffled across questions; ranks distinct per
    question (the reader reads no order from two equal ranks, see validate.direction_counts)."""
    rows = []
    for q, scores in scores_by_q.items():
        ranks = list(range(1, len(scores) + 1))
        rnd.shuffle(ranks)
        rows += [(q, f"d{i}", r, s) for i, (r, s) in enumerate(zip(ranks, scores))]
    rnd.shuffle(rows)
    if with_ranks:
        data = "".join(f"{q} Q0 {d} {r} {s!r} t\n" for q, d, r, s in rows)
        entries = {}
        for q, _, r, s in rows:
            entries.setdefault(q, []).append((r, s))
    else:
        data = "".join(f"{q} {d} {s!r}\n" for q, d, _, s in rows)
        entries = {}
        for q, _, _, s in rows:
            entries.setdefault(q, []).append((None, s))
    rf = read_run_bytes(data.encode(), "r")
    if not with_ranks and rf.format != "3col-score":
        return  # read as 3-column ranks: no scores
    expected = ascending_rule(entries)
    ours = [p for p in rf.problems if p.code == "scores_ascending"]
    assert bool(ours) == (expected is not None)
    if expected is not None:
        assert ours[0].message.startswith(f"scores grow with rank for {expected[0]} of {expected[1]} questions")


def test_a_clean_run_gets_no_orientation_warning():
    rf = read_run_bytes(b"1 Q0 a 1 3.0 t\n1 Q0 b 2 2.0 t\n2 Q0 c 1 1.0 t\n2 Q0 d 2 1.0 t\n", "c")
    assert not {"scores_ascending", "scores_descending"} & set(codes(rf))


@pytest.mark.parametrize("fmt", ["trec", "csv", "jsonl"])
def test_lower_is_better_is_also_a_read_run_path_option(tmp_path, fmt):
    data = files({"1": {"a": 0.3, "b": 0.1}})[fmt]
    path = tmp_path / "d.run"
    path.write_bytes(data)
    from bsard_demo.runs import read_run_path

    assert read_run_path(path, lower_is_better=True).run["1"] == ("b", "a")
    assert read_run_path(path).run["1"] == ("a", "b")


def test_the_hint_names_the_score_pages_checkbox():
    """The hint quotes the Score page's checkbox label, so the two stay in step."""
    import re
    from pathlib import Path

    for hints in (CLI_HINTS, PAGE_HINTS):
        for text in hints.values():
            assert re.search(r"« (.+?) »", text).group(1) == DISTANCES_LABEL
    page = (Path(__file__).resolve().parents[2] / "pages" / "score.py").read_text(encoding="utf-8")
    assert ": {DISTANCES_LABEL} (plus petit = meilleur)" in page
