"""Index bundles: read-only folders of prebuilt indexes, so a cold server never builds them.

A bundle is a folder holding cache entries exactly as :mod:`bsard_demo.cache` lays them out
(``<kind>/<key>/`` with their ``manifest.json``) plus ``bundle.json``, which describes it:

- ``format`` / ``format_version``, ``created`` (UTC), ``created_with`` (package versions);
- ``corpus``: fingerprint (:func:`corpus_id`: every article column, in row order), article
  count and dataset name;
- ``retrievers``: every retriever spec it serves, with its settings; ``encoders``: name,
  version and dimension of each dense encoder;
- ``entries``: one per cache entry (kind, key, what it is, its settings when known, size);
- ``models``: one per model folder the dense retrievers encode with, carried as its ONNX export
  under ``models/<name>/`` (``name``: the folder's base name; ``version``, ``dim``,
  ``base_model``, ``int8``, ``training``: what it was trained on, ``test``: a recorded figure).
  Where the bundle is active, ``--encoder NAME`` selects it (:meth:`Bundle.model_folder`,
  :meth:`Bundle.encoder`; :meth:`Bundle.model_list` lists them) and questions are encoded with
  onnxruntime, no torch and no download; a model whose files do not match the record is refused
  in one line, the rest of the bundle keeps serving;
- ``files``: size and sha256 of every file; ``total_size``.

Using a bundle: :func:`resolve_bundle` takes a folder or ``hf://OWNER/NAME[@REVISION]``
(fetched with :func:`huggingface_hub.snapshot_download`); :func:`activate` makes it (or the one
named by ``BSARD_INDEX``) the process's bundle, which :func:`bsard_demo.cache.load_or_build`
then consults before the cache. An entry is used only when listed in ``bundle.json`` and all its
files match their sizes and checksums; anything else (a key the bundle lacks, a bundle for
another corpus, a missing or damaged file) gives a one-line notice and the usual cache/build path.
Nothing ever writes into a bundle.

Making one: build the retrievers (the cache records the entries they used,
:func:`bsard_demo.cache.used_entries`), then :func:`export_bundle` copies those entries into a
new folder atomically; :func:`push_bundle` publishes it with ``HfApi.upload_folder``.

Hub addresses follow huggingface_hub's own ``hf://`` convention (``HfFileSystem``):
``hf://OWNER/NAME`` is a model repository, ``hf://datasets/OWNER/NAME`` a dataset repository.
Model is the default because a bundle is a derived artefact (an index, embeddings), not a data
set people browse, and the hub's dataset viewer has nothing to show in ``.npy``/``.json`` index
files; the corpus itself stays in its own dataset repository under its own licence.
"""
from __future__ import annotations

import os
from typing import Callable

from .. import cache, settings
from .export import bundled_models, check_export_target, describe_retriever, export_bundle
from .hub import (
    DOWNLOAD_DEADLINE_S,
    HUB_SCHEME,
    HUB_TIMEOUT_S,
    TOKEN_ENV_VAR,
    Downloader,
    HubRef,
    hub_token,
    is_hub_ref,
    parse_hub_ref,
    push_bundle,
    resolve_bundle,
)
from .model import (
    BUNDLE_FILE,
    FORMAT,
    FORMAT_VERSION,
    README_FILE,
    Bundle,
    BundleEntry,
    BundleError,
    BundleModel,
    CorpusId,
    corpus_id,
    open_bundle,
)

__all__ = ["BUNDLE_FILE", "DOWNLOAD_DEADLINE_S", "ENV_VAR", "FORMAT", "FORMAT_VERSION", "HUB_SCHEME", "HUB_TIMEOUT_S",
           "README_FILE", "TOKEN_ENV_VAR", "Bundle", "BundleEntry", "BundleError", "BundleModel", "CorpusId",
           "Downloader", "HubRef", "activate", "active", "bundled_models", "check_export_target", "corpus_id",
           "deactivate", "describe_retriever", "export_bundle", "hub_token", "is_hub_ref", "open_bundle",
           "parse_hub_ref", "push_bundle", "resolve_bundle"]

ENV_VAR = settings.INDEX  # "BSARD_INDEX"


def activate(value: "str | os.PathLike | Bundle | None" = None, *, corpus: CorpusId | None = None,
             token: str | None = None, download: Downloader | None = None,
             on_error: Callable[[str], None] | None = None, **resolve_options) -> Bundle | None:
    """Make a bundle the process's active bundle for :func:`bsard_demo.cache.load_or_build` (the
    CLI's ``--index``, the app's ``st.secrets["BSARD_INDEX"]``). ``value``: a :class:`Bundle`, a
    folder or ``hf://`` address, or ``None`` for ``$BSARD_INDEX``; an empty value deactivates.
    ``corpus`` (:func:`corpus_id` of the dataset served) lets misses say "built for another
    corpus". Returns the bundle (``None`` when none). A bundle that cannot be had raises
    :class:`BundleError`, or, with ``on_error``, is reported there in one line and no bundle is
    active."""
    if value is None:
        value = settings.current().index
    if not isinstance(value, Bundle) and not str(value).strip():
        cache.set_bundles(())
        return None
    try:
        bundle = value if isinstance(value, Bundle) else resolve_bundle(value, token=token, download=download,
                                                                        **resolve_options)
    except BundleError as exc:
        cache.set_bundles(())
        if on_error is None:
            raise
        on_error(f"{exc}; indexes are loaded from the cache or built")
        return None
    bundle.expected_corpus = corpus
    cache.set_bundles((bundle,))
    return bundle


def deactivate() -> None:
    cache.set_bundles(())


def active() -> Bundle | None:
    """The active bundle, if one was activated through this module."""
    for b in cache.active_bundles():
        if isinstance(b, Bundle):
            return b
    return None
