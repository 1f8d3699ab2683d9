"""The compiled decision core: the same sources of :mod:`engine.core`, compiled with mypyc.

``allot build-core`` (:func:`build`) compiles the core's algorithm modules into C extensions
(every module of ``engine/core`` but :data:`NOT_COMPILED`: ``types``, whose plain dataclasses
other layers pickle and extend; ``projection``, whose dict subclass, compiled, was never freed,
so a month's memory rose from 366 to 961 MB; ``lazymaps``, whose ``Mapping`` subclasses,
compiled, shared ``Mapping``'s isinstance caches, so a plain dict passed for a ``LazyMap``),
in a directory of the cache named after a hash of every source file of the package
(:func:`engine.cache.code_hash`). At import, :func:`activate` (called by
``engine/__init__.py``) loads those extensions in place of the modules' sources, but only
when the directory for the sources as they are now exists: after any edit the interpreted
core runs again until the next build, so a stale build is never used (where the cache holds no
build for this interpreter at all, the sources are not even hashed: start-up pays nothing).
``ALLOT_CORE=python`` keeps the interpreted core whatever is built.

Same decisions: it is the same code. The build changes no source, and the compiler checks
the annotations at run time (a value of another type than declared raises ``TypeError``
rather than being used). Every captured pass of the simulator benchmarks decides the same
actions, statuses, reservations and ranks either way; ``tests/core/test_core_compiled.py``
builds the core and compares whole simulations (wait causes included) and the scenario files,
and the whole suite passes under it but for five white-box tests that replace functions
inside the core. What it buys: about 30% less time per decision (the simulator's month,
``tests/benchmarks/bench_sim.py``, prints which core ran). What it costs: a C compiler and
Python's headers, and about 40 s of compiling per change of the sources.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

from engine.cache import cache_dir, code_hash

PACKAGE = Path(__file__).resolve().parent  # engine/
CORE = PACKAGE / "core"
NOT_COMPILED = ("__init__", "types", "projection", "lazymaps")  # engine.core modules left interpreted
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]  # this interpreter's, e.g. .cpython-311-x86_64-linux-gnu.so
PREFIX = "core-"  # a build's directory: PREFIX + the sources' hash + "-" + TAG
# one interpreter's extensions do not load in another: its tag is part of a build's name
TAG = sys.implementation.cache_tag or sys.implementation.name
KEEP = 4  # builds kept per interpreter (about 3 MB each), the newest


def modules() -> list[str]:
    """The names of the ``engine.core`` modules a build compiles, sorted."""
    return sorted(p.stem for p in CORE.glob("*.py") if p.stem not in NOT_COMPILED)


def build_dir(root: Path | None = None) -> Path | None:
    """Where the build for the sources as they are now lives (None: no cache directory)."""
    where = root if root is not None else cache_dir()
    return None if where is None else where / f"{PREFIX}{code_hash()[:24]}-{TAG}"


def built(where: Path | None) -> bool:
    """Is ``where`` a finished build (its modules all made: :func:`build` marks it last)?"""
    return where is not None and (where / "complete").is_file()


class _Finder:
    """A finder of ``sys.meta_path`` (it needs only ``find_spec``) for the compiled modules
    of one build: ``engine.core.<name>`` and the library they share (mypyc's
    ``<hash>__mypyc``), both extension modules in the build's directory."""

    def __init__(self, where: Path, names: dict[str, Path]):
        self.where = where
        self.names = names  # full module name -> its extension file

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        file = self.names.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(fullname, file)


_ACTIVE: _Finder | None = None


def active() -> Path | None:
    """The build whose modules are (or will be) loaded; None: the core is interpreted."""
    return _ACTIVE.where if _ACTIVE is not None else None


def declined() -> bool:
    """Does ``ALLOT_CORE=python`` ask for the interpreted core whatever is built?"""
    return os.environ.get("ALLOT_CORE", "").strip().lower() == "python"


