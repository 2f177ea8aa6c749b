"""Retrievers over a dataset's articles: BM25 (:mod:`.bm25`), dense (:mod:`.dense`), label transfer
(:mod:`.neighbours`) and their fusion (:mod:`.hybrid`), all following :class:`Retriever`, built
by :func:`build_retriever` from the kinds of :mod:`.registry` (:func:`register` adds one; the built-in ones
register in :mod:`.kinds`, imported here so that any import of the package has them)."""
from . import kinds  # noqa: F401 - registers the built-in kinds
from .base import Hit, Progress, Retriever
from .registry import RetrieverKind, RetrieverSpec, build_retriever, register, retriever_kinds

__all__ = ["Hit", "Progress", "Retriever", "RetrieverKind", "RetrieverSpec", "build_retriever", "register",
           "retriever_kinds"]
