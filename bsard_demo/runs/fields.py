"""Fields of a chunk of table lines -> arrays (ids, ranks, scores, tags), for
:mod:`bsard_demo.runs.text_formats`: :class:`TokenFields` parses Python tokens, :class:`ArrayFields` reads
pure-ASCII chunks with numpy, without a Python object per field; both give the same values and problems.

How: docs/design.md, 'bsard_demo/runs/fields.py'.
"""
from __future__ import annotations

import math
import sys
from itertools import compress
from typing import Sequence

import numpy as np

from .problems import ProblemList, quote

_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\x0b\x0c")] = True  # what bytes.split() splits at
_MAX_KEY = 7  # bytes of an id packed into an int64 key (with its length)
_MAX_DIGITS = 18  # digits of a rank computed in int64


def int_array(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array(values, dtype=object)


def as_str(token) -> str:
    return token if isinstance(token, str) else token.decode("ascii")


def _number_problem(what: str, token: str) -> str:
    hint = ""
    if "," in token:
        try:
            float(token.replace(",", "."))
            hint = " (decimal comma? use a point)"
        except ValueError:
            pass
    return f"{what} {quote(token)} is not a number{hint}"


def floats(values: Sequence, lines: np.ndarray | None, problems: ProblemList) -> tuple[np.ndarray, np.ndarray | None]:
    """Scores parsed from ``values`` (str or ASCII bytes), and a mask of those that are not
    finite numbers (None when all are), each reported with its line."""
    try:
        out = np.fromiter(map(float, values), dtype=float, count=len(values))
        if bool(np.all(np.isfinite(out))):
            return out, None
    except ValueError:
        pass
    out = np.zeros(len(values))
    bad = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        line = None if lines is None else int(lines[i])
        try:
            x = float(v)
        except ValueError:
            problems.error("bad_score", _number_problem("score", as_str(v)), line=line, kind="score is not a number")
            bad[i] = True
            continue
        if not math.isfinite(x):
            problems.error("bad_score", f"score {quote(as_str(v))} is not a finite number", line=line,
                           kind="score is NaN or infinite")
            bad[i] = True
        out[i] = x
    return out, bad


def ints(values: Sequence, lines: np.ndarray | None, problems: ProblemList, note: str = "",
         positive: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Ranks parsed from ``values`` (``"3.0"`` counts as 3; at least 1 when ``positive``), and a
    mask of the bad ones (None when none is)."""
    try:
        out = list(map(int, values))
        if not positive or min(out, default=1) >= 1:
            return int_array(out), None
    except ValueError:
        pass
    out = []
    bad = np.zeros(len(values), dtype=bool)
    what = "a whole number ≥ 1" if positive else "a whole number"
    for i, v in enumerate(values):
        try:
            r = int(v)
        except ValueError:
            r = whole(v)
        if r is None or positive and r < 1:
            problems.error("bad_rank", f"rank {quote(as_str(v))} is not {what}{note}",
                           line=None if lines is None else int(lines[i]), kind="rank is not a whole number")
            r = 0
            bad[i] = True
        out.append(r)
    return int_array(out), bad


def whole(token) -> int | None:
    """``token`` as a whole number, also written as a float (``"3.0"``); else None."""
    try:
        x = float(token)
    except ValueError:
        return None
    return int(x) if math.isfinite(x) and x.is_integer() else None


def digits(values: Sequence) -> list[bool]:
    """For each value, whether it is a plain whole number (ASCII digits only, and no longer than Python's
    int() takes from text: ``sys.get_int_max_str_digits()``, 4,300 by default)."""
    if values and isinstance(values[0], bytes):
        out = list(map(bytes.isdigit, values))
    else:
        out = [v.isascii() and v.isdigit() for v in values]
    most = sys.get_int_max_str_digits()
    if most and any(len(v) > most for v in compress(values, out)):
        out = [ok and len(v) <= most for ok, v in zip(out, values)]
    return out


class TokenFields:
    """The fields of ``width``-field rows given as one flat list of tokens."""

    def __init__(self, tokens: list, width: int):
        self._tokens, self.width = tokens, width
        self.n = len(tokens) // width

    def tokens(self, j: int) -> list:
        return self._tokens[j::self.width]

    def codes(self, j: int, intern, index: "KeyIndex | None" = None) -> np.ndarray:
        return intern(self.tokens(j))

    def floats(self, j: int, lines, problems: ProblemList):
        return floats(self.tokens(j), lines, problems)

    def ints(self, j: int, lines, problems: ProblemList, note: str = "", positive: bool = False):
        return ints(self.tokens(j), lines, problems, note, positive)

    def digit_values(self, j: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``(mask, values)`` of the plain whole numbers of column ``j`` (values None if none)."""
        col = self.tokens(j)
        mask = np.array(digits(col), dtype=bool)
        if not mask.any():
            return mask, None
        picked = col if mask.all() else [v for v, m in zip(col, mask.tolist()) if m]
        return mask, int_array(list(map(int, picked)))

    def first_seen(self, j: int) -> list[str]:
        col = self.tokens(j)
        first = col[0]
        # one tag in nearly every file: list.count compares in C, far cheaper than hashing all
        return [as_str(t) for t in ((first,) if col.count(first) == len(col) else dict.fromkeys(col))]


def positions(data: bytes, newline: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, ends, widths)``: byte offsets of every token of ``data`` (as ``bytes.split``
    finds them) and the number of tokens of each line (lines end at byte ``newline``)."""
    a = np.frombuffer(data, dtype=np.uint8)
    space = _SPACE[a]
    start = ~space
    start[1:] &= space[:-1]
    end = ~space
    end[:-1] &= space[1:]
    line_starts = np.concatenate(([0], np.flatnonzero(a == newline) + 1))
    marks = np.concatenate((start, [False])).view(np.int8)  # one more so that an empty last line is counted
    widths = np.add.reduceat(marks, line_starts, dtype=np.int64)
    return np.flatnonzero(start), np.flatnonzero(end) + 1, widths


class ArrayFields:
    """The fields of ``width``-field rows of a pure-ASCII chunk without NUL bytes, from token
    offsets (``starts``/``ends`` of the kept tokens, ``width`` per row)."""

    def __init__(self, data: bytes, starts: np.ndarray, ends: np.ndarray, width: int):
        self.data, self.width = data, width
        self._bytes = np.frombuffer(data, dtype=np.uint8)
        self.starts, self.ends = starts.reshape(-1, width), ends.reshape(-1, width)
        self.n = len(self.starts)
        # the 8 bytes from each offset, big-endian: one gather reads a token's first 8 bytes
        self._padded = data + bytes(8)
        self._words = np.ndarray((len(data) + 1,), dtype=">u8", buffer=self._padded, strides=(1,))

    def _head_words(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(first 8 bytes of each token of column j as uint64, token lengths)``."""
        s = self.starts[:, j]
        return self._words[s].astype(np.uint64), self.ends[:, j] - s

    def tokens(self, j: int) -> list[bytes]:
        data = self.data
        return [data[a:b] for a, b in zip(self.starts[:, j].tolist(), self.ends[:, j].tolist())]

    def _matrix(self, j: int, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Column ``j`` as an ``(n, L)`` byte matrix (NUL-padded) and the token lengths; None
        when a token is longer than ``limit``."""
        s, e = self.starts[:, j], self.ends[:, j]
        lengths = e - s
        width = int(lengths.max())
        if width > limit:
            return None
        offsets = np.arange(width)
        matrix = self._bytes.take(s[:, None] + offsets[None, :], mode="clip")
        matrix *= offsets[None, :] < lengths[:, None]  # NUL after each token
        return matrix, lengths

    def keys(self, j: int) -> np.ndarray | None:
        """Column ``j``'s tokens as int64 keys (up to 7 bytes, left-aligned in 56 bits, then
        3 bits of length), None if one is longer."""
        words, lengths = self._head_words(j)
        if int(lengths.max()) > _MAX_KEY:
            return None
        keep = (np.uint64(2**56 - 1) >> (np.uint64(8) * (np.uint64(_MAX_KEY) - lengths.astype(np.uint64)))) \
            << (np.uint64(8) * (np.uint64(_MAX_KEY) - lengths.astype(np.uint64)))
        return (((words >> np.uint64(8)) & keep).astype(np.int64) << 3) | lengths

    def codes(self, j: int, intern, index: "KeyIndex") -> np.ndarray:
        keys = self.keys(j)
        if keys is None:
            return intern(self.tokens(j))
        return index.codes(keys)

    def floats(self, j: int, lines, problems: ProblemList):
        m = self._matrix(j, 64)
        if m is not None:
            matrix = np.ascontiguousarray(m[0])
            try:
                out = matrix.view(f"S{matrix.shape[1]}").ravel().astype(np.float64)
                if bool(np.all(np.isfinite(out))):
                    return out, None
            except ValueError:
                pass
        return floats(self.tokens(j), lines, problems)

    def _short_digits(self, j: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(all-digit mask, values)`` of column ``j`` when no token is over 8 bytes, else None."""
        words, lengths = self._head_words(j)
        if int(lengths.max()) > 8:
            return None
        value = np.zeros(len(words), dtype=np.int64)
        ok = np.ones(len(words), dtype=bool)
        for k in range(8):
            inside = k < lengths
            byte = ((words >> np.uint64(56 - 8 * k)) & np.uint64(0xFF)).astype(np.int64)
            ok &= ~inside | ((byte >= 48) & (byte <= 57))
            value = np.where(inside, value * 10 + byte - 48, value)
        return ok, value

    def _digit_matrix(self, j: int):
        m = self._matrix(j, _MAX_DIGITS)
        if m is None:
            return None
        matrix, lengths = m
        inside = np.arange(matrix.shape[1])[None, :] < lengths[:, None]
        is_digit = ((matrix >= 48) & (matrix <= 57)) | ~inside
        return matrix, lengths, inside, is_digit.all(axis=1)

    @staticmethod
    def _digit_value(matrix, lengths, inside) -> np.ndarray:
        power = 10 ** np.clip(lengths[:, None] - 1 - np.arange(matrix.shape[1])[None, :], 0, None)
        return np.where(inside, (matrix.astype(np.int64) - 48) * power, 0).sum(axis=1)

    def ints(self, j: int, lines, problems: ProblemList, note: str = "", positive: bool = False):
        short = self._short_digits(j)
        if short is not None:
            if bool(short[0].all()) and (not positive or int(short[1].min()) >= 1):
                return short[1], None
            return ints(self.tokens(j), lines, problems, note, positive)
        d = self._digit_matrix(j)
        if d is not None and bool(d[3].all()):
            values = self._digit_value(*d[:3])
            if not positive or not len(values) or int(values.min()) >= 1:
                return values, None
        return ints(self.tokens(j), lines, problems, note, positive)

    def digit_values(self, j: int) -> tuple[np.ndarray, np.ndarray | None]:
        short = self._short_digits(j)
        if short is not None:
            mask, values = short
            return mask, (values[mask] if mask.any() else None)
        d = self._digit_matrix(j)
        if d is None:
            return TokenFields(self.tokens(j), 1).digit_values(0)
        matrix, lengths, inside, mask = d
        if not mask.any():
            return mask, None
        return mask, self._digit_value(matrix[mask], lengths[mask], inside[mask])

    def first_seen(self, j: int) -> list[str]:
        m = self._matrix(j, 64)
        if m is not None:
            matrix, lengths = m
            if bool(np.all(lengths == lengths[0])) and bool(np.all(matrix == matrix[0])):
                return [self.data[self.starts[0, j]:self.ends[0, j]].decode("ascii")]
        return TokenFields(self.tokens(j), 1).first_seen(0)


class KeyIndex:
    """Codes of ids packed as int64 keys (:meth:`ArrayFields.keys`): a sorted array of the keys
    seen so far and their codes. New ids get their codes from ``new_codes`` (the interning of
    :class:`~bsard_demo.runs.columns.Columns`, shared with the token path: ``list of str -> list
    of codes``), in order of first appearance."""

    def __init__(self, new_codes):
        self._keys = np.zeros(0, dtype=np.int64)
        self._codes = np.zeros(0, dtype=np.int32)
        self._new_codes = new_codes

    def codes(self, keys: np.ndarray) -> np.ndarray:
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        at = np.searchsorted(self._keys, unique)
        known = at < len(self._keys)
        known[known] = self._keys[at[known]] == unique[known]
        codes = np.empty(len(unique), dtype=np.int32)
        codes[known] = self._codes[at[known]]
        new = np.flatnonzero(~known)
        if len(new):
            new = new[np.argsort(first[new], kind="stable")]
            codes[new] = self._new_codes(unpack(unique[new]))
            keys_all = np.concatenate((self._keys, unique[new]))
            codes_all = np.concatenate((self._codes, codes[new]))
            order = np.argsort(keys_all, kind="stable")
            self._keys, self._codes = keys_all[order], codes_all[order]
        return codes[inverse.ravel()]


def unpack(keys: np.ndarray) -> list[str]:
    """The ids of keys made by :meth:`ArrayFields.keys` (ASCII, no NUL: the padding is dropped)."""
    shifts = 8 * np.arange(_MAX_KEY - 1, -1, -1) + 3
    raw = ((keys[:, None] >> shifts[None, :]) & 0xFF).astype(np.uint8)
    return np.ascontiguousarray(raw).view(f"S{_MAX_KEY}").ravel().astype(f"U{_MAX_KEY}").tolist()
