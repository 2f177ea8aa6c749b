"""Published BSARD test results with their provenance (:data:`ANCHORS`, one :class:`Anchor` per figure), the
state of the art a run is put beside: ``python -m bsard_demo anchors`` and ``evaluate --anchors``
(:mod:`bsard_demo.cli.anchors`) and the Score page (:func:`anchors_frame`); the paper's own baselines
(:func:`paper_baselines`) are the "(published)" rows of :func:`bsard_demo.evaluation.report.metrics_table`.

Every figure says where it was read (``read_in``) and how (``read``): :data:`READ_SOURCE` in its source (QABISAR's
Table 1, read in a plain-text copy of the paper; for MTEB, the result file its leaderboard shows),
:data:`READ_LISTING` in a listing that quotes the paper (Papers with Code), not in the paper's own table, which could
not be read here; :data:`NOT_READ` marks a published figure or system that could not be read: it is listed, its
figure is not shown. QABISAR's "MRP" (mean R-Precision) is stored as ``rprec``, never as MRR; its MAP has no stated
cut-off, so it is ``map``, not ``map@100``. MTEB's ``BSARDRetrieval`` v1 kept one gold article per
question (mteb#2906; its descriptive statistics: 222 relevant pairs for 222 questions, 1,060 in v2), so its
"recall@100" is a hit rate: it is stored as ``hit@100`` and never in a recall column. Tie-breaking differs between
tools (mteb#5092, pytrec_eval#56) and MTEB's leaderboard BSARD figures were reported not reproducible (mteb#1314):
:data:`NOTES` says so wherever the table is shown.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Sequence

import pandas as pd

READ_SOURCE = "source"
READ_LISTING = "listing"
NOT_READ = "not read"
READ_STATES = (READ_SOURCE, READ_LISTING, NOT_READ)
#: The states whose figures are shown: read in the source, or in a listing quoting it (the paper's baselines,
#: which the product showed before this table; kept, and now labelled as read in a listing).
SHOWN_STATES = (READ_SOURCE, READ_LISTING)
#: Measures an anchor may carry: BSARD recall (every gold article counted) and MTEB v1's one-gold figures.
RECALL_MEASURES = ("recall@100", "recall@200", "recall@500")
#: The ranking measures the papers print beside recall: MAP and MRR at 100 (the BSARD paper), MAP with no stated
#: cut-off and mean R-Precision ("MRP", QABISAR's Table 1), as the run tables name them.
RANK_MEASURES = ("map@100", "mrr@100", "map", "rprec")
MTEB_V1_MEASURES = ("hit@100", "ndcg@10 (one gold)")
MEASURES = RECALL_MEASURES + RANK_MEASURES + MTEB_V1_MEASURES
#: Display labels, the same as the run tables' for recall, MAP@100, MRR@100 and R-Prec.
LABELS = {"recall@100": "R@100", "recall@200": "R@200", "recall@500": "R@500", "map@100": "MAP@100",
          "mrr@100": "MRR@100", "map": "MAP (cut-off not stated)", "rprec": "R-Prec",
          "hit@100": "Hit@100 (MTEB v1)", "ndcg@10 (one gold)": "nDCG@10 (MTEB v1, 1 gold)"}
#: Column headers of the ``anchors`` table, narrow enough for a 100-column terminal.
SHORT_LABELS = {"recall@100": "R@100", "recall@200": "R@200", "recall@500": "R@500", "map@100": "MAP@100",
                "mrr@100": "MRR@100", "map": "MAP*", "rprec": "R-Prec", "hit@100": "Hit@100†",
                "ndcg@10 (one gold)": "nDCG@10†"}

BSARD_PAPER = "Louis & Spanakis (2022), A Statutory Article Retrieval Dataset in French"
#: The arXiv abstract (v2, the ACL version) where the best baseline's R@100 was read.
ABSTRACT_URL = "https://arxiv.org/abs/2108.11792v2"
BSARD_URL = "https://aclanthology.org/2022.acl-long.468/"
#: Where the paper's baselines were read: Papers with Code's record of the paper, as mirrored by hyper.ai.
PWC_LISTING = ("https://beta.hyper.ai/en/papers/2108.11792, 'Benchmarks' (information-retrieval-on-bsard, "
               "Papers with Code's record of arXiv 2108.11792)")
BSARD_TEST = "BSARD test split (222 questions, every gold article)"
MTEB_TEST = ("MTEB BSARDRetrieval v1 test (222 questions, one gold article each, mteb#2906); "
             "dataset revision 5effa1b9b5fa3b0f9e12523e6e43e5f86a6e6d59")
MTEB_RESULTS = "https://github.com/embeddings-benchmark/results/blob/319e81d64298f3bdc5f09c8b6ff91f5015b3664c/"
GDSR_PAPER = "Louis, van Dijck & Spanakis (2023), Finding the Law: Enhancing Statutory Article Retrieval via GNNs"
QABISAR_PAPER = ("Santosh, Sarwat & Grabmair (2025), QABISAR: Query-Article Bipartite Interactions for Statutory "
                 "Article Retrieval")
QABISAR_URL = "https://aclanthology.org/2025.coling-main.100/"
#: Where QABISAR's Table 1 was read: the PDF's text, as held in a public code index.
QABISAR_COPY = ("a plain-text copy of the paper's PDF (https://aclanthology.org/2025.coling-main.100.pdf) held in a "
                "public code index, found by an exact look-up of its title; the PDF is the source to cite")
QABISAR_WHERE = ("Table 1 'Comparison of QABISAR with prior works', section 3.2, test split (page number not read: the "
                 "copy has none)")

#: Said wherever the table is shown.
NOTES = (
    "R@k: recall over every gold article of BSARD's test questions, as `evaluate` computes it.",
    "Hit@100 (MTEB v1): MTEB's BSARDRetrieval v1 kept one gold article per question, so its 'recall_at_100' is a "
    "hit rate, not recall (mteb#2906, fixed by BSARDRetrieval.v2, for which no result was published in MTEB's "
    "results repository at the time of reading); its nDCG@10 also counts one gold article.",
    "MTEB's leaderboard BSARD figures were reported not reproducible (mteb#1314); tools break score ties "
    "differently (mteb#5092, pytrec_eval#56): compare within one tool.",
    "R-Prec: mean R-Precision, QABISAR's 'MRP' (not MRR). MAP*: QABISAR's MAP, no cut-off stated (the run tables' "
    "MAP is MAP@100).",
    "read: 'source' = read in its source; 'listing' = read in Papers with Code's record of the paper, the paper's "
    "own table not read here; 'not read' = the figures could not be read, so none is shown.",
)


@dataclass(frozen=True)
class Anchor:
    """One published figure (``value`` in %, ``None`` when not read) of ``system`` on ``evaluated_on``, with where
    it comes from (``paper``, ``venue``, ``url``, ``where``: table or file in the source), what the system was
    trained on (``trained_on``) and where and how the figure was read (``read_in``, ``read``)."""

    system: str
    measure: str
    value: float | None
    paper: str
    venue: str
    url: str
    where: str
    trained_on: str
    evaluated_on: str
    read: str
    read_in: str
    note: str = ""

    @property
    def shown(self) -> bool:
        return self.read in SHOWN_STATES and self.value is not None


def _paper(system: str, trained_on: str, values: Sequence[float], note: str = "") -> list[Anchor]:
    """The paper's R@100/200/500 of ``system`` (read in a listing; ``note`` goes with its R@100), then its MAP@100
    and MRR@100, listed as not read: the paper's own table could not be read here."""
    where = "results table on the test split (its number not read here)"
    return [Anchor(system, measure, value, BSARD_PAPER, "ACL 2022", BSARD_URL, where, trained_on, BSARD_TEST,
                   READ_LISTING, PWC_LISTING, note if measure == "recall@100" else "")
            for measure, value in zip(RECALL_MEASURES, values)] + [
        Anchor(system, measure, None, BSARD_PAPER, "ACL 2022", BSARD_URL, where, trained_on, BSARD_TEST, NOT_READ,
               "the paper's own table could not be read (no plain-text copy found); the listing has recall only")
        for measure in ("map@100", "mrr@100")]


