"""``allot simulate``: runs a trace file against the repo's config, prints a table or JSON,
writes the report, and reports user errors without a traceback."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from engine.cli import main

ROOT = Path(__file__).parents[2]


def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.yaml"
    rows = [f"  - {{id: j{i}, submit: {i * 120}, pods: 1, gpus_per_pod: {1 + i % 8}, "
            f"runtime: {600 + 300 * (i % 5)}, owner: o{i % 3}}}" for i in range(40)]
    path.write_text("tasks:\n" + "\n".join(rows) + "\nnode_failures:\n"
                    "  - {time: 300, node: h100-n0001, repair_s: 600}\n")
    return path


def test_simulate_json_summary_and_report(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
               "--cluster", "h100:2", "--baseline", "legacy,monopoly", "--demand-ratio", "0",
               "--out", str(out), "--no-pictures", "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["schedulers"]) == ["budget", "legacy", "monopoly"]
    assert doc["experiment"]["config"]["gpus"] == 16
    assert doc["schedulers"]["budget"]["tasks"]["submitted"] == 40
    assert doc["schedulers"]["budget"]["drain"]["failures"] == 1
    assert json.loads((out / "summary.json").read_text()) == doc
    report = (out / "report.md").read_text()
    assert "| p90 queue wait, debug |" in report
    # why work waited: collected for the budget scheduler, in the summary and the report
    assert doc["experiment"]["options"]["causes"] is True
    waited = {leaf: t["waiting_gpu_h"] for leaf, t in doc["schedulers"]["budget"]["teams"].items()
              if t["waiting_gpu_h"]}
    assert waited and all(h > 0 for causes in waited.values() for h in causes.values())
    assert all(not t["waiting_gpu_h"] for t in doc["schedulers"]["legacy"]["teams"].values())
    assert "## Why work waited (budget)" in report and "## Why work waited (legacy)" not in report


def test_simulate_text_table_with_derived_tree(tmp_path, capsys):
    rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
               "--cluster", "h100:2", "--tree", "equal", "--baseline", "none",
               "--out", str(tmp_path / "r"), "--no-pictures", "--demand-ratio", "1.5"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "p90 queue wait, debug" in text and "budget" in text


def test_without_root_a_directory_without_config_uses_the_embedded_default(tmp_path, capsys,
                                                                          monkeypatch):
    """Run from anywhere (no budgets/ or policies/ here), ``allot simulate`` uses the embedded
    default config, like every other command, instead of failing on the current directory."""
    monkeypatch.chdir(tmp_path)
    rc = main(["simulate", "--trace", str(trace_file(tmp_path)), "--cluster", "h100:2",
               "--baseline", "none", "--demand-ratio", "0", "--out", str(tmp_path / "r"),
               "--no-pictures", "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"]["config"]["origin"] == str(ROOT)
    assert doc["schedulers"]["budget"]["tasks"]["submitted"] == 40


def test_user_errors_are_reported_not_raised(tmp_path, capsys):
    rc = main(["simulate", "--root", str(ROOT), "--trace", str(tmp_path / "missing.csv")])
    assert rc == 1
    assert "trace file not found" in capsys.readouterr().err
    rc = main(["simulate", "--root", str(ROOT), "--window", "5d:2d", "--trace", "helios"])
    assert rc == 1
    assert "bad window" in capsys.readouterr().err


def test_a_run_with_nothing_to_replay_or_a_flag_that_does_nothing_is_refused(tmp_path, capsys):
    def refused(*argv: str) -> list[str]:
        assert main(["simulate", "--root", str(ROOT), "--out", str(tmp_path / "r"), *argv]) == 1
        return capsys.readouterr().err.splitlines()[:-1]  # (the last: "N problems found")

    assert refused("--window", "400d:401d", "--demand-ratio", "0") == [
        "philly: the part of the trace replayed (--window, --days) holds no GPU work; choose a part "
        "with jobs in it: the trace's jobs are submitted over its first 108.9 d"]
    (tmp_path / "empty.jsonl").write_text("")
    assert refused("--trace", str(tmp_path / "empty.jsonl"), "--demand-ratio", "0") == [
        f"{tmp_path / 'empty.jsonl'}: the trace holds no GPU work to replay; give a trace with jobs in it"]
    assert refused("--trace", "philly", "--columns", "submit=ts") == [
        "--columns: does not apply to the bundled trace philly; --columns maps the columns of your own "
        "CSV: drop it"]
    (tmp_path / "g.csv").write_text("ts,secs,n,team\n0,60,1,a\n")
    assert refused("--trace", str(tmp_path / "g.csv"), "--tree", "equal", "--mapping", "nowhere.yaml",
                   "--columns", "submit=ts,runtime=secs,gpus=n,owner=team")[0].startswith(
        "--mapping: does not apply with --tree equal")
    assert sorted(refused("--trace", str(tmp_path / "g.csv"),
                          "--columns", "submit=ts,runtime,gpus=n,owner=team,foo=vc,gpus=x")) == [
        "--columns: 'runtime' is not FIELD=COLUMN; e.g. --columns submit=ts,runtime=duration,gpus=num_gpus,owner=vc",
        "--columns: field 'gpus' is mapped twice; map each field to one column",
        "--columns: unknown field 'foo'; the fields: submit, runtime, owner, gpus, pods, gpus_per_pod, id, "
        "leaf, min_runtime, resumable, priority, class"]


def test_set_replaces_a_policy_knob_for_the_run_and_checks_it(tmp_path, capsys):
    """``--set KNOB=VALUE`` changes a knob of policies/scheduling.yaml for this run only; the
    value passes the file's checks; unknown knobs and bad values are user errors."""
    out = tmp_path / "rep"
    rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
               "--cluster", "h100:2", "--baseline", "none", "--demand-ratio", "0",
               "--set", "placement.loans=true", "--set", "fairShare.lookback=2d",
               "--out", str(out), "--no-pictures", "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"]["config"]["overrides"] == ["placement.loans=true", 'fairShare.lookback="2d"']
    assert doc["experiment"]["config"]["lookback_s"] == 2 * 86400
    assert 'set on the command line: placement.loans=true, fairShare.lookback="2d"' in (out / "report.md").read_text()
    for bad, words in ((["--set", "placement.loanz=true"], "'placement.loanz' is not a knob"),
                       (["--set", "placement.loans=maybe"], "placement.loans must be true or false"),
                       (["--set", "placement"], "is not KNOB=VALUE"),
                       (["--set", "placement=1"], "'placement' is not a knob")):
        rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)), *bad])
        assert rc == 1
        assert words in capsys.readouterr().err, bad
    # refused values are said of --set (the file holds other values), all at once
    rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
               "--set", "placement.reservationShare=2", "--set", "placement.loans=maybe",
               "--set", "foo.bar=1"])
    lines = capsys.readouterr().err.splitlines()
    assert rc == 1 and lines[-1] == "3 problems found"
    assert [line.split(" (the knob")[0] for line in lines[:-1]] == [
        "--set: 'foo.bar' is not a knob of the scheduling policy; name a setting of "
        "policies/scheduling.yaml by its path, e.g. placement.loans or fairShare.lookback",
        "--set: placement.loans=maybe: placement.loans must be true or false, got string 'maybe'",
        "--set: placement.reservationShare=2: placement.reservationShare is 2, must be <= 1"]
    assert " (the knob is at policies/scheduling.yaml:" in lines[1]
    rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
               "--set", "=1", "--set", "placement", "--set", "placement.loans=[1"])
    lines = capsys.readouterr().err.splitlines()
    assert rc == 1 and lines[-1] == "3 problems found", lines  # (every malformed --set at once)


