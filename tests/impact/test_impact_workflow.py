"""The GitHub Actions workflow in ``ci/github/allot-pr.yml``: valid against GitHub's workflow
JSON schema (the copy vendored in check-jsonschema, so the test runs offline), and shaped so the
bot never runs code from the pull request and holds no more rights than it needs."""

from __future__ import annotations

import copy
import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "ci" / "github" / "allot-pr.yml"


def builtin_schema(group: str, name: str) -> dict:
    pkg = resources.files("check_jsonschema.builtin_schemas") / group / f"{name}.json"
    return json.loads(pkg.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def workflow() -> dict:
    # PyYAML reads the bare key `on` as True; GitHub (and check-jsonschema) read it as "on".
    doc = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    return doc


def errors(doc: dict, schema: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


def typed(doc_text: str) -> dict:
    """The workflow as check-jsonschema parses it (typed scalars, `on` kept as a string)."""
    doc = yaml.safe_load(doc_text)
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc


def test_workflow_validates_against_the_github_workflow_schema():
    doc = typed(WORKFLOW.read_text(encoding="utf-8"))
    assert errors(doc, builtin_schema("vendor", "github-workflows")) == []
    assert errors(doc, builtin_schema("custom", "github-workflows-require-timeout")) == []


def test_the_schema_check_rejects_a_broken_workflow():
    doc = typed(WORKFLOW.read_text(encoding="utf-8"))
    broken = copy.deepcopy(doc)
    del broken["jobs"]["impact"]["runs-on"]
    broken["permissions"] = {"pull-requests": "everything"}
    found = errors(broken, builtin_schema("vendor", "github-workflows"))
    assert found, "the schema must catch a job without runs-on and an invalid permission"


def test_runs_only_for_pull_requests_touching_budgets_or_policies(workflow):
    assert set(workflow["on"]) == {"pull_request"}
    assert workflow["on"]["pull_request"]["paths"] == [
        "budgets/**", "policies/**", ".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"]


def test_permissions_are_minimal(workflow):
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "permissions" not in workflow["jobs"]["impact"]


def test_engine_is_installed_from_the_base_commit_and_pr_files_are_data(workflow):
    steps = workflow["jobs"]["impact"]["steps"]
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    base = next(s for s in checkouts if s["with"].get("path") == "engine-base")
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert all(s["with"]["persist-credentials"] == "false" for s in checkouts)
    runs = [s["run"] for s in steps if "run" in s]
    install = [r for r in runs if "pip install" in r]
    assert install == ["python -m pip install --disable-pip-version-check --quiet ./engine-base"]
    # nothing is executed from the pull request checkout: in it only the installed `allot`
    # runs, reading files as data; no interpreter, installer or script path is invoked there
    in_pr = [s["run"] for s in steps if s.get("working-directory") == "pr"]
    assert in_pr
    for run in in_pr:
        assert not re.search(r"\b(python3?|pip|bash|sh|source|make|npm)\b|\./|\bpr/", run), run
    assert not any("pr/" in r or " pr" in r for r in runs)
    poster = next(s for s in steps if "post_comment.py" in s.get("run", ""))
    assert poster["run"].startswith("python engine-base/ci/post_comment.py")


def test_runs_validate_codeowners_and_impact_on_base_and_head(workflow):
    job = workflow["jobs"]["impact"]
    step = next(s for s in job["steps"] if s.get("id") == "allot")
    script = step["run"]
    assert 'allot validate --rev "$HEAD_SHA"' in script
    assert "allot codeowners --check" in script
    assert 'allot impact --repo . --base "$BASE_SHA" --head "$HEAD_SHA" --cadence interval' in script
    assert job["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"  # (the engine's)
    # the configuration's base is the merge commit's first parent, whatever the event says
    assert script.index("BASE_SHA=$(git rev-parse HEAD^1)") < script.index("allot impact")


def test_token_reaches_only_the_posting_step_and_no_untrusted_text_is_interpolated(workflow):
    steps = workflow["jobs"]["impact"]["steps"]
    with_token = [s for s in steps if "secrets.GITHUB_TOKEN" in json.dumps(s)]
    assert len(with_token) == 1 and "post_comment.py" in with_token[0]["run"]
    assert with_token[0]["env"]["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "secrets." not in text.replace("${{ secrets.GITHUB_TOKEN }}", "")
    # PR-controlled strings (title, body, branch name) would be a script-injection hole
    for run in (s.get("run", "") for s in steps):
        assert "${{" not in run, run


FAKE_ALLOT = """#!/bin/sh
# stands in for the installed allot: exit codes from the environment, a report for impact
cmd=$1
case $cmd in
  validate) echo "budgets/applied.yaml:11:3: shares sum to 101%"; exit ${VALIDATE_RC:-0} ;;
  codeowners) echo "CODEOWNERS is stale"; exit ${CODEOWNERS_RC:-0} ;;
  impact)
    while [ $# -gt 0 ]; do [ "$1" = "--out" ] && out=$2; [ "$1" = "--base" ] && base=$2; shift; done
    echo "$base" > "$out/base.txt"
    echo "### Allot impact: report" > "$out/impact.md"; exit ${IMPACT_RC:-0} ;;
esac
"""


def run_check_step(tmp_path, **rcs: str) -> tuple[str, str]:
    """Run the workflow's check step with bash, as the runner would, against a fake allot."""
    import os
    import subprocess

    doc = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    step = next(s for s in doc["jobs"]["impact"]["steps"] if s.get("id") == "allot")
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "allot").write_text(FAKE_ALLOT)
    (bindir / "allot").chmod(0o755)
    # the checkout: a merge commit of the pull request onto the base it was made on
    pr = tmp_path / "pr"
    pr.mkdir(exist_ok=True)
    git = ["git", "-C", str(pr), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(pr)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "base"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "merge"], check=True)
    output = tmp_path / "github_output"
    output.write_text("")
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path),
           "GITHUB_OUTPUT": str(output), "BASE_SHA": "b" * 40, "HEAD_SHA": "a" * 40, **rcs}
    # GitHub runs `run:` with `bash -e {0}` on Linux runners
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path / "pr", env=env, check=True,
                   capture_output=True, text=True)
    return (tmp_path / "allot-impact" / "comment.md").read_text(), output.read_text()


