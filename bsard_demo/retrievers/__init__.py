"""Retrievers over a dataset's articles: BM25 (:mod:`.bm25`), dense (:mod:`.dense`) and their
fusion (:mod:`.hybrid`), all following :class:`Retriever` and built by :func:`build_retriever`."""
from .base import Hit, Progress, Retriever
from .registry import RetrieverSpec, build_retriever

__all__ = ["Hit", "Progress", "Retriever", "RetrieverSpec", "build_retriever"]
