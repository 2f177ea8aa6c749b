"""The parts of one search run together and are shared (bsard_demo/retrievers/hybrid.py: ``run_together``,
``part_search``): the hits, scores and part rankings are those of the parts run one after another, a
part's ranking is computed once for the columns that share it, and a hybrid inside a hybrid does not
wait on the pool. The learned ranker's columns likewise (its sample folder, tests/_ranker_fixture.py)."""
from __future__ import annotations

import gc
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bsard_demo.retrievers import RetrieverSpec, build_retriever, hybrid, ranker
from bsard_demo.retrievers.hybrid import HybridRetriever, part_rows, part_search, run_together
from bsard_demo.sources import load_dataset

QUESTIONS = ["Mon propriétaire peut-il garder ma garantie locative ?", "Comment divorcer ?", "bail de neuf ans"]


def sequential(calls):
    return [call() for call in calls]


@pytest.fixture
def no_memo(monkeypatch):
    """Every part searched again (the reference: nothing shared, nothing at once)."""
    monkeypatch.setattr(hybrid, "run_together", sequential)
    monkeypatch.setattr(ranker, "run_together", sequential)
    monkeypatch.setattr(hybrid, "part_search", lambda r, q, d: r.search_many([q], d)[0])
    monkeypatch.setattr(ranker, "part_rows", lambda r, q, d: r.search_rows([q], d)[0])


class Counting:
    """A fake part: a fixed ranking, counting its searches and the threads they ran on."""

    def __init__(self, name, ranking, wait: threading.Barrier | None = None):
        self.name, self.ranking, self.wait = name, ranking, wait
        self.calls, self.threads = 0, set()

    def search(self, question, k=100):
        return self.search_many([question], k)[0]

    def search_many(self, questions, k=100):
        self.calls += 1
        self.threads.add(threading.get_ident())
        if self.wait is not None:
            self.wait.wait(timeout=10)  # fails (BrokenBarrierError) unless the other part runs at once
        return [list(self.ranking[:k]) for _ in questions]


def hits(*ids):
    from bsard_demo.retrievers import Hit

    return [Hit(d, float(len(ids) - i)) for i, d in enumerate(ids)]


def test_run_together_keeps_order_and_runs_at_once():
    barrier = threading.Barrier(2)
    one, two = Counting("one", hits("a", "b"), barrier), Counting("two", hits("b", "c"), barrier)
    assert run_together([lambda: one.search("q", 5), lambda: two.search("q", 5)]) == [hits("a", "b"), hits("b", "c")]
    assert one.threads != two.threads  # the barrier let both through: they ran at the same time
    with pytest.raises(ZeroDivisionError):
        run_together([lambda: 1, lambda: 1 / 0])


def test_a_shared_part_is_searched_once_per_question_and_depth():
    bm25, dense = Counting("bm25", hits("a", "b", "c")), Counting("dense", hits("c", "a"))
    first = HybridRetriever([bm25, dense], depth=10, corpus_size=3)
    second = HybridRetriever([bm25, Counting("other", hits("b"))], depth=10, corpus_size=3)
    a = first.search_parts("q", 2)
    b = second.search_parts("q", 2)
    assert bm25.calls == 1 and dense.calls == 1  # the second column reused BM25's ranking
    assert a[1][0] == b[1][0] == hits("a", "b", "c")
    a[1][0].clear()  # a caller's list is its own
    assert first.search_parts("q", 2) == (HybridRetriever([bm25, dense], depth=10).fuse([hits("a", "b", "c"),
                                                                                         hits("c", "a")], 2),
                                          [hits("a", "b", "c"), hits("c", "a")])
    first.search_parts("another question", 2)
    assert bm25.calls == 2  # another question is searched
    part_search(bm25, "q", 1)
    assert bm25.calls == 3  # and another depth


def test_the_memo_is_bounded_and_keeps_no_retriever_alive(monkeypatch):
    import weakref

    from bsard_demo.build_once import BuildOnce

    monkeypatch.setattr(hybrid, "_memo", BuildOnce(entries=3))
    part = Counting("p", hits("a"))
    for i in range(5):
        part_search(part, f"q{i}", 1)
    assert len(hybrid._memo) <= 3
    part_search(part, "q0", 1)
    assert part.calls == 6  # q0 had been evicted
    gone = Counting("gone", hits("a"))
    part_search(gone, "q", 1)
    ref = weakref.ref(gone)
    del gone
    gc.collect()
    assert ref() is None


