"""An on-disk cache of built indexes, safe against stale, corrupt and concurrent writes.

Layout: ``<root>/<kind>/<key>/`` holding the entry's files and ``manifest.json`` (sha256 and
size of every file). ``key`` is a fingerprint of everything that shapes the entry (corpus
content and settings), so a changed corpus or setting never reuses a stale entry.

- The root is ``$BSARD_CACHE`` or ``~/.cache/bsard_demo``.
- Writers build in a temporary folder beside the target and rename it into place, so readers
  never see half an entry and two concurrent builders cannot interleave files.
- :func:`load` checks every file against the manifest; a missing, truncated or corrupt entry is
  removed and reported as absent (``None``), so the caller rebuilds.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

T = TypeVar("T")
MANIFEST = "manifest.json"


def cache_root() -> Path:
    """``$BSARD_CACHE`` when set, else ``~/.cache/bsard_demo``."""
    env = os.environ.get("BSARD_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "bsard_demo"


def fingerprint(texts: Iterable[str], settings: Mapping[str, object]) -> str:
    """A short hex digest of ``texts`` (in order) and ``settings`` (JSON, sorted keys)."""
    h = hashlib.sha256()
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for t in texts:
        b = t.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:24]


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
        for name, meta in manifest["files"].items():
            rel = Path(name)
            p = folder / rel
            if rel.is_absolute() or ".." in rel.parts or p.is_symlink() or not p.is_file():
                return False
            if p.stat().st_size != meta["size"] or _sha256(p) != meta["sha256"]:
                return False
        return True
    except Exception:  # noqa: BLE001 - any malformed manifest means "damaged"
        return False


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


def load_or_build(kind: str, key: str, *, read: Callable[[Path], T], build: Callable[[], T],
                  write: Callable[[T, Path], None], what: str, use_cache: bool = True,
                  root: Path | None = None, notice: Callable[[str], None] | None = None,
                  progress: Callable[[int, int, str], None] | None = None) -> T:
    """Entry ``kind/key`` read with ``read`` when cached and sound, else ``build()`` it and store
    it with ``write(value, folder)``. ``what`` names the entry in progress messages ("BM25
    index"). A cache that cannot be written is reported through ``notice``; the value is
    returned anyway and rebuilt next time."""
    def report(done: int, message: str) -> None:
        if progress is not None:
            progress(done, 1, message)

    if use_cache:
        loaded = load(kind, key, read, root=root, notice=notice)
        if loaded is not None:
            report(1, f"loaded cached {what}")
            return loaded
    value = build()
    if use_cache:
        report(0, f"saving {what}")
        try:
            store(kind, key, lambda folder: write(value, folder), root=root)
        except OSError as exc:
            if notice:
                notice(f"could not save the {what} to the cache ({exc.strerror or exc}); it will be rebuilt next time")
        report(1, f"saving {what}")
    return value
