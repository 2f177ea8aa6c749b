"""Files that cost time or memory, not bytes (issue 37), uploaded together on the Score page: each is
one error on its row (its limit named), the good run beside them is scored, the page answers at
once and the next visitor is served (the classes: tests/_hostile_runs.py, at 4 MB, the tiny lines at
8 MB: 1.4 million; 20 MB through the CLI: tests/test_hostile_reads.py)."""
from __future__ import annotations

import time

from _app_helpers import assert_next_visitor_scores, sample_run_trec, scored_runs, start
from _hostile_runs import write_class

CLASSES = {"gzip member flood": "gzip_too_many_members", "one line, many fields": "line_too_long",
           "one huge line": "line_too_long", "flat JSON list": "too_large_in_memory",
           "many tiny lines": "too_large_in_memory"}


def test_each_costly_file_is_one_error_and_the_good_run_is_scored(tmp_path):
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    paths = [write_class(name, tmp_path, 8 if name == "many tiny lines" else 4) for name in CLASSES]
    for path in paths:
        uploader.upload(path.name, path.read_bytes(), "application/octet-stream")
    uploader.upload("bon.trec", sample_run_trec(seed=3).encode(), "text/plain")
    t = time.perf_counter()
    at.run(timeout=90)
    assert time.perf_counter() - t < 60
    assert not at.exception, [e.value for e in at.exception]
    problems = [d.value for d in at.dataframe if "code" in d.value.columns]
    codes = [list(p["code"]) for p in problems]
    for name, code in CLASSES.items():
        assert [code] in codes, (name, codes)
    assert scored_runs(at) == ["bon.trec"]
    assert_next_visitor_scores()  # the same server process serves the next visitor
