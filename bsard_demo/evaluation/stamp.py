"""The reproducibility stamp of an export of results: what the figures were computed from, written
into every CSV, JSON, Markdown and LaTeX output of ``evaluate`` and ``compare`` and into the Score
page's downloads (:func:`board_stamp` once per board, then :func:`stamp_export` for each export).

A stamp (:func:`build_stamp`) is a JSON object: ``stamp`` (its format, :data:`STAMP_FORMAT`),
``bsard_demo`` (version and, in a git checkout, the commit), ``dataset`` (name, kind, the hub
commit the download resolved when from the hub, the sha256 of each file read and of the split's
labels), ``split``, ``ks``, ``runs`` (each run's sha256: the file's bytes, an upload's bytes, or
the TREC text of a run built in-process), ``rankings`` (each run's ranking digest,
:meth:`bsard_demo.runs.Run.ranking_sha256`: the same ranking in another file or format has the same one, and
:func:`stamp_differences` matches runs by it), ``measures`` (each column's ir_measures name, from
:mod:`bsard_demo.evaluation.measures`) and ``conventions`` (the tie and missing-question rules).
No path of the machine appears in it: files are named by their base name and their hash.

In JSON the stamp is the top-level key ``"stamp"``; in CSV, Markdown and LaTeX it is a block of
comment lines at the top that readers skip (``# `` lines: ``pandas.read_csv(comment="#")``; HTML
comments ``<!-- -->``, unseen once rendered; ``%`` lines for TeX), one ``key = JSON`` line each,
ASCII only so that no value can end the comment or the line. :func:`read_stamp` reads any of
them back and :func:`stamp_differences` says what differs between two (``python -m bsard_demo
stamps A B``). Hashing BSARD's 30 MB articles.csv takes ~0.1 s; a file's digest is remembered by
path, size and modification time.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import re
import subprocess
import weakref
from pathlib import Path
from typing import Mapping, Sequence

from ..cache import sha256_file as cache_sha256_file
from ..dataset import Dataset
from ..runs import STAMP_KEY, Run
from .labels import gains_of
from .measures import Measure
from .report import labels_digest
from .scoring import RunSource, Scoreboard

#: The stamp's own format; a reader refuses nothing, but :func:`stamp_differences` names a change.
STAMP_FORMAT = "bsard-demo-stamp/1"
#: The formats that carry a stamp as comment lines, and each one's comment syntax (prefix, suffix); JSON
#: carries it under its key ``stamp``.
COMMENTS = {"csv": ("# ", ""), "markdown": ("<!-- ", " -->"), "latex": ("% ", "")}
#: The stamp's fields, in the order they are written.
FIELDS = ("stamp", "bsard_demo", "dataset", "split", "ks", "runs", "rankings", "measures", "conventions")
#: How every figure is computed, whatever the measure (the CLI's ``evaluate --help`` says the same).
CONVENTIONS = ("every question of the split with a relevant article counts, a question missing from a run scores 0; "
               "ties by article id descending as strings (trec_eval); an article listed twice keeps its best "
               "position; values are trec_eval's on the run cut to its top k")
_SNAPSHOT = re.compile(r"(?:^|/)snapshots/([0-9a-f]{40})/")
#: A stamp's comment line up to its value; the value is the rest (a Markdown comment's `` -->`` taken off in
#: :func:`_stamp_line`: a lazy group before an optional suffix backtracked quadratically on long blank runs).
_LINE = re.compile(r"^(?:# |<!-- |% )stamp\.([a-z_]+) = ")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (remembered by path, size and mtime)."""
    st = Path(path).stat()
    return _file_digest(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:  # noqa: ARG001 - size and mtime: the memo's key
    return cache_sha256_file(Path(path))


def hub_revision(path: str | Path) -> str | None:
    """The commit a Hugging Face hub download resolved: huggingface_hub caches a file as
    ``…/snapshots/<40-hex commit>/<file>`` and returns that path; ``None`` for any other path."""
    m = _SNAPSHOT.search(Path(path).as_posix())
    return m.group(1) if m else None


@functools.lru_cache(maxsize=1)
def package_version() -> dict:
    """``{"version", "commit"}``: the installed bsard-demo version (else pyproject.toml's), and the
    checkout's git commit when the package runs from one (``None`` otherwise; 2 s at most)."""
    root = Path(__file__).resolve().parents[2]
    try:
        version = importlib.metadata.version("bsard-demo")
    except importlib.metadata.PackageNotFoundError:
        found = re.search(r'(?m)^version\s*=\s*"([^"]+)"', _read_text(root / "pyproject.toml"))
        version = found.group(1) if found else None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=2, check=False)
        commit = done.stdout.strip() if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", done.stdout.strip()) \
            else None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"version": version, "commit": commit}


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def dataset_stamp(dataset: Dataset, split: str) -> dict:
    """The dataset part of a stamp: name, kind, hub ``revision`` (``None`` off the hub), the
    sha256 of the corpus and of the split's questions file (``None`` when not read, e.g. the
    hub's articles.csv when scoring only) and of the split's labels
    (:func:`bsard_demo.evaluation.report.labels_digest`, the same whatever the source)."""
    files = dict(dataset.files)
    wanted = ("articles.csv", f"questions_{split}.csv") + (("labels",) if "labels" in files else ())
    hashes = {name: sha256_file(files[name]) if name in files and Path(files[name]).is_file() else None
              for name in wanted}
    revisions = {hub_revision(files[name]) for name in wanted if name in files}
    revisions.discard(None)
    revision = revisions.pop() if len(revisions) == 1 else (", ".join(sorted(revisions)) or None)
    name = Path(dataset.name).name if dataset.kind == "local" else dataset.name  # no path of the machine
    gains = gains_of(dataset, split)  # graded labels (a qrels file): the grades are part of the labels
    labels = labels_digest(dataset.qrels(split)) if gains is None else sha256_bytes(
        repr(sorted((q, sorted(g.items())) for q, g in gains.items())).encode())
    return {"name": name, "kind": dataset.kind, "revision": revision, "sha256": hashes, "labels_sha256": labels}