def test_progress_line_has_a_bar_per_run(capsys):
    """One line with a bar per scheduler run, in the order given, redrawn in place (runs side
    by side report in turns) and ended once every run reaches its end; a run not heard from
    yet shows empty; nothing at all when disabled."""
    from engine.commands.progress import Progress

    Progress(False, ["budget"])("budget", 10.0, 86400.0)
    assert capsys.readouterr().err == ""
    show = Progress(True, ["budget", "legacy"])
    show("budget", 43200.0, 86400.0)
    show("legacy", 50000.0, 86400.0)  # within 0.2 s of the last draw: skipped
    show("budget", 86400.0, 86400.0)  # the budget run is done, the legacy one not: skipped too
    show("legacy", 86400.0, 86400.0)  # all done: drawn, and the line ended
    err = capsys.readouterr().err
    empty, half, full = "[" + " " * 20 + "]   0.0%", "[" + "#" * 10 + " " * 10 + "]  50.0%", "[" + "#" * 20 + "] 100.0%"
    assert err == (f"\rbudget {half} day 0.50  legacy {empty} day 0.00"
                   f"\rbudget {full} day 1.00  legacy {full} day 1.00\n")
    show.finish()  # already ended: nothing more
    assert capsys.readouterr().err == ""
    zero = Progress(True, ["budget"])
    zero("budget", 0.0, 0.0)  # a run whose horizon is 0: it never reports its end
    zero.finish()  # the command ends the line once the runs are over
    zero("budget", 0.0, 0.0)  # (nothing after the end)
    assert capsys.readouterr().err == f"\rbudget {empty} day 0.00\rbudget {empty} day 0.00\n"


def test_jobs_2_runs_the_schedulers_side_by_side_with_the_same_report(tmp_path, capsys, monkeypatch):
    """``--jobs 2`` (the default) and ``--jobs 1`` write the same files, byte for byte; with 2
    the three runs and then the pictures were done in forked workers (where it can fork)."""
    import engine.sim.forked as forked
    import engine.sim.report as report

    forked_runs: list[int] = []

    def spy(runs, progress=None, workers=None):
        got = real(runs, progress, workers)
        forked_runs.append(len(runs) if got is not None else 0)
        return got

    real = forked.run_forked
    monkeypatch.setattr(forked, "run_forked", spy)
    monkeypatch.setattr(report, "run_forked", spy)
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        assert main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
                     "--cluster", "h100:2", "--baseline", "legacy,monopoly", "--demand-ratio", "0",
                     "--out", str(out), "--jobs", jobs]) == 0
        outs.append(out)
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == sorted(p.name for p in outs[1].iterdir()) and "waiting.png" in names
    for name in names:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
    assert forked_runs == ([3, 4] if forked.can_fork(2) else [0, 0])


