"""The BSARD data model: a corpus of articles and labelled question splits.

Conventions:
- every id (article, question) is a string, because run files and trec_eval compare ids as
  strings; ``"0947"`` and ``"947"`` are different ids.
- missing or empty text fields are ``""``, never NaN.
- a question's ``article_ids`` is a tuple of distinct article ids in first-seen order (repeated
  ids in the source are collapsed: real test question 274 lists article 1102 twice).
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Mapping, TypeVar

import pandas as pd

T = TypeVar("T")
ARTICLE_COLUMNS = (
    "id", "reference", "article", "law_type", "code", "book", "part", "act",
    "chapter", "section", "subsection", "description",
)
#: Headers that place an article in its code, outermost first.
HIERARCHY_COLUMNS = ("code", "book", "part", "act", "chapter", "section", "subsection")
QUESTION_COLUMNS = ("id", "category", "subcategory", "question", "extra_description", "article_ids")
#: The 2021 release of the corpus used these columns.
LEGACY_ARTICLE_COLUMNS = ("id", "article", "code", "article_no", "description", "law_type")


class DataError(ValueError):
    """A dataset file or folder that cannot be used; the message says what and where.

    ``advice``, when set, is the code of what the user may do instead, for a front end to word
    (the CLI: :data:`bsard_demo.cli.common.DATA_ADVICE`): ``"other_source"`` (use the sample or
    a folder), ``"other_source_or"`` (the same, as an aside) or ``"data_words"`` (what ``--data``
    takes). The message itself carries no front end's wording."""

    def __init__(self, message: str = "", *, advice: str | None = None):
        super().__init__(message)
        self.advice = advice


#: An article id is free text without separators (``947``, ``art-12``), but a bracket, brace or
#: quote left in a token means a list written in another syntax (``{947,948}``), not an id.
_ID_TOKEN = re.compile(r"[^\[\]{}()\"']+")
#: Spellings of "no value" that spreadsheets and pandas write into CSV cells.
_EMPTY_TOKENS = {"nan", "none", "null", "<na>"}


def parse_article_ids(value: object) -> tuple[str, ...]:
    """Parse a question's gold article ids.

    Accepts a comma/semicolon/space separated string (``"947,948"``), a single integer, a float
    that is an integer (pandas' ``947.0``), a list/tuple, or a JSON list string (``"[947, 948]"``).
    Repeated ids collapse, first occurrence kept; ``nan``/``None``/``null`` cells mean no id.
    Raises :class:`ValueError` on anything else (e.g. ``"{947,948}"``, a fraction).
    """
    if value is None:
        return ()
    if isinstance(value, bool):
        raise ValueError(f"not an article id list: {value!r}")
    if isinstance(value, int):
        items: Iterable[object] = [value]
    elif isinstance(value, float):
        if value != value:  # NaN
            return ()
        if not value.is_integer():
            raise ValueError(f"not an article id: {value!r}")
        items = [int(value)]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                parsed = text[1:-1]
            return parse_article_ids(parsed if isinstance(parsed, list) else str(parsed))
        items = [t for t in re.split(r"[,;\s]+", text) if t]
    else:
        items = list(value)  # numpy arrays and other iterables
    out: dict[str, None] = {}
    for item in items:
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        token = str(item).strip().strip("'\"")
        if not token or token.lower() in _EMPTY_TOKENS:
            continue
        if token.endswith(".0") and token[:-2].isdigit():
            token = token[:-2]
        if not _ID_TOKEN.fullmatch(token):
            raise ValueError(f"not an article id: {token!r}")
        out.setdefault(token, None)
    return tuple(out)


