"""An upload whose one article id is huge (issue 30, item 7): the Score page scores it and shows the id
in bounded excerpts only: no element of the page carries the id whole (at 40 MB it made two 40 MB
tables: the problems and the drill-down's articles)."""
from __future__ import annotations

import json

from _app_helpers import start

HUGE = 2_000_000


def test_a_huge_article_id_reaches_the_page_only_as_an_excerpt():
    at = start("pages/score.py")
    data = json.dumps({"1": {"A" * HUGE: 1.0, "2": 0.5}}).encode()
    at.file_uploader(key="runs").upload("huge.json", data, "application/json").run()
    assert not at.exception, [e.value for e in at.exception]
    frames = [d.value for d in at.dataframe]
    assert any("code" in f.columns and "unknown_articles" in set(f["code"]) for f in frames)
    assert any("article" in f.columns for f in frames)  # the drill-down's articles: the id is there, bounded
    longest = max(len(str(v)) for f in frames for v in f.astype(str).to_numpy().ravel())
    assert longest < 1000, longest
    texts = [str(getattr(e, "value", "")) for kind in ("markdown", "caption", "warning", "error", "info")
             for e in at.get(kind)]
    assert all("A" * 81 not in t for t in texts)
