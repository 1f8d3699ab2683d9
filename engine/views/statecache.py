"""The simulated view state kept on disk, for the next view command that asks for the same one.

The view commands (queue, explain, eta, usage, dashboard) take their state from a simulation
by default, and the embedded default's takes about 40 s; a researcher runs several of them in
a row on the same state. A simulation is deterministic, so its state is a pure function of its
inputs: the configuration (budgets and policy, as their JSON), the synthetic trace's days,
tasks and seed, the state's time, and the code that simulates (every source file of the
``engine`` package, hashed). The state is written under the hash of all of them, as the JSON
``--state FILE`` reads (:meth:`~engine.views.state.ViewState.to_dict`, which round-trips every
view exactly), and read back by a later run with the same inputs; any other input, or a code
change, is another key.

Where: ``$ALLOT_CACHE_DIR``, else ``$XDG_CACHE_HOME/allot``, else ``~/.cache/allot``. A file
that cannot be read back (cut short, another version) is ignored and replaced; a directory
that cannot be written to only means no state is kept. ``--fresh`` simulates again. At most
:data:`KEEP` states are kept (2 MB each for the embedded default): saving one removes the
least recently written beyond that.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from engine.cache import cache_dir, code_hash
from engine.views.state import ViewState

__all__ = ["cache_dir", "code_hash", "state_key", "load", "save"]
KEEP = 16
PREFIX = "view-state-"


def state_key(inputs: dict[str, Any]) -> str:
    """The file name for a state simulated from ``inputs`` (JSON-safe) by this code."""
    text = json.dumps({"inputs": inputs, "code": code_hash()}, sort_keys=True)
    return PREFIX + hashlib.sha256(text.encode()).hexdigest()[:24] + ".json"


def load(key: str) -> tuple[ViewState, Path] | None:
    """The state kept under ``key`` and its file, or None (none, or not readable as a state)."""
    where = cache_dir()
    if where is None:
        return None
    path = where / key
    try:
        return ViewState.from_dict(json.loads(path.read_text())), path
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(key: str, state: ViewState) -> Path | None:
    """Keep ``state`` under ``key`` (written whole or not at all); where, or None if it could
    not be written."""
    where = cache_dir()
    if where is None:
        return None
    target = where / key
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        part.write_text(json.dumps(state.to_dict(), allow_nan=False))
        os.replace(part, target)
    except (OSError, ValueError):
        return None
    _prune(target.parent)
    return target


def _prune(where: Path) -> None:
    """Remove the states beyond the :data:`KEEP` most recently written (newest first, then
    by name)."""
    try:
        kept = sorted(((p.stat().st_mtime_ns, p.name) for p in where.glob(PREFIX + "*.json")),
                      key=lambda t: (-t[0], t[1]))
        for _, name in kept[KEEP:]:
            (where / name).unlink(missing_ok=True)
    except OSError:
        pass