def _qabisar(system: str, trained_on: str, values: Sequence[float]) -> list[Anchor]:
    """One row of QABISAR's Table 1: R@100, R@200, R@500, MAP, MRP (= mean R-Precision, ``rprec``)."""
    return [Anchor(system, measure, value, QABISAR_PAPER, "COLING 2025", QABISAR_URL, QABISAR_WHERE, trained_on,
                   BSARD_TEST, READ_SOURCE, QABISAR_COPY, "the paper's 'MRP' (mean R-Precision)" if measure == "rprec"
                   else "the paper's 'MAP', no cut-off stated" if measure == "map" else "")
            for measure, value in zip(RECALL_MEASURES + ("map", "rprec"), values)]


def _mteb(model: str, revision: str, hit: float, ndcg: float) -> list[Anchor]:
    path = f"results/{model.replace('/', '__')}/{revision}/BSARDRetrieval.json"
    return [Anchor(model, measure, value, "MTEB results repository (BSARDRetrieval v1, mteb 1.12.75)", "MTEB",
                   MTEB_RESULTS + path, f"{path}: scores.test[0].{key}", "none on BSARD (zero-shot)", MTEB_TEST,
                   READ_SOURCE, MTEB_RESULTS + path)
            for measure, value, key in (("hit@100", hit, "recall_at_100"), ("ndcg@10 (one gold)", ndcg, "ndcg_at_10"))]