def activate() -> Path | None:
    """Load the core from the build for the current sources, if there is one and
    ``ALLOT_CORE`` is not ``python``; the build's directory, or None. Call it before any
    ``engine.core`` module is imported (``engine/__init__.py`` does); modules already
    imported stay as they are."""
    global _ACTIVE
    if _ACTIVE is not None:
        return _ACTIVE.where
    if declined():
        return None
    try:
        root = cache_dir()
        # (no build of this interpreter's at all, the usual case: the sources are not hashed)
        if root is None or next(root.glob(f"{PREFIX}*-{TAG}"), None) is None:
            return None
        where = build_dir(root)
        if where is None or not built(where):
            return None
        names = _extensions(where)
    except OSError:  # sources or cache unreadable (e.g. no permission): stay interpreted
        return None
    if names is None:
        return None
    _ACTIVE = _Finder(where, names)
    sys.meta_path.insert(0, _ACTIVE)
    return where


def _extensions(where: Path) -> dict[str, Path] | None:
    """Full module name -> extension file of a finished build; None if one is missing."""
    names: dict[str, Path] = {}
    for name in modules():
        file = where / "engine" / "core" / (name + SUFFIX)
        if not file.is_file():
            return None
        names[f"engine.core.{name}"] = file
    for file in where.glob("*__mypyc" + SUFFIX):  # the library the modules share
        names[file.name[: -len(SUFFIX)]] = file
    return names


class BuildError(Exception):
    """The compiler is missing or failed; the message says what to do."""


def build(root: Path | None = None, say: Callable[[str], None] = lambda _: None,
          force: bool = False) -> Path:
    """Compile the core for the sources as they are now into its build directory (under
    ``root``, else the cache directory); return that directory. Nothing is replaced unless
    the compile succeeds: the modules are compiled in a temporary copy of the package and
    the result moved in whole."""
    import shutil  # (only a build needs these)
    import subprocess
    import sysconfig
    import tempfile

    where = build_dir(root)
    if where is None:
        raise BuildError("no cache directory: set ALLOT_CACHE_DIR to a writable directory")
    if built(where) and not force:
        say(f"already built for these sources: {where}")
        return where
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]  # (e.g. "gcc -pthread")
    if shutil.which(compiler) is None and shutil.which("cc") is None:
        raise BuildError("no C compiler found: install one (e.g. gcc) and Python's headers")
    where.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="allot-core-", dir=where.parent) as tmp:
        work = Path(tmp)
        shutil.copytree(PACKAGE, work / "engine", ignore=shutil.ignore_patterns(
            "__pycache__", "*.so", "*.pyd", "_embedded"))
        # (as pyproject.toml's [tool.mypy]: dependencies without type information are Any)
        (work / "mypy.ini").write_text("[mypy]\nignore_missing_imports = True\n\n"
                                       "[mypy-yaml.*]\nignore_missing_imports = True\n")
        sources = [f"engine/core/{name}.py" for name in modules()]
        script = ("import sys\nfrom setuptools import setup\nfrom mypyc.build import mypycify\n"
                  "setup(name='allot-core', ext_modules=mypycify(sys.argv[1:], opt_level='3'),"
                  " script_args=['build_ext', '--build-lib', 'out', '--build-temp', 'tmp'])\n")
        say(f"compiling {len(sources)} modules of engine.core with mypyc (about 40 s)")
        done = subprocess.run([sys.executable, "-c", script, *sources], cwd=work,
                              capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise BuildError(f"mypyc failed (is mypy installed? pip install mypy):\n{tail}")
        out = work / "out"
        if _extensions(out) is None:
            raise BuildError(f"mypyc made no module for some of: {', '.join(modules())}")
        (out / "complete").write_text("engine.core compiled by mypyc\n")
        if built(where) and not force:
            say(f"built meanwhile by another process: {where}")  # (kept: it may be loading it)
            return where
        if where.exists():
            shutil.rmtree(where)
        out.rename(where)
    prune(where)
    say(f"built: {where}")
    return where


def prune(keep: Path) -> list[Path]:
    """Remove this interpreter's builds beside ``keep`` (for other sources: older ones, other
    checkouts sharing the cache) but the newest ``KEEP - 1``; the ones removed."""
    import shutil

    others = sorted((p for p in keep.parent.glob(f"{PREFIX}*-{TAG}") if p != keep and p.is_dir()),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in others[KEEP - 1:]:
        shutil.rmtree(old, ignore_errors=True)
    return others[KEEP - 1:]
