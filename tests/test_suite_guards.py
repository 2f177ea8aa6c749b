"""The suite never hangs (issue 21 item 3): under this repository's pytest configuration
(pyproject.toml: pytest-timeout's "thread" method, xdist's --max-worker-restart 0), a test that
aborts its worker and a test that hangs in native code each fail with their names ("worker 'gw0'
crashed while running ..."), quickly, and the run ends with a failure instead of waiting."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DOOMED = '''
import ctypes, os, time

def test_passes():
    pass

def test_aborts_its_worker():
    os.abort()

def test_hangs_in_native_code():
    # sleep(3) of libc, called 1,000 times: no Python bytecode runs, so a signal-based timeout
    # would wait for the call to return
    libc = ctypes.CDLL(None)
    for _ in range(1000):
        libc.sleep(3)
'''


def test_a_dying_worker_and_a_hang_fail_the_run_quickly_with_their_names(tmp_path):
    (tmp_path / "test_doomed.py").write_text(DOOMED)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir",
                           str(tmp_path), "-o", "timeout=2", "-p", "no:cacheprovider", "-q", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode not in (0, 5), out[-3000:]
    summary = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert any("test_aborts_its_worker" in line and "crashed" in line for line in summary), out[-3000:]
    assert any("test_hangs_in_native_code" in line and "crashed" in line for line in summary), out[-3000:]
    assert "2 failed, 1 passed" in out, out[-3000:]
    assert seconds < 120, f"the run took {seconds:.0f} s"
