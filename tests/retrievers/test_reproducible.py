"""Built-in runs are byte-identical across processes and hash seeds (issue 10, item 5): two fresh
processes under different ``PYTHONHASHSEED`` values build every retriever from scratch and write
the top-k (article ids and repr of the scores) of the sample's test questions, and the cache keys."""
from __future__ import annotations

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

cache = Path(sys.argv[1])
ds = load_dataset("sample")
mid = Dataset("sample-30", "local", ds.articles.iloc[:30].reset_index(drop=True), ds.splits)  # dense: CPU time
few = Dataset("sample-4", "local", ds.articles.iloc[:4].reset_index(drop=True), ds.splits)  # e5: ~1 article/s
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
'''


def _run(seed: str, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    env.pop("BSARD_CACHE", None)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(cache)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("seeds", [("1", "2")])
def test_runs_are_byte_identical_across_hash_seeds(tmp_path, seeds):
    procs = [_run(seed, tmp_path / f"cache-{seed}") for seed in seeds]
    outputs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr.decode()[-2000:]
        outputs.append(stdout)
    first = outputs[0].decode()
    sections = [line for line in first.splitlines() if line.startswith("## ")]
    # a finished dense build leaves no dense-partial/ folder behind: the cache holds only entries
    assert [line.split(":")[0] for line in sections][-2:] == ["## cache bm25s", "## cache dense"]
    assert len(sections) == 9 + 2 and len(first.splitlines()) == 9 * (1 + 27) + 2
    assert outputs[0] == outputs[1]


BM25S_CHILD = r'''
import json
import bm25s
from bsard_demo.analyzer import Analyzer
from bsard_demo.retrievers.bm25 import sorted_vocabulary
from bsard_demo.sources import load_dataset
tokens = [Analyzer().tokens(t) for t in load_dataset("sample").articles["article"]]
index = bm25s.BM25()
index.index(tokens, show_progress=False)
print(json.dumps([list(index.vocab_dict)[:40], list(sorted_vocabulary(tokens))[:40]]))
'''


def test_bm25s_own_numbering_follows_the_hash_seed():
    """Guards the test above: left to itself, bm25s numbers terms in hash order, so the seeds
    used there do give different term orders (and summation orders) without our sorting."""
    import json

    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", BM25S_CHILD], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(json.loads(done.stdout))
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
