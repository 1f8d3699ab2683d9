"""Loading from git revisions with pygit2: any ref, sha or HEAD~N, no checkout, bare repos too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
import pytest

from engine.errors import UserError
from engine.loader import load_config

from .conftest import BASE


def _commit_all(repo: pygit2.Repository, workdir: Path, message: str) -> str:
    """Stage every file of ``workdir`` and commit it on HEAD; return the commit sha."""
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    sig = pygit2.Signature("Test Manager", "manager@example.com", 1_700_000_000, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, tree, parents))


@pytest.fixture
def history(tmp_path: Path):
    """A repository with two commits: shares a1/a2 = 70/30, then 60/40 (and a dirty work tree)."""
    work = tmp_path / "repo"
    shutil.copytree(BASE, work)
    repo = pygit2.init_repository(str(work), initial_head="main")
    first = _commit_all(repo, work, "initial budgets")
    alpha = work / "budgets" / "alpha.yaml"
    alpha.write_text(alpha.read_text().replace("share: 70", "share: 60").replace("share: 30", "share: 40"))
    second = _commit_all(repo, work, "alpha: give a2 more")
    repo.create_tag("v1", first, pygit2.enums.ObjectType.COMMIT,
                    pygit2.Signature("T", "t@example.com", 1_700_000_000, 0), "first budgets")
    # The work tree now differs from both commits, and is even broken.
    alpha.write_text("this: [is not valid")
    return work, repo, first, second


def test_each_revision_loads_without_checkout(history):
    work, repo, first, second = history
    broken = (work / "budgets" / "alpha.yaml").read_text()
    old = load_config(work, rev=first)
    new = load_config(work, rev=second)
    assert old.tree.effective_share("a1") == pytest.approx(0.6 * 0.7)
    assert new.tree.effective_share("a1") == pytest.approx(0.6 * 0.6)
    assert new.tree.effective_share("a2") == pytest.approx(0.6 * 0.4)
    assert (old.revision, new.revision) == (first, second)
    assert new.origin.endswith(f"@{second}")
    assert new.files["a1"] == "budgets/alpha.yaml"
    # The work tree and index are untouched.
    assert (work / "budgets" / "alpha.yaml").read_text() == broken
    assert str(repo.head.target) == second
    assert repo.status()  # still dirty


@pytest.mark.parametrize("rev, share", [("HEAD", 0.36), ("HEAD~1", 0.42), ("main", 0.36), ("v1", 0.42)])
def test_refs_and_expressions(history, rev, share):
    work, *_ = history
    assert load_config(work, rev=rev).tree.effective_share("a1") == pytest.approx(share)


def test_short_sha(history):
    work, _, first, _ = history
    assert load_config(work, rev=first[:10]).revision == first


def test_work_tree_itself_reports_the_broken_file(history):
    work, *_ = history
    with pytest.raises(UserError) as err:
        load_config(work)
    assert [(p.file, p.line) for p in err.value.problems] == [("budgets/alpha.yaml", 1)]


def test_bare_repository(history, tmp_path):
    work, _, first, second = history
    bare = tmp_path / "bare.git"
    pygit2.clone_repository(str(work), str(bare), bare=True)
    assert load_config(bare, rev="HEAD").revision == second
    assert load_config(bare, rev="HEAD~1").tree.effective_share("a1") == pytest.approx(0.42)


def test_config_in_a_subdirectory_of_the_repository(tmp_path):
    work = tmp_path / "repo"
    shutil.copytree(BASE, work / "deploy" / "allot")
    repo = pygit2.init_repository(str(work), initial_head="main")
    sha = _commit_all(repo, work, "config lives in deploy/allot")
    config = load_config(work / "deploy" / "allot", rev="HEAD")
    assert config.revision == sha
    assert config.origin.endswith(":deploy/allot")


@pytest.mark.parametrize("rev", ["no-such-branch", "HEAD~5", "deadbeef" * 5, "HEAD:budgets"])
def test_unknown_or_non_commit_revisions_are_user_errors(history, rev):
    work, *_ = history
    with pytest.raises(UserError) as err:
        load_config(work, rev=rev)
    (problem,) = err.value.problems
    assert problem.message.startswith(f"unknown git revision {rev!r}")
    assert problem.message.count(rev) == 1  # (pygit2's error, when it only repeats the name, is not)
    assert problem.hint


def test_not_a_repository(tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(BASE, plain)
    with pytest.raises(UserError) as err:
        load_config(plain, rev="HEAD")
    (problem,) = err.value.problems
    assert (problem.file, problem.message) == (str(plain), "not inside a git repository")
    assert str(problem).startswith(f"{plain}: not inside a git repository; pass a directory inside")


def test_revision_with_errors_reports_them_with_paths(history):
    work, repo, _, _ = history
    bad = _commit_all(repo, work, "commit the broken file")
    with pytest.raises(UserError) as err:
        load_config(work, rev=bad)
    (problem,) = err.value.problems
    # the flow list "[is not valid" is still open at the end of line 1 (19 characters)
    assert (problem.file, problem.line, problem.column) == ("budgets/alpha.yaml", 1, 20)
    assert problem.message.startswith("invalid YAML:")


def _problems(work: Path, rev: str | None) -> list[str]:
    with pytest.raises(UserError) as caught:
        load_config(work, rev=rev)
    return [str(p) for p in caught.value.problems]


def test_a_symlinked_budget_file_loads_from_a_commit_as_from_the_directory(tmp_path):
    """Git keeps a symbolic link as a blob of its target's path: read through the link, as the
    file system does, not as a document that is the string 'real/alpha.yaml'."""
    work = tmp_path / "repo"
    shutil.copytree(BASE, work)
    (work / "budgets" / "real").mkdir()
    (work / "budgets" / "alpha.yaml").rename(work / "budgets" / "real" / "alpha.txt")
    (work / "budgets" / "alpha.yaml").symlink_to("real/alpha.txt")
    repo = pygit2.init_repository(str(work), initial_head="main")
    sha = _commit_all(repo, work, "alpha through a link")
    assert repo.revparse_single(sha).peel(pygit2.Commit).tree["budgets/alpha.yaml"].filemode \
        == pygit2.enums.FileMode.LINK
    on_disk, committed = load_config(work), load_config(work, rev=sha)
    assert committed.tree.effective_share("a1") == on_disk.tree.effective_share("a1") > 0
    assert committed.files["a1"] == on_disk.files["a1"] == "budgets/alpha.yaml"


@pytest.mark.parametrize("committed", [False, True])
def test_a_reference_to_a_link_that_leads_nowhere_says_so(tmp_path, committed):
    work = tmp_path / "repo"
    shutil.copytree(BASE, work)
    (work / "budgets" / "alpha.yaml").unlink()
    (work / "budgets" / "alpha.yaml").symlink_to("loop.yaml")
    (work / "budgets" / "loop.yaml").symlink_to("alpha.yaml")
    rev = None
    if committed:
        rev = _commit_all(pygit2.init_repository(str(work), initial_head="main"), work, "loop")
    problems = _problems(work, rev)
    assert len(problems) == 1, problems
    assert problems[0].startswith("budgets/root.yaml:11:")
    assert ("referenced file budgets/alpha.yaml is a symbolic link that leads nowhere "
            "(a loop, or its target is missing), not a file") in problems[0]
    assert "point the link at the file that holds the subtree 'alpha'" in problems[0]


def test_a_reference_to_a_directory_says_it_is_one(tmp_path):
    work = tmp_path / "repo"
    shutil.copytree(BASE, work)
    (work / "budgets" / "alpha.yaml").rename(tmp_path / "alpha.yaml")
    (work / "budgets" / "alpha.yaml").mkdir()
    (work / "budgets" / "alpha.yaml" / "alpha.yaml").write_bytes((tmp_path / "alpha.yaml").read_bytes())
    problems = _problems(work, None)  # (and the file inside it is an orphan, as it is)
    assert [p.split(":")[0] for p in problems] == ["budgets/alpha.yaml/alpha.yaml",
                                                   "budgets/root.yaml"], problems
    assert "orphan subtree 'alpha'" in problems[0]
    assert "referenced file budgets/alpha.yaml is a directory, not a file" in problems[1]
    assert "a file inside the directory?" in problems[1]
    repo = pygit2.init_repository(str(work), initial_head="main")
    assert _problems(work, _commit_all(repo, work, "a directory")) == problems  # same in git


def test_a_directory_s_origin_is_its_resolved_path_however_it_was_named(tmp_path, monkeypatch):
    """The origin goes into reports (summary.json): the same directory named as '.', by a
    relative or an absolute path, is one origin."""
    work = tmp_path / "cfg"
    shutil.copytree(BASE, work)
    monkeypatch.chdir(work)
    origins = {load_config(".").origin, load_config(str(work)).origin}
    monkeypatch.chdir(tmp_path)
    origins.add(load_config("cfg").origin)
    assert origins == {str(work.resolve())}


def test_a_policy_or_root_file_that_is_a_dead_link_or_a_directory_says_so(tmp_path):
    """Listed, not skipped: else the message blamed the wrong thing ("no SchedulingPolicy file
    found", or a count of root files)."""
    work = tmp_path / "repo"
    shutil.copytree(BASE, work)
    (work / "policies" / "scheduling.yaml").unlink()
    (work / "policies" / "scheduling.yaml").symlink_to("nowhere.yaml")
    (work / "budgets" / "root.yaml").rename(tmp_path / "root.yaml")
    (work / "budgets" / "root.yaml").mkdir()
    assert _problems(work, None) == [
        "budgets/root.yaml: not a readable YAML file: a directory; make it a YAML file, or remove it",
        "policies/scheduling.yaml: not a readable YAML file: a symbolic link that leads nowhere (a loop, "
        "or its target is missing); make it a YAML file, or remove it"]
