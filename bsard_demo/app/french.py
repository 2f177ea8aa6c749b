"""French wording of numbers for every page: counts, decimals, percentages and durations.

One thousands separator everywhere: the narrow no-break space U+202F (« 22 633 »), as French
typography sets it (Imprimerie nationale; also CLDR's fr grouping), which also keeps a number
on one line; the same space goes before ``%``. The decimal mark is the comma.
"""
from __future__ import annotations

import math

#: The thousands separator, and the space before ``%`` (narrow no-break space).
THIN = "\u202f"


def _french(text: str) -> str:
    """A number formatted by Python's ``,`` grouping and ``.`` decimal point, in French marks."""
    return text.replace(",", THIN).replace(".", ",")


def integer(n: int) -> str:
    """``22 633``: a count, thousands apart by :data:`THIN`."""
    return _french(f"{int(n):,}")


def decimal(x: float, digits: int | None = None) -> str:
    """``0,512`` (``digits`` decimals) or, without ``digits``, the shortest form (``0,05``,
    ``1,6``, ``12 000``); thousands apart by :data:`THIN`."""
    return _french(f"{x:,g}" if digits is None else f"{x:,.{digits}f}")


def percent(fraction: float, digits: int = 0) -> str:
    """``95 %``: a fraction (0.95) as a percentage with ``digits`` decimals."""
    return f"{decimal(100 * fraction, digits)}{THIN}%"


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 05 min`` (rounded up)."""
    s = max(0, math.ceil(seconds))
    if s < 60:
        return f"{s} s"
    minutes = math.ceil(s / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def megabytes(n_bytes: float, digits: int = 1) -> str:
    """``71,3 Mo``: a size in megabytes (10^6 bytes)."""
    return f"{decimal(n_bytes / 1e6, digits)} Mo"
