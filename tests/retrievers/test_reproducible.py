"""Built-in runs are byte-identical across processes and hash seeds (issue 10, item 5): two fresh
processes under different ``PYTHONHASHSEED`` values build every retriever from scratch and write
the top-k (article ids and repr of the scores) of the sample's test questions, and the cache keys. The same two
processes then index the sample with bm25s left to itself, for the guard that those seeds do change its term order
(one pair of processes for both tests: each child's interpreter and imports cost ~2.5 CPU s)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = r'''
import sys
from pathlib import Path
from bsard_demo.dataset import Dataset
from bsard_demo.retrievers import RetrieverSpec, build_retriever
from bsard_demo.retrievers.batch import question_texts
from bsard_demo.retrievers.hybrid_specs import hybrid_spec
from bsard_demo.sources import load_dataset
from _small_sample import cut_fields

cache = Path(sys.argv[1])
ds = load_dataset("sample")
mid = Dataset("sample-30", "local", ds.articles.iloc[:30].reset_index(drop=True), ds.splits)  # dense: CPU time
# e5 costs ~2.5 ms a token (its 4 whole articles: 1,039 tokens, ~2.6 CPU s a process): their texts cut to their
# words within 200 characters (~100 tokens each, ~0.8 s); what a seed could change (orders, ties, fusion) is not in
# an article's length
few = Dataset("sample-4", "local", cut_fields(ds.articles.iloc[:4].reset_index(drop=True), 200), ds.splits)
questions = question_texts(ds.questions("test"), False)
runs = [
    ("bm25", RetrieverSpec("bm25"), ds),
    ("bm25 rank_bm25", RetrieverSpec("bm25", {"engine": "rank_bm25"}), ds),
    ("bm25 text nostem", RetrieverSpec("bm25", {"fields": ("article",), "stem": False}), ds),
    ("dense use (30 articles)", RetrieverSpec("dense", {"encoder": "use"}), mid),
    ("hybrid rrf (30 articles)", RetrieverSpec("hybrid"), mid),
    ("hybrid default (30 articles)", hybrid_spec(), mid),
    ("hybrid weighted (30 articles)", hybrid_spec("use", method="weighted", alpha=0.6), mid),
    ("dense e5 (4 articles)", RetrieverSpec("dense", {"encoder": "e5"}), few),
    ("hybrid bm25+use+e5 (4 articles)", hybrid_spec("use,e5"), few),
]
out = sys.stdout
for label, spec, data in runs:
    retriever = build_retriever(spec, data, cache_root=cache)
    out.write(f"## {label}: {retriever.name}\n")
    for q, hits in zip(questions, retriever.search_many(questions, 20)):
        out.write(" ".join(f"{h.article_id}:{h.score!r}" for h in hits) + "\n")
for kind in sorted(p.name for p in cache.iterdir()):
    names = sorted(p.name for p in (cache / kind).iterdir() if not p.name.startswith("."))
    out.write(f"## cache {kind}: " + " ".join(names) + "\n")
''' + r'''
# the guard's part (test_bm25s_own_numbering_follows_the_hash_seed): written to its own file, not to stdout
import json
from pathlib import Path
import bm25s
from bsard_demo.analyzer import Analyzer
from bsard_demo.retrievers.bm25 import sorted_vocabulary
from bsard_demo.sources import load_dataset
tokens = [Analyzer().tokens(t) for t in load_dataset("sample").articles["article"]]
index = bm25s.BM25()
index.index(tokens, show_progress=False)
Path(sys.argv[2]).write_text(json.dumps([list(index.vocab_dict)[:40], list(sorted_vocabulary(tokens))[:40]]))
'''
SEEDS = ("1", "2")


def _run(seed: str, cache: Path, bm25s_out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    env.pop("BSARD_CACHE", None)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(cache), str(bm25s_out)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def children(tmp_path_factory) -> dict:
    """One process per seed of :data:`SEEDS`, side by side: ``stdout`` (their runs and cache keys, bytes) and
    ``bm25s`` (bm25s's own term order, then ours, each process's JSON read back), in seed order."""
    root = tmp_path_factory.mktemp("reproducible")
    procs = [_run(seed, root / f"cache-{seed}", root / f"bm25s-{seed}.json") for seed in SEEDS]
    stdout = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err.decode()[-2000:]
            stdout.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return {"stdout": stdout, "bm25s": [json.loads((root / f"bm25s-{seed}.json").read_text()) for seed in SEEDS]}


def test_runs_are_byte_identical_across_hash_seeds(children):
    outputs = children["stdout"]
    first = outputs[0].decode()
    sections = [line for line in first.splitlines() if line.startswith("## ")]
    # a finished dense build leaves no dense-partial/ folder behind: the cache holds only entries
    assert [line.split(":")[0] for line in sections][-2:] == ["## cache bm25s", "## cache dense"]
    assert len(sections) == 9 + 2 and len(first.splitlines()) == 9 * (1 + 27) + 2
    assert outputs[0] == outputs[1]


def test_bm25s_own_numbering_follows_the_hash_seed(children):
    """Guards the test above: left to itself, bm25s numbers terms in hash order, so the seeds
    used there do give different term orders (and summation orders) without our sorting."""
    outs = children["bm25s"]
    assert outs[0][0] != outs[1][0]  # bm25s's own order differs
    assert outs[0][1] == outs[1][1] == sorted(outs[0][1])  # ours does not


class _VectorEncoder:
    """Questions are given as vectors already: ``encode_queries`` is never used here."""

    name, version, normalized, max_tokens = "vectors", "1", True, None

    def __init__(self, dim: int):
        self.dim = dim


def _search_in_a_thread(retriever, queries, omp_threads: int):
    """``retriever``'s scores and ids for ``queries``, searched in a new thread whose OpenMP setting (FAISS's
    threads, kept per calling thread) was ``omp_threads`` before, and that thread's setting after."""
    from concurrent.futures import ThreadPoolExecutor

    import faiss

    def run():
        faiss.omp_set_num_threads(omp_threads)
        hits = retriever.search_vectors(queries, 50)
        return [[(h.article_id, h.score) for h in row] for row in hits], faiss.omp_get_max_threads()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def test_dense_scores_do_not_depend_on_the_machines_cores():
    """FAISS's default is one OpenMP thread per core, and a flat index searched with 1 or 3 threads gives other
    last bits (this 10,000 x 32 index does, as frlaw-dev's 29,115 x 512 did): so a dense run's scores would
    depend on the machine. Every search sets its thread to SEARCH_THREADS first."""
    import numpy as np

    from bsard_demo.retrievers.dense import SEARCH_THREADS, DenseRetriever

    rng = np.random.default_rng(0)
    emb = rng.standard_normal((10_000, 32)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    retriever = DenseRetriever([str(i) for i in range(len(emb))], emb, _VectorEncoder(32))
    queries = rng.standard_normal((20, 32)).astype(np.float32)
    one, after_one = _search_in_a_thread(retriever, queries, 1)
    three, after_three = _search_in_a_thread(retriever, queries, 3)
    assert after_one == after_three == SEARCH_THREADS == 1
    assert one == three
