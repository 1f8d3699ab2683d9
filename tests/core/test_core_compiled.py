"""The compiled core (:mod:`engine.accel`, ``allot build-core``) decides exactly what the
interpreted core decides, and is used only for the sources it was built from.

The build (about 40 s) goes to a temporary cache directory; each side runs
``tests/core/compiled_probe.py`` in a fresh interpreter (the choice of core is made at
``import engine``) and prints digests of every scenario file's decision and of a simulated day
and a half with gangs, preemptions and node failures (the legacy baseline, then the budget
scheduler with its wait causes, in one process).

Also run by hand: the whole suite under the compiled core (``ALLOT_CORE=compiled
ALLOT_CACHE_DIR=<a cache with a build> python -m pytest -n 2``) passes but for the five white-box
tests that replace a function inside the core (a compiled call does not see the replacement).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import engine.accel as accel
import engine.cache

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler to build the core with")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    where = accel.build(root=cache)
    assert where.parent == cache and (where / "complete").is_file()
    return cache


def _python(module: str, *args: str, cache: Path, core: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m module args`` in a fresh interpreter, with that cache and ``ALLOT_CORE``
    (``""``: the compiled core where built; the suite's conftest asks for the interpreted one)
    and any other variables in ``env``."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT,
                          env={**os.environ, "ALLOT_CACHE_DIR": str(cache), "ALLOT_CORE": core, **env},
                          capture_output=True, text=True, timeout=600)


def _probe(cache: Path, core: str) -> dict:
    done = _python("tests.core.compiled_probe", cache=cache, core=core)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_compiled_core_decides_what_the_interpreted_one_does(built):
    compiled = _probe(built, core="")
    interpreted = _probe(built, core="python")
    assert compiled.pop("active") == str(accel.build_dir(built))
    assert compiled.pop("decide_from").endswith(accel.SUFFIX)
    assert (interpreted.pop("active"), interpreted.pop("decide_from")) == ("None", "decide.py")
    assert compiled["sim"]["preempted"] > 100 and len(compiled["scenarios"]) >= 25
    assert compiled["abc"] == [False, False, True, True]
    assert compiled == interpreted


def test_a_build_serves_only_the_sources_it_was_built_from(built, monkeypatch):
    assert (accel.build_dir(built) / "complete").is_file()
    assert accel.build(root=built) == accel.build_dir(built)  # built already: kept
    monkeypatch.setattr(engine.cache, "_CODE", "the sources after an edit")
    assert not accel.build_dir(built).exists()  # so activate() finds nothing to load


def test_build_core_check_says_which_core_runs(built, tmp_path):
    def check(cache: Path) -> subprocess.CompletedProcess:
        return _python("engine.cli", "build-core", "--check", cache=cache, core="")

    found = check(built)
    assert found.returncode == 0 and found.stdout.startswith("core: compiled (")
    none = check(tmp_path)
    assert none.returncode == 1 and none.stdout == "core: interpreted; build for these sources: none\n"


def test_allot_simulate_names_the_compiled_core_on_its_wall_line(built, tmp_path):
    def wall(cache: Path, core: str) -> str:
        done = _python("engine.cli", "simulate", "--trace", "synthetic", "--days", "0.2", "--tasks",
                       "300", "--cluster", "h100:4", "--baseline", "none", "--no-pictures",
                       "--out", str(tmp_path / "out"), cache=cache, core=core)
        assert done.returncode == 0, done.stderr
        return next(line for line in done.stdout.splitlines() if line.startswith("wall: "))

    assert wall(built, "").endswith("; compiled core (allot build-core)")
    assert "compiled" not in wall(built, "python")


def test_a_build_keeps_the_newest_builds_of_its_interpreter_only(tmp_path):
    import time

    def made(name: str, age: int) -> Path:
        path = tmp_path / name
        path.mkdir()
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
        return path

    keep = made(f"{accel.PREFIX}new-{accel.TAG}", 0)
    others = [made(f"{accel.PREFIX}old{i}-{accel.TAG}", 10 * (i + 1)) for i in range(accel.KEEP + 1)]
    foreign = made(f"{accel.PREFIX}old-another-python", 1000)
    removed = accel.prune(keep)
    assert removed == others[accel.KEEP - 1:]
    assert sorted(p for p in tmp_path.iterdir()) == sorted([keep, *others[:accel.KEEP - 1], foreign])


def test_an_unreadable_cache_leaves_the_core_interpreted(tmp_path, monkeypatch):
    def refused(*_args):
        raise PermissionError(13, "Permission denied")

    class Unreadable(type(tmp_path)):  # type: ignore[misc]  # (a Path whose listing is refused)
        glob = refused

    cache = tmp_path / "cache"
    (cache / f"{accel.PREFIX}some-build-{accel.TAG}").mkdir(parents=True)  # (a build to look at)
    (tmp_path / "complete").write_text("")
    monkeypatch.setattr(accel, "_ACTIVE", None)
    monkeypatch.setenv("ALLOT_CORE", "")
    monkeypatch.setattr(accel, "cache_dir", lambda: Unreadable(cache))
    assert accel.activate() is None  # the cache cannot be listed
    monkeypatch.setattr(accel, "cache_dir", lambda: cache)
    monkeypatch.setattr(accel, "build_dir", refused)
    assert accel.activate() is None  # the sources cannot be hashed
    monkeypatch.setattr(accel, "build_dir", lambda root: tmp_path)  # a build, unreadable inside
    monkeypatch.setattr(accel, "_extensions", refused)
    assert accel.activate() is None and accel.active() is None
    monkeypatch.setattr(accel, "_extensions", lambda where: {})  # readable: the finder goes in
    assert accel.activate() == tmp_path
    sys.meta_path.remove(accel._ACTIVE)


def test_without_any_build_the_sources_are_not_hashed_at_import(tmp_path, monkeypatch):
    def hashed():
        raise AssertionError("hashed the sources")

    monkeypatch.setattr(accel, "_ACTIVE", None)
    monkeypatch.setenv("ALLOT_CORE", "")
    monkeypatch.setattr(accel, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(accel, "code_hash", hashed)
    (tmp_path / f"{accel.PREFIX}built-by-another-python-cpython-0").mkdir()
    assert accel.activate() is None


def test_a_build_without_a_compiler_says_what_to_do_and_changes_nothing(tmp_path):
    done = _python("engine.cli", "build-core", cache=tmp_path / "cache", core="",
                   PATH=str(tmp_path))  # (no compiler on it)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("engine/core: no C compiler found: install one (e.g. gcc)")
    assert "the interpreted core keeps working; nothing was changed" in done.stderr
    assert not (tmp_path / "cache").exists()
