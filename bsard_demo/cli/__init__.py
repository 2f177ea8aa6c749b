"""The command line ``python -m bsard_demo ...`` (see :mod:`bsard_demo.cli.main`)."""
