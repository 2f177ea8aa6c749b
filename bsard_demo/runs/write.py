"""Writing runs: the one TREC / JSON writer (CLI ``run``, the app's built-in run, :meth:`Run.to_trec`).

A ranking is a sequence of ``(article id, score)`` pairs, best first. TREC lines are
``qid Q0 docid rank score tag`` with ranks 1, 2, ... and scores written with ``repr`` (they read
back to the same floats); JSON is ``{qid: {docid: score}}``. Either reads back through
:func:`bsard_demo.runs.read.read_run_bytes` with the same order and no problem when the scores
decrease down each ranking (as a retriever's and :meth:`Run.to_trec`'s do).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

RUN_FORMATS = ("trec", "json")


def format_run(qids: Sequence[str], rankings: Iterable[Sequence[tuple[str, float]]], fmt: str, tag: str) -> str:
    """TREC lines (``qid Q0 docid rank score tag``) or JSON ``{qid: {docid: score}}`` of the
    ``rankings`` of ``qids`` (one ranking per question, in the same order)."""
    if fmt == "json":
        return json.dumps({q: {doc: score for doc, score in ranking} for q, ranking in zip(qids, rankings)},
                          ensure_ascii=False) + "\n"
    if fmt != "trec":
        raise ValueError(f"unknown run format {fmt!r}; choose from {', '.join(RUN_FORMATS)}")
    lines = [f"{q} Q0 {doc} {rank} {score!r} {tag}"
             for q, ranking in zip(qids, rankings) for rank, (doc, score) in enumerate(ranking, 1)]
    return "\n".join(lines) + ("\n" if lines else "")


def write_text_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends; bytes as they are) to ``path`` through a temporary
    file in the same folder, renamed over it: a reader never sees half a file, a failure leaves no
    temporary."""
    path = Path(path).expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else
              os.fdopen(fd, "w", encoding="utf-8", newline="\n")) as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
