"""``allot impact`` on real git repositories built with pygit2: both revisions read without a
checkout, the diff reported, an invalid head reported as file:line:column problems with
exit status 1."""

from __future__ import annotations

import json

import pygit2
import pytest

from engine.cli import main
from tests.impact.gitrepo import commit, replace_in, shipped_files


def test_diff_only_reports_the_moved_ten_points(shift_repo, capsys, tmp_path):
    code = main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                 "--head", shift_repo.head, "--no-replay", "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["base"] == shift_repo.base and doc["head"] == shift_repo.head
    leaves = {c["name"]: c for c in doc["diff"]["leaves"]}
    assert set(leaves) == {"code-assistant", "agents"}
    ca, ag = leaves["code-assistant"], leaves["agents"]
    # applied is 30% of the lab: 35% -> 25% of applied is 10.5% -> 7.5% of the lab
    assert (ca["share_before"], ca["share_after"]) == (35, 25)
    assert ca["effective_before"] == pytest.approx(0.105)
    assert ca["effective_after"] == pytest.approx(0.075)
    assert ag["effective_after"] == pytest.approx(0.09)
    assert ca["gpus_after"]["h100"] == pytest.approx(0.075 * 1024)
    assert doc["diff"]["added"] == doc["diff"]["removed"] == doc["diff"]["moved"] == []
    assert doc["replay"] is None


def test_markdown_and_files_written_to_out(shift_repo, capsys, tmp_path):
    out = tmp_path / "report"
    code = main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                 "--head", shift_repo.head, "--no-replay", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert text == (out / "impact.md").read_text()
    assert text.startswith(f"### Allot impact: `{shift_repo.base[:12]}` → `{shift_repo.head[:12]}`")
    assert "| code-assistant | applied | 35% → 25% | 10.50% → 7.50% | 107.5 → 76.8 | 9.2 → 6.6 |" in text
    assert json.loads((out / "impact.json").read_text())["ok"] is True


