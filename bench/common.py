"""What the benchmarks share: machine facts, the targets, timing, memory (RSS, /proc),
percentiles, text tables, the ``python -m bsard_demo`` runner, the synthetic-corpus fixture and
JSON output.

Imports only the standard library, numpy, ``bench.synthetic`` and ``_browser`` (tests' support
module, for Chromium's version); the last two lazily, for the benches that need them.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
#: the BSARD-scale synthetic corpus (seed 0) most benches default to, made when absent
SYNTH = OUT / "synth"
SYNTH_FILES = ("articles.csv", "questions_test.csv", "questions_train.csv")


# --------------------------------------------------------------------------- machine facts

def load_average() -> str:
    """``"0.52, 0.61, 0.70"``: the 1, 5 and 15 minute load averages."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def package_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        module = sys.modules.get(dist) or __import__(dist)
        return str(getattr(module, "__version__", "?"))


def machine_facts(*packages: str, extra: Sequence[str] = (), usable: bool = True, python: bool = True) -> str:
    """The header every bench prints: ``machine: …, cpu_count N (usable U), load average …`` and,
    with ``python``, a second line ``python X.Y.Z, pkg version, …, extra…``. A package is a
    distribution name, or ``label=distribution`` to print another label."""
    line = f"machine: {platform.machine()} {platform.system()}, cpu_count {os.cpu_count()}"
    if usable:
        line += f" (usable {usable_cpus()})"
    line += f", load average {load_average()}"
    if not python:
        return line
    parts = [f"python {platform.python_version()}"]
    for p in packages:
        label, _, dist = p.partition("=")
        parts.append(f"{label} {package_version(dist or label)}")
    return line + "\n" + ", ".join([*parts, *extra])


# --------------------------------------------------------------------------- targets

#: What each bench compares its figures with (the table of docs/benchmarks.md, "Targets"; units in
#: the names: s, ms, MB, × for a speed-up, which is "at least"; every other target is "at most").
TARGETS: dict[str, float] = {
    "bm25_all_s": 1.0, "bm25_speedup": 50.0, "bm25_one_ms": 5.0, "bm25_build_s": 15.0,  # bench_retrieval
    "dense_one_ms": 50.0, "memory_mb": 1024.0,  # bench_retrieval
    "evaluate_whole_s": 0.3, "read_run_above_tiny_mb": 150.0,  # bench_evaluate, bench_memory
    "app_first_page_s": 5.0, "app_search_ms": 300.0, "app_first_hits_s": 10.0, "app_rss_mb": 1024.0,  # bench_app
    "app_cold_link_s": 45.0, "cli_cold_run_s": 120.0,  # bench_app --only cold, bench_cold_start
    "uploads_rss_mb": 1536.0,  # load_app --scenario uploads
}


def target(name: str) -> float:
    """The value of target ``name`` (a key of :data:`TARGETS`)."""
    return TARGETS[name]


# --------------------------------------------------------------------------- timing, percentiles

def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """(wall seconds, result) of ``fn()``."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def median_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Median wall-clock seconds of ``repeat`` calls, and the last result."""
    times, out = [], None
    for _ in range(max(1, repeat)):
        t, out = timed(fn)
        times.append(t)
    return statistics.median(times), out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); NaN for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def p50_p95(values: Sequence[float]) -> tuple[float, float]:
    """Median and 95th percentile (linear interpolation)."""
    return percentile(values, 50), percentile(values, 95)


# --------------------------------------------------------------------------- memory (/proc)

def mb(kb: float) -> float:
    """kB (as /proc and ``ru_maxrss`` give them) to MiB."""
    return kb / 1024


def memory_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MiB, from /proc/self/status (Linux)."""
    values = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, amount, _unit = line.split()
                values[key[:-1]] = mb(int(amount))
    except OSError:
        import resource

        return float("nan"), mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return values.get("VmRSS", float("nan")), values.get("VmHWM", float("nan"))


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (scans /proc/*/stat: the ``children`` files may be absent)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text[text.rindex(")") + 2:].split()[1])  # fields after "(comm)": state, ppid, …
        if ppid == pid:
            out.append(int(stat.parent.name))
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (alive now)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def tree_memory_kb(pid: int) -> dict[str, int]:
    """``{"rss": …, "hwm": …, "processes": n}``: /proc status VmRSS/VmHWM of ``pid`` and all its
    descendants, summed (the sum of high-water marks is an upper bound of the tree's peak)."""
    total = {"rss": 0, "hwm": 0, "processes": 0}
    for p in process_tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        total["rss"] += int(fields.get("VmRSS", "0 kB").split()[0])
        total["hwm"] += int(fields.get("VmHWM", "0 kB").split()[0])
        total["processes"] += 1
    return total


def cpu_seconds(pids) -> float:
    """User + system CPU seconds used so far by the processes ``pids`` (/proc/<pid>/stat)."""
    total = 0
    for p in pids:
        try:
            text = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- output

def table(rows: Iterable[Sequence[object]], header: Sequence[str]) -> str:
    """A plain text table, first column left-aligned, the others right-aligned."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line([str(h) for h in header]), *(line(r) for r in rows)])


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: dataclasses, paths, numpy scalars and arrays, sets, tuple keys."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int, float, bool)) or k is None else " / ".join(map(str, k))
                if isinstance(k, tuple) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in (sorted(value, key=str) if isinstance(value, (set, frozenset)) else value)]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: str | Path | None, data: Any) -> Path | None:
    """Write ``data`` (plus the machine facts and the time) as JSON to ``path``, beside the table
    the bench printed; ``None`` or ``""`` writes nothing. Returns the path written."""
    if not path:
        return None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"written": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv,
              "machine": machine_facts(python=False), "python": platform.python_version(), "results": _plain(data)}
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    print(f"results written to {path}", flush=True)
    return path


def json_option(parser, name: str) -> None:
    """``--json FILE`` (default ``bench/out/NAME.json``; ``--json ''`` writes none)."""
    parser.add_argument("--json", default=str(OUT / f"{name}.json"), metavar="FILE",
                        help=f"also write the results as JSON (default bench/out/{name}.json; '' for none)")


# --------------------------------------------------------------------------- processes, folders

def cli(args: Sequence[str], cache: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    """``python -m bsard_demo ARGS`` with ``BSARD_CACHE=cache``, offline; raises on failure."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BSARD_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "bsard_demo", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"bsard_demo {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def app_machine_facts() -> str:
    """:func:`machine_facts` with the app's versions: streamlit, playwright, Chromium."""
    from _browser import CHROMIUM

    chromium = subprocess.run([str(CHROMIUM), "--version"], capture_output=True, text=True).stdout.strip()
    return machine_facts("streamlit", "playwright", extra=[chromium or "chromium ?"])


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def synthetic_corpus(path: str | Path = SYNTH, *, articles: int | None = None) -> Path:
    """The synthetic corpus folder ``path`` (seed 0, ``articles`` articles, BSARD's 22,633 by
    default), written first when one of its files is absent, as ``python bench/synthetic.py --out
    PATH [--articles N]`` would (same bytes, same report printed)."""
    from bench import synthetic

    path = Path(path)
    if not all((path / name).is_file() for name in SYNTH_FILES):
        argv = ["--out", str(path)] + (["--articles", str(articles)] if articles is not None else [])
        if synthetic.main(argv) != 0:
            raise SystemExit(f"could not write the synthetic corpus into {path}")
    return path
