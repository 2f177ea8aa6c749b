"""The French text analyzer shared by BM25 (:mod:`bsard_demo.retrievers.bm25`, the tuning grid) and the
app's highlighting (:mod:`bsard_demo.app.highlight`): words, elisions cut, lowercase, stop words
(:data:`FRENCH_STOPWORDS`) dropped, Snowball French stemming on the accented word, then accent folding, so
"Locatives", "locative" and "locatif" all give the term ``locat``. Results are cached per surface form.

The pipeline, step by step: docs/design.md, 'bsard_demo/analyzer.py'.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import re
import unicodedata
from typing import Iterable, Mapping, Sequence

import Stemmer

from .frame_memo import frame_memo

#: Bump when the analysis of any word changes: cached indexes are keyed on it.
ANALYZER_VERSION = 1

#: Article fields indexed by default, outermost header first, then the article's own text.
HEADER_FIELDS: tuple[str, ...] = (
    "reference", "code", "book", "part", "act", "chapter", "section", "subsection", "description",
)
DEFAULT_FIELDS: tuple[str, ...] = HEADER_FIELDS + ("article",)
TEXT_ONLY: tuple[str, ...] = ("article",)

#: Elided forms cut off before an apostrophe (``l'article`` → ``article``).
ELISIONS: tuple[str, ...] = (
    "jusqu", "lorsqu", "puisqu", "quoiqu", "presqu", "quelqu", "qu",
    "c", "d", "j", "l", "m", "n", "s", "t",
)
APOSTROPHES = "'’ʼ‘"
_ELISIONS = frozenset(ELISIONS)
# A word, with the apostrophe that follows it when a word comes right after (``l'``, ``jusqu’``):
# such a word is an elision when it is one of ELISIONS, else the apostrophe is ignored.
_WORD_RE = re.compile(rf"[^\W_]+(?:[{APOSTROPHES}](?=[^\W_]))?")
# The same, letting combining accents (decomposed text) continue a word; slower, used only when
# the text holds any.
_WORD_RE_COMBINING = re.compile(rf"[^\W_](?:[^\W_]|[\u0300-\u036f])*(?:[{APOSTROPHES}](?=[^\W_]))?")
_COMBINING_RE = re.compile(r"[\u0300-\u036f]")


def _word_re(text: str) -> re.Pattern:
    return _WORD_RE_COMBINING if _COMBINING_RE.search(text) else _WORD_RE


_STOPWORDS_TEXT = """
a à au aux avec ce ceci cela ça ces cet cette celui celle celles ceux chez comme dans de des du
dont elle elles en entre et eux il ils je la le les leur leurs lui ma mais me même mêmes mes moi
mon ne ni nos notre nous on ou où par pas pour qu que quel quelle quelles quels qui quoi sa sans
se ses si son sous sur ta te tes toi ton tu un une unes uns vos votre vous y
c d j l m n s t
ai aie aient aies ait as aura aurai auraient aurais aurait auras aurez auriez aurions aurons auront
avaient avais avait avez aviez avions avons ayant ayante ayantes ayants ayez ayons eu eue eues
eurent eus eusse eussent eusses eussiez eussions eut eûmes eût eûtes ont
es est étaient étais était étant étante étantes étants été étée étées étés étiez étions êtes
furent fus fusse fussent fusses fussiez fussions fut fûmes fût fûtes serai seraient serais serait
seras sera serez seriez serions serons seront soient sois soit sommes sont soyez soyons suis
"""


def fold(text: str) -> str:
    """Remove accents (NFKD, combining marks dropped) and spell out ``œ æ ß``."""
    decomposed = unicodedata.normalize("NFKD", text)
    out = "".join(c for c in decomposed if not unicodedata.combining(c))
    return out.translate(_LIGATURES)


_LIGATURES = str.maketrans({"œ": "oe", "Œ": "OE", "æ": "ae", "Æ": "AE", "ß": "ss"})

#: French stop words (Snowball's list — articles, pronouns, prepositions, conjunctions, forms of
#: *être* and *avoir* — plus a few frequent function words), accent-folded.
FRENCH_STOPWORDS: frozenset[str] = frozenset(fold(w) for w in _STOPWORDS_TEXT.split())

_MAX_CACHE = 500_000


def stemmer_version() -> str:
    """The PyStemmer version (it bundles the Snowball algorithms, so it versions the stems)."""
    version = getattr(Stemmer, "version", None)
    if callable(version):
        return f"pystemmer-{version()}"
    return f"pystemmer-{importlib.metadata.version('PyStemmer')}"


def _digest(words: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(words)).encode("utf-8")).hexdigest()[:16]
_DROP = ""


class Analyzer:
    """French analyzer: ``tokens`` for indexing/searching, ``spans`` for highlighting.

    Both see the same terms in the same order: ``[t for *_, t in a.spans(x)] == a.tokens(x)``.
    Instances are cheap; the stem cache is per instance.
    """

    def __init__(self, stem: bool = True, stopwords: bool = True, keep_numbers: bool = True):
        self.stem = bool(stem)
        self.stopwords = bool(stopwords)
        self.keep_numbers = bool(keep_numbers)
        self._stemmer = Stemmer.Stemmer("french") if self.stem else None
        self._cache: dict[str, str] = {}

    def settings(self) -> dict[str, object]:
        """What shapes the terms (for cache keys): the flags, :data:`ANALYZER_VERSION`, the
        PyStemmer (Snowball) version when stemming, and digests of the stop-word and elision
        lists (so an edit of either gives another key even if the version was not bumped)."""
        return {"analyzer_version": ANALYZER_VERSION, "stem": self.stem, "stopwords": self.stopwords,
                "keep_numbers": self.keep_numbers, "stemmer": stemmer_version() if self.stem else None,
                "stopwords_digest": _digest(FRENCH_STOPWORDS) if self.stopwords else None,
                "elisions_digest": _digest(ELISIONS)}

    def __repr__(self) -> str:
        return f"Analyzer(stem={self.stem}, stopwords={self.stopwords}, keep_numbers={self.keep_numbers})"

    def term(self, word: str) -> str | None:
        """The term of one word, or ``None`` when it is dropped (a word ending in an apostrophe
        is an elision when it is one of :data:`ELISIONS`)."""
        cached = self._cache.get(word)
        if cached is None:
            cached = self._analyze(word)
        return cached or None

    def _analyze(self, word: str) -> str:
        lower = unicodedata.normalize("NFC", word.lower())
        if lower and lower[-1] in APOSTROPHES:
            lower = lower[:-1]
            elided = lower in _ELISIONS
        else:
            elided = False
        folded = fold(lower)
        if elided or not folded or (self.stopwords and folded in FRENCH_STOPWORDS):
            term = _DROP
        elif folded[0].isdigit():
            term = folded if self.keep_numbers else _DROP
        elif self._stemmer is not None:
            term = fold(self._stemmer.stemWord(lower))
        else:
            term = folded
        if len(self._cache) >= _MAX_CACHE:
            self._cache = {}  # a new dict: a tokens() call in progress keeps reading the old one
        self._cache[word] = term
        return term

    def tokens(self, text: str) -> list[str]:
        """The terms of ``text`` in order (repeats kept)."""
        if not text:
            return []
        cache = self._cache
        analyze = self._analyze
        terms = [cache[w] if w in cache else analyze(w) for w in _word_re(text).findall(text)]
        return [t for t in terms if t]

    def tokens_many(self, texts: Iterable[str]) -> list[list[str]]:
        return [self.tokens(t) for t in texts]

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, term)`` for each kept word: ``text[start:end]`` is the word as written
        (without its elided prefix), ``term`` its analyzed form."""
        out = []
        text = text or ""
        for m in _word_re(text).finditer(text):
            term = self.term(m.group())
            if term:
                start, end = m.span()
                if text[end - 1] in APOSTROPHES:
                    end -= 1
                out.append((start, end, term))
        return out


