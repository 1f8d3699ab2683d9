"""Where configuration files come from: a directory, or a commit of a git repository.

A :class:`Source` lists and reads files by POSIX paths relative to the configuration root
(``budgets/root.yaml``). :class:`DirSource` reads the file system; :class:`GitSource` reads
the tree of one commit through pygit2 (any ref, sha or ``HEAD~3``) without touching the work
tree or the index, so it works in bare repositories and while a checkout is dirty.

:func:`open_source` resolves the root (see :func:`default_root`) and turns every git failure
(not a repository, unknown revision, a revision that is not a commit) into a
:class:`engine.errors.UserError`.
"""

from __future__ import annotations

import posixpath
from pathlib import Path, PurePosixPath
from typing import Protocol

from engine.errors import Problem, UserError
from engine.resources import repo_root

CONFIG_DIRS = ("budgets", "policies")
YAML_SUFFIXES = (".yaml", ".yml")
MAX_LINKS = 40  # symbolic links followed in a row in a commit's tree (as Linux does)
LEADS_NOWHERE = "a symbolic link that leads nowhere (a loop, or its target is missing)"


class Source(Protocol):
    """Read access to one configuration root."""

    origin: str
    revision: str | None

    def list_yaml(self, directory: str) -> list[str]:
        """YAML files under ``directory`` (recursively), as sorted root-relative paths."""

    def read(self, path: str) -> bytes | None:
        """The bytes of ``path``, or ``None`` when there is no such file."""

    def has_dir(self, directory: str) -> bool:
        """Whether ``directory`` exists."""

    def describe(self, path: str) -> str | None:
        """What is at ``path`` when it is there but :meth:`read` cannot read it as a file
        (``"a directory"``, a symbolic link that leads nowhere); None when nothing is there or
        it is a file."""


def default_root() -> Path:
    """The current directory or, as git finds its repository from a subdirectory, its nearest
    parent that holds ``budgets/`` and ``policies/`` (a manager working in ``budgets/`` means
    the repository around it, not the embedded default); else the embedded default
    (:func:`engine.resources.repo_root`: this checkout, or an installed package's copy)."""
    cwd = Path.cwd()
    for here in (cwd, *cwd.parents):
        if all((here / d).is_dir() for d in CONFIG_DIRS):
            return here
    return repo_root()


class DirSource:
    """Files of a directory on disk."""

    def __init__(self, root: Path):
        self.root = root
        self.origin = str(root.resolve())  # (the same run from another directory: the same origin)
        self.revision: str | None = None

    def has_dir(self, directory: str) -> bool:
        return (self.root / directory).is_dir()

    def list_yaml(self, directory: str) -> list[str]:
        base = self.root / directory
        if not base.is_dir():
            return []
        # (a link that leads nowhere or a directory named like a YAML file is listed too: reading
        # it says what it is, rather than the file seeming absent)
        found = [p for p in base.rglob("*") if p.suffix in YAML_SUFFIXES
                 and (p.is_file() or p.is_symlink() or p.is_dir())]
        return sorted(p.relative_to(self.root).as_posix() for p in found)

    def read(self, path: str) -> bytes | None:
        target = self.root / path
        try:
            return target.read_bytes() if target.is_file() else None
        except OSError:  # (unreadable: describe says so)
            return None

    def describe(self, path: str) -> str | None:
        target = self.root / path
        if target.is_dir():
            return "a directory"
        if target.is_symlink() and not target.exists():  # (exists() follows the link)
            return LEADS_NOWHERE
        if target.is_file():
            try:
                open(target, "rb").close()  # (why read refused it: opening is where it fails)
            except OSError as err:
                return f"a file that cannot be read ({err.strerror or err})"
        return None


