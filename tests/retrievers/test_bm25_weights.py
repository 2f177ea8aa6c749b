"""bsard_demo.retrievers.bm25_weights: BM25's formulas, equal bit for bit to bm25s's own."""
import math

import numpy as np
import pytest
from bm25s import scoring

from bsard_demo.retrievers.bm25_weights import (
    IDF,
    TermCounts,
    idf,
    length_norm,
    query_counts,
    sorted_vocabulary,
    tf_saturation,
)


@pytest.mark.parametrize("method", sorted(IDF))
def test_idf_is_bm25s_s(method):
    bm25s_idf = {"lucene": scoring._score_idf_lucene, "robertson": scoring._score_idf_robertson}[method]
    for n in (1, 2, 7, 1000, 22633):
        for df in range(1, min(n, 50) + 1):
            assert IDF[method](df, n) == bm25s_idf(df, N=n)
    assert idf([1, 2], 3, method).dtype == np.float64
    with pytest.raises(ValueError, match="unknown BM25 method"):
        idf([1], 2, "atire")


def test_tf_saturation_is_bm25s_s():
    tf = np.array([1.0, 2.0, 3.0, 7.0])
    for k1, b, l_d, l_avg in ((1.0, 0.6, 12, np.float64(9.5)), (1.2, 0.75, 3, np.float64(41 / 3)),
                              (0.0, 0.0, 5, np.float64(5.0))):
        mine = tf_saturation(tf, length_norm(np.float64(l_d), l_avg, k1, b))
        assert mine.tobytes() == scoring._score_tfc_robertson(tf, l_d, l_avg, k1, b).tobytes()


def test_term_counts_and_queries():
    tokens = [["bail", "loyer", "bail"], ["loyer"], ["garantie", "bail"]]
    vocab = sorted_vocabulary(tokens)
    assert vocab == {"bail": 0, "garantie": 1, "loyer": 2}
    counts = TermCounts([[vocab[t] for t in doc] for doc in tokens], len(vocab))
    assert counts.df.tolist() == [2, 1, 2] and counts.doc_len.tolist() == [3.0, 1.0, 2.0] and counts.avg_doc_len == 2.0
    w = counts.weights(1.0, 0.6).toarray()
    expected = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5)) * (2 / (1.0 * ((1 - 0.6) + 0.6 * 3 / 2.0) + 2))
    assert w.shape == (3, 3) and w[0, 0] == expected and w[1, 1] == 0.0
    q = query_counts([["bail", "bail", "inconnu"], ["loyer"]], {**vocab, "": 3}, 3).toarray()
    assert q.tolist() == [[2.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
