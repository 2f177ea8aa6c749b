"""Where a run's misses land, on the Score page: each missed gold article classed by the closest article
the run did retrieve in its top k (:func:`bsard_demo.evaluation.misses.board_misses`, the figures of
``evaluate --misses``), as chart data per run and for A against B, and as the drill-down's line for
one question. Labels are French here; the library keeps its own English ones.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import pandas as pd

from ..evaluation.misses import CLASSES, WINDOW, Misses
from ..evaluation.scoring import Scoreboard
from . import french

MISSES_K = "misses_k"  # session: the cut-off of the misses' chart, A-vs-B chart and drill-down line
#: The classes of a miss, nearest first, in French.
CLASS_FR = {"section": f"même section (≤ {WINDOW} articles)", "chapter": "même chapitre",
            "book": "même livre ou titre", "code": "même code", "elsewhere": "ailleurs",
            "unknown": "hors du corpus"}
#: What the page says about the classes (under the charts).
MISSES_HELP = (f"Chaque article pertinent absent des k premiers est classé par l'article retrouvé (dans ces k) "
               f"le plus proche de lui dans le code : même section et à {WINDOW} articles au plus, même chapitre, "
               "même livre ou titre, même code, ailleurs. Un niveau que le corpus n'a pas est sauté. Un raté « même "
               "section » est un raté de peu : son voisin a été trouvé. Les mêmes nombres que "
               "`python -m bsard_demo evaluate --misses FICHIER`.")


def class_labels() -> list[str]:
    """The French labels of the classes, nearest first (a chart's colour order)."""
    return [CLASS_FR[c] for c in CLASSES]


def misses_frame(misses: Mapping[str, Misses], k: int) -> pd.DataFrame:
    """Chart data at cut-off ``k``: one row per run (in order) and class, columns ``run, class, order,
    count, share, missed`` (``share`` of that run's misses at k; every class present)."""
    rows = []
    for name in misses:
        counts = misses[name].counts().loc[k]
        missed = int(counts["missed"])
        for order, cls in enumerate(CLASSES):
            n = int(counts[cls])
            rows.append({"run": name, "class": CLASS_FR[cls], "order": order, "count": n,
                         "share": n / missed if missed else 0.0, "missed": missed})
    return pd.DataFrame(rows, columns=["run", "class", "order", "count", "share", "missed"])


def board_misses_frame(board: Scoreboard, misses: Mapping[str, Misses], k: int) -> pd.DataFrame:
    """:func:`misses_frame` of ``board``'s own ``misses`` (:func:`bsard_demo.evaluation.misses.board_misses`
    of that board) at ``k``, made once per board and cut-off (:meth:`~bsard_demo.evaluation.scoring.Scoreboard.memo`;
    shared: read it, never change it)."""
    return board.memo(("misses", int(k)), lambda: misses_frame(misses, k))


def runs_rows(frame: pd.DataFrame, runs: Sequence[str]) -> pd.DataFrame:
    """The rows of ``runs`` (in that order) of a :func:`misses_frame`: the A-vs-B chart's data, read from the
    per-run chart's frame instead of counted again."""
    return pd.concat([frame[frame["run"] == name] for name in runs] or [frame.iloc[:0]], ignore_index=True)


def totals_line(frame: pd.DataFrame, k: int) -> str:
    """How many gold articles each run of a :func:`misses_frame` misses at ``k`` (plain text: escape it)."""
    totals = frame.drop_duplicates("run")
    return (f"Articles pertinents manqués dans le top {k} : "
            + " ; ".join(f"{run} {french.integer(int(n))}" for run, n in zip(totals["run"], totals["missed"])) + ".")


def question_line(lines: pd.DataFrame, k: int) -> str:
    """The drill-down's line for one question at ``k``, from its missed articles ``lines``
    (:meth:`~bsard_demo.evaluation.misses.Misses.question_lines`; plain text: escape it to render)."""
    if not len(lines):
        return f"Aucun article pertinent manqué dans le top {k}."
    counts = lines["class"].value_counts()
    parts = [f"{int(counts[c])} {CLASS_FR[c]}" for c in CLASSES if c in counts]
    return f"Articles pertinents manqués dans le top {k} : {len(lines)} — " + ", ".join(parts) + "."


def nearest_notes(lines: pd.DataFrame, k: int, references: Mapping[str, str]) -> dict[str, str]:
    """For each gold article of one question missed at ``k`` (its ``lines``, as :func:`question_line`'s):
    where it lands, and the nearest retrieved article (its reference from ``references`` when known,
    else its id) with its rank (plain text)."""
    notes = {}
    for row in lines.to_dict("records"):
        note = f"manqué dans le top {k} : {CLASS_FR[row['class']]}"
        nearest, rank = row["nearest_id"], row["nearest_rank"]
        if isinstance(nearest, str) and nearest and not pd.isna(rank):
            shown = references.get(nearest) or f"article {nearest}"
            note += f", le plus proche retrouvé : {shown} (rang {french.integer(int(rank))})"
        notes[str(row["article_id"])] = note
    return notes


def drill_misses(misses: Mapping[str, Misses] | None, run_name: str, qid: str, k: int,
                 reference: Callable[[str], str]) -> tuple[str | None, dict[str, str]]:
    """The drill-down's misses of ``run_name`` on question ``qid`` at ``k``: its line (:func:`question_line`; None
    without the misses) and the notes of its gold articles (:func:`nearest_notes`; ``reference`` names an article)."""
    if misses is None or run_name not in misses:
        return None, {}
    lines = misses[run_name].question_lines(qid, k)  # one filter of the run's misses, read three ways
    references = {a: reference(a) for a in set(lines["nearest_id"].dropna())}
    return question_line(lines, k), nearest_notes(lines, k, references)
