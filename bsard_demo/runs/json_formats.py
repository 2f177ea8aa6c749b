"""Text -> columns for JSON runs (``{qid: {docid: score}}``, ranx's run form, and ``{qid: [docid, ...]}``) and
JSON Lines.

:func:`parse_json` reads either (the layouts and rules: docs/run-formats.md) into a
:class:`~bsard_demo.runs.columns.Parsed`, its problems added to the list it is given. JSON objects keep repeated
keys (:class:`_Obj`), so a question or article given twice is reported, not silently overwritten.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from .columns import UNKNOWN, Columns, Parsed
from .csv_format import DOC_NAMES, QID_NAMES
from .fields import whole
from .limits import check_entries, check_json_values, tick
from .problems import ProblemList, quote
from .text_formats import split_lines

LIST_NAMES = ("docids", "doc_ids", "article_ids")


class _Obj(list):
    """A JSON object kept as its ``(key, value)`` pairs, so repeated keys are not lost."""


@dataclass
class _Rows:
    """Usable records as plain lists, turned into :class:`Columns` at the end."""

    qids: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    scores: list[float] | None = None
    ranks: list[int] | None = None
    lines: list[int] | None = None

    def columns(self) -> Columns:
        cols = Columns()
        cols.append_ids(self.qids, self.docs, score=self.scores, rank=self.ranks, line=self.lines)
        return cols


def _id(value) -> str | None:
    """A JSON question/article id as a string: strings (non-empty) and whole numbers only."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _json_type(value) -> str:
    if isinstance(value, _Obj):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _shown(value) -> str:
    """A JSON value as a message quotes it (:func:`~bsard_demo.runs.problems.quote`)."""
    try:
        text = json.dumps(dict(value) if isinstance(value, _Obj) else value)
    except (TypeError, ValueError, RecursionError):
        text = "..."
    return quote(text, marks=False)


def _json_score(value) -> tuple[float | None, str | None]:
    """``(score, None)`` or ``(None, reason)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"score {_shown(value)} is {_json_type(value)}, not a number"
    try:
        x = float(value)
    except OverflowError:
        return None, f"score {_shown(value)} is too large"
    if not math.isfinite(x):
        return None, f"score {value} is not a finite number"
    return x, None


def _whole(text: str) -> int | float:
    """A JSON integer too long for ``int()`` (``sys.get_int_max_str_digits()``) as a float: infinite,
    so it is reported as a bad id or score, never as a failure of the reader."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _loads(text: str):
    try:
        return json.loads(text, object_pairs_hook=_Obj)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer of more than 4,300 digits: parsed again, such integers as floats
        return json.loads(text, object_pairs_hook=_Obj, parse_int=_whole)


def parse_json(text: str, problems: ProblemList) -> Parsed:
    """The run of a JSON or JSON Lines ``text``; its problems are added to ``problems``. Its values
    are counted (commas) before any is parsed, against the read's entry limit (:mod:`.limits`)."""
    lead = text.lstrip()
    cut = lead.find("\n")
    if cut >= 0 and lead[cut:].strip():  # several lines: JSON Lines when the first is an object
        first = lead[:cut]
        check_json_values(first.count(","))
        try:
            first_value = _loads(first)
        except (json.JSONDecodeError, RecursionError):
            first_value = None
        if isinstance(first_value, _Obj):
            return _parse_jsonl(split_lines(text), problems)
    del lead  # a copy of the text
    check_json_values(text.count(","))
    try:
        value = _loads(text)
    except RecursionError:
        problems.error("json_too_deep", "the JSON is nested too deeply to be a run")
        return Parsed(UNKNOWN)
    except json.JSONDecodeError as exc:
        problems.error("invalid_json", f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno)
        return Parsed(UNKNOWN)
    if isinstance(value, _Obj) and any(k in QID_NAMES for k, _ in value) and not any(
        isinstance(v, (_Obj, list)) and k not in LIST_NAMES for k, v in value
    ):
        return _parse_jsonl(split_lines(text), problems)  # a JSON Lines file of one record
    if not isinstance(value, _Obj):
        problems.error("json_not_a_run",
            f"the JSON top level is {_json_type(value)}; expected an object "
            '{"qid": {"docid": score}} or {"qid": ["docid", ...]} (for one record per line, use JSON Lines)'
        )
        return Parsed(UNKNOWN)
    return _parse_json_dict(value, problems)


