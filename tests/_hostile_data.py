"""A small local dataset and run files full of hostile text, for the escaping tests
(``tests/test_xss.py`` in-process, ``tests/test_browser_hostile.py`` in Chromium).

Every payload sets ``window.__xss`` if it ever runs as script, so a browser test only has to
read that variable. The folder is a normal local dataset (``articles.csv``,
``questions_test.csv``): ``BSARD_DATA=<folder>`` or the sidebar's "Dossier local" loads it.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

IMG = "<img src=x onerror=window.__xss=1>"
SCRIPT = "<script>window.__xss=1</script>"
SVG = "<svg/onload=window.__xss=1>"  # no space: fits a TREC field
JS_LINK = "[lien](javascript:window.__xss=1)"
A_JS = '<a href="javascript:window.__xss=1">lien</a>'
BOLD_MD = "**gras**"
BOLD_HTML = "<b>gras</b>"
MATH = "$x^2$"
RED = ":red[rouge]"
LONG = "Z" * 5000  # one 5,000-character word
MARKUP = (IMG, SCRIPT, SVG, JS_LINK, A_JS, BOLD_MD, BOLD_HTML, MATH, RED)
#: Substrings a rendered fragment must never contain unescaped (tags that would run or style).
TAGS = ("<img", "<script", "<svg", "<a ", "<b>", "<i>")

#: Article ids and question id chosen to carry markup too (no whitespace: they fit a TREC field).
EVIL_ARTICLE = "<b>7</b>"
EVIL_QID = "<i>q9</i>"
QUESTION = f"garantie locative {IMG} {BOLD_MD} {JS_LINK} {MATH} {RED}"
CATEGORY = f"Logement {SCRIPT} {BOLD_HTML}"
#: Run file names (the run's name on the Score page).
RUN_IMG = f"{IMG}.trec"
RUN_MD = f"{BOLD_MD} {JS_LINK} {RED}.trec"

_FILLER = ("Le bailleur restitue la garantie locative au preneur dans les deux mois qui suivent la fin du bail, "
           "déduction faite des dégâts locatifs constatés dans l'état des lieux de sortie.")


def articles() -> list[dict[str, str]]:
    """Twelve articles about rental deposits; every text field carries markup somewhere."""
    rows = []
    payloads = list(MARKUP) + [A_JS + " " + IMG, LONG, SCRIPT + " " + LONG]
    for i, payload in enumerate(payloads, 1):
        rows.append({
            "id": EVIL_ARTICLE if i == 7 else str(i),
            "reference": f"Art. {i} {payload}" if i != 11 else f"Art. {LONG}",
            "article": f"{_FILLER} {payload} garantie {payload}" + (" garantie" * (i % 3)),
            "law_type": "regional",
            "code": f"Code {SCRIPT}" if i % 2 else f"Code du bail {BOLD_MD}",
            "book": f"Livre {IMG}",
            "part": "", "act": "",
            "chapter": f"Chapitre {A_JS}",
            "section": "", "subsection": "",
            "description": f"Description {IMG} {RED}",
        })
    return rows


def questions() -> list[dict[str, str]]:
    return [
        {"id": "1", "category": CATEGORY, "subcategory": SVG, "question": QUESTION,
         "extra_description": f"{IMG} {BOLD_MD}", "article_ids": f"1,{EVIL_ARTICLE},12"},
        {"id": EVIL_QID, "category": f"Famille {IMG}", "subcategory": "", "question": f"{SCRIPT} garantie {LONG}",
         "extra_description": "", "article_ids": "2,3"},
        {"id": "3", "category": CATEGORY, "subcategory": "", "question": f"{A_JS} {BOLD_HTML} bail",
         "extra_description": "", "article_ids": "11"},
    ]


def write_dataset(folder: Path) -> Path:
    """Write the hostile dataset into ``folder`` (created) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("articles.csv", articles()), ("questions_test.csv", questions())):
        with open(folder / name, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return folder


def run_trec(reverse: bool = False) -> bytes:
    """A TREC run over the hostile questions: two tags carrying markup (a warning lists them),
    an unknown article id carrying markup (a warning names it) and the markup article id."""
    ids = [str(i) for i in range(1, 13) if i != 7] + [EVIL_ARTICLE]
    if reverse:
        ids = ids[::-1]
    lines = []
    for qid in ("1", EVIL_QID, "3"):
        ranking = ids + [SVG]
        for rank, doc in enumerate(ranking, 1):
            tag = SCRIPT if rank % 2 else IMG.replace(" ", "_")
            lines.append(f"{qid} Q0 {doc} {rank} {100 - rank}.5 {tag}")
    return ("\n".join(lines) + "\n").encode()


def run_json() -> bytes:
    """The same kind of run as JSON scores, with a docid containing spaces and markup."""
    return json.dumps({"1": {EVIL_ARTICLE: 3.0, "1": 2.0, IMG: 1.0}, EVIL_QID: {"2": 1.0}}).encode()


#: The length of :func:`huge_id_runs`' ids: far above any message's bound, small enough for a quick test.
HUGE = 1_000_000


def _parquet(rows: list[tuple[str, str, float]], qcol: str = "q_id") -> bytes:
    out = io.BytesIO()
    q, d, s = zip(*rows)
    pq.write_table(pa.table({qcol: list(q), "doc_id": list(d), "score": list(s)}), out)
    return out.getvalue()


def huge_id_runs(n: int = HUGE) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of runs over :func:`questions` whose one article id, or one question id, is
    ``n`` characters long, in every format (JSON, JSON Lines, TREC, CSV, TSV, parquet), then other
    hostile runs of the kind: an ``n``-character score, rank, tag or header, the huge article listed
    twice, and ranks contradicting scores for a huge question. Each gets warnings or errors that
    name the huge value (unknown article or question, short ranking, duplicate, bad number...)."""
    big_doc, big_q = "A" * n, "Q" * n
    cases: list[tuple[str, bytes]] = []
    for what, rows in (("doc", [("1", big_doc, 2.0), ("1", "2", 1.0)]),
                       ("qid", [(big_q, "2", 2.0), (big_q, "3", 1.0), ("1", "2", 1.0)])):
        scores: dict = {}
        for q, d, s in rows:
            scores.setdefault(q, {})[d] = s
        cases += [
            (f"huge-{what}.json", json.dumps(scores).encode()),
            (f"huge-{what}.jsonl", "".join(json.dumps({"qid": q, "docid": d, "score": s}) + "\n"
                                           for q, d, s in rows).encode()),
            (f"huge-{what}.trec", "".join(f"{q} Q0 {d} {r} {s} t\n" for r, (q, d, s) in enumerate(rows, 1)).encode()),
            (f"huge-{what}.csv", ("q_id,doc_id,score\n" + "".join(f"{q},{d},{s}\n" for q, d, s in rows)).encode()),
            (f"huge-{what}.tsv", ("query_id\tdoc_id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows)
                                  ).encode()),
            (f"huge-{what}.parquet", _parquet(rows)),
        ]
    cases += [
        ("huge-score.trec", f"1 Q0 2 1 {'9' * n}x t\n".encode()),
        ("huge-score.json", json.dumps({"1": {"2": [big_doc]}}).encode()),
        ("huge-rank.csv", f"qid,docid,rank\n1,2,{'9' * n}x\n".encode()),
        ("huge-tags.trec", f"1 Q0 2 1 2.0 {big_doc}\n1 Q0 3 2 1.0 {big_q}\n".encode()),
        ("huge-header.csv", f"qid,docid,{big_doc}\n1,2\n".encode()),
        ("huge-columns.csv", f"qid,{big_doc}\n1,2\n".encode()),
        ("huge-twice.trec", f"1 Q0 {big_doc} 1 2.0 t\n1 Q0 {big_doc} 2 1.0 t\n".encode()),
        ("huge-ranks.trec", f"{big_q} Q0 2 2 2.0 t\n{big_q} Q0 3 1 1.0 t\n".encode()),
        ("huge-ranked.json", json.dumps({big_q: [big_doc, [big_doc]]}).encode()),
        ("huge-mixed.json", json.dumps({"1": {"2": 1.0}, big_q: [big_doc]}).encode()),
        ("huge-jsonl-id.jsonl", (json.dumps({"qid": [big_q], "docid": "2", "score": 1}) + "\n").encode()),
        ("huge-column-type.parquet", _parquet_bad_type(big_doc)),
    ]
    return cases


def _parquet_bad_type(name: str) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"qid": ["1"], "docid": ["2"], name: [1.0], "score": [[1.0]]}), out)
    return out.getvalue()
