"""Parquet runs (as ranx, ir_measures, pandas or polars write a run table) -> a
:class:`~bsard_demo.runs.columns.Parsed`, read with pyarrow, in batches of 64k rows; called in a child process by
:mod:`bsard_demo.runs.sandbox` (this module imports pyarrow: the server's process never loads it for a run).

The columns read, row numbers, and the memory bounds: docs/design.md, 'bsard_demo/runs/parquet_format.py'.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .columns import Columns, Parsed
from .content import Content
from .csv_format import DOC_NAMES, QID_NAMES, RELEVANCE_NAMES, columns_problem
from .decode import size_text
from .limits import check_entries
from .problems import ProblemList, quote

BATCH_ROWS = 1 << 16


def _column_names(names: Iterable[str]) -> dict[str, str]:
    """``{lower-case name: name as written}``, the first of each lower-case name."""
    out: dict[str, str] = {}
    for name in names:
        out.setdefault(str(name).strip().lower(), name)
    return out


def _open(content: Content, problems: ProblemList):
    source = content.source
    if content.compressed:
        where = pa.BufferReader(b"".join(content.blocks()))
    elif source.data is not None:
        where = pa.BufferReader(source.data)
    else:
        where = str(source.path)
    try:
        return pq.ParquetFile(where)
    except MemoryError:  # the reader's limit, not damage: the caller words it
        raise
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... on damaged footers
        problems.error("parquet_unreadable", f"this parquet file cannot be read ({_reason(exc)}); it may be "
                                             "truncated or damaged")
        return None


def _reason(exc: Exception) -> str:
    return quote(" ".join(str(exc).split()), 200, marks=False) or type(exc).__name__


def _kind(t) -> str | None:
    """``"string"``, ``"int"``, ``"float"`` or ``"bool"`` for a column type we can read; None otherwise."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float"
    return None


def parse_parquet(content: Content, problems: ProblemList, *, labels: bool = False) -> Parsed:
    """The run of a parquet file (docs/design.md, 'bsard_demo/runs/parquet_format.py'); its problems are
    added to ``problems``. ``labels``: a qrels table (:mod:`.qrels_read`): its relevance column
    (:data:`~.csv_format.RELEVANCE_NAMES`) is read in the place of the score, and no rank is read."""
    failed = Parsed("parquet")
    pf = _open(content, problems)
    if pf is None:
        return failed
    schema = pf.schema_arrow
    names = _column_names(schema.names)
    qcol = next((names[n] for n in QID_NAMES if n in names), None)
    dcol = next((names[n] for n in DOC_NAMES if n in names), None)
    scol, rcol, tcol = names.get("score"), names.get("rank"), names.get("tag")
    if labels:
        scol, rcol, tcol = next((names[n] for n in RELEVANCE_NAMES if n in names), None), None, None
    lacking = columns_problem([str(n) for n in schema.names], qcol, dcol, scol, rcol)
    if lacking is not None:
        code, message = lacking
        problems.error(code, message if code == "qrels_file" else f"the parquet table has {message}")
        return failed
    wanted = {"question id": qcol, "article id": dcol, "score": scol, "rank": rcol, "tag": tcol}
    allowed = {"question id": ("string", "int"), "article id": ("string", "int"), "score": ("int", "float"),
               "rank": ("int", "float"), "tag": ("string", "int")}
    bad_types = []
    for role, name in wanted.items():
        if name is None:
            continue
        kind = _kind(schema.field(name).type)
        if kind not in allowed[role]:
            shown_type = quote(schema.field(name).type, marks=False)
            bad_types.append(f"{role} column {quote(name)} is {shown_type}, expected "
                             + " or ".join({"string": "strings", "int": "integers", "float": "numbers"}[a]
                                           for a in allowed[role]))
    if bad_types:
        problems.error("bad_column_type", "; ".join(bad_types))
        return failed
    columns = [c for c in wanted.values() if c is not None]
    if not _sizes_fit(pf, columns, content.cap, problems):
        return failed
    check_entries(pf.metadata.num_rows)  # the read's row limit (.limits), before a row is decoded
    cols = Columns()
    tags: dict[str, None] = {}
    stages = (ProblemList(), ProblemList(), ProblemList())  # ids, scores, ranks: the CSV order
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False):
            _batch(batch, row, wanted, cols, tags, stages)
            row += batch.num_rows
    except MemoryError:
        raise
    except Exception as exc:
        problems.error("parquet_unreadable", f"this parquet file cannot be read after row {row} "
                                             f"({_reason(exc)}); it may be truncated or damaged")
        return failed
    for stage in stages:
        problems.extend(stage)
    by = "score" if scol is not None else "rank"
    return Parsed("parquet", cols, by, scol is not None and rcol is not None, tuple(tags))


