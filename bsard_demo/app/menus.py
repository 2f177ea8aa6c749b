"""What the app's shared menus offer, decided without Streamlit (:mod:`bsard_demo.app.ui` draws them):
the sidebar's data sources (the local folder only where the server allows one) and the dense
encoders of the active dataset (the bundle's models only when the bundle was built for its corpus;
the corpus fingerprint computed only when some trained model could use it: it hashes every article).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from .. import cache
from ..retrievers.defaults import TRAINED_RANKERS
from ..training import list_trained_models, models_folder, trained_for_corpus
from .builds import encoder_options, neighbours_option
from .data_words import SOURCE_LABELS, FolderAccess, source_kind, spec_name
from .hosting import BundleSetup
from .naming import public_name, strip_paths
from .state import ActiveData


def source_choices(access: FolderAccess) -> list[str]:
    """The sources the sidebar offers: the hub, the sample, and a local folder when allowed."""
    return ["hub", "sample"] + (["local"] if access.offered else [])


def source_choice(current: str | None, choices: Sequence[str], requested: str, loaded: str) -> str:
    """The source the sidebar's radio shows: ``current`` when offered, else the kind of the
    ``requested`` spec when offered, else the kind of the ``loaded`` one."""
    if current in choices:
        return current
    kind = source_kind(requested)
    return kind if kind in choices else source_kind(loaded)


def chosen_source(choice: str | None, access: FolderAccess) -> str | None:
    """The spec a click on the source radio loads at once: the hub or the sample, or the one
    folder the server names (``BSARD_DATA``); ``None`` when a folder must be typed first."""
    if choice in ("hub", "sample"):
        return choice
    if choice == "local" and not access.free and access.fixed:
        return access.fixed
    return None


def encoder_menu(data: ActiveData, setup: BundleSetup, corpus_sha256: Callable[[], str]) -> list:
    """Every dense encoder the app knows for ``data`` (:func:`bsard_demo.app.builds.encoder_options`):
    the built-in ones, the models of the index bundle when it serves this corpus, the trained folders
    of ``$BSARD_MODELS``, and the neighbours part; ``corpus_sha256()`` is called only when a trained
    model needs it."""
    ds = data.dataset
    bundle = setup.bundle if ds.articles is not None and setup.serves(data.key, ds.articles, ds.name) else None
    models = list_trained_models()
    has_models = bool(models) or (bundle is not None and bool(bundle.model_list()))
    sha = corpus_sha256() if has_models and ds.articles is not None else None
    options = encoder_options(models, corpus_sha256=sha, bundle=bundle) + [neighbours_option(ds)]
    # a model's record keeps the paths it was trained with: a public page names it by name
    return [replace(o, label=strip_paths(o.label), reason=None if o.reason is None else strip_paths(o.reason))
            for o in options]


def dataset_label(data: ActiveData, access: FolderAccess) -> str:
    """The active dataset's name as the pages show it (:func:`bsard_demo.app.data_words.spec_name`), a folder
    the server chose (``BSARD_DATA``) by its last component only: its path is the server's."""
    if source_kind(data.spec) == "local" and not access.free:
        return f"{SOURCE_LABELS['local']} : {public_name(data.spec)}"
    return spec_name(data.spec)


def rankers_here(data: ActiveData, corpus_sha256: Callable[[], str]) -> list[str]:
    """The learned rankers fitted on the active corpus, as ``--encoder`` takes them: the index
    bundle's first (by name), then ``$BSARD_MODELS``' folders (:func:`bsard_demo.training.trained_for_corpus`);
    none without articles, or without a bundle or a models folder (the fingerprint is not computed)."""
    if data.dataset.articles is None or not (cache.active_bundles() or models_folder().is_dir()):
        return []
    return trained_for_corpus(corpus_sha256())[TRAINED_RANKERS]
