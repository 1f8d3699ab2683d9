"""``allot simulate``: runs a trace file against the repo's config, prints a table or JSON,
writes the report, and reports user errors without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_progress_bar_per_run(capsys):
    """One line per scheduler run, redrawn in place and ended when the run reaches its end;
    nothing at all when disabled."""
    from engine.commands.simulate import Progress

    Progress(False)("budget", 10.0, 86400.0)
    assert capsys.readouterr().err == ""
    show = Progress(True)
    show("budget", 43200.0, 86400.0)
    show("budget", 50000.0, 86400.0)  # within 0.2 s of the last draw: skipped
    show("budget", 86400.0, 86400.0)
    show("legacy", 86400.0, 86400.0)
    err = capsys.readouterr().err
    assert err == ("\r   budget [###############               ]  50.0%  day   0.50"
                   "\r   budget [##############################] 100.0%  day   1.00\n"
                   "\r   legacy [##############################] 100.0%  day   1.00\n")
