"""Where allot keeps what it can make again, and the hash of the code that keys it.

The cache directory is ``$ALLOT_CACHE_DIR``, else ``$XDG_CACHE_HOME/allot``, else
``~/.cache/allot``; it holds the simulated view states (:mod:`engine.views.statecache`) and the
compiled core (:mod:`engine.accel`), both under a hash of every source file of the ``engine``
package, so a change of the code is another key and nothing made by other code is read.
Imports nothing of the engine: :mod:`engine.accel` reads it before the core is imported.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CODE: str | None = None  # the engine's source hash, once per process


def cache_dir() -> Path | None:
    """Where things are kept (module docstring); None without a home directory to put it in."""
    explicit = os.environ.get("ALLOT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # (no HOME and no password entry)
            return None
    return Path(base) / "allot"


def code_hash() -> str:
    """A hash of every ``.py`` file of the ``engine`` package (paths and bytes)."""
    global _CODE
    if _CODE is None:
        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE = h.hexdigest()
    return _CODE