class GitSource:
    """Files of one commit's tree, read with pygit2 (no checkout)."""

    def __init__(self, root: Path, rev: str):
        import pygit2  # imported here: only git loading needs it

        where = str(root)
        try:
            found = pygit2.discover_repository(where)
        except Exception:  # pragma: no cover - pygit2 returns None rather than raising
            found = None
        if not found:
            raise UserError([Problem(where, 0, 0, "not inside a git repository",
                                     "pass a directory inside a git repository (a plain directory "
                                     "is read without --rev, by allot validate and simulate)", "git")])
        try:
            repo = pygit2.Repository(found)
            obj = repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except Exception as err:  # pygit2 raises KeyError, ValueError or GitError subclasses
            detail = str(err).strip().strip("'\"") or type(err).__name__
            said = f"unknown git revision {rev!r}" + (f" ({detail})" if detail != rev else "")
            raise UserError([Problem(where, 0, 0, said,
                                     "give a branch, tag, commit sha or an expression like HEAD~3",
                                     "git")]) from None
        self.repo = repo
        self.commit = commit
        self.revision: str | None = str(commit.id)
        self.prefix = self._prefix(repo, root)
        location = repo.workdir or repo.path
        self.origin = f"{Path(location).resolve()}@{self.revision}"
        if self.prefix:
            self.origin += f":{self.prefix}"

    @staticmethod
    def _prefix(repo, root: Path) -> str:
        """Path of ``root`` inside the repository's tree ('' at the top)."""
        if not repo.workdir:
            return ""
        try:
            rel = root.resolve().relative_to(Path(repo.workdir).resolve())
        except ValueError:
            return ""
        return "" if str(rel) == "." else rel.as_posix()

    def _entry(self, path: str, follow: bool = True):
        """The tree entry at ``path`` (a link followed to what it names, at most
        :data:`MAX_LINKS` links, inside the commit's tree), or None: nothing there, or a link
        that leads nowhere (a loop, a missing target, out of the tree)."""
        import pygit2

        full = str(PurePosixPath(self.prefix, path)) if self.prefix else path
        for _ in range(MAX_LINKS + 1):
            try:
                entry = self.commit.tree[full]
            except KeyError:
                return None
            if not follow or entry.filemode != pygit2.enums.FileMode.LINK:
                return entry
            blob = self.repo[entry.id]
            assert isinstance(blob, pygit2.Blob)  # a link's entry is a blob of its target
            target = PurePosixPath(posixpath.normpath(posixpath.join(
                posixpath.dirname(full), blob.data.decode("utf-8", "replace"))))
            if target.is_absolute() or target.parts[:1] == ("..",):
                return None  # (outside the commit: nothing a commit can hold)
            full = str(target)
        return None

    def has_dir(self, directory: str) -> bool:
        import pygit2

        entry = self._entry(directory)
        return entry is not None and entry.type == pygit2.enums.ObjectType.TREE

    def list_yaml(self, directory: str) -> list[str]:
        import pygit2

        entry = self._entry(directory)
        if entry is None or entry.type != pygit2.enums.ObjectType.TREE:
            return []
        out: list[str] = []
        stack = [(directory, self.repo[entry.id])]
        while stack:
            base, tree = stack.pop()
            assert isinstance(tree, pygit2.Tree)  # only entries of type TREE are pushed
            for item in tree:
                assert item.name is not None  # objects iterated from a tree carry their entry name
                path = f"{base}/{item.name}"
                if item.type == pygit2.enums.ObjectType.TREE:
                    stack.append((path, self.repo[item.id]))
                elif PurePosixPath(item.name).suffix in YAML_SUFFIXES and (
                        item.filemode != pygit2.enums.FileMode.LINK or self._is_blob(path)):
                    out.append(path)  # (as on disk: a link counts when it leads to a file)
        return sorted(out)

    def _is_blob(self, path: str) -> bool:
        import pygit2

        entry = self._entry(path)
        return entry is not None and entry.type == pygit2.enums.ObjectType.BLOB

    def read(self, path: str) -> bytes | None:
        import pygit2

        entry = self._entry(path)
        if entry is None or entry.type != pygit2.enums.ObjectType.BLOB:
            return None
        blob = self.repo[entry.id]
        assert isinstance(blob, pygit2.Blob)  # entry.type is BLOB (checked above)
        return blob.data

    def describe(self, path: str) -> str | None:
        import pygit2

        entry = self._entry(path)
        if entry is not None:
            return "a directory" if entry.type == pygit2.enums.ObjectType.TREE else None
        own = self._entry(path, follow=False)
        return LEADS_NOWHERE if own is not None else None


def open_source(root: str | Path | None, rev: str | None) -> Source:
    """The source for ``root`` (default: :func:`default_root`) at ``rev`` (None: the directory)."""
    base = Path(root) if root is not None else default_root()
    if rev is not None:
        return GitSource(base, rev)
    if not base.exists():
        raise UserError([Problem(str(base), 0, 0, "does not exist",
                                 "give the directory that holds budgets/ and policies/", "missing")])
    if not base.is_dir():
        raise UserError([Problem(str(base), 0, 0, "is not a directory",
                                 "give the directory that holds budgets/ and policies/", "missing")])
    return DirSource(base)