def test_check_step_composes_the_comment_when_all_pass(tmp_path):
    import subprocess

    comment, output = run_check_step(tmp_path)
    parent = subprocess.run(["git", "-C", str(tmp_path / "pr"), "rev-parse", "HEAD^1"],
                            capture_output=True, text=True, check=True).stdout.strip()
    # the impact compares against the merge commit's first parent, not the event's base.sha
    assert (tmp_path / "allot-impact" / "base.txt").read_text().strip() == parent != "b" * 40
    assert comment.startswith(f"## Allot dry-run for {'a' * 12}")
    assert "| `allot validate` | passed |" in comment and "| `allot impact` | passed |" in comment
    assert "### Allot impact: report" in comment and "<details" not in comment
    assert output.strip() == "failed=0"


def test_check_step_reports_failures_and_still_writes_the_comment(tmp_path):
    comment, output = run_check_step(tmp_path, VALIDATE_RC="1", CODEOWNERS_RC="1")
    assert "| `allot validate` | **failed** (exit 1) |" in comment
    assert "| `allot codeowners` | **failed** (exit 1) |" in comment
    assert "budgets/applied.yaml:11:3: shares sum to 101%" in comment
    assert "CODEOWNERS is stale" in comment
    assert output.strip() == "failed=1"


def test_a_matplotlibrc_in_the_checkout_does_not_change_the_pictures(tmp_path):
    """The check step runs inside the pull request's checkout, where matplotlib reads a
    ``matplotlibrc``: the engine draws with matplotlib's own defaults whatever it says."""
    import subprocess
    import sys

    (tmp_path / "matplotlibrc").write_text("savefig.dpi: 1000\nfigure.figsize: 40, 40\n")
    probe = ("import matplotlib; before = matplotlib.rcParams['savefig.dpi']; "
             "from engine.pictures import pyplot; plt = pyplot(); "
             "print(before, plt.rcParams['savefig.dpi'], list(plt.rcParams['figure.figsize']))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         check=True, env={**__import__("os").environ,
                                          "PYTHONPATH": str(WORKFLOW.parents[2])}).stdout.split(" ", 2)
    assert out[0] == "1000.0"  # (the file is read: the probe means something)
    assert out[1] == "figure" and out[2].strip() == "[6.4, 4.8]"
