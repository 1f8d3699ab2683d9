"""``allot simulate --sweep KNOB=V1,V2,...``: one budget run per value (per combination of
several knobs), each column exactly what ``allot simulate --set KNOB=VALUE --baseline none``
reports, every refused value reported at once before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.commands.sweep import points, split_values
from tests.sim.test_sim_cli import ROOT, trace_file


def _flags(tmp_path: Path, out: str) -> list[str]:
    return ["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)), "--cluster",
            "h100:2", "--demand-ratio", "0", "--out", str(tmp_path / out), "--no-pictures"]


def test_each_column_is_the_run_with_that_value(tmp_path, capsys):
    rc = main([*_flags(tmp_path, "sweep"), "--sweep", "placement.reservationShare=0.1,1",
               "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert doc["knobs"] == ["placement.reservationShare"]
    assert [p["label"] for p in doc["points"]] == ["0.1", "1"]
    for point in doc["points"]:
        value = point["set"]["placement.reservationShare"]
        assert main([*_flags(tmp_path, f"one-{value}"), "--set", f"placement.reservationShare={value}",
                     "--baseline", "none", "--format", "json"]) == 0
        alone = json.loads(capsys.readouterr().out)
        assert point["summary"] == alone
        assert alone["experiment"]["config"]["reservation_share"] == float(value)
    # the values made a difference in this replay (else the comparison above proves little)
    a, b = (p["summary"]["schedulers"]["budget"] for p in doc["points"])
    assert a["idle"]["reserved"] != b["idle"]["reserved"]


def test_each_run_is_recorded_for_the_views(tmp_path, capsys, monkeypatch):
    """``point-N/run.json`` records column N's run as ``allot simulate --set`` records it, so
    ``allot explain JOB --report DIR/point-N`` shows that run: the same as the plain run's."""
    monkeypatch.setenv("ALLOT_CACHE_DIR", str(tmp_path / "cache"))
    assert main([*_flags(tmp_path, "sweep"), "--sweep", "placement.reservationShare=0.1,1"]) == 0
    assert "allot explain JOB --report " in capsys.readouterr().out
    rec = json.loads((tmp_path / "sweep" / "point-2" / "run.json").read_text())
    assert rec["flags"]["set"] == ["placement.reservationShare=1"]
    assert main([*_flags(tmp_path, "alone"), "--set", "placement.reservationShare=1",
                 "--baseline", "none"]) == 0
    capsys.readouterr()
    said = []
    for where in ("sweep/point-2", "alone"):
        assert main(["explain", "j13", "--report", str(tmp_path / where), "--at", "3000"]) == 0
        said.append(capsys.readouterr().out)
    assert said[0] == said[1] and "j13: pending" in said[0]


