"""The fuzz harness's quick mode (tests/_fuzz.py; its long mode is bench/fuzz_runs.py, issue 21):
seeded hostile files of every format, each read in a child; none may abort, hang, escape or end
in ``internal_error``. A failing case is saved as bytes under bench/out/fuzz-failures/ and named in the failure
(keep it in tests/runs/hostile/ once fixed). The long mode and its figures: docs/reliability.md."""
from __future__ import annotations

from pathlib import Path

import pytest

from _fuzz import Reader, dataset_cases, parquet_cases, run_cases, text_cases

HOSTILE = Path(__file__).parent / "hostile"
SAVED = Path(__file__).resolve().parents[2] / "bench" / "out" / "fuzz-failures"


def no_failures(outcomes) -> None:
    failed = [o for o in outcomes if o.failure]
    for o in failed:
        SAVED.mkdir(parents=True, exist_ok=True)
        (SAVED / o.name).write_bytes(o.data)
    assert not failed, [f"{o.name}: {o.failure} (bytes in {SAVED / o.name})" for o in failed]


@pytest.fixture(scope="module")
def reader():
    """One reading child for the cases of this module that should all read (a case that kills it or hangs
    still ends it, and the next gets a new one): each start costs ~1 CPU s (pandas, its fork server)."""
    shared = Reader()
    yield shared
    shared.close()


def test_structure_aware_parquet_mutations(reader):
    outcomes = run_cases(parquet_cases(100, seed=0), reader=reader)
    assert len(outcomes) == 100
    no_failures(outcomes)


def test_byte_mutations_of_the_text_formats(reader):
    outcomes = run_cases(text_cases(300, seed=0), reader=reader)
    assert len(outcomes) == 300
    no_failures(outcomes)


def test_byte_mutations_of_a_dataset_folder_s_csv_files(reader):
    """pandas' C parser reads a folder's CSV files in the process (docs/reliability.md: the audit)."""
    outcomes = run_cases(dataset_cases(100, seed=0), kind="dataset", reader=reader)
    assert len(outcomes) == 100 and any(o.codes == ["DataError"] for o in outcomes)
    no_failures(outcomes)


def test_regression_files(reader):
    files = sorted(HOSTILE.glob("*.parquet"))
    assert files
    no_failures(run_cases(((f.name, f.read_bytes()) for f in files), reader=reader))


def test_the_harness_fails_a_case_that_kills_its_reader_and_goes_on():
    """``isolate=False``: parquet decoded in the harness's child, which the regression file kills;
    that case fails with the reason, and the next one is read by a new child."""
    crash = sorted(HOSTILE.glob("abort-*.parquet"))[0]
    outcomes = run_cases([(crash.name, crash.read_bytes()), ("good.trec", b"1 Q0 a 1 2.0 t\n")], isolate=False)
    assert "died" in outcomes[0].failure and outcomes[1].failure == "" and outcomes[1].codes == ["short_rankings"]


def test_the_harness_fails_a_case_that_takes_too_long():
    [outcome] = run_cases([("slow.trec", b"1 Q0 a 1 2.0 t\n")], timeout=0.0)
    assert outcome.failure == "no answer within 0 s"


def test_the_cases_are_reproducible():
    assert list(parquet_cases(20, seed=3)) == list(parquet_cases(20, seed=3))
    assert list(text_cases(20, seed=3)) == list(text_cases(20, seed=3))
    assert list(dataset_cases(20, seed=3)) == list(dataset_cases(20, seed=3))