def _parse_json_dict(obj: _Obj, problems: ProblemList) -> Parsed:
    if not obj:
        problems.error("no_run_lines", "the JSON object is empty: no questions")
        return Parsed(UNKNOWN)
    first_kind = next((type(v) for _, v in obj if isinstance(v, (_Obj, list))), None)
    if first_kind is None:
        problems.error("json_not_a_run",
            f"the JSON values are {_json_type(obj[0][1])}; expected for each question an object "
            '{"docid": score} or a list ["docid", ...]'
        )
        return Parsed(UNKNOWN)
    by = "score" if first_kind is _Obj else "rank"
    fmt = "json-scores" if by == "score" else "json-ranked"
    expected = "an object {docid: score}" if by == "score" else "a list [docid, ...]"
    cols = _Rows(scores=[] if by == "score" else None, ranks=[] if by == "rank" else None)
    next_rank: dict[str, int] = {}
    for key, value in obj:
        tick()
        qid = key.strip()
        if not qid:
            problems.error("bad_id", "empty question id", kind="empty question id")
            continue
        if type(value) is not first_kind:
            problems.error("json_mixed_layout",
                           f"question {quote(qid)}: expected {expected} like the first question, "
                           f"found {_json_type(value)}",
                           kind="question of the wrong JSON type")
            continue
        if by == "score":
            for doc_key, raw in value:
                docid = doc_key.strip()
                if not docid:
                    problems.error("bad_id", f"question {quote(qid)}: empty article id", kind="empty article id")
                    continue
                score, why = _json_score(raw)
                if why:
                    problems.error("bad_score", f"question {quote(qid)}, article {quote(docid)}: {why}",
                                   kind="score is not a finite number")
                    continue
                cols.qids.append(qid)
                cols.docs.append(docid)
                cols.scores.append(score)
        else:
            start = next_rank.get(qid, 0)
            for pos, raw in enumerate(value, 1):
                docid = _id(raw)
                if docid is None:
                    problems.error("bad_id", f"question {quote(qid)}, position {pos}: article id {_shown(raw)} "
                                   "is not a string or whole number", kind="bad article id")
                    continue
                cols.qids.append(qid)
                cols.docs.append(docid)
                cols.ranks.append(start + pos)
            next_rank[qid] = start + len(value)
        value.clear()  # its pairs are in the rows now: freed as the rows grow (a lower peak)
    return Parsed(fmt, cols.columns(), by)


def _parse_jsonl(lines: list[str], problems: ProblemList) -> Parsed:
    cols = _Rows(scores=[], ranks=[], lines=[])
    mode = None  # "score", "rank" or "lists", fixed by the first valid record
    mode_line = 0
    next_rank: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if lineno % 1024 == 0:
            tick()
        check_json_values(line.count(","))
        check_entries(len(cols.qids))
        try:
            value = _loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            problems.error("invalid_json", f"not valid JSON ({reason})", line=lineno, kind="line is not valid JSON")
            continue
        if not isinstance(value, _Obj):
            problems.error("json_not_a_run", f"expected a JSON object, found {_json_type(value)}", line=lineno,
                           kind="line is not a JSON object")
            continue
        rec = dict(value)
        qkey = next((k for k in QID_NAMES if k in rec), None)
        if qkey is None:
            problems.error("missing_field", f"no question id (expected a key {', '.join(QID_NAMES)})", line=lineno,
                           kind="record without question id")
            continue
        qid = _id(rec[qkey])
        if qid is None:
            problems.error("bad_id", f"question id {_shown(rec[qkey])} is not a string or whole number", line=lineno,
                           kind="bad question id")
            continue
        lkey = next((k for k in LIST_NAMES if k in rec), None)
        dkey = next((k for k in DOC_NAMES if k in rec), None)
        if dkey is None and lkey is None:
            problems.error("missing_field", f"no article id (expected a key {', '.join(DOC_NAMES)}, or a list under "
                           f"{', '.join(LIST_NAMES)})", line=lineno, kind="record without article id")
            continue
        kind = "lists" if lkey is not None else "score" if "score" in rec else "rank" if "rank" in rec else None
        if kind is None:
            problems.error("missing_field", "no score or rank", line=lineno, kind="record without score or rank")
            continue
        if mode is None:
            mode, mode_line = kind, lineno
        if (mode == "lists") != (kind == "lists") or (mode == "score" and kind != "score"):
            want = {"lists": f"a list of article ids ({', '.join(LIST_NAMES)})", "score": "a score",
                    "rank": "a rank"}[mode]
            problems.error("json_mixed_layout", f"expected {want}, like the first record (line {mode_line})",
                           line=lineno, kind="record unlike the first")
            continue
        if mode == "lists":
            docs = rec[lkey]
            if not isinstance(docs, list):
                problems.error("bad_article_list", f"{lkey} is {_json_type(docs)}, not a list", line=lineno,
                               kind="bad article list")
                continue
            start = next_rank.get(qid, 0)
            for pos, raw in enumerate(docs, 1):
                docid = _id(raw)
                if docid is None:
                    problems.error("bad_id",
                                   f"article id {_shown(raw)} at position {pos} is not a string or whole number",
                                   line=lineno, kind="bad article id")
                    continue
                cols.qids.append(qid)
                cols.docs.append(docid)
                cols.ranks.append(start + pos)
                cols.lines.append(lineno)
            next_rank[qid] = start + len(docs)
            continue
        docid = _id(rec[dkey])
        if docid is None:
            problems.error("bad_id", f"article id {_shown(rec[dkey])} is not a string or whole number", line=lineno,
                           kind="bad article id")
            continue
        if mode == "score":
            score, why = _json_score(rec["score"])
            if why:
                problems.error("bad_score", why, line=lineno, kind="score is not a finite number")
                continue
            cols.scores.append(score)
        else:
            raw = rec["rank"]
            rank = None if isinstance(raw, bool) or not isinstance(raw, (int, float)) else whole(str(raw))
            if rank is None:
                problems.error("bad_rank", f"rank {_shown(raw)} is not a whole number", line=lineno,
                               kind="rank is not a whole number")
                continue
            cols.ranks.append(rank)
        cols.qids.append(qid)
        cols.docs.append(docid)
        cols.lines.append(lineno)
    by = "score" if mode == "score" else "rank"
    if by == "score":
        cols.ranks = None
    else:
        cols.scores = None
    return Parsed("jsonl", cols.columns(), by)
