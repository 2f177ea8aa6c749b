"""The Score page's uploads: read the visitor's run files and the built-in runs, and score them through
:func:`bsard_demo.evaluation.scoring.score_runs` (the service ``evaluate`` calls, so every figure equals the
CLI's); the problems table; the notices of files refused or left unread.

At most :data:`MAX_FILES` files are read: a run costs about 20 times its text in memory.
"""
from __future__ import annotations

import hashlib
from typing import Hashable, Sequence

import pandas as pd

from ..dataset import Dataset
from ..evaluation import DEFAULT_KS
from ..evaluation.scoring import Limits, RunSource, Scoreboard, score_runs
from ..runs import ProblemList, Run, warm
from . import french
from .problem_words import DISTANCES_LABEL, problem_fr

SEVERITY_FR = {"error": "erreur", "warning": "avertissement"}
#: The reader's words for a problem's hint (:data:`bsard_demo.runs.problems.HINTS`), in the technical details
#: (the reader's English, as the CLI's): they name both front ends.
PROBLEM_HINTS = {
    "read_as_distances": f"use --lower-is-better (CLI) / tick « {DISTANCES_LABEL} » under the file (Score page)",
    "read_as_similarities": f"if higher scores are better, drop --lower-is-better (CLI) / untick « {DISTANCES_LABEL} » "
                            "(Score page)",
}
#: The formats and conventions under the uploader (« Formats acceptés et conventions »).
FORMATS_HELP = """
Formats reconnus (détectés d'après le contenu, fichiers `.gz` acceptés) :

- **TREC** : `qid Q0 docid rang score tag` (6 colonnes) ;
- **3 colonnes** : `qid docid rang` ou `qid docid score` ;
- **CSV** avec en-tête : `qid`, `docid`, `score` et/ou `rank` ;
- **JSON** : `{"qid": {"docid": score}}` ou `{"qid": ["docid", …]}` ;
- **JSON Lines** : `{"qid": …, "docid": …, "score": …}` par ligne.
- **Parquet** (comme ranx l'écrit) : colonnes `qid`/`query_id`, `docid`/`doc_id`, `score` et/ou `rank` ;
- **LZ4 de ranx** (`Run.save(…, kind="lz4")`), lu comme son JSON.

Chaque question du split compte (absente du run : 0). Les articles sont classés par score décroissant,
égalités départagées par identifiant décroissant (règle de trec_eval) ; cochez « scores = distances » sous
un fichier dont les scores sont des distances (plus petit = meilleur) : ses articles sont alors classés
par score croissant. Les valeurs sont celles de `python -m bsard_demo evaluate`.
"""
PROBLEM_COLUMNS = ["ligne", "gravité", "problème", "code"]
#: Uploaded files scored at once (each may hold up to the upload limit, and a run costs about 20
#: times its text in memory); the page does not read the others.
MAX_FILES = 10
#: The uploader's help (Streamlit's own words on its drop zone are hidden: bsard_demo.app.style).
UPLOAD_HELP = ("Glissez vos fichiers de run sur le cadre, ou touchez « Choisir des fichiers ». Formats : TREC, "
               "3 colonnes, CSV, JSON, JSON Lines, parquet, compressés en gzip ou non (détails ci-dessous).")
#: The labels uploader's help (bsard_demo.runs.qrels_read reads every layout named).
LABELS_HELP = ("Pour évaluer contre d'autres étiquettes que celles du split : qrels TREC (q 0 article pertinence), "
               "JSON de ranx, CSV/TSV ou parquet avec q_id, doc_id et relevance, LZ4 de ranx ; compressé en gzip "
               "ou non. Une pertinence > 0 compte comme pertinente.")
#: Built-in runs kept per process, and how long a scoreboard or a built-in run is kept.
SCOREBOARD_ENTRIES, SCOREBOARD_TTL_S = 4, 3600
#: What the scoreboards kept per process may weigh together (:attr:`~bsard_demo.evaluation.scoring.Scoreboard.nbytes`;
#: the newest is always kept):
#: a board of ten runs of 150 questions cut at rank 1,000 weighs ~40 MB.
SCOREBOARD_BUDGET = 256 * 2**20


def too_many_files(ignored: Sequence[str], limit: int = MAX_FILES, budget_mb: int | None = None) -> str:
    """The French notice for the uploads beyond ``limit`` files or ``budget_mb`` MB in all (names as given:
    escape them to render)."""
    names = ", ".join(f"« {n} »" for n in ignored)
    most = f"Au plus {limit} fichiers" + (f" et {budget_mb} Mo en tout" if budget_mb else "")
    return (f"{most} sont évalués à la fois : {len(ignored)} fichier(s) en trop n'ont pas été lus "
            f"({names}). Retirez des fichiers (×) pour évaluer les autres.")


