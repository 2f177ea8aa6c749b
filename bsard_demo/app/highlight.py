"""Safe rendering of user and dataset text in the app: HTML escaping, term highlighting (with the shared
:class:`~bsard_demo.analyzer.Analyzer`), Markdown escaping; used by both pages and :mod:`bsard_demo.app.render`.

Conventions: docs/design.md, 'bsard_demo/app/highlight.py'.
"""
from __future__ import annotations

import html
import re
from typing import Iterable

from ..analyzer import Analyzer

_DEFAULT = Analyzer()
#: How far past ``max_chars`` a preview may run to finish its last word.
WORD_OVERRUN = 40
#: Characters with a meaning in (Streamlit's CommonMark + GFM) Markdown, escaped by :func:`md_escape`.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&\"'])")


#: Words of a question too common to be worth a highlight (the stop words aside): the forms of « pouvoir »,
#: « devoir », « falloir », « faire », « vouloir », « avoir », « être », « aller » a question is asked with.
QUIET_WORDS = ("peut peux peuvent pouvez pouvons pourrait pourrais pourraient puis puisse doit dois doivent devez "
               "devons devrait devrais faut faudrait fait fais faire font faites veut veux veulent voudrais voudrait "
               "avoir être aller va vais vont")
_QUIET = frozenset(_DEFAULT.tokens(QUIET_WORDS))
#: Terms shorter than this are not highlighted (« a », « y », a stray letter).
MIN_TERM = 3


def query_terms(question: str, analyzer: Analyzer | None = None) -> frozenset[str]:
    """The analyzed terms of ``question`` worth a highlight: stop words dropped, stems accent-folded,
    without the common verbs of :data:`QUIET_WORDS` nor terms under :data:`MIN_TERM` characters."""
    quiet = _QUIET if analyzer is None else frozenset(analyzer.tokens(QUIET_WORDS))
    return frozenset(t for t in (analyzer or _DEFAULT).tokens(question or "") if len(t) >= MIN_TERM and t not in quiet)


def highlight_html(text: str, terms: Iterable[str], analyzer: Analyzer | None = None, *,
                   max_chars: int | None = None, newlines: bool = True) -> str:
    """``text`` escaped, with every word whose term is in ``terms`` wrapped in ``<mark>``.

    ``max_chars`` keeps about that many characters of ``text`` (up to the end of the word it
    falls in, at most :data:`WORD_OVERRUN` more) and appends "…" when something was cut. ``newlines`` turns line
    breaks into ``<br>``.
    """
    text = "" if text is None else str(text)
    wanted = frozenset(terms)
    cut = len(text)
    if max_chars is not None and len(text) > max_chars:
        start = max(0, int(max_chars))
        m = re.compile(r"\S*").match(text, start)
        cut = m.end() if m and m.end() - start <= WORD_OVERRUN else start
    out: list[str] = []
    pos = 0
    if wanted:
        for start, end, term in (analyzer or _DEFAULT).spans(text[:cut]):
            if term in wanted:
                out.append(_esc(text[pos:start], newlines))
                out.append(f"<mark>{_esc(text[start:end], newlines)}</mark>")
                pos = end
    out.append(_esc(text[pos:cut], newlines))
    if cut < len(text):
        out.append(" …")
    return "".join(out)


def matched_terms(text: str, terms: Iterable[str], analyzer: Analyzer | None = None) -> list[str]:
    """The words of ``text`` (as written, first occurrence order, no repeats) whose term is in ``terms``."""
    wanted = frozenset(terms)
    seen: dict[str, None] = {}
    for start, end, term in (analyzer or _DEFAULT).spans(text or ""):
        if term in wanted:
            seen.setdefault(text[start:end], None)
    return list(seen)


def escape_html(text: object) -> str:
    """``html.escape`` of ``str(text)`` (quotes included); ``None`` gives ``""``."""
    return "" if text is None else html.escape(str(text), quote=True)


def md_escape(text: object) -> str:
    """``text`` with Markdown (and embedded HTML) neutralised: every special character is
    backslash-escaped, line breaks become spaces. For labels and captions rendered as Markdown."""
    plain = "" if text is None else re.sub(r"\s+", " ", str(text)).strip()
    return _MD_SPECIAL.sub(r"\\\1", plain)


def _esc(text: str, newlines: bool) -> str:
    escaped = html.escape(text, quote=True)
    return escaped.replace("\r\n", "\n").replace("\n", "<br>") if newlines else escaped