def measure_definitions(columns: Sequence[str]) -> dict:
    """Each measure column's ir_measures name (:attr:`bsard_demo.evaluation.measures.Measure.short_label`):
    ``{"recall@100": "R@100", "map@100": "AP@100", "mrr@100": "RR@100", "ndcg@10": "nDCG@10"}``."""
    out = {}
    for column in columns:
        measure = Measure.from_column(column)
        if measure is not None:
            out[str(column)] = measure.short_label
    return out


def build_stamp(dataset: Dataset, split: str, runs: Mapping[str, str | None], ks: Sequence[int],
                measures: Sequence[str], rankings: Mapping[str, str | None] | None = None) -> dict:
    """A stamp (see the module doc): ``runs`` maps each run's name to its sha256, ``rankings`` to its ranking
    digest, ``measures`` are the exported columns."""
    return {"stamp": STAMP_FORMAT, "bsard_demo": package_version(), "dataset": dataset_stamp(dataset, split),
            "split": split, "ks": sorted(int(k) for k in ks), "runs": dict(runs), "rankings": dict(rankings or {}),
            "measures": measure_definitions(measures), "conventions": CONVENTIONS}


def source_sha256(source: RunSource) -> str | None:
    """A run source's sha256: its file's or its upload's bytes; for a run built in-process, its
    TREC text (:meth:`bsard_demo.runs.Run.to_trec`). ``None`` for a path that is not a regular
    file that can be read (the run's own problems say why)."""
    if source.path is not None:
        try:
            return sha256_file(source.path) if Path(source.path).is_file() else None
        except OSError:
            return None
    if source.data is not None:
        return sha256_bytes(source.data)
    return run_sha256(source.run)


_RUN_DIGESTS: dict[int, tuple[weakref.ref, str]] = {}


def run_sha256(run: Run) -> str:
    """The sha256 of a run's TREC text (:meth:`~bsard_demo.runs.Run.to_trec`, the file the Score
    page offers for a built-in run), remembered while the run lives: 0.15 s for 222 questions x
    300 articles, paid once, not on every page run that offers a download."""
    hit = _RUN_DIGESTS.get(id(run))
    if hit is not None and hit[0]() is run:
        return hit[1]
    digest = sha256_bytes(run.to_trec().encode("utf-8"))
    key = id(run)
    _RUN_DIGESTS[key] = (weakref.ref(run, lambda _ref, key=key: _RUN_DIGESTS.pop(key, None)), digest)
    return digest


def board_stamp(board: Scoreboard, sources: Sequence[RunSource], measures: Sequence[str] | None = None) -> dict:
    """The stamp of a :class:`~bsard_demo.evaluation.scoring.Scoreboard` scored from ``sources``
    (in the order given to :func:`~bsard_demo.evaluation.scoring.score_runs`); ``measures``: the
    columns exported (default: every measure of the evaluations)."""
    columns = list(measures) if measures is not None else list(dict.fromkeys(
        c for ev in board.evaluations.values() for c in ev.means))
    runs = {scored.name: source_sha256(source) for scored, source in zip(board.runs, sources)}
    rankings = {scored.name: scored.ranking_sha256 for scored in board.runs}
    return build_stamp(board.dataset, board.split, runs, board.ks, columns, rankings)