def test_bare_repository_with_branch_names(tmp_path, capsys):
    repo = pygit2.init_repository(str(tmp_path / "bare.git"), bare=True)
    files = shipped_files()
    commit(repo, files, "base")
    files = replace_in(files, "policies/scheduling.yaml", "lookback: 7d", "lookback: 3d")
    commit(repo, files, "shorter lookback", ref="refs/heads/pr")
    code = main(["impact", "--repo", str(tmp_path / "bare.git"), "--base", "main", "--head", "pr",
                 "--no-replay", "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["diff"]["policy"] == [{"key": "lookback_s", "before": 7 * 86400.0, "after": 3 * 86400.0}]
    assert doc["diff"]["leaves"] == []


def test_invalid_head_prints_located_problems_and_exits_1(shift_repo, tmp_path, capsys):
    repo = pygit2.Repository(str(shift_repo.path))
    files = shipped_files()
    files = replace_in(files, "budgets/applied.yaml", "    - name: agents\n      share: 20",
                       "    - name: agents\n      share: 21")
    bad = commit(repo, files, "shares no longer sum to 100")
    out = tmp_path / "report"
    code = main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                 "--head", bad, "--no-replay", "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert f"the head revision {bad} is invalid" in err
    lines = [l for l in err.splitlines() if l.startswith("budgets/applied.yaml:")]
    assert lines and all(l.split(":")[1].isdigit() and l.split(":")[2].isdigit() for l in lines)
    md = (out / "impact.md").read_text()
    assert "is invalid" in md and lines[0] in md
    doc = json.loads((out / "impact.json").read_text())
    assert doc["ok"] is False and doc["invalid"] == "head"
    assert doc["problems"][0]["file"] == "budgets/applied.yaml"


def test_both_revisions_invalid_report_every_problem_of_each(shift_repo, tmp_path, capsys):
    """Every problem at once: an invalid base does not hide the head's problems. Each problem
    is named as git names a file of a revision (REV:PATH)."""
    repo = pygit2.Repository(str(shift_repo.path))
    files = shipped_files()
    bad_base = commit(repo, replace_in(files, "budgets/applied.yaml", "      share: 20",
                                       "      share: 21"), "applied sums to 101")
    bad_head = commit(repo, replace_in(files, "budgets/frontier.yaml", "      share: 70",
                                       "      share: 69"), "frontier sums to 99")
    out = tmp_path / "report"
    code = main(["impact", "--repo", str(shift_repo.path), "--base", bad_base, "--head", bad_head,
                 "--no-replay", "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"allot impact: the base revision {bad_base} and the head revision "
                      f"{bad_head} are both invalid:")
    assert err[1].startswith(f"{bad_base}:budgets/applied.yaml:") and "101%" in err[1]
    assert err[2].startswith(f"{bad_head}:budgets/frontier.yaml:") and "99%" in err[2]
    assert err[3] == "2 problems found"
    md = (out / "impact.md").read_text()
    assert "are both invalid" in md and md.index("applied.yaml") < md.index("frontier.yaml")
    doc = json.loads((out / "impact.json").read_text())
    assert (doc["ok"], doc["invalid"], doc["revision"]) == (False, "both", f"{bad_base}..{bad_head}")
    assert doc["revisions"] == {"base": bad_base, "head": bad_head}
    assert [(p["revision"], p["file"]) for p in doc["problems"]] == [
        ("base", "budgets/applied.yaml"), ("head", "budgets/frontier.yaml")]
    code = main(["impact", "--repo", str(shift_repo.path), "--base", bad_base, "--head", bad_head,
                 "--no-replay", "--format", "json"])
    printed = json.loads(capsys.readouterr().out)
    assert code == 1 and [p["file"] for p in printed["problems"]] == [
        f"{bad_base}:budgets/applied.yaml", f"{bad_head}:budgets/frontier.yaml"]


def test_unknown_revision_is_a_user_error(shift_repo, capsys):
    code = main(["impact", "--repo", str(shift_repo.path), "--base", "no-such-branch",
                 "--head", shift_repo.head, "--no-replay"])
    assert code == 1
    assert "no-such-branch" in capsys.readouterr().err


def test_progress_line_on_stderr(shift_repo, capsys, tmp_path, monkeypatch):
    """``--progress`` draws one line on stderr for the two replays (always on a terminal),
    redrawn at most every 0.2 s and ended once both are done."""
    from engine.commands.impact import ReplayProgress

    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"id": f"j{i}", "submit": 60.0 * i, "pods": 1,
                                         "gpus_per_pod": 8, "runtime": 1800.0,
                                         "owner": "applied-code" if i % 2 else "applied-agents"})
                             + "\n" for i in range(20)))
    code = main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                 "--head", shift_repo.head, "--trace", str(trace), "--days", "0.05",
                 "--demand-ratio", "0", "--jobs", "1", "--progress", "--format", "json"])
    assert code == 0
    err = capsys.readouterr().err
    assert err.endswith("base [####################] 100.0%  head [####################] 100.0%\n")
    assert err.count("\n") == err.count("allot impact: simulating") + 1  # the bar ends once
    bar = ReplayProgress()
    bar([0.5, 0.0])
    bar([0.6, 0.0])  # within 0.2 s of the last: not drawn
    bar([1.0, 1.0])
    bar([1.0, 1.0])  # drawn once finished
    err = capsys.readouterr().err
    assert err.count("\r") == 2 and err.count("\n") == 1
    assert "base [##########          ]  50.0%  head [                    ]   0.0%" in err


def test_an_out_directory_holds_this_run_s_report_only(shift_repo, capsys, tmp_path):
    """A replay then a diff-only run into the same --out: the first run's chart and replay
    records go (they would describe another run); other files stay."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"id": f"j{i}", "submit": 60.0 * i, "pods": 1,
                                         "gpus_per_pod": 8, "runtime": 1800.0,
                                         "owner": "applied-code" if i % 2 else "applied-agents"})
                             + "\n" for i in range(20)))
    out = tmp_path / "report"
    assert main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                 "--head", shift_repo.head, "--trace", str(trace), "--days", "0.05",
                 "--demand-ratio", "0", "--jobs", "1", "--out", str(out)]) == 0
    assert (out / "impact.png").is_file() and (out / "head" / "run.json").is_file()
    (out / "notes.txt").write_text("mine")
    assert main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.head,
                 "--head", shift_repo.base, "--no-replay", "--out", str(out)]) == 0
    capsys.readouterr()
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "impact.json", "impact.md", "notes.txt"]