#: The table. Figures in %, as the source prints them (MTEB's fractions times 100).
ANCHORS: tuple[Anchor, ...] = (
    *_paper("BM25", "none (lexical)", (51.33, 56.78, 64.71)),
    *_paper("siamese bi-encoder", "BSARD train split (fine-tuned RoBERTa-based bi-encoder)", (71.63, 78.38, 83.77)),
    *_paper("two-tower bi-encoder", "BSARD train split (fine-tuned RoBERTa-based bi-encoder)", (74.78, 78.04, 83.39),
            note="agrees with the abstract's '74.8% R@100', " + ABSTRACT_URL + " (read)"),
    Anchor("G-DSR", "recall@100", None, GDSR_PAPER, "EACL 2023", "https://aclanthology.org/2023.eacl-main.203/",
           "results table (not read)", "BSARD train split plus synthetic questions (mT5 query generation: "
           "github.com/maastrichtlawtech/gdsr docs/README.md, 'Domain-specific augmentation')", BSARD_TEST, NOT_READ,
           "its abstract only (https://arxiv.org/abs/2301.12847): no figure; its own table was not found in a "
           "readable copy, and a secondary note's figures are not shown unverified"),
    # QABISAR's Table 1: its baselines are its own runs (named as there, "in QABISAR"), not the BSARD paper's.
    *_qabisar("BM25 (in QABISAR)", "none (lexical)", (49.3, 57.3, 63.0, 16.8, 13.6)),
    *_qabisar("BE w/o Hier. (in QABISAR)", "BSARD train split (bi-encoder, LegalCamemBERT, no hierarchical article "
              "encoder)", (77.9, 81.8, 88.1, 36.4, 30.1)),
    *_qabisar("BE (in QABISAR)", "BSARD train split (bi-encoder, hierarchical article encoder)",
              (79.9, 83.3, 88.7, 39.2, 31.6)),
    *_qabisar("BE+GE-Stat. (in QABISAR)", "BSARD train split (BE plus a graph encoder over the statutes' structure: "
              "G-DSR's method, as QABISAR's 'baselines derived from prior works' (section 3.1), not G-DSR's own "
              "figure)", (82.3, 85.1, 89.9, 42.6, 34.8)),
    *_qabisar("QABISAR", "BSARD train split (query-article bipartite graph, distilled into the query encoder)",
              (83.7, 87.9, 91.3, 43.1, 35.6)),
    *_mteb("intfloat/multilingual-e5-large", "4dc6d853a804b9c8886ede6dda8a073b7dc08a81", 63.063, 21.278),
    *_mteb("intfloat/multilingual-e5-small", "e4ce9877abf3edfe10b0d82785e83bdcb973e22e", 52.703, 14.539),
    *_mteb("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a", 27.477, 4.804),
)

