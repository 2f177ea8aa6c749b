"""Run files for the app tests, made from the bundled sample without any retriever."""
from __future__ import annotations

import numpy as np

from bsard_demo.sources import load_sample

CLI_ENV = {"HF_HUB_OFFLINE": "1"}


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
