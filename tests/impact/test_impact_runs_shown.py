"""``allot impact --out DIR`` records its two replays (``DIR/base/run.json``,
``DIR/head/run.json``), so the view commands show either one at any instant: a manager who
reads that a team lost GPU-hours in the head can ask why one of its jobs waited
(:mod:`engine.commands.runrecord`)."""

from __future__ import annotations

import json

import pytest

from engine.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _trace(path):
    """Two owners' 16-GPU jobs, one a minute for an hour, each running 2 hours: more than the
    shipped clusters hold, so work queues and ranks decide."""
    path.write_text("".join(json.dumps({"id": f"j{i:03d}", "submit": 60.0 * i, "pods": 2, "gpus_per_pod": 8,
                                        "runtime": 7200.0, "min_runtime": 1800.0, "resumable": True,
                                        "owner": "code" if i % 2 else "agents",
                                        "leaf": "code-assistant" if i % 2 else "agents"}) + "\n"
                            for i in range(120)))
    return path


def test_each_replay_is_shown_as_it_ran(shift_repo, capsys, tmp_path, monkeypatch):
    out = tmp_path / "impact"
    code, _, err = _run(capsys, "impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                        "--head", shift_repo.head, "--trace", str(_trace(tmp_path / "t.jsonl")),
                        "--days", "0.2", "--demand-ratio", "0", "--jobs", "1", "--out", str(out))
    assert code == 0, err
    assert f"allot explain JOB --report {out / 'base'} (or {out / 'head'})" in err
    overall = json.loads((out / "impact.json").read_text())["replay"]["overall"]
    monkeypatch.chdir(tmp_path / "impact")  # (the records hold absolute paths)
    shares = {}
    for side, key in (("base", "before"), ("head", "after")):
        rec = json.loads((out / side / "run.json").read_text())
        assert rec["command"] == "impact" and rec["side"] == side
        assert rec["flags"]["base"] == shift_repo.base and rec["flags"]["head"] == shift_repo.head
        code, text, err = _run(capsys, "queue", "--report", side, "--format", "json", "--full")
        assert code == 0, err
        state = json.loads(text)
        # every preempted run of the replay is in the state at its end: as many as the report's
        assert sum(1 for run in state["runs"] if run[6]) == overall["preemptions"][key]
        # ... and those of runs charged to a budget (allocated) are the report's own count
        assert sum(1 for run in state["runs"] if run[6] and run[5]) == \
            overall["preemptions_of_charged"][key]
        shares[side] = {n["name"]: n["share_pct"] for n in state["config"]["tree"]}
    assert overall["preemptions"]["before"] != overall["preemptions"]["after"]
    # each side is its own revision's run (the head moves 10 points from code-assistant to agents)
    assert (shares["base"]["agents"], shares["head"]["agents"]) == (20.0, 30.0)


def test_a_replay_recorded_elsewhere_is_shown_from_a_clone(shift_repo, capsys, tmp_path):
    """A CI run's artifact names the runner's checkout; read on another machine, the record
    says so and ``--config`` names the clone (it must hold both commits)."""
    out = tmp_path / "impact"
    code, _, err = _run(capsys, "impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                        "--head", shift_repo.head, "--trace", str(_trace(tmp_path / "t.jsonl")),
                        "--days", "0.1", "--demand-ratio", "0", "--jobs", "1", "--out", str(out))
    assert code == 0, err
    clone = shift_repo.path.rename(tmp_path / "clone")
    code, _, err = _run(capsys, "queue", "--report", str(out / "head"))
    assert code == 1 and err.startswith(
        f"{out / 'head' / 'run.json'}: the run's repository {shift_repo.path} is not there (was the run "
        f"recorded on another machine?); give where it is now with --config DIR (a clone holding both commits)")
    code, text, err = _run(capsys, "queue", "--report", str(out / "head"), "--config", str(clone),
                           "--format", "json", "--full")
    assert code == 0, text
    state = json.loads(text)
    preempted = json.loads((out / "impact.json").read_text())["replay"]["overall"]["preemptions"]["after"]
    assert sum(1 for run in state["runs"] if run[6]) == preempted


def _queued(spans: list[dict], end: float) -> float:
    """Seconds a timeline's spans spent queued (pending, or preempted and requeued)."""
    ends = [s["start"] for s in spans[1:]] + [end]
    return sum(b - s["start"] for s, b in zip(spans, ends) if s["state"] in ("pending", "preempted"))


def test_each_team_that_lost_names_a_job_that_waited_longer_and_its_timelines_agree(
        shift_repo, capsys, tmp_path):
    """The report names, per team that lost, its job whose time queued grew most; that job's
    timeline in each replay adds up to the time queued the report gives for that side."""
    out = tmp_path / "impact"
    code, text, err = _run(capsys, "impact", "--repo", str(shift_repo.path), "--base", shift_repo.base,
                           "--head", shift_repo.head, "--trace", str(_trace(tmp_path / "t.jsonl")),
                           "--days", "0.2", "--demand-ratio", "0", "--jobs", "1", "--out", str(out))
    assert code == 0, err
    teams = json.loads((out / "impact.json").read_text())["replay"]["teams"]
    losers = [t for t in teams if t["change_gpu_h"] <= -0.05 and t["waited_longer"]]
    assert losers, "the shift makes a team lose"
    t = losers[0]
    job, before, after = (t["waited_longer"][k] for k in ("job", "queued_before_s", "queued_after_s"))
    assert after > before
    assert f"- {t['team']}: `{job}` queued " in text and "--report DIR/head --timeline" in text
    for side, queued in (("base", before), ("head", after)):
        code, said, err = _run(capsys, "explain", job, "--report", str(out / side), "--timeline",
                               "--format", "json")
        assert code == 0, said
        doc = json.loads(said)
        assert _queued(doc["spans"], doc["end"]) == pytest.approx(queued, abs=1.0)