def export_stamp(*, dataset: Dataset | None = None, split: str | None = None, runs: Mapping[str, str | None] = (),
                 rankings: Mapping[str, str | None] = ()) -> dict:
    """The stamp of an ``export-qrels`` (``dataset``, ``split``) or ``export-run`` (``runs``: the source file's
    sha256, ``rankings``: its ranking digest) file, written where the format has room (parquet metadata)."""
    out: dict = {"stamp": STAMP_FORMAT, "bsard_demo": package_version()}
    if dataset is not None and split is not None:
        out.update(dataset=dataset_stamp(dataset, split), split=split)
    if runs or rankings:
        out.update(runs=dict(runs), rankings=dict(rankings))
    return out


def read_stamp_bytes(data: bytes) -> dict | None:
    """The stamp of a file's bytes: a parquet export's metadata (found in its footer without a parquet decoder:
    the key, then the stamp's JSON object), else :func:`read_stamp` of the text."""
    if data[:4] == b"PAR1" and data[-4:] == b"PAR1" and len(data) >= 12:
        size = int.from_bytes(data[-8:-4], "little")
        footer = data[max(4, len(data) - 8 - size):-8]
        at = footer.find(STAMP_KEY)
        start = footer.find(b'{"stamp"', at) if at >= 0 else -1
        if start < 0:
            return None
        try:
            stamp, _ = json.JSONDecoder().raw_decode(footer[start:].decode("ascii", errors="replace"))
        except (ValueError, RecursionError):
            return None
        return stamp if isinstance(stamp, dict) else None
    return read_stamp(data.decode("utf-8", errors="replace"))


def stamp_export(text: str, fmt: str, stamp: Mapping) -> str:
    """``text`` (an export in ``fmt``) with ``stamp`` in it: the key ``"stamp"`` of a JSON object,
    comment lines on top of CSV, Markdown and LaTeX; any other format is returned unchanged."""
    if fmt == "json":
        obj = json.loads(text)
        obj["stamp"] = dict(stamp)
        return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"
    if fmt not in COMMENTS:
        return text
    before, after = COMMENTS[fmt]
    lines = [f"{before}stamp.{key} = {_ascii_json(stamp[key])}{after}" for key in FIELDS if key in stamp]
    return "\n".join(lines) + "\n" + text


def _ascii_json(value) -> str:
    """One line of ASCII JSON in which ``>`` and ``<`` are escaped: no value ends a comment."""
    return json.dumps(value, ensure_ascii=True, sort_keys=False).replace("<", "\\u003c").replace(">", "\\u003e")


def _stamp_line(line: str) -> tuple[str, str] | None:
    """``(field, JSON text)`` of a stamp comment line, else ``None``."""
    m = _LINE.match(line)
    if m is None:
        return None
    value = line[m.end():].rstrip()
    if line.startswith("<!-- "):
        value = value.removesuffix("-->").rstrip()
    return m.group(1), value


def read_stamp(text: str) -> dict | None:
    """The stamp of an export (JSON key or comment lines), or ``None`` when it has none."""
    text = text.lstrip("\ufeff")  # a byte-order mark an editor may have added
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except (ValueError, RecursionError):  # not JSON, an integer past Python's digit limit, deep nesting
            return None
        stamp = obj.get("stamp") if isinstance(obj, dict) else None
        return stamp if isinstance(stamp, dict) else None
    stamp = {}
    for line in text.splitlines():
        found = _stamp_line(line)
        if found is None:
            if stamp:
                break  # the block is over
            continue
        try:
            stamp[found[0]] = json.loads(found[1])
        except (ValueError, RecursionError):
            continue
    return stamp or None


def strip_stamp(text: str) -> str:
    """``text`` without the stamp's comment lines on top (a JSON export is returned unchanged):
    what a CSV reader reads when a cell may hold ``#`` (``pandas.read_csv(comment="#")`` would cut it)."""
    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and _stamp_line(lines[n].rstrip("\r\n")) is not None:
        n += 1
    return "".join(lines[n:])


