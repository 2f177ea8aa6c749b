"""Speed benchmarks, run by hand (bench/README.md; results in docs/benchmarks.md).

A package so that its shared modules import one way (``from bench.common import …``):
``common`` (machine facts, timing, RSS, percentiles, the synthetic-corpus fixture, JSON output),
``browser`` (the Streamlit server + Chromium driver, also used by the browser tests),
``targets`` (the table of targets) and ``synthetic`` (the BSARD-like generator). The scripts
still run as ``python bench/NAME.py`` (``bench/_path.py`` puts the repository on ``sys.path``)
and as ``python -m bench.NAME``. Nothing here imports ``tests/``.
"""