def article_text(row: Mapping[str, object], fields: Sequence[str] = DEFAULT_FIELDS) -> str:
    """What is indexed for one article: its non-empty ``fields`` in the given order, one per line;
    a value repeated in two fields is kept once. Missing fields count as empty."""
    return _joined(row.get(f, "") for f in fields)


def _joined(values: Iterable[object]) -> str:
    """The non-empty ``values`` (stripped; None and NaN empty), each once, in order, one per line."""
    seen: dict[str, None] = {}
    for value in values:
        text = "" if value is None or (isinstance(value, float) and value != value) else str(value).strip()
        if text:
            seen.setdefault(text, None)
    return "\n".join(seen)


def article_texts(articles, fields: Sequence[str] = DEFAULT_FIELDS) -> list[str]:
    """:func:`article_text` of every row of an articles DataFrame, in row order. Memoised per frame
    while :func:`~bsard_demo.frame_memo.keeping` is open (a command's or a page's builds: the corpus'
    fingerprints and indexes read the same 29k texts)."""
    fields = tuple(fields)
    return list(frame_memo(articles, ("article_texts", fields), lambda: tuple(_texts(articles, fields)), keep=False))


def _texts(articles, fields: Sequence[str]) -> list[str]:
    columns = [f for f in fields if f in articles.columns]
    if not columns:
        return [""] * len(articles)
    # article_text of each row, its values read column by column (no dict per row)
    return [_joined(values) for values in zip(*(articles[c].tolist() for c in columns))]