def stamp_differences(a: Mapping, b: Mapping) -> list[str]:
    """What differs between two stamps and makes their figures incomparable or different in
    origin, one line each (empty: the same data, split, cut-offs, measures and code). Runs are
    matched by their ranking digest first (the same ranking in another file or format is the same run:
    :func:`same_runs`), then by name: one in both with another ranking or file is named; runs in one only
    are listed."""
    out = []

    def differ(label: str, x, y) -> None:
        if x != y:
            out.append(f"{label}: {_show(x)} vs {_show(y)}")

    differ("stamp format", a.get("stamp"), b.get("stamp"))
    da, db = _mapping(a.get("dataset")), _mapping(b.get("dataset"))
    for key in ("name", "kind", "revision", "labels_sha256"):
        differ(f"dataset {key}", da.get(key), db.get(key))
    ha, hb = _mapping(da.get("sha256")), _mapping(db.get("sha256"))
    for name in sorted(set(ha) | set(hb)):
        differ(f"dataset file {_show(name)} sha256", ha.get(name), hb.get(name))
    differ("split", a.get("split"), b.get("split"))
    differ("k values", a.get("ks"), b.get("ks"))
    va, vb = _mapping(a.get("bsard_demo")), _mapping(b.get("bsard_demo"))
    differ("bsard-demo version", va.get("version"), vb.get("version"))
    differ("bsard-demo commit", va.get("commit"), vb.get("commit"))
    ma, mb = _mapping(a.get("measures")), _mapping(b.get("measures"))
    for column in sorted(set(ma) & set(mb)):
        differ(f"measure {_show(column)}", ma[column], mb[column])
    only = sorted(set(ma) ^ set(mb))
    if only:
        more = f" and {len(only) - 5} more" if len(only) > 5 else ""
        out.append(f"measures in one file only: {', '.join(_show(c) for c in only[:5])}{more}")
    differ("conventions", a.get("conventions"), b.get("conventions"))
    out += _run_differences(a, b)
    return out


def same_runs(a: Mapping, b: Mapping) -> list[str]:
    """The runs both stamps hold as the same ranking (:meth:`bsard_demo.runs.Run.ranking_sha256`) from another
    file or under another name, one line each: "the same run, another file", not a difference."""
    out = []
    for x, y, ra, rb in _matched(a, b):
        if (x, ra.get(x)) != (y, rb.get(y)):
            how = "another file" if ra.get(x) != rb.get(y) else "the same file"
            named = _show(x) if x == y else f"{_show(x)} and {_show(y)}"
            out.append(f"run {named}: the same ranking, {how}")
    return out


def _matched(a: Mapping, b: Mapping) -> list[tuple[str, str, Mapping, Mapping]]:
    """Pairs ``(name in a, name in b, a's runs, b's runs)`` of runs with the same ranking digest, each run in one
    pair at most (a name of both first)."""
    ra, rb = _mapping(a.get("runs")), _mapping(b.get("runs"))
    ka, kb = _mapping(a.get("rankings")), _mapping(b.get("rankings"))
    free = [n for n in kb if isinstance(kb[n], str)]
    pairs = []
    for x in sorted(ka, key=lambda n: (n not in kb, n)):
        digest = ka[x]
        if not isinstance(digest, str):
            continue
        y = x if x in free and kb[x] == digest else next((n for n in free if kb[n] == digest), None)
        if y is not None:
            free.remove(y)
            pairs.append((x, y, ra, rb))
    return pairs


def _run_differences(a: Mapping, b: Mapping) -> list[str]:
    """Runs compared: those of the same ranking are the same run (:func:`same_runs`); of the others, a name in
    both is named with what differs (its ranking, else its file), the rest listed as in one file only."""
    ra, rb = _mapping(a.get("runs")), _mapping(b.get("runs"))
    ka, kb = _mapping(a.get("rankings")), _mapping(b.get("rankings"))
    pairs = _matched(a, b)
    left = [n for n in ra if n not in {x for x, *_ in pairs}]
    right = [n for n in rb if n not in {y for _, y, *_ in pairs}]
    out = []
    for name in sorted(set(left) & set(right)):
        if name in ka and name in kb and ka[name] != kb[name]:
            out.append(f"run {_show(name)}: another ranking ({_show(ka[name])} vs {_show(kb[name])})")
        elif ra[name] != rb[name]:
            out.append(f"run {_show(name)}: another file (sha256 {_show(ra[name])} vs {_show(rb[name])})")
    for label, runs, other in (("first", left, right), ("second", right, left)):
        only = sorted(set(runs) - set(other))
        if only:
            more = f" and {len(only) - 5} more" if len(only) > 5 else ""
            out.append(f"runs in the {label} file only: {', '.join(_show(n) for n in only[:5])}{more}")
    return out


def _mapping(value) -> Mapping:
    """A stamp field that should be an object: itself, or ``{}`` when a file holds anything else."""
    return value if isinstance(value, Mapping) else {}


def _show(value) -> str:
    """A stamp value in a message: a digest by its first 12 characters, anything at most ~80."""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value):
        return value[:12]
    text = "none" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else f"{text[:80]}… ({len(text)} characters)"
