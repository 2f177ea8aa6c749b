"""What the active dataset is called and why it fell back (the sidebar's and the banner's French words), and which
local folders a visitor may load (:func:`folder_access`). (Split from :mod:`.state`, which holds the process-wide
state.)"""
from __future__ import annotations

from dataclasses import dataclass

from .. import settings
from ..dataset import DataError
from ..sources import DataUnavailable

SOURCE_LABELS = {"hub": "BSARD (hub Hugging Face)", "sample": "Échantillon fictif (démo)", "local": "Dossier local"}
FICTIONAL_NOTICE = ("Échantillon de démonstration : ces articles sont FICTIFS, inventés pour montrer "
                    "l'application. Ce ne sont pas des textes de loi belges ; ne vous y fiez pas.")

FICTIONAL_SHORT = "Articles fictifs : pas du droit belge."


def source_kind(spec: str) -> str:
    """``"hub"``, ``"sample"`` or ``"local"`` for a spec."""
    return spec if spec in ("hub", "sample") else "local"


ALLOW_FOLDERS_ENV = settings.ALLOW_FOLDERS
#: Said to a visitor; how a server's keeper offers folders is the README's (BSARD_DATA, BSARD_ALLOW_FOLDERS).
FOLDERS_DISABLED = "Ce serveur ne propose pas de dossier local."


@dataclass(frozen=True)
class FolderAccess:
    """Which local folders visitors may load: any (``free``), else only ``fixed`` (the folder
    named by ``BSARD_DATA``), else none."""

    free: bool = False
    fixed: str | None = None

    @property
    def offered(self) -> bool:
        return self.free or self.fixed is not None

    def allows(self, spec: str) -> bool:
        """Whether ``spec`` may be loaded (``"hub"`` and ``"sample"`` always may)."""
        return source_kind(spec) != "local" or self.free or spec == self.fixed


def folder_access(config: settings.Settings | None = None) -> FolderAccess:
    """The folder policy from ``BSARD_ALLOW_FOLDERS`` (``1``, ``true`` or ``yes``) and
    ``BSARD_DATA`` of ``config`` (default: :func:`bsard_demo.settings.current`)."""
    config = settings.current() if config is None else config
    data = config.data
    return FolderAccess(config.allow_folders, data if data and source_kind(data) == "local" else None)


def spec_name(spec: str) -> str:
    """French name of a dataset spec: the source label, plus the folder for a local one."""
    kind = source_kind(spec)
    return SOURCE_LABELS[kind] if kind != "local" else f"{SOURCE_LABELS['local']} : {spec}"


#: The French words for :attr:`~bsard_demo.sources.DataUnavailable.cause`, shown in the banner.
HUB_CAUSES = {
    "offline": "hub injoignable et aucune copie en cache local",
    "timeout": "le hub n'a pas répondu à temps",
    "damaged": "fichiers reçus incomplets ou endommagés",
}


def hub_cause(error: Exception) -> str | None:
    """The French cause of a hub failure, ``None`` when the error does not name a known one."""
    return HUB_CAUSES.get(getattr(error, "cause", None))


def fallback_reason(requested: str, error: DataError, kept: str = "sample") -> str:
    """The French banner shown when ``requested`` could not be loaded and ``kept`` is used instead."""
    if source_kind(requested) == "hub":
        cause = hub_cause(error)
        what = "Le jeu BSARD n'a pas pu être obtenu du hub Hugging Face" + (f" ({cause})" if cause else "")
    else:
        what = f"Le dossier « {requested} » n'a pas pu être chargé"
    instead = ("l'échantillon fictif fourni avec elle" if kept == "sample"
               else f"le jeu de données déjà chargé ({spec_name(kept)})")
    return f"{what} : l'application utilise {instead}."


def failure_detail(error: Exception) -> str:
    """The loader's message for the banner (its ``advice`` code is not worded here)."""
    if isinstance(error, DataUnavailable):
        return error.detail
    return str(error)