def test_two_knobs_every_combination_in_one_table(tmp_path, capsys):
    rc = main([*_flags(tmp_path, "sw"), "--sweep", "placement.reservationShare=0.1,1",
               "--sweep", "placement.loans=false,true", "--jobs", "1"])
    assert rc == 0
    text = capsys.readouterr().out
    assert text.startswith("sweep of placement.reservationShare/placement.loans (4 runs of the "
                           "budget scheduler)")
    at = "policies/scheduling.yaml"
    assert text.splitlines()[1] == (
        f"knobs: the policy file writes placement.reservationShare: 0.25 ({at}:37) and placement.loans: "
        f"false ({at}:38), together in no column; every other knob as the policy file has it")
    heads = text.splitlines()[2].split()
    assert heads == ["0.1/false", "0.1/true", "1/false", "1/true"]
    assert "entitled GPU-h delivered" in text and "report: " in text
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert [p["set"] for p in doc["points"]] == [
        {"placement.reservationShare": r, "placement.loans": loan}
        for r in ("0.1", "1") for loan in ("false", "true")]
    overrides = [p["summary"]["experiment"]["config"]["overrides"] for p in doc["points"]]
    assert overrides[3] == ["placement.reservationShare=1", "placement.loans=true"]
    md = (tmp_path / "sw" / "sweep.md").read_text()
    assert "| measure | 0.1/false | 0.1/true | 1/false | 1/true |" in md
    assert "## Teams: delivered GPU-hours as a share of the entitlement" in md
    # sweep.png joins one knob's values by a line, never the combinations of two (no trend)
    import matplotlib.axes

    from engine.commands.sweepreport import plot

    styles: list[str] = []
    real = matplotlib.axes.Axes.plot

    def spy(self, *args, **kwargs):
        styles.append(kwargs.get("linestyle", "-"))
        return real(self, *args, **kwargs)

    matplotlib.axes.Axes.plot = spy
    try:
        plot(doc, tmp_path / "two.png")
        plot({**doc, "knobs": doc["knobs"][:1]}, tmp_path / "one.png")
    finally:
        matplotlib.axes.Axes.plot = real
    assert styles and set(styles[:len(styles) // 2]) == {"none"} and set(styles[len(styles) // 2:]) == {"-"}


def test_jobs_1_and_2_write_the_same_files(tmp_path, capsys):
    """Side by side in forked workers (two at a time) or one after the other: the same bytes,
    pictures included."""
    for jobs in ("1", "2"):
        flags = [f for f in _flags(tmp_path, f"j{jobs}") if f != "--no-pictures"]
        assert main([*flags, "--sweep", "fairShare.lookback=1h,2d,7d", "--jobs", jobs]) == 0
    capsys.readouterr()
    names = sorted(str(p.relative_to(tmp_path / "j1")) for p in (tmp_path / "j1").rglob("*")
                   if p.is_file())
    assert names == [f"point-{i}/run.json" for i in (1, 2, 3)] + ["sweep.json", "sweep.md", "sweep.png"]
    for name in names:
        assert (tmp_path / "j1" / name).read_bytes() == (tmp_path / "j2" / name).read_bytes(), name


def test_refusals_are_reported_at_once_and_nothing_runs(tmp_path, capsys):
    out = tmp_path / "never"
    flags = ["simulate", "--root", str(ROOT), "--trace", str(trace_file(tmp_path)), "--out", str(out)]
    cases = [
        (["--sweep", "placement.reservationShare=0.1,2,x", "--sweep", "placement.loans=maybe"],
         ["--sweep: placement.reservationShare=2: placement.reservationShare is 2, must be <= 1",
          "--sweep: placement.reservationShare=x: placement.reservationShare must be a number",
          "--sweep: placement.loans=maybe: placement.loans must be true or false", "3 problems found"]),
        (["--sweep", "placement.bogus=1,2", "--sweep", "placement.reservationShare=0.2",
          "--set", "placement.reservationShare=0.3"],
         ["--sweep: 'placement.bogus' is not a knob of the scheduling policy",
          "--sweep: placement.reservationShare is given to both --sweep and --set", "2 problems found"]),
        (["--sweep", "placement.loans=true", "--baseline", "legacy"],
         ["--baseline: a sweep runs the budget scheduler only"]),
        (["--sweep", "placement.loans="], ["'placement.loans=' is not KNOB=VALUE,VALUE,..."]),
        (["--sweep", "placement.loans=true", "--sweep", "placement.loans=false"],
         ["placement.loans is swept twice"]),
        (["--sweep", "placement.reservationShare=0.1,0.2,0.1"],
         ["placement.reservationShare: 0.1 given twice"]),
        (["--sweep", "placement.loans=true,false", "--trace", str(tmp_path / "missing.csv")],
         ["trace file not found"]),
        (["--sweep", "fairShare.lookback=1hr,[1,2"],  # (a value not YAML hides no other problem)
         ["--sweep: 'fairShare.lookback=[1,2': the value is not YAML",
          "--sweep: fairShare.lookback=1hr: ", "2 problems found"]),
    ]
    for extra, words in cases:
        assert main([*flags, *extra]) == 1, extra
        err = capsys.readouterr().err
        for w in words:
            assert w in err, (extra, w, err)
        assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("text, values", [
    ("0.1,0.25", ["0.1", "0.25"]),
    ("[A,B],[C]", ["[A,B]", "[C]"]),
    ("{a: 1, b: 2},x", ["{a: 1, b: 2}", "x"]),
    ("true", ["true"]),
])
def test_values_split_on_commas_outside_brackets(text, values):
    assert split_values(text) == values


def test_points_vary_the_last_knob_fastest():
    assert points(["a.b=1,2", "c=x,y"]) == [[("a.b", "1"), ("c", "x")], [("a.b", "1"), ("c", "y")],
                                            [("a.b", "2"), ("c", "x")], [("a.b", "2"), ("c", "y")]]


def test_progress_counts_the_runs_done_and_shows_those_going(capsys):
    """A sweep may have more runs than a line holds: how many are done, then a bar for each run
    going (a run waiting for a worker is not shown); the line ends once all are done."""
    from engine.commands.sweep import SweepProgress

    show = SweepProgress(True, ["0.1", "0.25", "1"])
    show("0.1", 43200.0, 86400.0)
    show("0.1", 86400.0, 86400.0)  # within 0.2 s of the last draw: skipped
    show("0.25", 86400.0, 86400.0)  # (skipped too)
    show("1", 86400.0, 86400.0)  # all done: drawn, and the line ended
    half = "[" + "#" * 10 + " " * 10 + "]  50.0%"
    assert capsys.readouterr().err == f"\rsweep 0 of 3 done  0.1 {half} day 0.50\rsweep 3 of 3 done\n"


def test_the_policy_files_value_is_marked(tmp_path, capsys):
    """The column whose value the policy file writes reads ``(file)``; a value written another
    way in YAML is still the file's (read as YAML); a knob the file leaves out marks none."""
    from engine.loader import policy_places

    assert main([*_flags(tmp_path, "m"), "--sweep", "placement.reservationShare=0.250,1",
                 "--jobs", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["0.250", "(file)", "1"]  # (under the note)
    doc = json.loads((tmp_path / "m" / "sweep.json").read_text())
    assert [p["file"] for p in doc["points"]] == [True, False]
    assert "| measure | 0.250 (file) | 1 |" in (tmp_path / "m" / "sweep.md").read_text()
    assert policy_places(ROOT, None, ["placement.reservationShare", "placement.nothing"]) == {
        "placement.reservationShare": (0.25, "policies/scheduling.yaml", 37)}


def test_a_smaller_sweep_into_the_same_out_leaves_no_column_of_the_earlier_one(tmp_path, capsys):
    assert main([*_flags(tmp_path, "sweep"), "--sweep", "placement.reservationShare=0.1,0.5,1"]) == 0
    assert (tmp_path / "sweep" / "point-3" / "run.json").is_file()
    (tmp_path / "sweep" / "notes.txt").write_text("mine")
    assert main([*_flags(tmp_path, "sweep"), "--sweep", "placement.reservationShare=0.1,1"]) == 0
    capsys.readouterr()
    assert sorted(str(p.relative_to(tmp_path / "sweep")) for p in (tmp_path / "sweep").rglob("*")) == [
        "notes.txt", "point-1", "point-1/run.json", "point-2", "point-2/run.json", "sweep.json",
        "sweep.md"]


def test_the_note_says_where_each_knob_value_comes_from_and_is_true(tmp_path, capsys):
    """Under the heading (and in sweep.md and sweep.json) a sweep says where its runs' knob
    values come from: the policy file's line for the swept knob (the column marked
    ``(file)``) and, when ``--set`` gave another knob for every run, that value instead of the
    file's; the runs had the values it says."""
    import shutil

    policy = (ROOT / "policies" / "scheduling.yaml").read_text().splitlines()
    share, lookback = (next(n for n, line in enumerate(policy, 1) if line.strip().startswith(f"{key}:"))
                       for key in ("reservationShare", "lookback"))
    assert policy[share - 1].split()[1] == "0.25" and policy[lookback - 1].split()[1] == "7d"
    at = "policies/scheduling.yaml"
    swept = f"knobs: the policy file writes placement.reservationShare: 0.25 ({at}:{share}), the column marked (file)"
    for extra, said, days in (
            ([], "", 7),
            (["--set", "fairShare.lookback=2d"],
             f"; fairShare.lookback: 2d from --set in every run, not the file's 7d ({at}:{lookback})", 2)):
        assert main([*_flags(tmp_path, "s"), "--sweep", "placement.reservationShare=0.1,0.25", *extra,
                     "--jobs", "1"]) == 0
        note = f"{swept}{said}; every other knob as the policy file has it"
        assert capsys.readouterr().out.splitlines()[1] == note
        doc = json.loads((tmp_path / "s" / "sweep.json").read_text())
        assert doc["note"] == note and doc["set"] == extra[1:]
        md = (tmp_path / "s" / "sweep.md").read_text()
        assert f"\n{note}.\n" in md
        assert f"`allot simulate --set KNOB=VALUE{''.join(' --set ' + s for s in extra[1:])} --baseline none`" in md
        configs = [p["summary"]["experiment"]["config"] for p in doc["points"]]
        assert [(c["reservation_share"], c["lookback_s"]) for c in configs] == [(0.1, days * 86400),
                                                                                (0.25, days * 86400)]
    root = tmp_path / "root"  # (a knob the file leaves to its default, given by --set)
    shutil.copytree(ROOT / "budgets", root / "budgets")
    shutil.copytree(ROOT / "policies", root / "policies")
    (root / "policies" / "scheduling.yaml").write_text(
        "\n".join(line for line in policy if not line.strip().startswith("loans:")) + "\n")
    flags = _flags(tmp_path, "d")
    flags[flags.index("--root") + 1] = str(root)
    assert main([*flags, "--sweep", "placement.reservationShare=0.1,1", "--set", "placement.loans=true",
                 "--jobs", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        f"knobs: the policy file writes placement.reservationShare: 0.25 ({at}:{share}), which no column "
        f"has; placement.loans: true from --set in every run (the file leaves it to its default); every "
        f"other knob as the policy file has it")
