"""Index bundles on the Hugging Face hub: ``hf://[datasets/]OWNER/NAME[@REVISION]`` addresses,
:func:`resolve_bundle` (a folder, or a hub repository fetched with ``snapshot_download``) and
:func:`push_bundle` (``upload_folder``). See :mod:`bsard_demo.bundles`."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import settings
from ..dataset import first_line
from ..sources import call_with_deadline, hub_reachable
from .model import Bundle, BundleError, open_bundle

TOKEN_ENV_VAR = settings.HF_TOKEN  # "HF_TOKEN"
HUB_SCHEME = "hf://"
#: Seconds a whole hub download may take (a bundle for BSARD with USE is ~60 MB).
DOWNLOAD_DEADLINE_S = 300.0
#: Seconds for the hub's metadata requests (huggingface_hub's ``etag_timeout``).
HUB_TIMEOUT_S = 10.0
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_REPO_PART}/{_REPO_PART}$")
_REVISION = re.compile(r"^[A-Za-z0-9._/-]{1,200}$")
_REPO_TYPES = {"": "model", "models/": "model", "datasets/": "dataset"}

Downloader = Callable[..., str]


# ------------------------------------------------------------------------------ hub names

@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf://[datasets/]OWNER/NAME[@REVISION]``."""

    repo_id: str
    revision: str | None = None
    repo_type: str = "model"

    @property
    def url(self) -> str:
        prefix = "datasets/" if self.repo_type == "dataset" else ""
        return f"{HUB_SCHEME}{prefix}{self.repo_id}" + (f"@{self.revision}" if self.revision else "")


def is_hub_ref(value: str) -> bool:
    return str(value).strip().lower().startswith(HUB_SCHEME)


def parse_hub_ref(value: str) -> HubRef:
    """Parse ``hf://OWNER/NAME``, ``hf://OWNER/NAME@REVISION`` (a branch, tag or commit) or the
    same with ``datasets/`` (or ``models/``) before the owner. Raises :class:`BundleError`
    (cause ``"invalid"``) with what is wrong and the accepted form."""
    text = str(value).strip()
    form = "expected hf://OWNER/NAME or hf://OWNER/NAME@REVISION (hf://datasets/OWNER/NAME for a dataset repository)"
    if not text.lower().startswith(HUB_SCHEME):
        raise BundleError(f"{text!r} is not a hub address; {form}", "invalid")
    rest = text[len(HUB_SCHEME):]
    repo_type = "model"
    for prefix, kind in _REPO_TYPES.items():
        if prefix and rest.startswith(prefix):
            rest, repo_type = rest[len(prefix):], kind
            break
    name, sep, revision = rest.partition("@")
    if sep and not revision:
        raise BundleError(f"{text!r}: empty revision after '@'; {form}", "invalid")
    if revision and not _REVISION.match(revision):
        raise BundleError(f"{text!r}: bad revision {revision!r}; {form}", "invalid")
    name = name.rstrip("/")
    if not _REPO_ID.match(name) or "--" in name or ".." in name:
        raise BundleError(f"{text!r}: {name or 'nothing'!r} is not OWNER/NAME; {form}", "invalid")
    return HubRef(name, revision or None, repo_type)


# -------------------------------------------------------------------------------- resolve

def hub_token(token: str | None = None) -> str | None:
    """``token`` when given (e.g. the app's ``st.secrets["HF_TOKEN"]``), else ``$HF_TOKEN``, else
    ``None`` (huggingface_hub then uses a token saved by ``hf auth login``, if any)."""
    if token:
        return token.strip() or None
    return settings.current().hf_token


def resolve_bundle(value: str | os.PathLike, *, token: str | None = None, download: Downloader | None = None,
                   reachable: Callable[[], bool] = hub_reachable, deadline: float | None = DOWNLOAD_DEADLINE_S,
                   timeout: float = HUB_TIMEOUT_S, cache_dir: str | os.PathLike | None = None) -> Bundle:
    """Open the bundle named by ``value``: a folder, or ``hf://[datasets/]OWNER/NAME[@REVISION]``
    fetched with ``download`` (default :func:`huggingface_hub.snapshot_download`, replaceable for
    tests) into the usual Hugging Face cache. When the hub is unreachable (``reachable()``
    false) a copy already in that cache is used. ``deadline`` bounds the whole download
    (huggingface_hub retries a silent host for minutes). Raises :class:`BundleError` whose
    ``cause`` says why (see the class)."""
    text = str(value).strip()
    if not text:
        raise BundleError(f"empty index bundle name; give a folder or {HUB_SCHEME}OWNER/NAME[@REVISION]", "invalid")
    if not is_hub_ref(text):
        return open_bundle(Path(text).expanduser(), label=text)
    ref = parse_hub_ref(text)
    if download is None:
        from huggingface_hub import snapshot_download as download  # imported late: heavy
    online = reachable()

    def fetch() -> str:
        kwargs = dict(repo_id=ref.repo_id, repo_type=ref.repo_type, revision=ref.revision, token=hub_token(token),
                      etag_timeout=timeout, local_files_only=not online)
        if cache_dir is not None:
            kwargs["cache_dir"] = str(cache_dir)
        return download(**kwargs)

    try:
        path = call_with_deadline(fetch, deadline)
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes a BundleError with a cause
        raise _download_error(ref, exc, online) from None
    bundle = open_bundle(Path(path), label=ref.url)
    return bundle


