"""An installed wheel works away from the repository: ``pip install .`` (the reconciler's image,
the CI bot) carries the schemas, the embedded default config and the bundled traces in
``engine/_embedded`` (setup.py), and every command finds them there.

The package is built from a copy of the source files with the test environment's setuptools
(no build isolation, no index: nothing is downloaded) and installed into a directory of its
own; the commands then run from a directory with no configuration, with that directory first
on the import path.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.resources import DIRECTORIES

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md",
           "engine", "schemas", "budgets", "policies", "traces")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    src, site = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("site")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--no-index", "--target", str(site), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def allot(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    code = ("import sys, engine; assert engine.__file__.startswith(sys.argv[1]), engine.__file__; "
            "from engine.cli import main; sys.exit(main(sys.argv[2:]))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-c", code, str(site), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_wheel_carries_the_repository_files(installed):
    embedded = installed / "engine" / "_embedded"
    assert sorted(p.name for p in embedded.iterdir()) == sorted(DIRECTORIES)
    # setup.py (which cannot import the package it builds) copies the same list
    tree = ast.parse((ROOT / "setup.py").read_text())
    copied = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", "") == "DIRECTORIES" for t in n.targets))
    assert copied == DIRECTORIES
    for name in ("schemas/budget.schema.json", "schemas/trace.schema.json",
                 "budgets/root.yaml", "policies/scheduling.yaml", "traces/philly/philly.csv.gz"):
        assert (embedded / name).read_bytes() == (ROOT / name).read_bytes(), name


def test_commands_run_from_the_installed_wheel(installed, tmp_path):
    done = allot(installed, tmp_path, "validate", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    config = tmp_path / "mine"  # a policy repository of the user's own
    shutil.copytree(ROOT / "budgets", config / "budgets")
    shutil.copytree(ROOT / "policies", config / "policies")
    # CODEOWNERS belongs to a policy repository, not to the installed package's copy
    done = allot(installed, tmp_path, "codeowners")
    assert done.returncode == 1 and "give its PATH" in done.stderr
    assert not (installed / "engine" / "_embedded" / ".github").exists()
    done = allot(installed, tmp_path, "codeowners", str(config), "--output", "-")
    assert done.returncode == 0 and "budgets/" in done.stdout
    # ... checked against the schemas the wheel carries
    (config / "policies" / "scheduling.yaml").write_text(
        (ROOT / "policies" / "scheduling.yaml").read_text().replace("loans: false", "loans: maybe"))
    done = allot(installed, tmp_path, "validate", str(config))
    assert done.returncode == 1 and "loans" in done.stdout + done.stderr
    # the bundled trace and the embedded default: a short replay
    done = allot(installed, tmp_path, "simulate", "--window", "42d:42d12h", "--warmup", "1h",
                 "--demand-ratio", "0", "--baseline", "none", "--no-pictures", "--format", "json",
                 "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["experiment"]["config"]["origin"].endswith("_embedded")
    assert summary["schedulers"]["budget"]["tasks"]["submitted"] > 0