def test_two_columns_asking_for_a_part_at_once_search_it_once():
    started, release = threading.Event(), threading.Event()

    class Slow(Counting):
        def search_many(self, questions, k=100):
            started.set()
            release.wait(10)
            return super().search_many(questions, k)

    part = Slow("slow", hits("a", "b"))
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(part_search, part, "q", 2)
        started.wait(10)
        second = pool.submit(part_search, part, "q", 2)
        time.sleep(0.2)  # the second asks while the first searches (without the wait, it would search too)
        release.set()
        assert first.result(10) == second.result(10) == hits("a", "b")
    assert part.calls == 1  # the second waited for the first's search


def test_a_hybrid_inside_a_hybrid_runs_its_parts_without_waiting_on_the_pool():
    inner = [HybridRetriever([Counting(f"i{j}", hits("a", "b")), Counting(f"j{j}", hits("b", "c"))], depth=5)
             for j in range(hybrid.PART_THREADS + 2)]
    outer = HybridRetriever(inner, depth=5)
    fused, parts = outer.search_parts("q", 3)
    # each inner fuses to b (1/62 + 1/61), a (1/61), c (1/62); the outer fuses six such rankings
    assert len(parts) == len(inner) and [h.article_id for h in fused] == ["b", "a", "c"]


def test_a_parts_arrays_and_hits_share_one_search():
    import pandas as pd

    from bsard_demo.retrievers.base import ranked_hits
    from bsard_demo.retrievers.bm25 import BM25Retriever

    class CountingBM25(BM25Retriever):
        calls = 0

        def search_rows(self, questions, k=100):
            CountingBM25.calls += 1
            return super().search_rows(questions, k)

    frame = pd.DataFrame({"id": ["1", "2", "3"], "article": ["bail loyer", "divorce", "bail"]})
    built = BM25Retriever.build(frame, use_cache=False)
    bm25 = CountingBM25(built.article_ids, built.settings, bm25s_index=built._bm25s)
    rows, scores = part_rows(bm25, "bail", 3)
    assert part_search(bm25, "bail", 3) == ranked_hits(rows, scores, bm25.article_ids) == bm25.search("bail", 3)
    assert CountingBM25.calls == 2  # part_rows, then bm25.search; part_search read the memo
    assert not rows.flags.writeable  # the memo's arrays are shared: read-only
    with pytest.raises(TypeError, match="search_rows"):
        part_rows(Counting("hits only", hits("a")), "bail", 3)  # a part without arrays: part_search's hits


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    ds = load_dataset("sample")
    spec = RetrieverSpec("hybrid", {"retrievers": [{"kind": "bm25", "options": {}},
                                                   {"kind": "neighbours", "options": {}},
                                                   {"kind": "bm25", "options": {"k1": 1.5}}]})
    return ds, build_retriever(spec, ds, cache_root=cache)


def test_a_real_hybrid_gives_the_hits_of_its_parts_run_one_after_another(sample, monkeypatch):
    ds, h = sample
    questions = QUESTIONS + list(ds.questions("test")["question"][:5])
    together = [h.search_parts(q, 20) for q in questions] + [h.search_many(questions, 20)]
    hybrid._memo.clear()
    with monkeypatch.context() as m:
        m.setattr(hybrid, "run_together", sequential)
        m.setattr(hybrid, "part_search", lambda r, q, d: r.search_many([q], d)[0])
        alone = [h.search_parts(q, 20) for q in questions] + [h.search_many(questions, 20)]
    assert together == alone


def test_the_learned_ranker_gives_the_hits_of_its_parts_run_one_after_another(sample_ranker, monkeypatch):
    _, folder, cache_dir = sample_ranker
    ds = load_dataset("sample")
    r = build_retriever(RetrieverSpec("ranker", {"model": str(folder)}), ds, cache_root=cache_dir)
    questions = QUESTIONS + list(ds.questions("test")["question"][:5])
    together = [r.search_parts(q, 20) for q in questions]
    hybrid._memo.clear()
    with monkeypatch.context() as m:
        m.setattr(ranker, "run_together", sequential)
        m.setattr(ranker, "part_rows", lambda p, q, d: p.search_rows([q], d)[0])
        alone = [r.search_parts(q, 20) for q in questions]
    assert together == alone and any(hits for hits, _ in together)
    # the hits are those of the arrays, and each part's ranking is the part's own search_many
    assert [r.search(q, 20) for q in questions] == [hits for hits, _ in together]
    assert all(parts == [p.search_many([q], min(r.depth, r.size))[0] for p in r.parts.values()]
               for q, (_, parts) in zip(questions, together))
    # search_many ranks a question while the next one's inputs search: the same hits as one at a time
    hybrid._memo.clear()
    assert r.search_many(questions + questions[:1], 20) == [hits for hits, _ in together] + [together[0][0]]
    assert r.search_many([], 20) == [] and r.search_many(questions[:1], 5) == [together[0][0][:5]]
