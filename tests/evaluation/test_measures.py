"""bsard_demo.evaluation.measures: one parser and one label table for every measure of the product."""
import pytest

from bsard_demo.evaluation.measures import (
    EXTRA,
    EXTRA_COLUMNS,
    FAMILIES,
    Measure,
    column_label,
    cutoff_columns,
    is_measure_column,
)


def test_parse_accepts_case_and_blanks_and_gives_the_column():
    assert Measure.parse("recall@100") == Measure("recall", 100)
    assert Measure.parse(" MAP @ 10 ").column == "map@10"
    assert Measure.parse("nDCG@10") == Measure("ndcg", 10) == EXTRA[1]
    assert str(Measure.parse("MRR@100")) == "mrr@100" == Measure("mrr", 100).name


@pytest.mark.parametrize("text, message", [
    ("precision@10", "unknown measure"), ("recall", "unknown measure"), ("recall@-1", "unknown measure"),
    ("R@100", "unknown measure"), ("recall@0", "must be at least 1"), ("ndcg@20", "nDCG is available at ndcg@10 only"),
    ("rprec@10", "R-Prec has no cut-off"), ("rprec@0", "R-Prec has no cut-off"), ("R-Prec@100", "unknown measure"),
    ("prec", "unknown measure"),
])
def test_parse_refuses_what_nothing_computes(text, message):
    with pytest.raises(ValueError, match=message):
        Measure.parse(text)


def test_labels_cutoff_and_columns():
    m = Measure("map", 100)
    assert (m.label, m.short_label, m.label_fr, m.cutoff, m.is_extra) == ("MAP@100", "AP@100", "MAP@100", 100, False)
    with_k = [f for f in FAMILIES if f != "rprec"]
    assert [Measure(f, 10).label for f in with_k] == ["R@10", "MAP@10", "MRR@10", "nDCG@10"]
    assert [Measure(f, 10).short_label for f in with_k] == ["R@10", "AP@10", "RR@10", "nDCG@10"]
    assert Measure("recall", 200).label_fr == "Rappel@200" and Measure("ndcg", 10).is_extra
    assert column_label("recall@500") == "R@500" and column_label("ndcg@10", french=True) == "nDCG@10"
    assert column_label("n_relevant") == "n_relevant"
    assert column_label("missing_questions", french=True) == "missing_questions"
    assert cutoff_columns((100, 200)) == [
        "recall@100", "recall@200", "map@100", "map@200", "mrr@100", "mrr@200"]
    assert EXTRA_COLUMNS == ("rprec", "ndcg@10")


@pytest.mark.parametrize("text", ["rprec", "Rprec", " R-Prec ", "R-Precision", "r precision", "R-Précision"])
def test_r_precision_has_no_cutoff_and_one_column(text):
    m = Measure.parse(text)
    assert m == Measure("rprec") == EXTRA[0] and m.k is None and m.cutoff is None and m.is_extra
    assert (m.column, m.label, m.short_label, m.label_fr) == ("rprec", "R-Prec", "Rprec", "R-Précision")
    assert Measure.from_column("rprec") == m and is_measure_column("rprec") and not is_measure_column("rprec@10")
    assert column_label("rprec") == "R-Prec" and column_label("rprec", french=True) == "R-Précision"
    with pytest.raises(ValueError, match="no cut-off"):
        Measure("rprec", 5)
    with pytest.raises(ValueError, match="needs a cut-off"):
        Measure("recall")


def test_from_column_reads_only_measure_columns():
    assert Measure.from_column("mrr@500") == Measure("mrr", 500)
    for other in ("n_relevant", "missing_questions", "R@100", "recall@x", "recall@0", "Recall@100", "source"):
        assert Measure.from_column(other) is None and not is_measure_column(other)
    with pytest.raises(ValueError):
        Measure("precision", 10)


def test_every_family_has_what_computes_it():
    from bsard_demo.evaluation.metrics import VALUES

    assert set(VALUES) == set(FAMILIES)


def test_a_new_family_is_declared_once(monkeypatch):
    """One row of FAMILIES and one function of metrics.VALUES: the parser, the columns, the labels
    and evaluate follow (a toy precision@k)."""
    from bsard_demo.evaluation import evaluate
    from bsard_demo.evaluation.measures import Family, cutoff_families
    from bsard_demo.evaluation.metrics import VALUES

    monkeypatch.setitem(FAMILIES, "p", Family("p", "P", "P", "Précision"))
    monkeypatch.setitem(VALUES, "p", lambda positions, n_relevant, k: len([p for p in positions if p <= k]) / k)
    assert Measure.parse("P @ 2") == Measure("p", 2) and column_label("p@2") == "P@2"
    assert cutoff_families()[-1] == "p" and cutoff_columns((2,))[-1] == "p@2"
    ev = evaluate({"q": {"a", "b"}}, {"q": ["a", "x", "b"]}, ks=(2,), extra=())
    assert ev.means["p@2"] == 0.5 and ev.means["recall@2"] == 0.5
    with pytest.raises(ValueError, match=r"use recall@k, map@k, mrr@k, p@k, rprec or ndcg@10"):
        Measure.parse("precision@2")
