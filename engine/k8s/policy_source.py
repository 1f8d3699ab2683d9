"""The policy in force: followed from the policy git repository with pygit2.

Three sources, from ``--policy-repo``:

- none: the embedded default (this package's own ``budgets/`` and ``policies/``), loaded once;
- a directory that is not a git repository (e.g. a mounted ConfigMap): re-read every interval,
  identified by a content hash ``dir:<sha256 prefix>``;
- a git URL or the path of a git repository: cloned bare into ``workdir`` once, then fetched
  every interval; the tip of ``refs/remotes/origin/<branch>`` is the candidate.

Each new candidate (commit or content hash) is validated with
:func:`engine.loader.load_config` (reading the commit's tree, no checkout) exactly once. A
valid one replaces the configuration atomically (the loop swaps it between passes); an invalid
one is recorded with its problems while the last good configuration stays in force, and the
loop reports it (Event, metric, log). A fetch failure is recorded the same way. Until a first
valid configuration exists the reconciler is not ready.

Credentials for a private repository: ``ALLOT_GIT_USERNAME``/``ALLOT_GIT_PASSWORD`` (https
token) or ``ALLOT_GIT_SSH_KEY`` (path of a private key, ``ALLOT_GIT_SSH_PUBKEY`` optional).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pygit2

from engine.errors import UserError
from engine.loader import load_config
from engine.model import Config

log = logging.getLogger("allot.k8s.policy")


@dataclass(frozen=True)
class PolicyEvent:
    """What a poll found: a new good configuration, or an invalid candidate (kept last good),
    or a fetch failure."""

    kind: str  # "applied" | "invalid" | "fetch-failed"
    revision: str
    message: str


def _callbacks() -> pygit2.RemoteCallbacks | None:
    user, password = os.environ.get("ALLOT_GIT_USERNAME"), os.environ.get("ALLOT_GIT_PASSWORD")
    key = os.environ.get("ALLOT_GIT_SSH_KEY")
    if user and password:
        return pygit2.RemoteCallbacks(credentials=pygit2.UserPass(user, password))
    if key:
        pub = os.environ.get("ALLOT_GIT_SSH_PUBKEY", key + ".pub")
        return pygit2.RemoteCallbacks(credentials=pygit2.Keypair("git", pub, key, ""))
    return None


def _is_git(location: str) -> bool:
    if "://" in location or location.startswith("git@"):
        return True
    try:
        return pygit2.discover_repository(location) is not None
    except Exception:
        return False


def dir_revision(root: Path) -> str:
    """A content hash of the YAML under ``root/budgets`` and ``root/policies``."""
    digest = hashlib.sha256()
    for sub in ("budgets", "policies"):
        base = root / sub
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file() and path.suffix in (".yaml", ".yml"):
                    digest.update(str(path.relative_to(root)).encode() + b"\0")
                    digest.update(path.read_bytes() + b"\0")
    return "dir:" + digest.hexdigest()[:12]


class PolicySource:
    """Holds the configuration in force and polls for new ones (see the module docstring)."""

    def __init__(self, location: str | None = None, *, branch: str = "main",
                 workdir: str | Path | None = None, interval_s: float = 60.0,
                 timer: Callable[[], float] = time.monotonic):
        self.location = location
        self.branch = branch
        self.interval_s = interval_s
        self.timer = timer
        self.mode = "default" if not location else ("git" if _is_git(location) else "dir")
        # the clone's home; a temporary one is made only when a git source is first fetched
        self.workdir: Path | None = Path(workdir) if workdir else None
        self.config: Config | None = None
        self.revision: str | None = None  # the revision in force
        self.invalid: dict[str, str] = {}  # rejected revision -> problems
        self.last_invalid: str | None = None
        self.fetch_error: str | None = None
        self._repo: pygit2.Repository | None = None
        self._next_poll = -float("inf")

    @property
    def commit(self) -> str:
        """The revision in force (sha, ``dir:`` hash or ``embedded``), '' before the first."""
        return self.revision or ""

    def poll(self, force: bool = False) -> PolicyEvent | None:
        """Look for a new revision when the interval elapsed (or ``force``); return what
        happened, or None when nothing new was found."""
        now = self.timer()
        if not force and now < self._next_poll:
            return None
        self._next_poll = now + self.interval_s
        if self.mode == "default":
            if self.config is None:
                return self._try(None, None, "embedded")
            return None
        if self.mode == "dir":
            assert self.location is not None
            rev = dir_revision(Path(self.location))
            if rev == self.revision or rev in self.invalid:
                return None
            return self._try(self.location, None, rev)
        try:
            sha = self._fetch()
        except (pygit2.GitError, KeyError, ValueError, OSError) as err:
            said = err.args[0] if isinstance(err, KeyError) and err.args else err
            self.fetch_error = (f"{type(err).__name__}: {said}; check --policy-repo and --branch "
                                f"(a private repository needs the allot-git Secret: ALLOT_GIT_*)")
            log.warning("policy fetch from %s failed: %s", self.location, self.fetch_error)
            return PolicyEvent("fetch-failed", self.revision or "", self.fetch_error)
        self.fetch_error = None
        if sha == self.revision or sha in self.invalid:
            return None
        assert self._repo is not None  # _fetch() opened it
        return self._try(str(self._repo.path), sha, sha)

    def _fetch(self) -> str:
        """Clone or fetch; the sha at the tip of the followed branch."""
        if self._repo is None:
            if self.workdir is None:
                self.workdir = Path(tempfile.mkdtemp(prefix="allot-policy-"))
            target = self.workdir / "repo.git"
            if (target / "HEAD").exists():
                self._repo = pygit2.Repository(str(target))
            else:
                assert self.location is not None  # mode "git" is set only for a location
                self._repo = pygit2.clone_repository(self.location, str(target), bare=True,
                                                     callbacks=_callbacks())
        self._repo.remotes["origin"].fetch(callbacks=_callbacks())
        for ref in (f"refs/remotes/origin/{self.branch}", f"refs/heads/{self.branch}"):
            try:
                return str(self._repo.lookup_reference(ref).peel(pygit2.Commit).id)
            except (KeyError, pygit2.InvalidSpecError):
                continue
        raise KeyError(f"branch {self.branch!r} not found in {self.location}")

    def _try(self, root: str | None, rev: str | None, label: str) -> PolicyEvent:
        try:
            config = load_config(root, rev)
        except Exception as err:  # (a revision nobody could foresee must not stop the loop)
            if isinstance(err, UserError):
                text = "; ".join(str(p) for p in err.problems[:5])
                if len(err.problems) > 5:
                    text += f"; and {len(err.problems) - 5} more"
            else:
                log.exception("policy revision %s could not be read", label)
                text = f"it could not be read ({type(err).__name__}: {err}); please report this"
            self.invalid[label] = text
            self.last_invalid = label
            kept = self.revision or "none"
            log.error("policy revision %s is invalid, keeping %s: %s", label, kept, text)
            return PolicyEvent("invalid", label,
                               f"policy revision {_short(label)} is invalid, keeping "
                               f"{_short(kept)}: {text}")
        self.config = config
        self.revision = config.revision or label
        self.last_invalid = None
        log.info("policy revision %s in force (%s)", self.revision, config.origin)
        return PolicyEvent("applied", self.revision, f"policy revision {_short(self.revision)} "
                                                     f"in force")


def _short(rev: str) -> str:
    return rev[:12] if len(rev) == 40 else rev
