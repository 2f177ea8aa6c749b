"""bsard_demo.evaluation.measures: one parser and one label table for every measure of the product."""
from pathlib import Path

import pytest

from bsard_demo.evaluation.measures import (
    FAMILIES,
    TABLE_PLACES,
    Family,
    Measure,
    column_label,
    cutoff_columns,
    cutoff_families,
    extra_columns,
    extra_measures,
    families_help,
    is_measure_column,
)
from bsard_demo.evaluation.report import display_columns

REPO = Path(__file__).resolve().parents[2]


def test_parse_accepts_case_and_blanks_and_gives_the_column():
    assert Measure.parse("recall@100") == Measure("recall", 100)
    assert Measure.parse(" MAP @ 10 ").column == "map@10"
    assert Measure.parse("nDCG@10") == Measure("ndcg", 10) in extra_measures()
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
    for family, label, short in (("recall", "R@10", "R@10"), ("mrr", "MRR@10", "RR@10"),
                                 ("ndcg", "nDCG@10", "nDCG@10")):
        assert (Measure(family, 10).label, Measure(family, 10).short_label) == (label, short)
    assert Measure("recall", 200).label_fr == "Rappel@200" and Measure("ndcg", 10).is_extra
    assert column_label("recall@500") == "R@500" and column_label("ndcg@10", french=True) == "nDCG@10"
    assert column_label("n_relevant") == "n_relevant"
    assert column_label("missing_questions", french=True) == "missing_questions"
    # the columns derive from the declarations: each family at every cut-off, in declaration order, then the extras
    assert cutoff_columns((100, 200)) == [f"{f}@{k}" for f in cutoff_families() for k in (100, 200)]
    assert extra_columns() == tuple(m.column for f in FAMILIES.values() if not f.every_cutoff
                                    for m in extra_measures() if m.family == f.name)
    assert extra_columns().index("rprec") < extra_columns().index("ndcg@10")  # the published tables' order


@pytest.mark.parametrize("text", ["rprec", "Rprec", " R-Prec ", "R-Precision", "r precision", "R-Précision"])
def test_r_precision_has_no_cutoff_and_one_column(text):
    m = Measure.parse(text)
    assert m == Measure("rprec") in extra_measures() and m.k is None and m.cutoff is None and m.is_extra
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


def test_every_family_has_what_computes_it_and_says_what_it_is():
    for f in FAMILIES.values():
        assert callable(f.value) and f.definition and f.citation, f.name
        assert f.cutoffs is None or all(isinstance(k, int) and k >= 1 for k in f.cutoffs), f.name
        assert f.tables in TABLE_PLACES, f.name


def test_design_md_lists_no_family_by_hand():
    """A new family edits no document (docs/extending.md, 'A measure'): docs/design.md points to ``evaluate
    --help``, whose list is written from the declarations."""
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    assert "evaluate --help" in design and "families_help()" in design
    assert not [f for f in FAMILIES.values() if f.definition in design], "a hand copy of the families' definitions"


def test_evaluate_help_lists_every_declared_family(capsys):
    from bsard_demo.cli.main import main

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert " ".join(families_help().split()) in shown
    for f in FAMILIES.values():
        assert f"{f.label_fr}" in shown and " ".join(f.definition.split()) in shown, f.name


def test_a_new_family_is_declared_once(monkeypatch):
    """One declaration (a row of FAMILIES with what computes it): the parser, the columns, the labels and
    evaluate follow (a toy precision@k; a name no family has, so that a real P@k can be declared)."""
    from bsard_demo.evaluation import evaluate

    def precision(positions, n_relevant, k):
        return len([p for p in positions if p <= k]) / k

    before = display_columns((2, 5), extra_columns())
    monkeypatch.setitem(FAMILIES, "toy", Family("toy", "Toy", "Toy", "Jouet", precision, definition="d", citation="c"))
    assert Measure.parse("Toy @ 2") == Measure("toy", 2) and column_label("toy@2") == "Toy@2"
    assert cutoff_families()[-1] == "toy" and cutoff_columns((2,))[-1] == "toy@2"
    ev = evaluate({"q": {"a", "b"}}, {"q": ["a", "x", "b"]}, ks=(2,), extra=())
    assert ev.means["toy@2"] == 0.5 and ev.means["recall@2"] == 0.5
    forms = ", ".join([f"{f}@k" for f in cutoff_families()] + list(extra_columns())[:-1])
    with pytest.raises(ValueError, match=rf"use {forms} or {extra_columns()[-1]} \(e.g. recall@100\)"):
        Measure.parse("precision@2")
    shown = display_columns((2, 5), extra_columns())  # the tables: its row's place, before the "last" families
    last = [c for c in before if FAMILIES[Measure.from_column(c).family].tables == "last"]
    assert shown == [c for c in before if c not in last] + ["toy@2"] + last
    assert "toy@k: Toy@k (ir_measures Toy@k, in French Jouet@k), at every k asked, shown at the smallest k: d (c)." \
        in " ".join(families_help().split())


def test_a_family_at_its_own_cutoffs_is_computed_there_and_parsed_there_only(monkeypatch):
    """A family computed at declared cut-offs only (as nDCG@10) is an extra measure at each of them: evaluate
    computes it with nothing else to edit, and the parser names those cut-offs when given another."""
    from bsard_demo.evaluation import evaluate

    def success(positions, n_relevant, k):
        return float(any(p <= k for p in positions))

    monkeypatch.setitem(FAMILIES, "s", Family("s", "S", "Success", "Succès", success, cutoffs=(1, 10)))
    assert extra_columns()[-2:] == ("s@1", "s@10") and Measure.parse("S@10") == Measure("s", 10)
    with pytest.raises(ValueError, match=r"S is available at s@1, s@10 only, not s@5"):
        Measure.parse("s@5")
    ev = evaluate({"q": {"a"}}, {"q": ["x", "a"]}, ks=(5,))
    assert (ev.means["s@1"], ev.means["s@10"]) == (0.0, 1.0)
    assert list(ev.per_question.columns[:len(cutoff_columns((5,)) + list(extra_columns()))]) == \
        cutoff_columns((5,)) + list(extra_columns())


def test_the_tables_put_the_published_measures_first_and_mrr_last():
    """The published BSARD tables' order (R@k, MAP, then MRP = mean R-Prec, as QABISAR's Table 1) leads; MRR,
    which sees the first relevant article only, closes (its row's ``tables="last"``)."""
    columns = display_columns((100, 200, 500), extra_columns())
    assert columns[:5] == ["recall@100", "recall@200", "recall@500", "map@100", "rprec"] and columns[-1] == "mrr@100"
