"""Shared by the app tests: starting ``app.py`` under ``AppTest``, and run files made from the
bundled sample without any retriever."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from bsard_demo.app.data_words import ALLOW_FOLDERS_ENV
from bsard_demo.sources import load_sample

CLI_ENV = {"HF_HUB_OFFLINE": "1"}
REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120


def set_app_env(monkeypatch, cache: Path, data: str, *, stored_hybrid: bool = False) -> Path:
    """The app's environment for one test: ``BSARD_DATA=data``, ``BSARD_CACHE=cache`` (made if
    needed), offline, no ``BSARD_ALLOW_FOLDERS`` (a test that needs it sets it), cwd the repo.
    A first visitor sees BM25 alone unless ``stored_hybrid`` (``link_policy.SHOW_STORED_HYBRID``):
    many tests share one cache, where an earlier test's embeddings would otherwise add the
    hybrid to later tests' pages."""
    from bsard_demo.app import link_policy

    monkeypatch.setattr(link_policy, "SHOW_STORED_HYBRID", stored_hybrid)
    cache.mkdir(exist_ok=True)
    monkeypatch.setenv("BSARD_DATA", data)
    monkeypatch.setenv("BSARD_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ALLOW_FOLDERS_ENV, raising=False)
    monkeypatch.chdir(REPO)
    return cache


def assert_clean(at: AppTest) -> None:
    """No exception and no error box on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def start(page: str | None = None) -> AppTest:
    """``app.py`` run once (then switched to ``page``), checked clean."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    if page:
        at.switch_page(page).run()
    assert_clean(at)
    return at


def sample_run_trec(seed: int = 0, split: str = "test", depth: int = 150, drop: int = 0) -> str:
    """A TREC run over the sample's ``split``: every article shuffled by ``seed``, cut to ``depth``,
    scores strictly decreasing; the first ``drop`` questions are left out (they score 0)."""
    ds = load_sample()
    rng = np.random.default_rng(seed)
    ids = np.array(sorted(ds.articles["id"]))
    lines = []
    for qid in list(ds.questions(split)["id"])[drop:]:
        ranking = rng.permutation(ids)[:depth]
        lines += [f"{qid} Q0 {doc} {r} {depth - r + 1}.5 seed{seed}" for r, doc in enumerate(ranking, 1)]
    return "\n".join(lines) + "\n"


def column_names(at: AppTest) -> list[str]:
    """The Search page's columns, left to right, by their label with its settings (Markdown-escaped, as the
    page writes it): the first line of each column's « Détails techniques » (its heading is its kind's title)."""
    return [e.caption[0].value for e in at.main.expander if e.label == "Détails techniques"]


def scored_runs(at: AppTest) -> list[str]:
    """The names of the runs the Score page's metrics table holds (it shows exactly one such table)."""
    [metrics] = [d.value for d in at.dataframe if "R@100" in d.value.columns]
    return list(metrics.index)


def assert_next_visitor_scores(seed: int = 4) -> None:
    """A fresh Score page of the same server process scores a good upload with no error (after a hostile one)."""
    again = start("pages/score.py")
    again.file_uploader(key="runs").upload("encore.trec", sample_run_trec(seed=seed).encode(), "text/plain")
    again.run()
    assert not again.exception and not again.error, [e.value for e in again.exception or again.error]
