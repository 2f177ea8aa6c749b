"""An on-disk cache of built indexes (``$BSARD_CACHE`` or ``~/.cache/bsard_demo``), safe against stale,
corrupt and concurrent writes: :func:`load_or_build` for every retriever's index, consulting the read-only
index bundles (:mod:`bsard_demo.bundles`, :func:`set_bundles`) first, and recording the entries it hands out
(:func:`used_entries`) for :func:`bsard_demo.bundles.export_bundle`. The in-memory memo of built values:
:mod:`bsard_demo.build_once`.

Layout and rules: docs/design.md, 'bsard_demo/cache.py'.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from . import settings
from .dataset import first_line
from .progress import Step

T = TypeVar("T")
MANIFEST = "manifest.json"
_log = logging.getLogger(__name__)


def cache_root() -> Path:
    """``$BSARD_CACHE`` when set, else ``~/.cache/bsard_demo``."""
    return settings.current().cache


def fingerprint(texts: Iterable[str], settings: Mapping[str, object]) -> str:
    """A short hex digest of ``texts`` (in order) and ``settings`` (JSON, sorted keys)."""
    h = hashlib.sha256()
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for t in texts:
        b = t.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:24]


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    return _sha256(path)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def entry_path(kind: str, key: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / kind / key


def store(kind: str, key: str, write: Callable[[Path], None], root: Path | None = None) -> Path:
    """Create entry ``kind/key`` by calling ``write(folder)`` on a temporary folder, then
    checksum its files and rename it into place. If another writer got there first, its
    (complete) entry is kept. Returns the entry's path."""
    target = entry_path(kind, key, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(target.parent, key)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=target.parent))
    try:
        write(tmp)
        files = {p.relative_to(tmp).as_posix(): {"sha256": _sha256(p), "size": p.stat().st_size}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        (tmp / MANIFEST).write_text(json.dumps({"files": files}, indent=1))
        try:
            os.rename(tmp, target)
        except OSError:
            if target.exists() and verify(target):
                shutil.rmtree(tmp, ignore_errors=True)  # a concurrent builder won; keep theirs
            else:  # a damaged entry, a stray file or a dangling link is in the way
                stale = target.with_name(f".{key}.stale-{uuid.uuid4().hex[:8]}")
                if os.path.lexists(target):
                    os.rename(target, stale)
                    _discard(stale)
                os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


#: A writer's temporary (or set-aside) folder older than this is a killed writer's leftover.
LEFTOVER_AGE_S = 3600


def sweep_leftovers(folder: Path, key: str, max_age: float = LEFTOVER_AGE_S) -> None:
    """Remove the ``.KEY.tmp-*`` and ``.KEY.stale-*`` folders of ``key`` in ``folder`` not touched
    for ``max_age`` seconds: what a writer killed mid-write (SIGKILL, power loss) leaves, never
    read (readers only open the entry itself) but as big as the entry (docs/reliability.md,
    "10. Faults mid-flight"). A live writer's folder is younger: it is written as soon as made."""
    now = time.time()
    for pattern in (f".{key}.tmp-*", f".{key}.stale-*"):
        for path in folder.glob(pattern):
            try:
                old = now - path.lstat().st_mtime > max_age
            except OSError:
                continue
            if old:
                _discard(path)


def replace_folder(tmp: Path, dest: Path) -> None:
    """Put the finished folder ``tmp`` at ``dest`` by renames: whatever is at ``dest`` (but an
    empty folder, which the rename replaces on POSIX) is first moved aside, and put back if the
    rename fails, then removed; so ``dest`` always holds the old or the new version, whole."""
    old = None
    if os.path.lexists(dest) and not (dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir())):
        old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(dest, old)
    try:
        os.rename(tmp, dest)
    except OSError:
        if old is not None:
            os.rename(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _discard(path: Path) -> None:
    """Remove ``path`` whatever it is (folder, file, link), ignoring errors."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def verify(folder: Path) -> bool:
    """True when ``folder`` has a manifest and every listed file matches its size and sha256.
    Never raises: an unreadable or malformed manifest, or one naming anything but a regular file
    inside ``folder`` (e.g. ``../x`` or a device, which could be read forever), gives False."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        return check_files(folder, manifest["files"]) is None
    except Exception:  # noqa: BLE001 - any malformed manifest means "damaged"
        return False


def check_files(folder: Path, files: Mapping[str, Mapping[str, object]], *, follow_links: bool = False) -> str | None:
    """``None`` when every file named in ``files`` (relative path → ``{"size", "sha256"}``) is a
    regular file inside ``folder`` with that size and sha256, else a short description of the
    first problem ("missing file x", "size of x differs", ...). Sizes are checked for all files
    before any is hashed, so a partial copy is found cheaply. ``follow_links`` accepts symbolic
    links to regular files (the Hugging Face cache stores snapshots as links to blobs). Never
    raises."""
    try:
        paths = []
        for name, meta in files.items():
            rel = Path(name)
            p = folder / rel
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                return f"bad file name {name!r}"
            if (p.is_symlink() and not follow_links) or not p.is_file():
                return f"missing file {name}" if not os.path.lexists(p) else f"{name} is not a regular file"
            if p.stat().st_size != int(meta["size"]):
                return f"size of {name} differs ({p.stat().st_size} bytes, {int(meta['size'])} expected)"
            paths.append((name, p, str(meta["sha256"])))
        for name, p, digest in paths:
            if _sha256(p) != digest:
                return f"checksum of {name} differs"
        return None
    except Exception as exc:  # noqa: BLE001 - unreadable, malformed: a problem, not a crash
        return f"cannot check the files ({type(exc).__name__}: {exc})"


# ------------------------------------------------------------------ read-only bundles, usage log

class BundleSource(Protocol):
    """What :func:`load_or_build` needs from an active index bundle (see :mod:`bsard_demo.bundles`)."""

    label: str

    def lookup(self, kind: str, key: str, *, what: str = "", describe: Mapping[str, object] | None = None
               ) -> tuple[Path | None, str | None]:
        """``(folder, None)`` for a sound entry ``kind/key``; else ``(None, note)`` where ``note``
        is a one-line explanation (missing, damaged, another corpus...), or ``None`` to stay quiet."""


@dataclass(frozen=True)
class UsedEntry:
    """An index entry handed out by :func:`load_or_build` in this process. ``source``:
    ``"bundle"``, ``"cache"`` (loaded), ``"built"`` (built and stored) or ``"unsaved"`` (built,
    the cache could not be written: ``path`` is ``None``)."""

    kind: str
    key: str
    path: Path | None
    what: str
    source: str
    describe: Mapping[str, object] = field(default_factory=dict)


_lock = threading.Lock()
_bundles: tuple[BundleSource, ...] = ()
_used: dict[tuple[str, str], UsedEntry] = {}


def set_bundles(bundles: Sequence[BundleSource]) -> None:
    """Make ``bundles`` (in order of preference; empty: none) the active index bundles of this
    process, consulted by every :func:`load_or_build` before the cache."""
    global _bundles
    with _lock:
        _bundles = tuple(bundles)


def active_bundles() -> tuple[BundleSource, ...]:
    with _lock:
        return _bundles


def used_entries() -> list[UsedEntry]:
    """Entries handed out so far in this process, first use first (one per ``kind/key``)."""
    with _lock:
        return list(_used.values())


def forget_used() -> None:
    """Empty the :func:`used_entries` log (e.g. before building what is to be exported)."""
    with _lock:
        _used.clear()


def _record(entry: UsedEntry) -> None:
    with _lock:
        _used.pop((entry.kind, entry.key), None)
        _used[(entry.kind, entry.key)] = entry


def load(kind: str, key: str, read: Callable[[Path], T], root: Path | None = None,
         notice: Callable[[str], None] | None = None) -> T | None:
    """Read entry ``kind/key`` with ``read(folder)``; ``None`` when absent. A corrupt entry (bad
    checksum or ``read`` failing) is removed, reported through ``notice`` and gives ``None``."""
    target = entry_path(kind, key, root)
    try:
        if not target.is_dir():
            return None
    except OSError:  # e.g. a cache folder we may not enter: absent to us (store() will say so)
        return None
    problem = None
    if not verify(target):
        problem = "checksum mismatch or missing file"
    else:
        try:
            return read(target)
        except Exception as exc:  # noqa: BLE001 - any failure to read means rebuild
            problem = f"{type(exc).__name__}: {exc}"
    if notice:
        notice(f"cached index {kind}/{key} is damaged ({problem}); rebuilding it")
    stale = target.with_name(f".{key}.stale-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(target, stale)
        shutil.rmtree(stale, ignore_errors=True)
    except OSError:
        pass
    return None


def is_stored(kind: str, key: str, root: Path | None = None, *, what: str = "") -> bool:
    """Whether entry ``kind/key`` is in an active index bundle or the cache, i.e. whether
    :func:`load_or_build` would only load it (the cache entry is not checksummed here: a damaged
    one is found, removed and rebuilt on load). Never raises."""
    for bundle in active_bundles():
        try:
            folder, _note = bundle.lookup(kind, key, what=what)
        except Exception:  # noqa: BLE001 - an unreadable bundle holds nothing for us
            continue
        if folder is not None:
            return True
    try:
        return entry_path(kind, key, root).is_dir()
    except OSError:
        return False


def load_or_build(kind: str, key: str, *, read: Callable[[Path], T], build: Callable[[], T],
                  write: Callable[[T, Path], None], what: str, use_cache: bool = True,
                  root: Path | None = None, notice: Callable[[str], None] | None = None,
                  progress: Callable[[int, int, str], None] | None = None,
                  describe: Mapping[str, object] | None = None, subject: str = "") -> T:
    """Entry ``kind/key`` read with ``read`` from an active index bundle (:func:`set_bundles`)
    or the cache when there and sound, else ``build()`` it and store it in the cache with
    ``write(value, folder)``. ``what`` names the entry in notices and progress ("BM25 index"),
    whose steps are :class:`~bsard_demo.retrievers.base.Step` s (``saving``, ``loaded_cached``,
    ``loaded_bundle``) with the entry's ``kind`` and ``subject`` (e.g. the encoder) as parameters;
    ``describe`` (optional, JSON-able: e.g. ``{"corpus": {...}, "settings": {...}}``) is kept in
    :func:`used_entries` and lets a bundle say why it has no such entry. A bundle that lacks the
    entry or holds a damaged one is reported through ``notice`` (one line) and the usual path
    runs; a bundle is only ever read. A cache that cannot be written is reported through
    ``notice``; the value is returned anyway and rebuilt next time. ``use_cache=False`` skips
    bundles and cache alike."""
    def report(done: int, step: str) -> None:
        if progress is not None:
            progress(done, 1, Step(step, entry=kind, subject=subject, what=what))

    def say(message: str) -> None:
        if notice is not None:
            notice(message)
        else:
            _log.warning("%s", message)

    info = dict(describe or {})
    if use_cache:
        for bundle in active_bundles():
            try:
                folder, note = bundle.lookup(kind, key, what=what, describe=info)
            except Exception as exc:  # noqa: BLE001 - a broken bundle must never stop a build
                folder, note = None, (f"index bundle {getattr(bundle, 'label', '?')}: cannot be read "
                                      f"({first_line(exc, limit=200)}); using the cache or building instead")
            if folder is None:
                if note:
                    say(note)
                continue
            try:
                value = read(folder)
            except Exception as exc:  # noqa: BLE001 - any failure to read means: not from this bundle
                say(f"index bundle {bundle.label}: its {what} ({kind}/{key}) cannot be read "
                    f"({first_line(exc, limit=200)}); using the cache or building instead")
                continue
            _record(UsedEntry(kind, key, folder, what, "bundle", info))
            report(1, "loaded_bundle")
            return value
        loaded = load(kind, key, read, root=root, notice=notice)
        if loaded is not None:
            _record(UsedEntry(kind, key, entry_path(kind, key, root), what, "cache", info))
            report(1, "loaded_cached")
            return loaded
    value = build()
    if use_cache:
        report(0, "saving")
        try:
            path = store(kind, key, lambda folder: write(value, folder), root=root)
            _record(UsedEntry(kind, key, path, what, "built", info))
        except OSError as exc:
            _record(UsedEntry(kind, key, None, what, "unsaved", info))
            if notice:
                # numpy reports a full disk as a short write ("N requested and M written"), no errno
                why = exc.strerror or f"{exc}: the disk is probably full"
                notice(f"could not save the {what} to the cache ({why}); it will be rebuilt next time")
        report(1, "saving")
    return value