def budget_words(limit_mb: int, budget_mb: int, limit_files: int = MAX_FILES) -> str:
    """The uploader's French label: what a visitor may upload (files, MB a file, MB in all)."""
    return (f"Fichiers de run (jusqu'à {limit_files} fichiers de {limit_mb} Mo chacun, "
            f"{budget_mb} Mo en tout par visiteur)")


def upload_too_large(size: int, limit_bytes: int) -> str:
    """The French error of an upload above the limit (the reader's ``size_message``)."""
    return (f"fichier de {french.decimal(size / 2**20, 1)} Mo, au-delà de la limite de "
            f"{french.decimal(limit_bytes / 2**20, 0)} Mo")


def score_files(files: Sequence[tuple[str, bytes]], dataset: Dataset, split: str = "test",
                ks: Sequence[int] = DEFAULT_KS, *, limit_bytes: int | None = None,
                lower_is_better: Sequence[bool] = (), runs: Sequence[tuple[str, Run]] = ()) -> Scoreboard:
    """:func:`bsard_demo.evaluation.scoring.score_runs` of the ``(name, bytes)`` uploads, then the
    ``(name, Run)`` built-in ``runs``, against ``split``.

    ``limit_bytes`` (default: the reader's own cap) is the size limit of an upload, raw or
    inflated: a larger file is not read and gets the :func:`upload_too_large` error, a
    compressed one inflating past it gets the reader's error. ``lower_is_better[i]`` says that
    the scores of ``files[i]`` are distances (the CLI's ``--lower-is-better``; default: no)."""
    return score_sources(run_sources(files, lower_is_better, runs), dataset, split, ks, limit_bytes=limit_bytes)


def score_sources(sources: Sequence[RunSource], dataset: Dataset, split: str = "test", ks: Sequence[int] = DEFAULT_KS,
                  *, limit_bytes: int | None = None) -> Scoreboard:
    """:func:`score_files` of sources already made (:func:`run_sources`)."""
    limits = Limits(limit_bytes, upload_too_large) if limit_bytes else Limits()
    return score_runs(dataset, split, sources, ks, limits=limits)


def run_sources(files: Sequence[tuple[str, bytes]], lower_is_better: Sequence[bool] = (),
                runs: Sequence[tuple[str, Run]] = ()) -> list[RunSource]:
    """The scoring service's sources of the ``(name, bytes)`` uploads (``lower_is_better[i]``: the
    scores of ``files[i]`` are distances; default no), then of the ``(name, Run)`` built-in runs."""
    flags = list(lower_is_better) + [False] * (len(files) - len(lower_is_better))
    sources = [RunSource.upload(name, data, lower_is_better=bool(lower)) for (name, data), lower in zip(files, flags)]
    return sources + [RunSource.built(name, run) for name, run in runs]


def scoreboard_key(data_key: Hashable, split: str, files: Sequence[tuple[str, bytes]],
                   built: Sequence[tuple[str, Run, bytes]], limit: int, lower_is_better: Sequence[bool]) -> tuple:
    """What a scoreboard is remembered by: the dataset, split, each file's name, sha256 and size (a
    built-in run's: its TREC file's), how many are uploads, the size limit and each upload's score
    orientation (``lower_is_better``, parallel to ``files``). Two visitors with the same files share it."""
    blobs = list(files) + [(name, blob) for name, _, blob in built]
    digests = tuple((name, hashlib.sha256(blob).hexdigest(), len(blob)) for name, blob in blobs)
    return (data_key, split, digests, len(files), limit, tuple(bool(x) for x in lower_is_better))


def prepare_reader() -> None:
    """Start the child-process reader of parquet uploads (:mod:`bsard_demo.runs.sandbox`) while
    the visitor picks files, so the first upload does not wait for pyarrow to load (idempotent)."""
    warm()


def problems_frame(problems: ProblemList) -> pd.DataFrame:
    """The problems of one file as a table: ``ligne`` (1-based, empty for the whole file),
    ``gravité`` (erreur / avertissement), ``problème`` (the code's French sentence:
    :func:`~bsard_demo.app.problem_words.problem_fr`), ``code`` (the stable code, as in the CLI's JSON); the
    reader's order (file-level first), then the checks' findings."""
    rows = [{"ligne": p.line, "gravité": SEVERITY_FR.get(p.severity, p.severity),
             "problème": problem_fr(p.code, p.hint, p.message), "code": p.code} for p in problems]
    df = pd.DataFrame(rows, columns=PROBLEM_COLUMNS)
    df["ligne"] = df["ligne"].astype("Int64")
    return df


def problem_details(problems: ProblemList) -> pd.DataFrame:
    """The reader's own messages (English, with the figures and ids), the technical details of
    :func:`problems_frame`: ``ligne``, ``code``, ``message``."""
    rows = [{"ligne": p.line, "code": p.code, "message": p.text(PROBLEM_HINTS)} for p in problems]
    df = pd.DataFrame(rows, columns=["ligne", "code", "message"])
    df["ligne"] = df["ligne"].astype("Int64")
    return df
