"""Benchmarks, run by hand (bench/README.md; results in docs/benchmarks.md and docs/reliability.md).

A package so that its shared module imports one way (``from bench.common import …``). The scripts
run as ``python bench/NAME.py`` and as ``python -m bench.NAME``; both put the repository and
``tests/`` on ``sys.path`` (``bench/_path.py``), so a bench imports the tests' support modules
(``_browser``, ``_ws_client``, ``_synthetic``, ``_fuzz``) by their bare names. Tests never import bench/.
"""
from bench import _path  # noqa: F401
