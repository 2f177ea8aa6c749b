"""Issue 37's bar for the CLI: each class of costly file (tests/_hostile_runs.py), made by code at 20 MB,
makes ``evaluate`` exit 0 or 2 within 30 s with its whole process tree at most 512 MB (summed RSS,
sampled every 20 ms; before: > 120 s for the gzip member flood, up to 1.7 GB: docs/reliability.md,
section 12)."""
from __future__ import annotations

import pytest

from _hostile_runs import CLASSES, evaluate_cost, shared_class


@pytest.mark.parametrize("name", list(CLASSES))
def test_evaluate_ends_each_costly_file_in_30_s_and_512_mb(tmp_path_factory, name):
    path = shared_class(name, 20, tmp_path_factory)  # read only, so written once a process
    cost = evaluate_cost(path, "sample", timeout=60)
    assert cost["exit"] in (0, 2) and cost["seconds"] < 30 and cost["peak_mb"] <= 512, cost
    assert cost["exit"] == 2 and len(cost["errors"]) == 1, cost  # refused, with its one code
