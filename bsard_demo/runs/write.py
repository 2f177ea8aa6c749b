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


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc/self/status``:
    no window in which another thread creates a file under umask 0), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_file_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would leave: the file's own when it exists, else 0o666 less the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def write_text_atomic(path: str | os.PathLike, text: str | bytes) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends; bytes as they are) to ``path`` through a temporary
    file in the same folder, renamed over it: a reader never sees half a file, a failure leaves no
    temporary. The file ends with the mode a plain ``open`` gives (644 under umask 022), not
    ``mkstemp``'s 600."""
    path = Path(path).expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, mode)
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else
              os.fdopen(fd, "w", encoding="utf-8", newline="\n")) as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