def _sizes_fit(pf, columns: list[str], cap: int, problems: ProblemList) -> bool:
    """The footer's inflated sizes of the needed columns against the size limit."""
    meta = pf.metadata
    index = [pf.schema_arrow.get_field_index(c) for c in columns]
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        size = sum(group.column(i).total_uncompressed_size for i in index if i < group.num_columns)
        if size > cap // 4:
            problems.error("parquet_too_large", f"row group {g + 1} of the parquet file inflates to {size_text(size)}, "
                                                f"above {size_text(cap // 4)} (a quarter of the size limit); write "
                                                "it with smaller row groups")
            return False
        total += size
    if total > cap:
        problems.error("parquet_too_large", f"the parquet columns inflate to {size_text(total)}, above the limit of "
                                            f"{size_text(cap)}")
        return False
    return True


def _ids(column, rows: np.ndarray, role: str, intern, stage: ProblemList) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, bad mask)`` of an id column of one batch: each distinct id interned once."""
    if not pa.types.is_dictionary(column.type):
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            column = pc.cast(column, pa.string())
        column = pc.dictionary_encode(column)
    elif not pa.types.is_string(column.type.value_type):
        column = pc.dictionary_encode(pc.cast(column.dictionary_decode(), pa.string()))
    values = [None if v is None else v.strip() for v in column.dictionary.to_pylist()]
    empty = np.array([not v for v in values], dtype=bool)
    codes_of_value = intern([v or "" for v in values]) if values else np.zeros(0, dtype=np.int32)
    indices = column.indices
    null = np.asarray(indices.is_null())
    idx = np.asarray(indices.fill_null(0), dtype=np.int64)
    bad = null | (empty[idx] if len(empty) else null)
    for i in np.flatnonzero(bad).tolist():
        stage.error("bad_id", f"empty {role} id", line=int(rows[i]), kind=f"empty {role} id")
    return codes_of_value[idx] if len(codes_of_value) else np.zeros(len(idx), dtype=np.int32), bad


def _numbers(column, rows: np.ndarray, what: str, stage: ProblemList) -> tuple[np.ndarray, np.ndarray | None]:
    """float64 values of a numeric column, and a mask of the null, NaN or infinite ones (reported)."""
    null = np.asarray(column.is_null())
    values = np.asarray(column.cast(pa.float64()).fill_null(0.0), dtype=np.float64)
    bad = null | ~np.isfinite(values)
    code = "bad_score" if what == "score" else "bad_rank"
    for i in np.flatnonzero(bad).tolist():
        if null[i]:
            stage.error(code, f"{what} is missing (null)", line=int(rows[i]), kind=f"{what} is missing")
        else:
            stage.error(code, f"{what} {float(values[i])!r} is not a finite number", line=int(rows[i]),
                        kind="score is NaN or infinite" if what == "score" else "rank is not a whole number")
    return values, (bad if bad.any() else None)


def _ranks(column, rows: np.ndarray, stage: ProblemList) -> tuple[np.ndarray, np.ndarray | None]:
    if pa.types.is_integer(column.type) and column.null_count == 0:
        return np.asarray(column, dtype=np.int64), None
    values, bad = _numbers(column, rows, "rank", stage)
    bad = np.zeros(len(values), dtype=bool) if bad is None else bad
    fractional = ~bad & (values != np.floor(values))
    for i in np.flatnonzero(fractional).tolist():
        stage.error("bad_rank", f"rank {float(values[i])!r} is not a whole number", line=int(rows[i]),
                    kind="rank is not a whole number")
    bad |= fractional
    return np.where(bad, 0, values).astype(np.int64), (bad if bad.any() else None)


def _batch(batch, first_row: int, wanted: dict, cols: Columns, tags: dict, stages) -> None:
    ids, score_stage, rank_stage = stages
    rows = np.arange(first_row + 1, first_row + batch.num_rows + 1, dtype=np.int64)
    q, bad_q = _ids(batch.column(wanted["question id"]), rows, "question", cols.q_codes, ids)
    d, bad_d = _ids(batch.column(wanted["article id"]), rows, "article", cols.d_codes, ids)
    bad = bad_q | bad_d
    if wanted["tag"] is not None:
        col = batch.column(wanted["tag"])
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        for tag in pc.unique(col.cast(pa.string())).to_pylist():  # in order of first appearance
            if tag is not None:
                tags.setdefault(tag.strip())
    scores = ranks = None
    if wanted["score"] is not None:
        scores, bad_s = _numbers(batch.column(wanted["score"]), rows, "score", score_stage)
        bad = bad if bad_s is None else bad | bad_s
    if wanted["rank"] is not None:
        ranks, bad_r = _ranks(batch.column(wanted["rank"]), rows, rank_stage)
        bad = bad if bad_r is None else bad | bad_r
    if bad.any():
        keep = ~bad
        q, d, rows = q[keep], d[keep], rows[keep]
        scores = None if scores is None else scores[keep]
        ranks = None if ranks is None else ranks[keep]
    cols.append(q, d, score=scores, rank=ranks, line=rows)