def _download_error(ref: HubRef, exc: BaseException, online: bool) -> BundleError:
    name = type(exc).__name__
    where = f"cannot download the index bundle {ref.url} from the Hugging Face hub"
    if not online:
        return BundleError(f"{where}: the hub is unreachable and no copy is in the local Hugging Face cache", "offline")
    if isinstance(exc, TimeoutError) or "timeout" in name.lower():
        return BundleError(f"{where}: no complete answer in time ({first_line(exc, limit=200)})", "timeout")
    if (name in {"RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError"}
            or "401" in str(exc) or "403" in str(exc)):
        return BundleError(f"{where}: repository or revision not found, or private (set {TOKEN_ENV_VAR} to a token "
                           f"that may read it; {first_line(exc, limit=200)})", "denied")
    if name in {"LocalEntryNotFoundError", "OfflineModeIsEnabled"} or "connection" in name.lower():
        return BundleError(f"{where}: the hub could not be reached ({first_line(exc, limit=200)})", "offline")
    return BundleError(f"{where}: {first_line(exc, limit=200)}", "error")


# ----------------------------------------------------------------------------------- push

def push_bundle(folder: str | os.PathLike, repo_id: str, *, token: str | None = None, repo_type: str = "model",
                private: bool | None = None, revision: str | None = None, commit_message: str | None = None,
                upload: Callable[..., Any] | None = None, create_repo: Callable[..., Any] | None = None) -> str:
    """Publish the bundle in ``folder`` to the hub repository ``repo_id`` (``OWNER/NAME``, or an
    ``hf://`` address, whose ``datasets/`` prefix picks a dataset repository) with
    ``HfApi.upload_folder``; the repository is created first when missing (``create_repo``,
    ``exist_ok=True``); remote files absent from the bundle (an older bundle's entries) are
    deleted in the same commit. The bundle is checked in full first: a damaged bundle is never published.
    Returns the ``hf://`` address to put in ``BSARD_INDEX``. ``upload``/``create_repo`` default to
    :class:`huggingface_hub.HfApi`'s methods (replaceable for tests). Raises :class:`BundleError`."""
    bundle = open_bundle(folder)
    problems = bundle.check()
    if problems:
        raise BundleError(f"index bundle {folder}: not published, it is damaged ({problems[0]}"
                          + (f"; {len(problems) - 1} more" if len(problems) > 1 else "") + ")", "damaged")
    text = str(repo_id).strip()
    ref = parse_hub_ref(text if is_hub_ref(text) else HUB_SCHEME + text)
    if is_hub_ref(text) and ref.repo_type != "model":
        repo_type = ref.repo_type
    if ref.revision and revision is None:
        revision = ref.revision
    tok = hub_token(token)
    if upload is None or create_repo is None:
        from huggingface_hub import HfApi  # imported late: heavy

        api = HfApi(token=tok)
        upload = upload or api.upload_folder
        create_repo = create_repo or api.create_repo
    message = commit_message or f"bsard-demo index bundle: {bundle.summary()}"
    try:
        create_repo(repo_id=ref.repo_id, repo_type=repo_type, private=private, exist_ok=True, token=tok)
        upload(folder_path=str(bundle.root), repo_id=ref.repo_id, repo_type=repo_type, revision=revision,
               commit_message=message, token=tok, delete_patterns="*")  # the repo mirrors the bundle
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes one clear line
        raise BundleError(f"cannot publish the index bundle to {ref.repo_id} ({repo_type} repository): "
                          f"{first_line(exc, limit=200)}; check {TOKEN_ENV_VAR} (a token with write access) and the "
                          "network", "error") from None
    return HubRef(ref.repo_id, revision, repo_type).url
