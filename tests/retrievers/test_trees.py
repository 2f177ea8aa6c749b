"""bsard_demo/retrievers/trees.py: LightGBM's raw scores in numpy, bit for bit, and a damaged model file refused.

The comparisons train small LightGBM models (skipped without lightgbm); the checks of a model file need none.
"""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from bsard_demo.retrievers.trees import MAX_DEPTH, MAX_NODES, MAX_TREES, ZERO_THRESHOLD, TreeEnsemble


def _data(rows: int, features: int, seed: int) -> np.ndarray:
    """Normal values with ~15 % NaN, ~15 % exact zeros and a few repeated values (ties between rows)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features))
    X[rng.random(X.shape) < 0.15] = 0.0
    X[rng.random(X.shape) < 0.15] = np.nan
    X[:, 1] = np.round(X[:, 1], 1)  # few distinct values: thresholds sit between them
    return X


def _hard_rows(model: TreeEnsemble, X: np.ndarray, seed: int) -> np.ndarray:
    """Rows of ``X`` whose features are set, one split at a time, to that split's exact threshold (a tie:
    ``x <= threshold`` goes left), to a value LightGBM reads as zero (+-kZeroThreshold, 1e-40, -0.0), and to
    +-inf; the rest of each row from ``X``."""
    rng = np.random.default_rng(seed)
    rows = []
    for tree in model.as_dict()["trees"]:
        for feature, threshold in zip(tree["split_feature"], tree["threshold"]):
            for value in (threshold, np.nextafter(threshold, np.inf), np.nextafter(threshold, -np.inf)):
                row = X[rng.integers(len(X))].copy()
                row[feature] = value
                rows.append(row)
    special = (ZERO_THRESHOLD, -ZERO_THRESHOLD, np.nextafter(ZERO_THRESHOLD, 1), 1e-40, -0.0, np.inf, -np.inf)
    for value in special:
        for feature in range(X.shape[1]):
            row = X[rng.integers(len(X))].copy()
            row[feature] = value
            rows.append(row)
    return np.vstack([X, np.array(rows)])


def _train(params: dict, X: np.ndarray, y: np.ndarray, rounds: int, group=None):
    lgb = pytest.importorskip("lightgbm")
    base = {"verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True}
    return lgb.train({**base, **params}, lgb.Dataset(X, y, group=group), num_boost_round=rounds)


def _lambdarank(params: dict | None = None, seed: int = 0):
    X = _data(600, 8, seed)
    rng = np.random.default_rng(seed)
    y = np.clip(np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 2] > 0) + (X[:, 3] == 0) * 1.5
                + rng.normal(0, 0.5, len(X)), 0, 3).astype(int)
    params = {"objective": "lambdarank", "num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 5, **(params or {})}
    return _train(params, X, y, 40, group=[20] * 30), X


@pytest.fixture(scope="module")
def lambdarank():
    return _lambdarank()


@pytest.fixture(scope="module")
def regression():
    """31 leaves: walked level by level (over the table's 8 splits); a few trees are small enough for the table."""
    X = _data(800, 6, 1)
    rng = np.random.default_rng(1)
    y = np.nan_to_num(X[:, 0]) * 2 + np.sin(np.nan_to_num(X[:, 1], nan=3.0)) + (X[:, 2] == 0) + rng.normal(0, .3, 800)
    params = {"objective": "regression", "num_leaves": 31, "learning_rate": 0.2, "min_data_in_leaf": 3,
              "min_gain_to_split": 0.5}
    return _train(params, X, y, 30), X


def _assert_equal_to_lightgbm(booster, X: np.ndarray) -> TreeEnsemble:
    model = TreeEnsemble.from_lightgbm(booster)
    X = _hard_rows(model, X, seed=3)
    expected = booster.predict(X, raw_score=True)
    got = model.predict(X)
    assert got.dtype == np.float64 and got.shape == (len(X),)
    np.testing.assert_array_equal(got, expected)  # bit for bit (the contract is 1e-9)
    return model


def _missing_types(model: TreeEnsemble) -> set[tuple[int, int]]:
    return {(m, d) for t in model.as_dict()["trees"] for m, d in zip(t["missing_type"], t["default_left"])}


def test_lambdarank_scores_equal_lightgbm_with_nan_splits_both_ways(lambdarank):
    model = _assert_equal_to_lightgbm(*lambdarank)
    assert {(2, 0), (2, 1)} <= _missing_types(model)  # missing type NaN, default right and left
    assert model.num_features == 8 and model.num_trees == 40


def test_zero_as_missing_scores_equal_lightgbm():
    booster, X = _lambdarank({"zero_as_missing": True}, seed=2)
    model = _assert_equal_to_lightgbm(booster, X)
    assert {m for m, _ in _missing_types(model)} == {1}  # every split: missing type Zero


def test_without_missing_values_nan_is_read_as_zero():
    booster, X = _lambdarank({"use_missing": False}, seed=4)
    model = _assert_equal_to_lightgbm(booster, X)
    assert {m for m, _ in _missing_types(model)} == {0}


def test_regression_of_large_and_small_trees_equals_lightgbm(regression):
    model = _assert_equal_to_lightgbm(*regression)
    leaves = [len(t["leaf_value"]) for t in model.as_dict()["trees"]]
    assert max(leaves) > 9 and min(leaves) <= 9  # both ways of predicting, summed in tree order


def test_rows_predicted_in_blocks_are_those_predicted_alone(regression, monkeypatch):
    from bsard_demo.retrievers import trees

    model = TreeEnsemble.from_lightgbm(regression[0])
    X = _hard_rows(model, regression[1], seed=5)
    whole = model.predict(X)
    monkeypatch.setattr(trees, "_BLOCK", 7 * model.num_trees)  # blocks of a few rows, a ragged last one
    np.testing.assert_array_equal(model.predict(X), whole)
    np.testing.assert_array_equal(np.concatenate([model.predict(X[i:i + 1]) for i in range(20)]), whole[:20])


def test_a_single_leaf_model_predicts_its_constant():
    X = _data(50, 3, 5)
    booster = _train({"objective": "regression", "min_data_in_leaf": 40}, X, np.arange(50.0), 3)
    model = _assert_equal_to_lightgbm(booster, X)
    assert all(not t["left"] and len(t["leaf_value"]) == 1 for t in model.as_dict()["trees"])


def test_a_json_round_trip_keeps_every_bit(lambdarank):
    booster, X = lambdarank
    model = TreeEnsemble.from_lightgbm(booster)
    data = model.as_dict()
    assert data["format"] == 1 and data["num_features"] == 8
    text = json.dumps(data)
    again = TreeEnsemble.from_dict(json.loads(text))
    assert again.as_dict() == data
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    assert len(text) < 40 * 800  # compact: ~0.5 kB a tree of 7 leaves (146,587 bytes for 300 in the bench)


def test_categorical_splits_are_refused():
    X = np.random.default_rng(6).integers(0, 5, size=(300, 2)).astype(float)
    y = (X[:, 0] == 2) * 3.0 + X[:, 1]
    lgb = pytest.importorskip("lightgbm")
    params = {"objective": "regression", "verbose": -1, "min_data_in_leaf": 5, "num_threads": 1,
              "min_data_per_group": 5, "cat_smooth": 1}
    booster = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[0]), num_boost_round=3)
    assert booster.dump_model()["tree_info"][0]["num_cat"] > 0  # the model does split on a category
    with pytest.raises(ValueError, match="categorical splits are not supported"):
        TreeEnsemble.from_lightgbm(booster)