#: The columns of :func:`anchors_records` and :func:`figures_frame`.
COLUMNS = tuple(f.name for f in fields(Anchor))
#: The source column of the paper's rows in :func:`bsard_demo.evaluation.report.metrics_table`.
PUBLISHED_SOURCE = "published (Louis & Spanakis, ACL 2022)"


def anchors_records(anchors: Sequence[Anchor] = ANCHORS) -> list[dict]:
    """Every anchor as a dict of :data:`COLUMNS` (``value`` in %, ``None`` when not read)."""
    return [asdict(a) for a in anchors]


def anchors_report() -> dict:
    """The published results as ``anchors --format json`` prints them (and ``evaluate --format json
    --anchors`` under its key ``anchors``): ``{"anchors": records, "notes": [...]}``."""
    return {"anchors": anchors_records(), "notes": list(NOTES)}


def figures_frame(anchors: Sequence[Anchor] = ANCHORS) -> pd.DataFrame:
    """One row per figure (:data:`COLUMNS`), the figures not read included with an empty value."""
    return pd.DataFrame(anchors_records(anchors), columns=list(COLUMNS))


def paper_baselines(ks: Sequence[int] = (100, 200, 500)) -> dict[str, dict[str, float]]:
    """The BSARD paper's shown recall figures at the cutoffs ``ks``, as fractions: ``{system: {"recall@k": v}}``."""
    out: dict[str, dict[str, float]] = {}
    wanted = {f"recall@{k}" for k in ks}
    for a in ANCHORS:
        if a.paper == BSARD_PAPER and a.shown and a.measure in wanted:
            out.setdefault(a.system, {})[a.measure] = a.value / 100
    return out


def anchors_frame(ks: Sequence[int] = (100, 200, 500), *, shown_only: bool = True) -> pd.DataFrame:
    """The table beside a run (the Score page's): one row per system (index ``system``), its measure columns as
    fractions, recall at the cutoffs ``ks`` named as the run tables' (``recall@100``), the
    :data:`RANK_MEASURES` with a figure read (``map`` with no stated cut-off, ``rprec``) and MTEB v1's figures
    under their own names (``hit@100``, ``ndcg@10 (one gold)``), empty where nothing was read; then ``paper``,
    ``venue``, ``trained_on``, ``evaluated_on``, ``read`` and ``read_in`` (of its first figure). ``shown_only``:
    leave out the systems none of whose figures could be read."""
    read_any = {a.measure for a in ANCHORS if a.shown}  # a ranking measure nobody's figure was read for: no column
    measures = ([f"recall@{k}" for k in ks if f"recall@{k}" in RECALL_MEASURES]
                + [m for m in RANK_MEASURES if m in read_any] + list(MTEB_V1_MEASURES))
    rows: dict[str, dict] = {}
    for a in ANCHORS:
        if shown_only and not a.shown:
            continue
        row = rows.setdefault(a.system, {m: None for m in measures} | {
            "paper": a.paper, "venue": a.venue, "trained_on": a.trained_on, "evaluated_on": a.evaluated_on,
            "read": a.read, "read_in": a.read_in})
        if a.shown and a.measure in measures:
            row[a.measure] = a.value / 100
    frame = pd.DataFrame.from_dict(rows, orient="index",
                                   columns=measures + ["paper", "venue", "trained_on", "evaluated_on", "read",
                                                       "read_in"])
    frame[measures] = frame[measures].astype(float)
    frame.index.name = "system"
    return frame
