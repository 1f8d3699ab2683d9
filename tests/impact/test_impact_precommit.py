"""The pre-commit hooks (``.pre-commit-hooks.yaml``, published for config repositories, and the
example ``.pre-commit-config.yaml``): well-formed per pre-commit's manifest format, triggered by
budget and policy files only, and their entry really is ``allot validate``: it passes on the
shipped configuration and fails, with located problems, on a broken one."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from engine.cli import main

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"id", "name", "entry", "language"}
LANGUAGES = {"python", "system", "script", "docker", "docker_image", "fail", "pygrep"}


def hooks() -> list[dict]:
    published = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    example = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    local = [h for repo in example["repos"] for h in repo["hooks"]]
    assert [r["repo"] for r in example["repos"]] == ["local"]
    return published + local


@pytest.mark.parametrize("hook", hooks(), ids=lambda h: f"{h['id']}-{h['language']}")
def test_hook_is_well_formed_and_scoped_to_config_files(hook):
    assert REQUIRED <= set(hook), hook
    assert hook["language"] in LANGUAGES
    assert hook["pass_filenames"] is False  # allot reads the whole tree, not single files
    files = re.compile(hook["files"])
    if hook["id"] == "allot-validate":
        assert hook["entry"] == "allot validate"
        assert files.search("budgets/applied-multimodal.yaml")
        assert files.search("policies/scheduling.yaml")
    else:
        assert hook["entry"] == "allot codeowners --check"
        assert files.search(".github/CODEOWNERS") and files.search("budgets/root.yaml")
    assert not files.search("engine/cli.py") and not files.search("README.md")


def run_entry(entry: str) -> int:
    argv = shlex.split(entry)
    assert argv[0] == "allot"
    return main(argv[1:])


def copy_config(dest: Path) -> Path:
    for folder in ("budgets", "policies"):
        shutil.copytree(ROOT / folder, dest / folder)
    return dest


def test_validate_entry_passes_on_the_shipped_configuration(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(copy_config(tmp_path))
    assert run_entry("allot validate") == 0


def test_validate_entry_fails_on_a_broken_budget_with_a_location(tmp_path, monkeypatch, capsys):
    root = copy_config(tmp_path)
    path = root / "budgets" / "applied.yaml"
    path.write_text(path.read_text().replace("share: 35              # % of applied = 10.5% of the lab\n"
                                             "      principals", "share: 45\n      principals", 1))
    monkeypatch.chdir(root)
    assert run_entry("allot validate") == 1
    err = capsys.readouterr().err
    assert re.search(r"^budgets/applied\.yaml:\d+:\d+: ", err, re.M), err
