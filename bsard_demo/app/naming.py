"""How a public page names what the server holds: by name and fingerprint, never by a path of the
machine that built it. A bundle's records keep the paths they were made with (the folder an adapter was
trained in, the data folder of the build: ``/tmp/tmpab12cd/frlaw-dev`` in the deploy recipe); the page
shows their last component (:func:`public_name`, :func:`strip_paths`; the index bundle's address too:
:func:`bundle_name`) and a 12-hex fingerprint of the
files (:func:`files_fingerprint`: 48 bits, enough to tell two builds apart at a glance).
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from .. import bundles

#: An absolute path in a text, at its start or after a space, a bracket, a quote, ``=``, ``,``, ``;`` or ``:``:
#: ``/a/b``, ``~/a``, ``C:\\a`` (not a URL's ``//host/x``, not ``models/x``, not a tag's ``</b``).
_PATH = re.compile(r"(?<![^\s(\"'«\[=,;:])(?:~|[A-Za-z]:)?(?:[/\\][\w.+@~-]+)+[/\\]?")
FINGERPRINT_HEX = 12


def public_name(value: object) -> str:
    """The last component of a path-like ``value`` (``/tmp/x/frlaw-dev`` → ``frlaw-dev``,
    ``hf://owner/repo`` → ``repo``); a value without a separator unchanged."""
    text = str(value).strip().rstrip("/\\")
    parts = [p for p in re.split(r"[/\\]", text) if p]
    return parts[-1] if parts else text


def strip_paths(text: str) -> str:
    """``text`` with every absolute path replaced by its last component."""
    return _PATH.sub(lambda m: public_name(m.group(0)) or m.group(0), str(text))


def files_fingerprint(files: Mapping[str, Mapping[str, Any]]) -> str:
    """A short fingerprint of files recorded as ``{name: {"sha256": …}}`` (a bundle's or a model's):
    the first hex digits of the sha256 of their sorted names and digests; ``""`` when none has one."""
    lines = sorted(f"{name}\0{meta.get('sha256')}" for name, meta in files.items()
                   if isinstance(meta, Mapping) and meta.get("sha256"))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:FINGERPRINT_HEX] if lines else ""


def digests_fingerprint(digests: Mapping[str, str]) -> str:
    """:func:`files_fingerprint` of ``{name: sha256}`` (a model folder's record: ``weights_sha256``)."""
    return files_fingerprint({name: {"sha256": sha} for name, sha in digests.items() if isinstance(sha, str)})


def bundle_name(value: str) -> str:
    """What visitors read for the bundle at ``value`` (``BSARD_INDEX``): its last component, no folder nor hub
    owner (``/srv/x/frlaw-bundle`` → ``frlaw-bundle``, ``hf://owner/bsard-index@v2`` → ``bsard-index@v2``)."""
    return public_name(value)


def without_address(problem: str, value: str, name: str) -> str:
    """``problem`` with the bundle's address (as given, or as the hub reader spells it) replaced by ``name``."""
    spellings = {value}
    if bundles.is_hub_ref(value):
        try:
            spellings.add(bundles.parse_hub_ref(value).url)
        except bundles.BundleError:
            pass
    for spelling in sorted(spellings, key=len, reverse=True):
        problem = problem.replace(spelling, name)
    return problem
