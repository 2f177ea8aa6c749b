"""What a measure is, apart from how a run is scored (as ``ir_measures`` declares ``R@k``, ``AP@k``, ``RR@k``,
``nDCG@k``, ``Rprec``): a :class:`Family` is declared once, in :data:`FAMILIES` (its labels, what computes it, the
cut-offs it is computed at, the names it is parsed from, its definition and where it comes from), and everything
else derives from the declarations: the columns and their order (:func:`cutoff_columns`, :func:`extra_measures`),
what :meth:`Measure.parse` accepts and its messages, and ``evaluate --help``'s list (:func:`families_help`).
:class:`Measure` is a family and a cut-off (none for R-Precision), with its column name and labels.

The families, their columns and labels: docs/design.md, 'bsard_demo/evaluation/measures.py'.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

from .metrics import (
    ap_from_positions,
    ndcg_from_positions,
    recall_from_positions,
    rprec_from_positions,
    rr_from_positions,
)

#: What computes a family at cut-off ``k`` (``None`` without one) from the sorted 1-based ranks of the relevant
#: articles found and their number (:mod:`bsard_demo.evaluation.metrics`).
Value = Callable[[Sequence[int], int, "int | None"], float]


class Family(NamedTuple):
    """One family of measures, declared once: its column prefix, labels, what computes it (``value``) and where.

    ``cutoffs``: ``None``, at every cut-off an evaluation asks for (``ks``: R@100, R@200…); a tuple of cut-offs,
    an *extra* measure computed at those only, beside the others (nDCG@10); ``()``, no cut-off: one figure,
    column ``name`` (R-Precision). ``aliases``: other names :meth:`Measure.parse` takes for a family without
    cut-off. ``definition`` and ``citation``: docs/design.md's table. ``tables``: where the tables of ``evaluate``,
    ``compare`` and the Score page show a family computed at every cut-off: ``"every k"`` (recall), ``"first"``, at
    the smallest cut-off before the extra measures (MAP), or ``"last"``, at the smallest after them (MRR)."""

    name: str  # column prefix: recall@100
    label: str  # English label (tables of the CLI and the Score page): R@100
    short: str  # ir_measures' name (the Search page's per-question scores): R@100, AP@100, RR@100
    label_fr: str  # the Score page's charts and selectors: Rappel@100
    value: Value
    cutoffs: tuple[int, ...] | None = None
    aliases: tuple[str, ...] = ()
    definition: str = ""
    citation: str = ""
    tables: str = "first"

    @property
    def every_cutoff(self) -> bool:
        """Computed at every cut-off of an evaluation (else an extra measure)."""
        return self.cutoffs is None

    @property
    def cutoff(self) -> bool:
        """Has a cut-off (``name@k``); False: one figure, column ``name``."""
        return self.cutoffs != ()


#: The places a family's ``tables`` names (:class:`Family`).
TABLE_PLACES = ("every k", "first", "last")

_BSARD = "Louis & Spanakis, ACL 2022 (BSARD)"
#: The families, in column order: those at every cut-off first (each at every ``k``), then the extra ones,
#: each at its cut-offs (R-Precision first: the published BSARD tables put it after MAP; then nDCG@10, MTEB's).
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("recall", "R", "R", "Rappel", recall_from_positions, tables="every k",
           definition="share of the question's relevant articles in the top k", citation=_BSARD),
    Family("map", "MAP", "AP", "MAP", ap_from_positions,
           definition="average precision at k: the precision at each relevant article found in the top k, "
                      "summed and divided by the number of relevant articles", citation=_BSARD),
    Family("mrr", "MRR", "RR", "MRR", rr_from_positions, tables="last",
           definition="reciprocal rank of the first relevant article in the top k (0 if none)", citation=_BSARD),
    Family("rprec", "R-Prec", "Rprec", "R-Précision", rprec_from_positions, cutoffs=(), aliases=("R-Precision",),
           definition="share of the top R that is relevant, R the question's number of relevant articles",
           citation="trec_eval's Rprec; the MRP of QABISAR and G-DSR"),
    Family("ndcg", "nDCG", "nDCG", "nDCG", ndcg_from_positions, cutoffs=(10,),
           definition="discounted cumulative gain at k with binary gains, over the ideal ranking's",
           citation="trec_eval's ndcg_cut; MTEB's figure"),
)}


def cutoff_families() -> tuple[str, ...]:
    """The families computed at every cut-off of an evaluation (``ks``), in column order."""
    return tuple(f.name for f in FAMILIES.values() if f.every_cutoff)


def _measure_re() -> re.Pattern:
    """``family @ k`` for any family of :data:`FAMILIES` (case and blanks ignored)."""
    return re.compile(rf"^\s*({'|'.join(map(re.escape, FAMILIES))})\s*@\s*(\d+)\s*$", re.IGNORECASE)


def _bare_name(text: str) -> str:
    """``text`` lower-cased without blanks, hyphens and accents: ``"R-Précision"`` -> ``"rprecision"``."""
    return re.sub(r"[\s\-_]", "", str(text).lower()).replace("é", "e")


def _bare_families() -> dict[str, str]:
    """The names a family without cut-off is parsed from (its column, labels, ``R-Precision``)."""
    out = {}
    for f in FAMILIES.values():
        if not f.cutoff:
            for name in (f.name, f.label, f.short, f.label_fr, *f.aliases):
                out[_bare_name(name)] = f.name
    return out


_COLUMN_RE = re.compile(r"^([a-z]+)@([0-9]+)$")


@dataclass(frozen=True)
class Measure:
    """A measure: ``family`` (a key of :data:`FAMILIES`) at cut-off ``k``; ``k`` is ``None`` for a
    family without cut-off (``Measure("rprec")``, R-Precision), and required for the others."""

    family: str
    k: int | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"unknown measure family {self.family!r}; known: {', '.join(FAMILIES)}")
        if not FAMILIES[self.family].cutoff:
            if self.k is not None:
                raise ValueError(f"{FAMILIES[self.family].label} has no cut-off (R is each question's number of "
                                 f"relevant articles): write {self.family}, not {self.family}@{self.k}")
            return
        if self.k is None:
            raise ValueError(f"{self.family} needs a cut-off: {self.family}@k")
        if int(self.k) < 1:
            raise ValueError(f"the cutoff of {self.family}@{self.k} must be at least 1")
        object.__setattr__(self, "k", int(self.k))

    @classmethod
    def parse(cls, text: str) -> "Measure":
        """``"recall@100"``, ``"map@100"``, ``"mrr@10"``, ``"ndcg@10"`` (case and blanks ignored:
        ``"MAP @ 100"``, ``"nDCG@10"``), ``"rprec"`` (also ``"Rprec"``, ``"R-Prec"``,
        ``"R-Precision"``). A family with declared cut-offs is computed at those only (nDCG@10).
        Raises :class:`ValueError` with the accepted forms otherwise."""
        bare = _bare_families().get(_bare_name(text))
        if bare is not None:
            return cls(bare)
        m = _measure_re().match(str(text))
        if not m:
            forms = [f"{f}@k" for f in cutoff_families()] + list(extra_columns())
            raise ValueError(f"unknown measure {str(text)!r}; use {', '.join(forms[:-1])} or {forms[-1]} "
                             "(e.g. recall@100)")
        family, k = m.group(1).lower(), int(m.group(2))
        if not FAMILIES[family].cutoff:
            cls(family, k)  # raises: no cut-off
        if k < 1:
            raise ValueError(f"the cutoff of {text!r} must be at least 1")
        measure = cls(family, k)
        if not FAMILIES[family].every_cutoff and k not in FAMILIES[family].cutoffs:
            at = ", ".join(m.column for m in extra_measures() if m.family == family)
            raise ValueError(f"{FAMILIES[family].label} is available at {at} only, not {measure.column}")
        return measure

    @classmethod
    def from_column(cls, column: object) -> "Measure | None":
        """The measure a table column holds (``"recall@100"``, exactly as :attr:`column` writes
        it, ``"rprec"``), or ``None`` for any other column (``"n_relevant"``, ``"missing_questions"``…)."""
        family = FAMILIES.get(str(column))
        if family is not None and not family.cutoff:
            return cls(family.name)
        m = _COLUMN_RE.match(str(column))
        if not m or m.group(1) not in FAMILIES or not FAMILIES[m.group(1)].cutoff or int(m.group(2)) < 1:
            return None
        return cls(m.group(1), int(m.group(2)))

    @property
    def column(self) -> str:
        """The column of evaluation tables, per-question frames and JSON: ``recall@100``, ``rprec``."""
        return self.family if self.k is None else f"{self.family}@{self.k}"

    def _named(self, name: str) -> str:
        return name if self.k is None else f"{name}@{self.k}"

    name = column  # the name tuning and the CLI print

    @property
    def cutoff(self) -> int | None:
        """``k``; ``None`` for R-Precision (its cut-off is each question's number of relevant articles)."""
        return self.k

    @property
    def label(self) -> str:
        """English display name: ``R@100``, ``MAP@100``, ``MRR@100``, ``nDCG@10``, ``R-Prec``."""
        return self._named(FAMILIES[self.family].label)

    @property
    def short_label(self) -> str:
        """ir_measures' name: ``R@100``, ``AP@100``, ``RR@100``, ``nDCG@10``, ``Rprec``."""
        return self._named(FAMILIES[self.family].short)

    @property
    def label_fr(self) -> str:
        """French display name: ``Rappel@100``, ``MAP@100``, ``MRR@100``, ``nDCG@10``, ``R-Précision``."""
        return self._named(FAMILIES[self.family].label_fr)

    @property
    def is_extra(self) -> bool:
        """Computed beside the cut-off measures, at its own cut-off (nDCG@10) or without one (R-Prec)."""
        return not FAMILIES[self.family].every_cutoff

    def __str__(self) -> str:
        return self.column


def extra_measures() -> tuple[Measure, ...]:
    """The extra measures an evaluation adds beside the cut-off ones, in column order: each family not computed
    at every cut-off, at each of its declared cut-offs (or without one): R-Precision, then nDCG@10."""
    return tuple(Measure(f.name, k) for f in FAMILIES.values() if not f.every_cutoff for k in (f.cutoffs or (None,)))


def extra_columns() -> tuple[str, ...]:
    """The columns of :func:`extra_measures`: ``("rprec", "ndcg@10")``."""
    return tuple(m.column for m in extra_measures())


#: :func:`extra_measures` and :func:`extra_columns` of the declared families (as imported).
EXTRA: tuple[Measure, ...] = extra_measures()
EXTRA_COLUMNS: tuple[str, ...] = extra_columns()


def cutoff_columns(ks) -> list[str]:
    """Columns of the cut-off measures in display order: all recalls, then map@k, then mrr@k."""
    return [Measure(family, k).column for family in cutoff_families() for k in ks]


def is_measure_column(column: object) -> bool:
    """Whether a table column holds a measure (``recall@100``, ``ndcg@10``…)."""
    return Measure.from_column(column) is not None


def column_label(column: object, *, french: bool = False) -> str:
    """The display name of a table column: a measure's :attr:`~Measure.label` (or
    :attr:`~Measure.label_fr`); any other column is returned unchanged."""
    m = Measure.from_column(column)
    if m is None:
        return column
    return m.label_fr if french else m.label


def families_help() -> str:
    """The families as ``evaluate --help`` lists them (docs/design.md points there), in column order: each with its
    column, labels, cut-offs, place in the tables, other names, definition and source, wrapped to 100 columns."""
    lines = ["measures (each declared once, in bsard_demo/evaluation/measures.py's FAMILIES), in column order:"]
    for f in FAMILIES.values():
        at = ("at every k asked" if f.every_cutoff else f"at k = {', '.join(map(str, f.cutoffs))} only" if f.cutoff
              else "without cut-off")
        shown = {"every k": "at every k", "first": "at the smallest k", "last": "last, at the smallest k"}[f.tables] \
            if f.every_cutoff else "last" if f.tables == "last" else "in its row's place"
        also = f"; also parsed from {', '.join(f.aliases)}" if f.aliases else ""
        k = "@k" if f.cutoff else ""
        lines.append(textwrap.fill(
            f"{f.name}{k}: {f.label}{k} (ir_measures {f.short}{k}, in French {f.label_fr}{k}{also}), {at}, shown "
            f"{shown}: {f.definition} ({f.citation}).", 100, initial_indent="  ", subsequent_indent="    "))
    return "\n".join(lines) + "\n"
