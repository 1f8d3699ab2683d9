"""Fixtures for the impact area: a fake GitHub API and a runner for ``ci/post_comment.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.impact.fake_github import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "post_comment.py"
TOKEN = "ghs_s3cr3tTOKENvalue0123456789abcdef"


@pytest.fixture
def github():
    fake = FakeGitHub(token=TOKEN)
    fake.url = fake.start()
    yield fake
    fake.stop()


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float


@pytest.fixture
def post(tmp_path, github):
    """Run the posting script as CI would: a body file, settings from the environment."""
    import time

    def run(text: str = "report", *args: str, token: str = TOKEN, **env: str) -> Run:
        body = tmp_path / "body.md"
        body.write_text(text, encoding="utf-8")
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ALLOT_POST_"))}
        environ.update({"GITHUB_TOKEN": token, "GITHUB_REPOSITORY": github.repo,
                        "GITHUB_API_URL": github.url, "PR_NUMBER": "7",
                        "ALLOT_POST_BACKOFF_S": "0.05", "ALLOT_POST_MAX_WAIT_S": "5"})
        environ.update(env)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, str(SCRIPT), "--body-file", str(body), *args],
                              capture_output=True, text=True, env=environ, timeout=60)
        return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)

    return run


# ------------------------------------------------------------------------------ git repos

@dataclass
class Revisions:
    path: Path
    base: str
    head: str


CODE_ASSISTANT = ("    - name: code-assistant\n      share: 35", "    - name: code-assistant\n      share: 25")
AGENTS = ("    - name: agents\n      share: 20", "    - name: agents\n      share: 30")


@pytest.fixture
def shift_repo(tmp_path) -> Revisions:
    """A real git repository: the shipped budgets/policies at the base commit, and a head
    commit moving 10 points of the applied program from code-assistant (35% -> 25%) to its
    sibling agents (20% -> 30%)."""
    import pygit2

    from tests.impact.gitrepo import commit, replace_in, shipped_files

    repo = pygit2.init_repository(str(tmp_path / "config"), bare=False)
    files = shipped_files()
    base = commit(repo, files, "base: the shipped budgets")
    files = replace_in(files, "budgets/applied.yaml", *CODE_ASSISTANT)
    files = replace_in(files, "budgets/applied.yaml", *AGENTS)
    head = commit(repo, files, "move 10% of applied from code-assistant to agents")
    return Revisions(tmp_path / "config", base, head)
