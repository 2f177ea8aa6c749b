"""Tree ensemble prediction without LightGBM (bsard_demo/retrievers/trees.py) against ``booster.predict``, in one
process (docs/benchmarks.md, "Tree ensemble prediction without LightGBM").

    python bench/bench_trees.py [--trees 300] [--leaves 7] [--features 29] [--rows 600 5000] [--repeat 21]

A LambdaRank model (``--trees`` trees of ``--leaves`` leaves, ``--features`` features) is trained by LightGBM on
seeded synthetic rows (normal values, 10 % NaN, 10 % exact zeros; groups of 20), then for each ``--rows``: the
median of ``--repeat`` calls of :meth:`TreeEnsemble.predict` (its table of leaves; and every tree walked level by
level, the way taken by trees of more than 9 leaves), of ``booster.predict(X, raw_score=True)`` with LightGBM's
default threads and with one thread, and the largest |difference| from LightGBM. Also: the model file's size
(``json.dumps(as_dict())``) and the time to read it back (``from_dict``, which checks everything).
"""
from __future__ import annotations

import argparse
import json

import numpy as np

if __package__ in (None, ""):  # python bench/bench_trees.py
    import _path  # noqa: F401

from bench.common import json_option, machine_facts, median_time, table, write_json  # noqa: E402
from bsard_demo.retrievers import trees  # noqa: E402


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm
    return median_time(fn, repeat)[0] * 1e3


def _rows(rng, n: int, features: int) -> np.ndarray:
    X = rng.normal(size=(n, features))
    X[rng.random(X.shape) < 0.1] = 0.0
    X[rng.random(X.shape) < 0.1] = np.nan
    return X


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trees", type=int, default=300)
    parser.add_argument("--leaves", type=int, default=7)
    parser.add_argument("--features", type=int, default=29)
    parser.add_argument("--rows", type=int, nargs="+", default=[600, 5000])
    parser.add_argument("--repeat", type=int, default=21)
    json_option(parser, "bench_trees")
    args = parser.parse_args(argv)
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = _rows(rng, 6000, args.features)
    y = np.clip(np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1] > 0) + rng.normal(0, 1, len(X)), 0, 3).astype(int)
    params = {"objective": "lambdarank", "num_leaves": args.leaves, "learning_rate": 0.05, "min_data_in_leaf": 5,
              "verbose": -1, "seed": 0}
    booster = lgb.train(params, lgb.Dataset(X, y, group=[20] * (len(X) // 20)), num_boost_round=args.trees)
    print(machine_facts("numpy", "lightgbm", extra=[f"{booster.num_trees()} trees of <= {args.leaves} leaves, "
                                                   f"{args.features} features, median of {args.repeat}"]))
    model = trees.TreeEnsemble.from_lightgbm(booster)
    text = json.dumps(model.as_dict())
    read_ms = _median_ms(lambda: trees.TreeEnsemble.from_dict(json.loads(text)), 5)
    saved, trees.TABLE_SPLITS = trees.TABLE_SPLITS, 0
    walked = trees.TreeEnsemble.from_dict(json.loads(text))  # every tree walked level by level
    trees.TABLE_SPLITS = saved
    results, lines = {"model_file_bytes": len(text), "read_ms": read_ms, "rows": {}}, []
    for n in args.rows:
        Xn = _rows(np.random.default_rng(n), n, args.features)
        expected = booster.predict(Xn, raw_score=True)
        diff = max(float(np.max(np.abs(m.predict(Xn) - expected))) for m in (model, walked))
        row = {"numpy (table)": _median_ms(lambda: model.predict(Xn), args.repeat),  # noqa: B023
               "numpy (walk)": _median_ms(lambda: walked.predict(Xn), args.repeat),  # noqa: B023
               "lightgbm": _median_ms(lambda: booster.predict(Xn, raw_score=True), args.repeat),  # noqa: B023
               "lightgbm 1 thread": _median_ms(lambda: booster.predict(Xn, raw_score=True, num_threads=1),  # noqa: B023
                                               args.repeat),
               "max_abs_diff": diff}
        results["rows"][n] = row
        lines.append([n, *(f"{row[k]:.2f}" for k in list(row)[:4]), f"{diff:.1e}"])
    print(table(lines, ["rows", "numpy table ms", "numpy walk ms", "lightgbm ms", "lightgbm 1 thread ms",
                        "max |diff|"]))
    print(f"model file {len(text):,} bytes (json.dumps(as_dict())), read back and checked in {read_ms:.1f} ms")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
