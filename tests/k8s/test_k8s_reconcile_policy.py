"""Policy from git: the reconciler follows a real pygit2 repository, applies each valid commit,
and keeps the last good one (reporting it) when a commit is invalid."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from engine.k8s import marks
from engine.k8s.client import KubeClient
from engine.k8s.loop import LoopOptions, Reconciler
from engine.k8s.policy_source import PolicySource
from tests.k8s.reconcile_support import POLICY_NS, Env, ann, events_for, job, write_policy

SIG = pygit2.Signature("Manager", "manager@example.org", 1_750_000_000, 0)


def commit_all(repo: pygit2.Repository, message: str) -> str:
    """Stage the whole work tree and commit it on main; return the sha."""
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("refs/heads/main", SIG, SIG, message, tree, parents))


@pytest.fixture
def policy_repo(tmp_path):
    work = tmp_path / "policy-repo"
    repo = pygit2.init_repository(str(work), initial_head="main")
    write_policy(work)
    first = commit_all(repo, "initial budgets")
    return work, repo, first


def break_shares(work: Path) -> None:
    """A manager's mistake: team shares that no longer add up to 100 %."""
    path = work / "budgets" / "root.yaml"
    path.write_text(path.read_text().replace("share: 50", "share: 45", 1))


def test_source_applies_valid_commits_and_keeps_the_last_good_one(policy_repo, tmp_path):
    work, repo, first = policy_repo
    src = PolicySource(str(work), branch="main", workdir=tmp_path / "clone", interval_s=0)
    event = src.poll()
    assert (event.kind, src.commit) == ("applied", first)
    assert src.config.revision == first and src.config.tree.leaves() == ("team-a", "team-b")
    assert src.poll() is None  # nothing new

    break_shares(work)
    bad = commit_all(repo, "oops")
    event = src.poll()
    assert event.kind == "invalid" and event.revision == bad
    assert "sum to 95" in event.message and first[:12] in event.message
    assert src.commit == first and src.config.revision == first  # last good kept
    assert src.last_invalid == bad
    assert src.poll() is None  # an invalid commit is validated once, not every poll

    write_policy(work, {"team-a": 40, "team-b": 40, "team-c": 20})
    good = commit_all(repo, "add team-c")
    event = src.poll()
    assert (event.kind, src.commit, src.last_invalid) == ("applied", good, None)
    assert src.config.tree.leaves() == ("team-a", "team-b", "team-c")


def test_source_on_a_plain_directory_is_identified_by_content(tmp_path):
    root = write_policy(tmp_path / "dir")
    src = PolicySource(str(root), interval_s=0)
    assert src.mode == "dir" and src.poll().kind == "applied"
    first = src.commit
    assert first.startswith("dir:") and src.poll() is None
    break_shares(root)
    assert src.poll().kind == "invalid" and src.commit == first


def test_a_revision_that_breaks_the_reader_is_invalid_not_fatal(tmp_path, monkeypatch, caplog):
    """Whatever a pushed revision does to the code that reads it, the reconciler keeps the
    revision in force and goes on (a crash would be a crash loop in the cluster)."""
    import engine.k8s.policy_source as source

    root = write_policy(tmp_path / "dir")
    src = PolicySource(str(root), interval_s=0)
    assert src.poll().kind == "applied"
    first = src.commit

    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(source, "load_config", broken)
    write_policy(root, {"team-a": 60, "team-b": 40})
    event = src.poll()
    assert event.kind == "invalid" and src.commit == first and src.config is not None
    assert "could not be read (RecursionError: maximum recursion depth exceeded)" in event.message
    assert "policy revision" in caplog.text and "Traceback" in caplog.text


def test_source_reports_a_fetch_failure_and_keeps_running(tmp_path):
    src = PolicySource(f"file://{tmp_path}/missing.git", workdir=tmp_path / "clone",
                       interval_s=0)
    assert src.mode == "git"
    event = src.poll()
    assert event.kind == "fetch-failed" and src.config is None and src.fetch_error
    assert event.message.endswith("; check --policy-repo and --branch (a private repository needs the "
                                  "allot-git Secret: ALLOT_GIT_*)")


def test_reconciler_keeps_scheduling_with_the_last_good_commit(kube_emulator, kube_client,
                                                               tmp_path, policy_repo):
    work, repo, first = policy_repo
    env = Env(kube_emulator, kube_client, tmp_path / "unused")
    env.nodes(1)
    policy = PolicySource(str(work), branch="main", workdir=tmp_path / "clone", interval_s=0)
    r = Reconciler(KubeClient(kube_client, backoff_s=0.005), policy,
                   LoopOptions(namespace=POLICY_NS, identity="r1", interval_s=1),
                   clock=env.emu.clock)
    env.submit(job("team-a", "one", budget="team-a", min_runtime="10m"))
    r.run_pass()
    assert ann(env.job("team-a", "one"))[marks.CONFIG] == first
    assert r.metrics.get("allot_config_info", revision=first) == 1.0

    break_shares(work)
    bad = commit_all(repo, "oops")
    env.advance(60)
    env.submit(job("team-b", "two", budget="team-b", min_runtime="10m"))
    report = r.run_pass()
    assert report.policy_event.kind == "invalid"
    assert report.result.admitted == ["team-b/two"]  # still scheduling, on the good commit
    assert ann(env.job("team-b", "two"))[marks.CONFIG] == first
    assert r.metrics.get("allot_policy_invalid", revision=bad) == 1.0
    assert r.metrics.get("allot_config_info", revision=first) == 1.0
    (event,) = events_for(env.emu, "allot-reconciler", "PolicyInvalid")
    assert event["type"] == "Warning" and bad[:12] in event["message"]
    assert event["involvedObject"]["kind"] == "Lease"
    text = r.metrics.render()
    assert f'allot_policy_invalid{{revision="{bad}"}} 1' in text
    assert "allot_policy_invalid_total 1" in text

    write_policy(work)
    fixed = commit_all(repo, "revert")
    env.advance(60)
    report = r.run_pass()
    assert report.policy_event.kind == "applied" and report.revision == fixed
    assert r.metrics.get("allot_policy_invalid", revision=bad) is None


def test_only_a_git_source_gets_a_clone_directory(policy_repo, tmp_path, monkeypatch):
    """The embedded default and a plain directory are read in place: no temporary clone
    directory is made (the reconciler used to leave one per start); a git source without
    --workdir gets one on its first fetch."""
    work, _repo, _first = policy_repo
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    for source in (PolicySource(None), PolicySource(str(tmp_path / "plain"))):
        source.poll(force=True)
        assert source.workdir is None
    assert list((tmp_path / "tmp").iterdir()) == []
    git = PolicySource(str(work), branch="main")
    assert git.poll(force=True).kind == "applied"
    assert git.workdir is not None and git.workdir.parent == tmp_path / "tmp"
    assert (git.workdir / "repo.git" / "HEAD").exists()
