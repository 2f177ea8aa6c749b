"""A parquet upload that aborts pyarrow (issue 21): the Score page names the problem on that file's
row, scores the other files of the upload, and the server process (here the test's) lives on."""
from __future__ import annotations

from pathlib import Path

from _app_helpers import assert_next_visitor_scores, sample_run_trec, scored_runs, start

HOSTILE = Path(__file__).resolve().parents[1] / "runs" / "hostile"


def test_the_aborting_file_is_named_and_the_others_are_scored():
    at = start("pages/score.py")
    uploader = at.file_uploader(key="runs")
    for path in sorted(HOSTILE.glob("abort-*.parquet"))[:2]:
        uploader.upload(path.name, path.read_bytes(), "application/octet-stream")
    uploader.upload("bon.trec", sample_run_trec(seed=3).encode(), "text/plain")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 2 and all("ce run n'est pas évalué" in e for e in errors), errors
    problems = [d.value for d in at.dataframe if "problème" in d.value.columns][:2]  # then bon.trec's warnings
    assert [list(p["code"]) for p in problems] == [["reader_crashed"], ["reader_crashed"]]
    details = [d.value for d in at.dataframe if "message" in d.value.columns][:2]  # the reader's own words
    names = sorted(HOSTILE.glob("abort-*.parquet"))[:2]
    for frame, path in zip(details, names):
        [message] = list(frame["message"])
        assert path.name in message and "damaged or hostile" in message and "parquet::" not in message
    assert scored_runs(at) == ["bon.trec"]
    assert_next_visitor_scores()  # the same server process serves the next visitor
