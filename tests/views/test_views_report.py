"""The view commands on the budget run of an ``allot simulate`` report (``--report DIR``): the
report says that a team got less than its entitlement, the views say why for one job, at any
instant of that same run (:mod:`engine.commands.runrecord`)."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
SMALL = ("--trace", "synthetic", "--days", "0.3", "--tasks", "300", "--cluster", "h100:4",
         "--baseline", "none", "--no-pictures", "--jobs", "1")


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _simulate(capsys, out: Path, *extra: str) -> list[dict]:
    code, text, err = _run(capsys, "simulate", *SMALL, "--out", str(out), *extra)
    assert code == 0, err
    assert f"allot explain JOB --report {out}" in text
    return list(csv.DictReader((out / "tasks-budget.csv").open()))


def _ids(state: dict) -> tuple[set[str], set[str]]:
    snap = state["snapshot"]
    return {w["id"] for w in snap["pending"]}, {r["workload"]["id"] for r in snap["running"]}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "out"
    assert main(["simulate", *SMALL, "--out", str(out)]) == 0
    return out, list(csv.DictReader((out / "tasks-budget.csv").open()))


def test_the_state_at_the_end_is_the_report_s(capsys, report):
    out, rows = report
    code, text, err = _run(capsys, "queue", "--report", str(out), "--format", "json", "--full")
    assert code == 0, err
    pending, running = _ids(json.loads(text))
    assert pending == {r["id"] for r in rows if r["state"] == "pending"} != set()
    assert running == {r["id"] for r in rows if r["state"] == "running"} != set()


def test_the_state_at_an_instant_holds_the_work_submitted_and_not_ended_then(capsys, report):
    out, rows = report
    horizon = json.loads((out / "run.json").read_text())["horizon_s"]
    at = round(horizon / 2) + 0.25  # (no event of the run falls on a quarter second)
    code, text, err = _run(capsys, "queue", "--report", str(out), "--at", str(at), "--format", "json", "--full")
    assert code == 0, err
    state = json.loads(text)
    assert state["now"] == at
    pending, running = _ids(state)
    alive = {r["id"] for r in rows if float(r["submit"]) <= at and r["state"] != "rejected"
             and not (r["end"] and float(r["end"]) < at)}
    assert pending | running == alive and not pending & running
    started = {r["id"] for r in rows if r["first_start"] and float(r["first_start"]) < at}
    assert running <= started
    job = sorted(pending)[0]
    code, text, err = _run(capsys, "explain", job, "--report", str(out), "--at", str(at))
    assert code == 0 and text.startswith(f"{job}: pending"), err
    code, text, err = _run(capsys, "queue", "--report", str(out), "--at", str(at))
    assert f"note: simulated state at t={at:.0f}s ({at / 3600:.1f} h into a {horizon / 3600:.1f} h run" in text


def test_a_run_whose_inputs_changed_is_not_shown(capsys, tmp_path):
    """Not even from the states kept for the views (the key holds the inputs as they are)."""
    for part in ("budgets", "policies"):
        shutil.copytree(REPO / part, tmp_path / "cfg" / part)
    _simulate(capsys, tmp_path / "out", "--root", str(tmp_path / "cfg"))
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path / "out"))  # (its state now kept)
    assert code == 0, err
    policy = tmp_path / "cfg" / "policies" / "scheduling.yaml"
    policy.write_text(policy.read_text().replace("reservations: 8", "reservations: 4"))
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path / "out"))
    assert code == 1 and err.startswith(
        f"{tmp_path / 'out' / 'run.json'}: the budgets and policies at {tmp_path / 'cfg'} changed since "
        f"this report was simulated, so its run cannot be shown; run allot simulate again")
    record = tmp_path / "out" / "run.json"  # written by other code: the message says it may be that
    record.write_text(json.dumps({**json.loads(record.read_text()), "code": "another"}))
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path / "out"))
    assert code == 1 and "changed since this report was simulated (or this allot's code, which prepares " \
                         "the run, is not the code that wrote the record), so" in err


def test_a_run_record_with_fields_of_the_wrong_kind_is_refused(capsys, report, tmp_path):
    out, _ = report
    rec = json.loads((out / "run.json").read_text())
    for change in ({"fingerprint": None}, {"horizon_s": "x"}, {"horizon_s": float("inf")},
                   {"flags": {**rec["flags"], "root": None}}):
        (tmp_path / "run.json").write_text(json.dumps({**rec, **change}))
        code, _, err = _run(capsys, "queue", "--report", str(tmp_path))
        assert code == 1 and err.startswith(f"{tmp_path / 'run.json'}: the run record's fields are not as "
                                            f"allot wrote them; run allot simulate again"), (change, err)
    (tmp_path / "run.json").write_bytes(b'{"kind": "\xff"}')
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path))
    assert code == 1 and "not a run record: not UTF-8 text (byte 0xff)" in err
    # flags as allot simulate would not have parsed them: named, not taken for a changed trace
    for flag, value, says in (("cadence", "zzz", "flag 'cadence' must be one of watch, interval, event"),
                              ("seed", "x", "flag 'seed': "), ("days", -3, "flag 'days': "),
                              ("set", "placement.loans=true", "flag 'set' must be a list"),
                              ("checkpoint_loss", [1], "flag 'checkpoint_loss' must be a number")):
        (tmp_path / "run.json").write_text(json.dumps({**rec, "flags": {**rec["flags"], flag: value}}))
        code, _, err = _run(capsys, "queue", "--report", str(tmp_path), "--fresh")
        assert code == 1 and "the run record's flags are not as allot wrote them" in err and says in err, err


def test_what_a_report_source_refuses(capsys, report, tmp_path):
    out, _ = report
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path))
    assert code == 1 and err.startswith(f"{tmp_path / 'run.json'}: cannot read the run record: No such file")
    (tmp_path / "run.json").write_text('{"kind": "something else", "flags": {}}')
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path))
    assert code == 1 and err.startswith(f"{tmp_path / 'run.json'}: not a run record of allot simulate")
    rec = json.loads((out / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**rec, "flags": {**rec["flags"], "seed": "x"}}))
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path))
    assert code == 1 and err.startswith(f"{tmp_path / 'run.json'}: the run record's flags are not as allot "
                                        f"wrote them (")
    code, _, err = _run(capsys, "queue", "--report", str(out), "--at", "30d")
    assert code == 1 and err.startswith("--at: time 2.592e+06s is after the end of the run (")
    code, _, err = _run(capsys, "queue", "--report", str(out), "--days", "2", "--trace", "philly")
    assert code == 1 and err.splitlines()[:2] == [
        "--days: does not apply to --trace philly: it shapes the embedded default's simulation; drop it",
        "--trace and --report: give one source of the state, not several; the sources are --sim "
        "(the default), --trace, --report, --url and --state"]
    code, _, err = _run(capsys, "queue", "--report", str(out), "--days", "2", "--seed", "0")
    assert code == 1 and err.splitlines()[:2] == [
        f"--days: does not apply to --report {out}: the report's run recorded its own; drop it",
        f"--seed: does not apply to --report {out}: the report's run recorded its own; drop it"]


def test_a_run_whose_configuration_moved_is_read_where_it_is_now(capsys, tmp_path):
    for part in ("budgets", "policies"):
        shutil.copytree(REPO / part, tmp_path / "cfg" / part)
    rows = _simulate(capsys, tmp_path / "out", "--root", str(tmp_path / "cfg"))
    moved = (tmp_path / "cfg").rename(tmp_path / "elsewhere")
    code, _, err = _run(capsys, "queue", "--report", str(tmp_path / "out"))
    assert code == 1 and err.startswith(f"{tmp_path / 'out' / 'run.json'}: the run's configuration "
                                        f"{tmp_path / 'cfg'} is not there")
    code, text, err = _run(capsys, "queue", "--report", str(tmp_path / "out"), "--config", str(moved),
                           "--format", "json", "--full")
    assert code == 0, text
    assert _ids(json.loads(text))[0] == {r["id"] for r in rows if r["state"] == "pending"}


def test_the_report_names_a_job_of_each_team_that_fell_short_and_asks_why_while_it_waits(
        capsys, report, monkeypatch):
    """``report.md`` lists the teams with enough demand below 95% of their entitlement, each
    with its funded job that waited the most GPU-hours and an ``allot explain`` command at the
    middle of that job's longest wait: run as written in the report's directory, it shows the
    job pending."""
    import shlex

    out, rows = report
    text = (out / "report.md").read_text()
    section = text.split("## Teams that fell short (budget)", 1)[1]
    asks = re.findall(r"^- \*\*([\w-]+)\*\* \(([\d.]+)%\): (\S+), .*`(allot explain [^`]+)`$", section, re.M)
    summary = json.loads((out / "summary.json").read_text())["schedulers"]["budget"]["teams"]
    assert [a[0] for a in asks] == sorted(
        (t for t, v in summary.items() if v["enough_demand"] and v["ratio"] < 0.95),
        key=lambda t: (summary[t]["ratio"], t)) != []
    monkeypatch.chdir(out)
    for team, _, job, command in asks:
        mine = [r for r in rows if r["leaf"] == team and r["funded"] == "1"]
        most = max(mine, key=lambda r: (int(r["gpus"]) * float(r["queued_s"]), r["id"]))
        assert job == most["id"]
        code, said, err = _run(capsys, *shlex.split(command)[1:])
        assert code == 0 and said.startswith(f"{job}: pending"), (command, err)


def test_a_job_s_timeline_follows_it_through_the_run(capsys, report):
    """``explain --timeline``: the job's status at every pass, folded into spans, agrees with
    the report's CSV: admitted at its first start, one preempted span per preemption, each
    queued time of the CSV spent in pending spans, ending as the CSV says."""
    out, rows = report
    job = max(rows, key=lambda r: (int(r["preemptions"]), r["id"]))
    assert int(job["preemptions"]) >= 2
    code, text, err = _run(capsys, "explain", job["id"], "--report", str(out), "--timeline", "--format", "json")
    assert code == 0, text
    spans = json.loads(text)["spans"]
    starts = [s["start"] for s in spans]
    assert starts == sorted(starts) and spans[0]["start"] >= float(job["submit"])
    admitted = [s for s in spans if s["state"] == "admitted"]
    assert admitted[0]["start"] == pytest.approx(float(job["first_start"]), abs=1e-3)
    assert len(admitted) == int(job["preemptions"]) + (job["state"] != "pending")
    assert sum(1 for s in spans if s["state"] == "preempted") == int(job["preemptions"])
    assert spans[-1]["state"] == {"pending": "pending", "running": "running"}.get(job["state"], spans[-1]["state"])
    assert all(s["nodes"] for s in spans if s["state"] in ("admitted", "running"))
    ends = [*starts[1:], json.loads(text)["end"]]
    waited = sum(b - s["start"] for s, b in zip(spans, ends) if s["state"] in ("pending", "preempted"))
    assert waited == pytest.approx(float(job["queued_s"]), abs=1.0)
    code, text, _ = _run(capsys, "explain", job["id"], "--report", str(out), "--timeline")
    lines = text.splitlines()
    assert lines[0].startswith(f"{job['id']}: {len(spans)} span(s) over ")
    assert lines[1].startswith("  time by state and cause: ") and "running" in lines[1]
    code, text, err = _run(capsys, "explain", job["id"], "--state", str(out / "run.json"), "--timeline")
    assert code == 1 and err.startswith("--timeline: needs a simulated run, not --state")


def test_a_job_that_ended_before_the_state_s_window_is_still_found_by_its_timeline(capsys, tmp_path):
    """A simulated state keeps ended work only as far back as the lookback (here 1 h of a
    7.2 h run): explaining an older job says how to ask about it, and ``--timeline``, which
    replays the whole run, follows it to its end."""
    out = tmp_path / "out"
    rows = _simulate(capsys, out, "--set", "fairShare.lookback=1h")
    horizon = json.loads((out / "run.json").read_text())["horizon_s"]
    old = [r for r in rows if r["state"] == "done" and float(r["end"]) < horizon - 2 * 3600]
    job = max(old, key=lambda r: (int(r["preemptions"]), float(r["end"]) - float(r["first_start"]), r["id"]))
    code, _, err = _run(capsys, "explain", job["id"], "--report", str(out))
    assert code == 1 and f"no workload {job['id']!r}" in err
    assert "is not in the state: give --at a time it was queued or running, or use --timeline" in err
    code, text, err = _run(capsys, "explain", job["id"], "--report", str(out), "--timeline", "--format", "json")
    assert code == 0, err
    doc = json.loads(text)
    assert doc["workload"] == job["id"] and doc["spans"][0]["start"] >= float(job["submit"])
    assert doc["spans"][-1]["state"] == "running"
    assert doc["end"] == pytest.approx(float(job["end"]), abs=1e-3)  # when it ended, not the run's end
    code, _, err = _run(capsys, "explain", "no-such-job", "--report", str(out), "--timeline")
    assert code == 1 and "no pass of the run up to t=" in err and "'no-such-job'" in err


def test_simulate_prints_the_worst_team_s_job_to_ask_about(capsys, tmp_path):
    out = tmp_path / "out"
    code, text, err = _run(capsys, "simulate", *SMALL, "--out", str(out))
    assert code == 0, err
    first = (out / "report.md").read_text().split("## Teams that fell short (budget)", 1)[1]
    team, job, at = re.findall(r"^- \*\*([\w-]+)\*\* .*?: (\S+), .*--report \. --at (\d+)`$", first, re.M)[0]
    last = text.splitlines()[-1]
    assert last.startswith(f"{team} got ") and f"ask why its job {job} waited: allot explain {job} " \
        f"--report {out} --at {at} (or --timeline)" in last


@pytest.mark.parametrize("command, trace", [("simulate", "philly"), ("impact", None)])
def test_the_key_of_a_kept_state_holds_the_bundled_trace_and_its_mapping(monkeypatch, tmp_path,
                                                                          command, trace):
    """A bundled trace (named, or the default one) is read from its file, with the
    mapping.yaml beside it when no --mapping is given: both are in the key, so a kept state
    is not shown after either changed (the replay then refuses, as without the cache)."""
    from engine.commands import runrecord
    from engine.sim import importers

    shutil.copytree(REPO / "traces" / "philly", tmp_path / "philly")
    monkeypatch.setitem(importers.BUNDLED, "philly", ("philly", tmp_path / "philly" / "philly.csv.gz"))
    flags = {"trace": trace, "mapping": None, "tree": "repo", "trace_format": None}
    rec = {"command": command, "flags": flags}
    before = runrecord.sources(rec, str(REPO))
    assert {"trace", "mapping"} <= set(before)
    mapping = tmp_path / "philly" / "mapping.yaml"
    mapping.write_text(mapping.read_text() + "\n# edited\n")
    after = runrecord.sources(rec, str(REPO))
    assert after["mapping"] != before["mapping"] and after["trace"] == before["trace"]
    own = tmp_path / "own.yaml"
    own.write_text(mapping.read_text())
    named = runrecord.sources({**rec, "flags": {**flags, "mapping": str(own)}}, str(REPO))
    assert named["mapping"] == after["mapping"]  # (its own file, whose text is the same)
    mapping.write_text("changed: again\n")
    assert runrecord.sources({**rec, "flags": {**flags, "mapping": str(own)}}, str(REPO)) == named


def test_usage_of_a_report_s_run_gives_the_report_s_entitlement(capsys, report):
    """Water-filled hour by hour from the run's start, as the report: the same GPU-hours per
    team (the view's finer plotting bins would give other totals)."""
    out, _ = report
    summary = json.loads((out / "summary.json").read_text())["schedulers"]["budget"]
    code, text, err = _run(capsys, "usage", "--report", str(out), "--format", "json")
    assert code == 0, err
    rows = {r["node"]: r for r in json.loads(text)["rows"]}
    teams = summary["teams"]
    assert any(t["entitled_gpu_h"] > 0 for t in teams.values())
    for leaf, t in teams.items():
        assert rows[leaf]["entitled_gpu_h"] == pytest.approx(t["entitled_gpu_h"], abs=0.01), leaf


def test_usage_of_a_run_with_a_warm_up_gives_the_report_s_figures(capsys, tmp_path):
    """The report measures from its warm-up's end: usage's delivered and entitled GPU-hours per
    team are those of that measured window too (they counted the warm-up, so disagreed)."""
    out = tmp_path / "warm"
    code, _, err = _run(capsys, "simulate", "--window", "42d:42d4h", "--warmup", "2h", "--cluster",
                        "h100:4", "--baseline", "none", "--no-pictures", "--jobs", "1", "--out", str(out))
    assert code == 0, err
    budget = json.loads((out / "summary.json").read_text())["schedulers"]["budget"]
    assert budget["measured_s"][0] > 0
    code, text, err = _run(capsys, "usage", "--report", str(out), "--format", "json")
    assert code == 0, err
    rows = {r["node"]: r for r in json.loads(text)["rows"]}
    assert any(t["delivered_gpu_h"] > 0 for t in budget["teams"].values())
    for leaf, t in budget["teams"].items():
        assert rows[leaf]["delivered_gpu_h"] == pytest.approx(t["delivered_gpu_h"], abs=0.01), leaf
        assert rows[leaf]["entitled_gpu_h"] == pytest.approx(t["entitled_gpu_h"], abs=0.01), leaf
    code, text, err = _run(capsys, "usage", "--report", str(out))
    assert code == 0, err
    assert "measured window, from the end of its warm-up" in text.splitlines()[0]


def test_usage_of_a_run_with_a_node_failure_gives_the_report_s_entitlement(capsys, tmp_path):
    """The report's entitlement water-fills the healthy capacity, hour by hour: a node out of
    service from its failure to its repair is none of it; usage's is the same (it counted the
    whole cluster, so every team was entitled to more than the report said)."""
    trace = tmp_path / "t.jsonl"
    with open(trace, "w") as fh:
        for i in range(40):
            for team in ("pretraining", "agents"):
                fh.write(json.dumps({"id": f"{team}-{i}", "submit": 60.0 * i, "pods": 1,
                                     "gpus_per_pod": 4, "runtime": 3 * 3600.0, "owner": team,
                                     "leaf": team, "min_runtime": 1800.0, "resumable": True}) + "\n")
        fh.write(json.dumps({"type": "node_failure", "time": 3600.0, "node": "h100-n0000",
                             "repair_s": 7200.0}) + "\n")
    out = tmp_path / "fail"
    code, _, err = _run(capsys, "simulate", "--trace", str(trace), "--cluster", "h100:2",
                        "--demand-ratio", "0", "--baseline", "none", "--no-pictures", "--jobs", "1",
                        "--out", str(out))
    assert code == 0, err
    budget = json.loads((out / "summary.json").read_text())["schedulers"]["budget"]
    assert budget["drain"]["failures"]  # the node did fail in the run
    code, text, err = _run(capsys, "usage", "--report", str(out), "--format", "json")
    assert code == 0, err
    rows = {r["node"]: r for r in json.loads(text)["rows"]}
    assert sum(t["entitled_gpu_h"] for t in budget["teams"].values()) > 0
    for leaf, t in budget["teams"].items():
        assert rows[leaf]["entitled_gpu_h"] == pytest.approx(t["entitled_gpu_h"], abs=0.01), leaf