# ---------------------------------------------------------------------- model files (no lightgbm)

def _stump() -> dict:
    """x0 <= 0.5 (NaN right) -> (x1 <= -1 (zero missing, left) -> -1 : 2) : 3."""
    return {"split_feature": [0, 1], "threshold": [0.5, -1.0], "left": [1, -1], "right": [-3, -2],
            "default_left": [0, 1], "missing_type": [2, 1], "leaf_value": [-1.0, 2.0, 3.0]}


def _file() -> dict:
    return {"format": 1, "num_features": 3, "trees": [_stump(), {"split_feature": [], "threshold": [], "left": [],
                                                                "right": [], "default_left": [], "missing_type": [],
                                                                "leaf_value": [0.25]}]}


def test_a_hand_written_model_follows_lightgbms_rule():
    model = TreeEnsemble.from_dict(_file())
    X = np.array([[0.5, -1.0, 9], [0.6, 0, 9], [np.nan, 5, 9], [0.0, np.nan, 9], [0.0, 1e-36, 9], [0, -0.5, 9],
                  [-3, -2, 9]])
    # row 0: tie at 0.5 left, tie at -1 left; 1: right; 2: NaN right; 3: NaN is missing (Zero) -> left;
    # 4: 1e-36 is zero -> missing -> left; 5: -0.5 > -1 -> leaf 1; 6: left, left
    np.testing.assert_array_equal(model.predict(X), np.array([-1, 3, 3, -1, -1, 2, -1]) + 0.25)
    assert model.predict(np.empty((0, 3))).shape == (0,)
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        model.predict(np.zeros((2, 4)))


def _damaged(change) -> dict:
    data = copy.deepcopy(_file())
    change(data)
    return data


