"""The issue's acceptance test: a real git repository (pygit2) whose base holds the shipped
budgets and policies and whose head moves 10 points of the applied program from the
code-assistant project to its sibling agents. ``allot impact`` must report that diff and, on a
short trace where both projects (and two other teams) want far more than their share, show
code-assistant delivered fewer GPU-hours and agents more."""

from __future__ import annotations

import json

import pytest

from engine.cli import main

TEAMS = ("code-assistant", "agents", "pretraining", "biology")


def write_burst_trace(path, jobs_per_team: int = 150, runtime_s: float = 6 * 3600.0) -> None:
    """Every team submits ``jobs_per_team`` single-node jobs (8 GPUs, resumable, 1 h min
    runtime) in the first minutes: 4 x 150 x 8 = 4,800 GPUs wanted on 1,112, for 6 h each."""
    with open(path, "w", encoding="utf-8") as fh:
        for t, team in enumerate(TEAMS):
            for i in range(jobs_per_team):
                fh.write(json.dumps({
                    "id": f"{team}-{i:03d}", "submit": float(i + t * 0.25), "pods": 1,
                    "gpus_per_pod": 8, "runtime": runtime_s, "owner": team, "leaf": team,
                    "min_runtime": 3600.0, "resumable": True}) + "\n")


def test_moving_ten_percent_shifts_delivered_hours(shift_repo, tmp_path, capsys):
    trace = tmp_path / "burst.jsonl"
    write_burst_trace(trace)
    out = tmp_path / "report"
    code = main(["impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                 "--head", shift_repo.head, "--trace", str(trace), "--days", "0.5",
                 "--demand-ratio", "0", "--out", str(out), "--format", "json"])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)

    # the structural diff: exactly the two sibling leaves, 10 points of applied (30% of the lab)
    leaves = {c["name"]: c for c in doc["diff"]["leaves"]}
    assert set(leaves) == {"code-assistant", "agents"}
    assert leaves["code-assistant"]["effective_before"] == pytest.approx(0.105)
    assert leaves["code-assistant"]["effective_after"] == pytest.approx(0.075)
    assert leaves["agents"]["effective_before"] == pytest.approx(0.060)
    assert leaves["agents"]["effective_after"] == pytest.approx(0.090)

    # the replay: same jobs on both sides, demand well above every share
    replay = doc["replay"]
    assert replay["tasks"] == 4 * 150
    assert replay["horizon_s"] == pytest.approx(0.5 * 86400)
    teams = {t["team"]: t for t in replay["teams"]}
    ca, ag = teams["code-assistant"], teams["agents"]
    assert ca["delivered_gpu_h"]["after"] < ca["delivered_gpu_h"]["before"]
    assert ag["delivered_gpu_h"]["after"] > ag["delivered_gpu_h"]["before"]
    assert ca["entitled_gpu_h"]["after"] < ca["entitled_gpu_h"]["before"]
    assert ag["entitled_gpu_h"]["after"] > ag["entitled_gpu_h"]["before"]
    assert "agents" in replay["gainers"] and "code-assistant" in replay["losers"]
    # teams whose share did not change move far less than the two that did
    for other in ("pretraining", "biology"):
        assert abs(teams[other]["change_gpu_h"]) < abs(ca["change_gpu_h"])

    # the comment: summary table first, then the folded details; the chart and JSON twin
    md = (out / "impact.md").read_text()
    summary, _, details = md.partition("<details>")
    assert "| team | effective share | delivered GPU-h | change | entitled GPU-h |" in summary
    assert summary.index("**agents**") < summary.index("**code-assistant**")
    assert "10.50% → 7.50%" in summary and "6.00% → 9.00%" in summary
    assert "Budget tree changes" in details and "How this was computed" in details
    assert len(md) < 65536
    assert (out / "impact.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "impact.json").read_text())["replay"]["gainers"] == replay["gainers"]
