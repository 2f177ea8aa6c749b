"""Shared fixtures: the real BSARD question files live in ../shared (never in the repo)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_BSARD = REPO.parent / "shared" / "data" / "bsard"


@pytest.fixture(scope="session")
def real_bsard_dir() -> Path:
    if not (SHARED_BSARD / "questions_test.csv").is_file():
        pytest.skip(f"real BSARD question files not found at {SHARED_BSARD} (../shared is absent)")
    return SHARED_BSARD


@pytest.fixture(scope="session")
def real_bsard(real_bsard_dir):
    from bsard_demo.sources import load_dataset

    return load_dataset(real_bsard_dir, need_corpus=False)


# Property tests: in CI, a fixed sequence of examples (a new random example must not turn CI red
# on its own; failures found locally are replayed from the example database) and no database
# written into the checkout.
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
