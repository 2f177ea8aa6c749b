"""A LightGBM tree ensemble's raw scores in numpy alone, for the hosted install (no lightgbm, no torch).

:class:`TreeEnsemble` reads a booster's ``dump_model()`` once, stores it as a plain JSON-able dict (the ranker
folder's model file, checked in full when read back) and predicts by LightGBM's rule for numerical splits: bit for
bit ``booster.predict(X, raw_score=True)`` in tests/retrievers/test_trees.py. Trees of at most 9 leaves are read
through a table of leaf values indexed by all their splits' answers, 2.5-4x faster than walking them level by level
(600 rows x 300 trees of 7 leaves: 4.0-7.5 vs 16-23 ms, docs/benchmarks.md); larger trees are walked.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

FORMAT = 1
#: LightGBM's ``kZeroThreshold`` (``const double kZeroThreshold = 1e-35f``, a float literal widened): an input
#: of at most this magnitude is read as 0 when LightGBM predicts from a dense matrix.
ZERO_THRESHOLD = float(np.float32(1e-35))
#: ``missing_type`` codes of :meth:`TreeEnsemble.as_dict`, LightGBM's ``MissingType`` enum.
MISSING_TYPES = {"None": 0, "Zero": 1, "NaN": 2}
MAX_TREES = 10_000
MAX_NODES = 100_000  # split nodes and leaves, over all trees
MAX_DEPTH = 64
MAX_FEATURES = 100_000
#: A tree with at most this many splits is predicted through a table of 2**splits leaf values.
TABLE_SPLITS = 8
_BLOCK = 1 << 19  # entries of a (splits x rows) block, ~4 MB of float64
_TREE_KEYS = ("split_feature", "threshold", "left", "right", "default_left", "missing_type", "leaf_value")


class TreeEnsemble:
    """The sum of binary trees of numerical splits ``x <= threshold`` (left) with LightGBM's missing values.
    Categorical splits, linear trees and models of several outputs or averaged ones (random forests) are refused."""

    def __init__(self, num_features: int, trees: list[dict[str, list]]):
        self._num_features = num_features
        self._trees = trees  # checked lists, as in as_dict()
        self._compile()

    # ------------------------------------------------------------------ reading and writing

    @classmethod
    def from_lightgbm(cls, booster) -> "TreeEnsemble":
        """From a ``lightgbm.Booster`` (or a scikit-learn ``LGBMModel``, through its ``booster_``); its
        ``dump_model()`` holds the leaf values with the learning rate already applied."""
        booster = getattr(booster, "booster_", booster)
        dump = booster.dump_model()
        if dump.get("num_class", 1) != 1 or dump.get("num_tree_per_iteration", 1) != 1:
            raise ValueError("tree model: only models of one output (no multiclass) are supported")
        if dump.get("average_output"):
            raise ValueError("tree model: averaged outputs (random forest mode) are not supported")
        trees = [_tree_arrays(i, info) for i, info in enumerate(dump["tree_info"])]
        return cls.from_dict({"format": FORMAT, "num_features": int(dump["max_feature_idx"]) + 1, "trees": trees})

    @classmethod
    def from_dict(cls, data: dict) -> "TreeEnsemble":
        """From what :meth:`as_dict` wrote (read from disk: every field is checked; ``ValueError`` if damaged)."""
        if not isinstance(data, dict):
            raise ValueError(f"tree model: expected a dict, got {type(data).__name__}")
        if set(data) != {"format", "num_features", "trees"}:
            raise ValueError(f"tree model: expected the keys format, num_features, trees, got {sorted(map(str, data))}")
        if data["format"] != FORMAT or isinstance(data["format"], bool):
            raise ValueError(f"tree model: unknown format {data['format']!r} (this version reads {FORMAT})")
        num_features = data["num_features"]
        if not _is_int(num_features) or not 1 <= num_features <= MAX_FEATURES:
            raise ValueError(f"tree model: num_features must be an integer in [1, {MAX_FEATURES}], "
                             f"got {num_features!r}")
        trees = data["trees"]
        if not isinstance(trees, list) or not 1 <= len(trees) <= MAX_TREES:
            raise ValueError(f"tree model: trees must be a list of 1 to {MAX_TREES} trees")
        sizes = [len(t["left"]) for t in trees if isinstance(t, dict) and isinstance(t.get("left"), list)]
        if sum(2 * s + 1 for s in sizes) > MAX_NODES:  # before any per-node work
            raise ValueError(f"tree model: more than {MAX_NODES} nodes in all")
        return cls(num_features, [_checked_tree(i, tree, num_features) for i, tree in enumerate(trees)])

    def as_dict(self) -> dict:
        """``{"format": 1, "num_features": F, "trees": [...]}``, plain lists and numbers. Each tree's splits are
        numbered from its root (split 0) and its leaves from the left; ``left``/``right`` hold a split's children,
        ``c >= 0`` a split and ``c < 0`` the leaf ``~c`` (LightGBM's convention), ``default_left`` 0/1 where a
        missing value goes, ``missing_type`` 0 (None), 1 (Zero) or 2 (NaN); a single-leaf tree has no splits."""
        return {"format": FORMAT, "num_features": self._num_features,
                "trees": [{k: list(t[k]) for k in _TREE_KEYS} for t in self._trees]}

    @property
    def num_features(self) -> int:
        return self._num_features

    @property
    def num_trees(self) -> int:
        return len(self._trees)

    # ------------------------------------------------------------------ prediction

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Raw scores (float64) of the rows of ``X`` (n x :attr:`num_features`), the trees added in order as
        LightGBM adds them."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self._num_features:
            raise ValueError(f"expected an array of shape (n, {self._num_features}), got {X.shape}")
        n = X.shape[0]
        out = np.empty(n)
        if n == 0:
            return out
        views = self._views(X)
        widest = max(self._table_cols.size, len(self._trees))
        block = max(1, _BLOCK // max(1, widest))
        for start in range(0, n, block):
            stop = min(n, start + block)
            if not self._walk_trees.size:
                values = self._table_values(views[:, start:stop])
            else:
                values = np.empty((len(self._trees), stop - start))
                values[self._walk_trees] = self._walk_values(views[:, start:stop])
                if self._table_trees.size:
                    values[self._table_trees] = self._table_values(views[:, start:stop])
            out[start:stop] = _in_order(values)
        return out

    def _views(self, X: np.ndarray) -> np.ndarray:
        """(views x n): each split's feature with its missing values already sent its default way, so that every
        split is ``view > threshold`` (right). A view is (feature, rule): NaN read as 0 (missing type None); NaN
        (type NaN), or NaN and zero (type Zero), made -inf (default left) or +inf (default right). One row a view
        (the transpose of ``X``'s layout), so that the trees' splits gather whole rows (:meth:`_table_values`)."""
        X = np.where(np.abs(X) <= ZERO_THRESHOLD, 0.0, X).T  # LightGBM drops these inputs (read as 0)
        out = np.empty((len(self._view_keys), X.shape[1]))
        for j, (feature, missing, left) in enumerate(self._view_keys):
            x = X[feature]
            if missing == 0:
                out[j] = np.where(np.isnan(x), 0.0, x)
            else:
                missed = np.isnan(x) if missing == 2 else np.isnan(x) | (x == 0.0)
                out[j] = np.where(missed, -np.inf if left else np.inf, x)
        return out

    def _table_values(self, views: np.ndarray) -> np.ndarray:
        """(table trees x rows): each tree's splits answered at once (padded with splits no value passes), their
        answers read as the bits of an index into the tree's table of leaf values. A row a split, not a column:
        the e5 ranker's :meth:`predict` (300 trees of 6 splits, 600-700 candidates a question of frlaw-dev test)
        2.5-2.7 ms a question against 5.6-6.5 ms with a row a candidate and ``np.cumsum`` (docs/benchmarks.md)."""
        splits = self._table_splits
        right = (views[self._table_cols] > self._table_thresholds[:, None]).reshape(-1, splits, views.shape[1])
        codes = (right.view(np.uint8) * self._bits[None, :, None]).sum(axis=1, dtype=np.intp)
        return self._tables[self._table_offsets[:, None] + codes]

    def _walk_values(self, views: np.ndarray) -> np.ndarray:
        """(walked trees x rows): every row walked down every tree at once, one level a step; a leaf loops on
        itself, so rows that reached theirs stay put."""
        rows = np.arange(views.shape[1])
        node = np.broadcast_to(self._walk_roots[:, None], (self._walk_roots.size, views.shape[1])).copy()
        for _ in range(self._walk_depth):
            right = views[self._walk_cols[node], rows] > self._walk_thresholds[node]
            node = self._walk_children[2 * node + right]
        return self._walk_leaf_values[node]

    # ------------------------------------------------------------------ compiling the checked lists

    def _compile(self) -> None:
        keys: dict[tuple[int, int, bool], int] = {}

        def view(t: dict, s: int) -> int:
            missing = t["missing_type"][s]
            key = (t["split_feature"][s], missing, bool(t["default_left"][s]) and missing != 0)
            return keys.setdefault(key, len(keys))

        table = [i for i, t in enumerate(self._trees) if len(t["left"]) <= TABLE_SPLITS]
        walk = [i for i, t in enumerate(self._trees) if len(t["left"]) > TABLE_SPLITS]
        self._table_trees = np.array(table, dtype=np.intp)
        self._walk_trees = np.array(walk, dtype=np.intp)
        self._compile_tables([self._trees[i] for i in table], view)
        self._compile_walk([self._trees[i] for i in walk], view)
        self._view_keys = list(keys) or [(0, 0, False)]  # only single-leaf trees: a view for their padding

    def _compile_tables(self, trees: list[dict], view) -> None:
        splits = max([len(t["left"]) for t in trees] + [1])
        size = 1 << splits
        cols = np.zeros((len(trees), splits), dtype=np.intp)
        thresholds = np.full((len(trees), splits), np.inf)  # padding: no view is > inf
        tables = np.empty((len(trees), size))
        codes = np.arange(size)
        for i, t in enumerate(trees):
            for s in range(len(t["left"])):
                cols[i, s], thresholds[i, s] = view(t, s), t["threshold"][s]
            left, right = np.array(t["left"] + [0], dtype=np.intp), np.array(t["right"] + [0], dtype=np.intp)
            node = np.full(size, 0 if t["left"] else -1, dtype=np.intp)
            while (inner := node >= 0).any():
                at = np.where(inner, node, 0)
                node = np.where(inner, np.where((codes >> at) & 1, right[at], left[at]), node)
            tables[i] = np.array(t["leaf_value"])[~node]
        self._table_splits = splits
        self._table_cols, self._table_thresholds = cols.ravel(), thresholds.ravel()
        self._bits = (1 << np.arange(splits)).astype(np.uint8)  # splits <= TABLE_SPLITS = 8
        self._tables = tables.ravel()
        self._table_offsets = np.arange(len(trees), dtype=np.intp) * size

    def _compile_walk(self, trees: list[dict], view) -> None:
        cols, thresholds, children, leaf_values, roots, depth = [], [], [], [], [], 0
        for t in trees:
            base, splits = len(cols), len(t["left"])

            def node(c: int, base=base, splits=splits) -> int:
                return base + c if c >= 0 else base + splits + ~c
            for s in range(splits):
                cols.append(view(t, s))
                thresholds.append(t["threshold"][s])
                children += [node(t["left"][s]), node(t["right"][s])]
                leaf_values.append(0.0)
            for j, value in enumerate(t["leaf_value"]):
                cols.append(0)
                thresholds.append(np.inf)
                children += [base + splits + j] * 2
                leaf_values.append(value)
            roots.append(base)
            depth = max(depth, _depth(t))
        self._walk_cols = np.array(cols, dtype=np.intp)
        self._walk_thresholds = np.array(thresholds, dtype=np.float64)
        self._walk_children = np.array(children, dtype=np.intp)
        self._walk_leaf_values = np.array(leaf_values, dtype=np.float64)
        self._walk_roots = np.array(roots, dtype=np.intp)
        self._walk_depth = depth


def _in_order(values: np.ndarray) -> np.ndarray:
    """Each column's sum of ``values`` (trees x rows) added row after row, in tree order, as LightGBM adds its
    trees (the same floats as ``np.cumsum(values.T, axis=1)[:, -1]``, 13x faster: one vector add a tree)."""
    total = values[0].copy()
    for row in values[1:]:
        total += row
    return total


# ---------------------------------------------------------------------- LightGBM's dump to arrays

def _tree_arrays(index: int, info: dict) -> dict[str, list]:
    """One ``tree_info`` entry of ``dump_model()`` as the lists of :meth:`TreeEnsemble.as_dict` (splits in
    pre-order from the root, leaves from the left), iteratively (no recursion limit)."""
    if info.get("num_cat", 0) or info.get("is_linear"):
        raise ValueError("categorical splits are not supported" if info.get("num_cat", 0)
                         else "tree model: linear trees are not supported")
    tree: dict[str, list] = {k: [] for k in _TREE_KEYS}
    root = info["tree_structure"]
    if "leaf_value" in root:
        tree["leaf_value"].append(float(root["leaf_value"]))
        return tree
    stack = [(root, None, "")]  # (node, parent split, side); right pushed first so left is numbered first
    while stack:
        node, parent, side = stack.pop()
        if "leaf_value" in node:
            ref = ~len(tree["leaf_value"])
            tree["leaf_value"].append(float(node["leaf_value"]))
        else:
            if node.get("decision_type") != "<=":
                raise ValueError("categorical splits are not supported" if node.get("decision_type") == "=="
                                 else f"tree model: tree {index}: unknown decision type {node.get('decision_type')!r}")
            ref = len(tree["left"])
            tree["split_feature"].append(int(node["split_feature"]))
            tree["threshold"].append(float(node["threshold"]))
            tree["default_left"].append(int(bool(node["default_left"])))
            tree["missing_type"].append(MISSING_TYPES[node["missing_type"]])
            tree["left"].append(0)
            tree["right"].append(0)
            stack += [(node["right_child"], ref, "right"), (node["left_child"], ref, "left")]
        if parent is not None:
            tree[side][parent] = ref
    return tree


# ---------------------------------------------------------------------- checks of a model file

def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    try:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    except OverflowError:  # an int beyond any float
        return False


def _checked_tree(index: int, tree: Any, num_features: int) -> dict[str, list]:
    where = f"tree model: tree {index}"
    if not isinstance(tree, dict) or set(tree) != set(_TREE_KEYS):
        raise ValueError(f"{where}: expected a dict with the keys {', '.join(_TREE_KEYS)}")
    for key in _TREE_KEYS:
        if not isinstance(tree[key], list):
            raise ValueError(f"{where}: {key} must be a list")
    splits = len(tree["left"])
    for key in _TREE_KEYS[:-1]:
        if len(tree[key]) != splits:
            raise ValueError(f"{where}: {key} has {len(tree[key])} entries, left has {splits}")
    if len(tree["leaf_value"]) != splits + 1:
        raise ValueError(f"{where}: {splits} splits need {splits + 1} leaf values, got {len(tree['leaf_value'])}")
    rules = {"split_feature": (_is_int, lambda v: 0 <= v < num_features, f"a feature index in [0, {num_features})"),
             "threshold": (_is_number, None, "a finite number"),
             "left": (_is_int, lambda v: -splits - 1 <= v < splits, f"a child in [{-splits - 1}, {splits})"),
             "right": (_is_int, lambda v: -splits - 1 <= v < splits, f"a child in [{-splits - 1}, {splits})"),
             "default_left": (_is_int, lambda v: v in (0, 1), "0 or 1"),
             "missing_type": (_is_int, lambda v: v in (0, 1, 2), "0 (None), 1 (Zero) or 2 (NaN)"),
             "leaf_value": (_is_number, None, "a finite number")}
    for key, (kind, ok, what) in rules.items():
        for s, v in enumerate(tree[key]):
            if not kind(v) or (ok is not None and not ok(v)):
                raise ValueError(f"{where}: {key}[{s}] = {v!r} is not {what}")
    _depth(tree, where)
    return {k: list(tree[k]) for k in _TREE_KEYS}


def _depth(tree: dict, where: str = "tree model") -> int:
    """The tree's depth (splits on its longest path); ``ValueError`` unless every split and every leaf is reached
    exactly once from split 0 (no cycle, no shared or orphan node) within :data:`MAX_DEPTH` levels."""
    splits = len(tree["left"])
    if splits == 0:
        return 0
    seen_splits, seen_leaves = [False] * splits, [False] * (splits + 1)
    seen_splits[0] = True
    level, depth = [0], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise ValueError(f"{where}: deeper than {MAX_DEPTH} levels")
        below = []
        for s in level:
            for c in (tree["left"][s], tree["right"][s]):
                seen = seen_splits if c >= 0 else seen_leaves
                k = c if c >= 0 else ~c
                if seen[k]:
                    raise ValueError(f"{where}: node {c} is reached twice (a cycle or a shared child)")
                seen[k] = True
                if c >= 0:
                    below.append(c)
        level = below
    if not all(seen_leaves):
        raise ValueError(f"{where}: a node is not reached from the root")
    return depth