def _set(path, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def _chain(n: int) -> dict:
    """``n`` splits, each one level below the last: split s sends left to leaf s, right to split s + 1."""
    return {"split_feature": [0] * n, "threshold": [0.0] * n, "left": [~s for s in range(n)],
            "right": list(range(1, n)) + [~n], "default_left": [0] * n, "missing_type": [0] * n,
            "leaf_value": [0.0] * (n + 1)}


def _deep_chain(data):
    data["trees"][0] = _chain(MAX_DEPTH + 1)


def _unreachable_cycle() -> dict:
    """Split 0 -> leaves 0 and 1; splits 1 and 2 are each other's child, out of the root's reach."""
    return {"split_feature": [0, 0, 0], "threshold": [0.0] * 3, "left": [-1, -3, 1], "right": [-2, 2, -4],
            "default_left": [0] * 3, "missing_type": [0] * 3, "leaf_value": [0.0] * 4}


DAMAGED = {
    "not a dict": (lambda d: None, "expected a dict"),
    "missing key": (lambda d: d.pop("trees"), "expected the keys"),
    "extra key": (_set(["objective"], "lambdarank"), "expected the keys"),
    "unknown format": (_set(["format"], 2), "unknown format"),
    "format true": (_set(["format"], True), "unknown format"),
    "num_features a string": (_set(["num_features"], "3"), "num_features"),
    "num_features zero": (_set(["num_features"], 0), "num_features"),
    "num_features a bool": (_set(["num_features"], True), "num_features"),
    "trees not a list": (_set(["trees"], {"0": _stump()}), "trees must be a list"),
    "no tree": (_set(["trees"], []), "trees must be a list"),
    "too many trees": (_set(["trees"], [_stump()] * (MAX_TREES + 1)), "trees must be a list"),
    "too many nodes": (_set(["trees", 0, "left"], [0] * (MAX_NODES // 2 + 1)), f"more than {MAX_NODES} nodes"),
    "tree not a dict": (_set(["trees", 1], [0.25]), "tree 1: expected a dict"),
    "tree key missing": (lambda d: d["trees"][0].pop("missing_type"), "tree 0: expected a dict"),
    "array not a list": (_set(["trees", 0, "threshold"], "0.5,-1"), "threshold must be a list"),
    "arrays of different lengths": (_set(["trees", 0, "default_left"], [0]), "default_left has 1 entries"),
    "leaf count": (_set(["trees", 0, "leaf_value"], [1.0, 2.0]), "need 3 leaf values"),
    "feature out of range": (_set(["trees", 0, "split_feature", 1], 3), r"split_feature\[1\] = 3"),
    "feature negative": (_set(["trees", 0, "split_feature", 0], -1), r"split_feature\[0\] = -1"),
    "feature a float": (_set(["trees", 0, "split_feature", 0], 0.0), r"split_feature\[0\] = 0.0"),
    "threshold NaN": (_set(["trees", 0, "threshold", 0], float("nan")), r"threshold\[0\] = nan"),
    "threshold infinite": (_set(["trees", 0, "threshold", 0], float("inf")), r"threshold\[0\] = inf"),
    "threshold beyond a float": (_set(["trees", 0, "threshold", 0], 10 ** 400), r"threshold\[0\] = 1000"),
    "threshold a string": (_set(["trees", 0, "threshold", 1], "-1"), r"threshold\[1\] = '-1'"),
    "threshold a bool": (_set(["trees", 0, "threshold", 1], False), r"threshold\[1\] = False"),
    "left child past the splits": (_set(["trees", 0, "left", 0], 2), r"left\[0\] = 2"),
    "right child past the leaves": (_set(["trees", 0, "right", 0], -4), r"right\[0\] = -4"),
    "default_left not 0/1": (_set(["trees", 0, "default_left", 0], 2), r"default_left\[0\] = 2"),
    "missing_type unknown": (_set(["trees", 0, "missing_type", 0], 3), r"missing_type\[0\] = 3"),
    "missing_type a string": (_set(["trees", 0, "missing_type", 0], "NaN"), r"missing_type\[0\] = 'NaN'"),
    "leaf value NaN": (_set(["trees", 0, "leaf_value", 2], float("nan")), r"leaf_value\[2\] = nan"),
    "leaf value null": (_set(["trees", 1, "leaf_value", 0], None), r"tree 1: leaf_value\[0\] = None"),
    "cycle": (_set(["trees", 0, "left", 1], 0), "reached twice"),
    "shared leaf": (_set(["trees", 0, "right", 1], -1), "reached twice"),
    "unreachable cycle": (_set(["trees", 0], _unreachable_cycle()), "not reached from the root"),
    "too deep": (_deep_chain, f"deeper than {MAX_DEPTH} levels"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_model_file_is_refused_in_one_line(case):
    change, message = DAMAGED[case]
    data = "not a model" if case == "not a dict" else _damaged(change)
    with pytest.raises(ValueError, match=message) as raised:
        TreeEnsemble.from_dict(data)
    assert "\n" not in str(raised.value)


def test_the_undamaged_file_and_the_deepest_allowed_tree_are_read():
    TreeEnsemble.from_dict(_file())
    data = _damaged(_set(["trees", 0], _chain(MAX_DEPTH)))
    data["trees"][0]["leaf_value"][-1] = 1.5  # x0 > 0 at every split: the last leaf
    model = TreeEnsemble.from_dict(data)
    assert model.predict(np.array([[1.0, 0, 0], [-1.0, 0, 0]])).tolist() == [1.75, 0.25]
