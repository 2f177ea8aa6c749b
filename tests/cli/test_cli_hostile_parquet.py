"""``evaluate`` on a parquet file that aborts pyarrow (issue 21), through the real interpreter (the
child's C++ text would reach the terminal's stderr, not a captured sys.stderr): one problem line,
exit 2, and the other files of the command scored."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOSTILE = sorted((REPO / "tests" / "runs" / "hostile").glob("abort-*.parquet"))


def evaluate(*paths) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bsard_demo", "evaluate", *map(str, paths), "--data", "sample",
                           "--format", "csv"], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_one_line_exit_2_and_the_good_file_scored(tmp_path):
    alone = evaluate(HOSTILE[0])
    assert alone.returncode == 2 and alone.stdout == ""
    [line] = alone.stderr.splitlines()
    assert line == (f"bsard_demo evaluate: {HOSTILE[0].name}: error [reader_crashed]: the parquet reader crashed on "
                    f"{HOSTILE[0].name}: the file is damaged or hostile and was not read; not scored")
    good = tmp_path / "good.trec"
    good.write_text("".join(f"{q} Q0 {d} {r} {10 - r} t\n" for q in range(1, 4) for r, d in enumerate("abc", 1)))
    mixed = evaluate(*HOSTILE, good)
    assert mixed.returncode == 2
    assert [line.split(": ")[1] for line in mixed.stderr.splitlines() if "reader_crashed" in line] == \
        [p.name for p in HOSTILE]
    assert "terminate" not in mixed.stderr and "parquet::" not in mixed.stderr and "Traceback" not in mixed.stderr
    assert "good.trec" in mixed.stdout
