"""Index bundles: read-only folders of prebuilt indexes (cache entries laid out as :mod:`bsard_demo.cache`
does, plus ``bundle.json``), so a cold server never builds them. :func:`resolve_bundle` takes a folder or
``hf://OWNER/NAME[@REVISION]`` (:mod:`.hub`), :func:`activate` makes it the process's bundle, which
:func:`bsard_demo.cache.load_or_build` consults before the cache (the app: ``BSARD_INDEX``); :func:`export_bundle`
(:mod:`.export`, the CLI's ``index --export``) makes one, :func:`push_bundle` publishes it; :mod:`.model` reads it.

``bundle.json``, the checks, why ``hf://`` is a model repository: docs/design.md, 'bsard_demo/bundles/__init__.py'.
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