def _fill_text(df: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    for col in columns:
        if col not in df.columns:
            df[col] = ""
        else:
            df[col] = df[col].fillna("").astype(str).str.strip()
    return df


def normalize_articles(raw: pd.DataFrame, *, source: str = "articles.csv") -> pd.DataFrame:
    """Bring an articles table to :data:`ARTICLE_COLUMNS` (string columns, unique string ids).

    Accepts the current hub layout, the 2021 layout (``article_no`` becomes the reference
    ``"Art. <no>, <code>"``) and tables lacking any hierarchy/description column.
    Extra columns are kept. Raises :class:`DataError` when ``id`` or ``article`` is missing or ids
    repeat.
    """
    df = raw.copy()
    df.columns = [str(c).strip().lower().lstrip("\ufeff") for c in df.columns]
    missing = [c for c in ("id", "article") if c not in df.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}")
    df = _fill_text(df, [c for c in ARTICLE_COLUMNS if c != "id"]
                    + (["article_no"] if "article_no" in df.columns else []))
    if "article_no" in df.columns:
        no_ref = df["reference"] == ""
        df.loc[no_ref, "reference"] = [
            ", ".join(p for p in (f"Art. {no}" if no else "", code) if p)
            for no, code in zip(df.loc[no_ref, "article_no"], df.loc[no_ref, "code"])
        ]
    df["id"] = df["id"].map(_clean_id)
    bad = df.index[df["id"] == ""].tolist()
    if bad:
        raise DataError(f"{source}: empty id on line(s) {_lines(bad)}")
    dup = df["id"].duplicated(keep=False)
    if dup.any():
        ids = sorted(set(df.loc[dup, "id"]))[:10]
        raise DataError(f"{source}: repeated article id(s) {', '.join(ids)} on line(s) "
                        f"{_lines(df.index[dup].tolist())}")
    ordered = list(ARTICLE_COLUMNS) + [c for c in df.columns if c not in ARTICLE_COLUMNS]
    return df[ordered].reset_index(drop=True)


def normalize_questions(raw: pd.DataFrame, *, source: str = "questions.csv") -> pd.DataFrame:
    """Bring a questions table to :data:`QUESTION_COLUMNS`; ``article_ids`` becomes a tuple of str.

    Raises :class:`DataError` listing every line with an unreadable ``article_ids`` or id.
    """
    df = raw.copy()
    df.columns = [str(c).strip().lower().lstrip("\ufeff") for c in df.columns]
    missing = [c for c in ("id", "question", "article_ids") if c not in df.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}")
    df = _fill_text(df, ("category", "subcategory", "question", "extra_description"))
    df["id"] = df["id"].map(_clean_id)
    problems: list[str] = []
    parsed: list[tuple[str, ...]] = []
    for i, value in enumerate(df["article_ids"]):
        try:
            parsed.append(parse_article_ids(value))
        except (ValueError, TypeError) as exc:
            problems.append(f"line {i + 2}: {exc}")
            parsed.append(())
    df["article_ids"] = parsed
    empty_ids = df.index[df["id"] == ""].tolist()
    if empty_ids:
        problems.append(f"empty question id on line(s) {_lines(empty_ids)}")
    dup = df["id"].duplicated(keep=False) & (df["id"] != "")
    if dup.any():
        problems.append(f"repeated question id(s) {', '.join(sorted(set(df.loc[dup, 'id']))[:10])} on line(s) "
                        f"{_lines(df.index[dup].tolist())}")
    if problems:
        raise DataError(f"{source}: " + "; ".join(problems[:20])
                        + (f"; … {len(problems) - 20} more" if len(problems) > 20 else ""))
    ordered = list(QUESTION_COLUMNS) + [c for c in df.columns if c not in QUESTION_COLUMNS]
    return df[ordered].reset_index(drop=True)


def read_csv_table(data: bytes, *, source: str) -> pd.DataFrame:
    """Read CSV bytes (UTF-8, BOM and CRLF accepted) into an all-string DataFrame.

    Raises :class:`DataError` naming the line for undecodable bytes or malformed rows.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{source}: not UTF-8 text (bad byte on line {line})") from None
    if not text.strip():
        raise DataError(f"{source}: the file is empty")
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(f"{source}: not a readable CSV ({first_line(exc, with_type=False)})") from None
    if not isinstance(df.index, pd.RangeIndex):  # pandas made the surplus leading fields an index
        raise DataError(f"{source}: not a readable CSV (every row has more fields than the header line)")
    return df


@dataclass
class Dataset:
    """A corpus (``None`` when only questions are available) and named question splits.

    ``kind`` is ``"hub"``, ``"local"`` or ``"sample"``; ``fictional`` is true for the bundled
    sample, whose articles are invented and must be shown as such. ``files`` are the paths of the
    files read, by file name (``articles.csv``, ``questions_test.csv``…), for the reproducibility
    stamp (:mod:`bsard_demo.evaluation.stamp`), which hashes them and shows no path.
    """

    name: str
    kind: str
    articles: pd.DataFrame | None
    splits: Mapping[str, pd.DataFrame]
    fictional: bool = False
    files: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    _qrels: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # not shared by replace()

    @property
    def split_names(self) -> list[str]:
        order = {"test": 0, "train": 1}
        return sorted(self.splits, key=lambda s: (order.get(s, 2), s))

    def questions(self, split: str = "test") -> pd.DataFrame:
        if split not in self.splits:
            raise DataError(f"no split '{split}' in {self.name}; available: {', '.join(self.split_names) or 'none'}")
        return self.splits[split]

    def questions_of(self, splits: str | Iterable[str]) -> pd.DataFrame:
        """The questions of one or more splits (:func:`parse_splits`: ``"train,synthetic"``), in that order, as
        one frame with a ``split`` column and a ``key`` column unique over the union: the question's id for one
        split, ``split:id`` for several (ids of different splits may repeat). One split's frame keeps its
        rows, order and columns (plus the two)."""
        names = parse_splits(splits)
        frames = [self.questions(name) for name in names]  # DataError names an absent split
        many = len(names) > 1
        out = pd.concat([f.assign(split=name, key=[f"{name}:{q}" if many else q for q in f["id"]])
                         for name, f in zip(names, frames)], ignore_index=True)
        return out

    def absent_splits(self, splits: str | Iterable[str]) -> list[str]:
        """The names of ``splits`` (:func:`parse_splits`: ``"train,synthetic"``) this dataset lacks, in order."""
        return [name for name in parse_splits(splits) if name not in self.splits]

    def check_splits(self, splits: str | Iterable[str], need: str = "") -> str:
        """The names of ``splits`` (:func:`parse_splits`) joined by commas (``"train,synthetic"``: the form a
        model's record keeps), or :class:`DataError` naming every absent one (``need``: what needs them, said
        first)."""
        names = parse_splits(splits)
        absent = self.absent_splits(names)
        if absent:
            raise DataError(f"{need}{': ' if need else ''}no split '{', '.join(absent)}' in {self.name} "
                            f"(available: {', '.join(self.split_names) or 'none'})")
        return ",".join(names)

    def qrels(self, split: str = "test") -> dict[str, frozenset[str]]:
        """Gold article ids per question id of ``split``."""
        if split not in self._qrels:
            q = self.questions(split)
            self._qrels[split] = {qid: frozenset(ids) for qid, ids in zip(q["id"], q["article_ids"])}
        return self._qrels[split]

    @property
    def article_ids(self) -> frozenset[str] | None:
        # once per dataset object: a page asked for it 2-3 times a visit (~7 % of a deep link's CPU)
        return None if self.articles is None else self.memo("article_ids", lambda: frozenset(self.articles["id"]))

    def article(self, article_id: str) -> dict[str, object] | None:
        """One article row by id (:meth:`row`), or ``None``."""
        if self.articles is None:
            return None
        pos = self._article_index().get(str(article_id))
        return None if pos is None else self.row(pos)

    def row(self, pos: int) -> dict[str, object]:
        """Article row ``pos`` (corpus order) as ``{column: value}``, the values ``articles.iloc[pos]``
        holds, read column by column: a frame row's ``iloc`` builds a new array of the row (78 µs), and the
        Search page reads hundreds of rows a visit (a section's articles around its hits). Arrow-backed
        text columns are read from their Arrow arrays (no copy): pandas' item access checks its indexer
        each time, 33 µs a row of frlaw-dev's 12 columns against 14 µs."""
        columns = self.memo("columns", lambda: [_column_reader(self.articles[c]) for c in self.articles.columns])
        out = {}
        for name, values, arrow, na in columns:
            if arrow:
                value = values[pos].as_py()
                out[name] = na if value is None else value
            else:
                out[name] = values[pos]
        return out

    def article_position(self, article_id: str) -> int | None:
        """An article's row number in the corpus (its order in ``articles.csv``), or ``None``."""
        if self.articles is None:
            return None
        return self._article_index().get(str(article_id))

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per dataset object and ``key``: facts derived from the data alone (an
        option list, the corpus's codes), which the app's process-wide dataset would otherwise
        recompute at every visit (a walk of 29k articles was ~8 % of a landing visit's server CPU,
        docs/benchmarks.md "Per-visit cost"). Two threads may both compute; one result is kept."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _article_index(self) -> dict[str, int]:
        return self.memo("article_index", lambda: {a: i for i, a in enumerate(self.articles["id"])})


def parse_splits(value: str | Iterable[str]) -> tuple[str, ...]:
    """Split names from ``"train,synthetic"`` (or a sequence of names): stripped, empty ones dropped, repeats
    collapsed, order kept. :class:`DataError` when none is left."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(dict.fromkeys(str(n).strip() for n in items if str(n).strip()))
    if not names:
        raise DataError(f"no split named in {str(value)!r} (e.g. train or train,synthetic)")
    return names


def hierarchy(article: Mapping[str, object]) -> list[str]:
    """The non-empty headers placing an article in its code, outermost first."""
    return [str(article.get(c, "")) for c in HIERARCHY_COLUMNS if str(article.get(c, "") or "").strip()]


def _clean_id(value: object) -> str:
    text = "" if value is None else str(value).strip()
    if text.endswith(".0") and text[:-2].isdigit():
        text = text[:-2]
    return text


def _lines(index_positions: list[int]) -> str:
    lines = [str(i + 2) for i in index_positions[:10]]  # +1 for 1-based, +1 for the header
    more = len(index_positions) - 10
    return ", ".join(lines) + (f" (+{more} more)" if more > 0 else "")


def first_line(exc: BaseException, *, limit: int = 300, with_type: bool = True) -> str:
    """The first line of ``exc``'s message (at most ``limit`` characters) for a one-line error:
    ``"ValueError: bad value"``, or without the type name when ``with_type`` is false; the type
    name alone when the message is empty."""
    text = str(exc).strip()
    name = type(exc).__name__
    if not text:
        return name
    line = text.splitlines()[0][:limit]
    return f"{name}: {line}" if with_type else line


def _column_reader(column: pd.Series) -> tuple[Hashable, object, bool, object]:
    """``(name, values, arrow, missing)`` of a corpus column for :meth:`Dataset.row`: a pyarrow-backed text
    column as its Arrow array (``arrow``; a null reads as the dtype's ``missing`` value, as pandas gives it),
    any other column as its pandas array."""
    dtype = column.dtype
    if isinstance(dtype, pd.StringDtype) and str(dtype.storage).startswith("pyarrow"):
        return column.name, column.array.__arrow_array__(), True, dtype.na_value
    return column.name, column.array, False, None