def test_a_report_directory_holds_this_run_s_report_only(tmp_path, capsys):
    """A second run into the same --out leaves none of the first run's files (its legacy
    table, its pictures); other files there are left alone; without pictures the report
    says there are none."""
    out = tmp_path / "rep"
    base = ["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
            "--cluster", "h100:2", "--demand-ratio", "0", "--out", str(out)]
    assert main(base + ["--baseline", "legacy"]) == 0
    assert {"tasks-legacy.csv", "gantt.png", "usage.png", "waits.png"} <= {p.name for p in out.iterdir()}
    (out / "notes.txt").write_text("mine")
    assert main(base + ["--baseline", "none", "--no-pictures"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == [
        "notes.txt", "report.md", "run.json", "summary.json", "tasks-budget.csv"]
    report = (out / "report.md").read_text()
    assert "- Pictures: none (`--no-pictures`)." in report and "gantt.png" not in report


def test_what_a_preemption_costs_is_set_by_flags_recorded_and_replayed(tmp_path, capsys):
    from engine.commands import runrecord
    from engine.views.simstate import state_from_sim

    def run(out, *costs):
        rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
                   "--cluster", "h100:2", "--baseline", "none", "--demand-ratio", "3",
                   "--out", str(out), "--no-pictures", "--format", "json", *costs])
        assert rc == 0
        return json.loads(capsys.readouterr().out)

    default = run(tmp_path / "a")
    free = run(tmp_path / "b", "--checkpoint-loss", "0", "--restart-overhead", "0")
    assert default["experiment"]["options"]["checkpoint_loss_s"] == 300.0
    assert free["experiment"]["options"]["checkpoint_loss_s"] == 0.0
    assert free["experiment"]["options"]["restart_overhead_s"] == 0.0
    budget = free["schedulers"]["budget"]
    assert budget["preemptions"] > 0 and budget["gpu_hours"]["lost_to_preemption"] == 0.0
    assert default["schedulers"]["budget"]["gpu_hours"]["lost_to_preemption"] > 0.0
    # the view commands replay the run as it ran: same costs, same end of every task
    again = runrecord.replay(tmp_path / "b", None)
    assert (again.options.checkpoint_loss_s, again.options.restart_overhead_s) == (0.0, 0.0)
    ends = {r["id"]: r["end"] for r in csv.DictReader((tmp_path / "b" / "tasks-budget.csv").open())}
    assert {i: ("" if r.end is None else f"{r.end:g}") for i, r in again.tasks.items()} == {
        i: ("" if e == "" else f"{float(e):g}") for i, e in ends.items()}
    assert state_from_sim(again).meta["checkpoint_loss_s"] == 0.0
    with pytest.raises(SystemExit) as stop:  # (a usage error, argparse's)
        main(["simulate", "--checkpoint-loss=-1m"])
    assert stop.value.code == 2 and "is negative" in capsys.readouterr().err


def test_every_bad_flag_is_reported_in_one_run(tmp_path, capsys):
    rc = main(["simulate", "--root", str(ROOT), "--out", str(tmp_path / "r"), "--set", "foo=1",
               "--window", "5d:1d", "--warmup", "1hr", "--mapping", str(tmp_path / "none.yaml"),
               "--baseline", "foo"])
    assert rc == 1
    flags = [line.split(":")[0] for line in capsys.readouterr().err.splitlines()[:-1]]
    assert flags == ["--baseline", "--set", "--warmup", "--window", str(tmp_path / "none.yaml")]
    rc = main(["simulate", "--root", str(ROOT), "--out", str(tmp_path / "r"), "--cluster", "h200",
               "--columns", "submit", "--trace", "philly"])
    assert rc == 1
    assert [line.split(":")[0] for line in capsys.readouterr().err.splitlines()[:-1]] == [
        "--cluster", "--columns", "--columns"]


def test_set_reaches_an_entry_of_a_map_knob(tmp_path, capsys):
    """``billing.weights`` is a map: ``--set billing.weights.b200=2`` sets one entry, checked as
    the file's are; the map itself is no knob."""
    from engine.commands.siminputs import load_with_settings

    config = load_with_settings(str(ROOT), None, ["billing.weights.b200=2"])
    assert config.policy.billing_weight("b200") == 2.0 and config.policy.billing_weight("h100") == 1.0
    for bad, words in ((["billing.weights.h100=0"], "billing.weights.h100 is 0, must be > 0"),
                       (["billing.weights.x999=2"], "billing weight for GPU type 'x999', which no cluster has"),
                       (["billing.weights=2"], "'billing.weights' is not a knob")):
        rc = main(["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)),
                   *[a for b in bad for a in ("--set", b)]])
        assert rc == 1 and words in capsys.readouterr().err, bad
