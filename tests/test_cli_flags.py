"""Every number a user types on the command line is checked where argparse reads it: a value
out of range is a usage error naming the flag (exit 2), never a traceback, a nonsensical run
(``--demand-ratio -1`` ran 20,000 simulated days) or a failure after minutes of simulation."""

from __future__ import annotations

import argparse
import socket

import pytest

from engine.cli import build_parser, main
from engine.errors import Problem

BAD = [
    (["simulate", "--demand-ratio", "-1"], "--demand-ratio: must be a number >= 0"),
    (["simulate", "--days", "-1"], "--days: must be a number > 0"),
    (["simulate", "--trace", "synthetic", "--days", "0"], "--days: must be a number > 0"),
    (["simulate", "--trace", "synthetic", "--tasks", "-5"], "--tasks: must be a whole number >= 1"),
    (["simulate", "--trace", "synthetic", "--tasks", "0"], "--tasks: must be a whole number >= 1"),
    (["simulate", "--trace", "synthetic", "--seed", "-1"], "--seed: must be a whole number >= 0"),
    (["simulate", "--demand-ratio", "inf"], "--demand-ratio: must be a number >= 0"),
    (["simulate", "--demand-ratio", "nan"], "--demand-ratio: must be a number >= 0"),
    (["simulate", "--days", "two"], "--days: expected a number"),
    (["simulate", "--days", "1e308"], "--days: must be at most 3650 days"),
    (["simulate", "--trace", "synthetic", "--tasks", "100000000000"], "--tasks: must be at most 10,000,000"),
    (["impact", "--base", "HEAD", "--days", "1e308"], "--days: must be at most 3650 days (0: all)"),
    (["impact", "--base", "HEAD", "--demand-ratio", "-2"], "--demand-ratio: must be a number >= 0"),
    (["impact", "--base", "HEAD", "--seed", "-3"], "--seed: must be a whole number >= 0"),
    (["reconcile", "--metrics-port", "70000"], "--metrics-port: must be a port from 0 to 65535"),
    (["reconcile", "--interval=-1"], "--interval: must be a time span >= 0"),
]


@pytest.mark.parametrize("argv,said", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_number_out_of_range_is_a_usage_error_naming_the_flag(argv, said, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


# the view commands read every flag and say all their problems at once (engine.commands.Checked)
VIEW_BAD = [
    (["queue", "--days", "0"], "--days: must be a number > 0, got '0'; give a number of days, e.g. 2"),
    (["queue", "--days", "4000"], "--days: must be at most 3650 days, got '4000'; give a number of days"),
    (["queue", "--tasks", "20000000"], "--tasks: must be at most 10,000,000, got '20000000'; give a count"),
    (["queue", "--tasks", "-3"], "--tasks: must be a whole number >= 1, got '-3'; give a count, e.g. 2400"),
    (["queue", "--seed", "-1"], "--seed: must be a whole number >= 0, got '-1'; give a whole number"),
    (["queue", "--at=-5"], "--at: must be a time span >= 0, got '-5'; give a time, e.g. 16h or 1d2h"),
    (["eta", "x", "--horizon=-5"], "--horizon: must be a time span >= 0, got '-5'; give a time, e.g. 3d"),
    (["dashboard", "--port", "-5"], "--port: must be a port from 0 to 65535, got '-5'; give e.g. 8080"),
    (["dashboard", "--port", "99999"], "--port: must be a port from 0 to 65535, got '99999'; give e.g. 8080"),
]


@pytest.mark.parametrize("argv,said", VIEW_BAD, ids=[" ".join(a) for a, _ in VIEW_BAD])
def test_a_view_commands_number_out_of_range_is_a_problem_naming_the_flag(argv, said, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(said) and err.endswith("\n1 problem found\n") and "Traceback" not in err


ALL_AT_ONCE = {  # a view command's flags, each refused, and what else it checks before its state
    "queue": (["queue", "--at", "nonsense", "--days=-3", "--tasks", "abc"], [
        "--at: cannot read duration 'nonsense' at 'nonsense'; write e.g. '7d', '8h', '15m', '90s' or '1h30m'",
        "--days: must be a number > 0, got '-3'; give a number of days, e.g. 2",
        "--tasks: expected a whole number, got 'abc'; give a count, e.g. 2400"]),
    "explain": (["explain", "j", "--timeline", "--state", "s.json", "--seed", "x"], [
        "--seed: expected a whole number, got 'x'; give a whole number, e.g. 0",
        "--timeline: needs a simulated run, not --state: the passes before a saved or live state are "
        "not kept; give --report DIR, --trace or the embedded default"]),
    "eta": (["eta", "j", "--horizon", "soon", "--at", "0", "--days", "1e9"], [
        "--at: time 0 is not after the start; give e.g. 16h",
        "--days: must be at most 3650 days, got '1e9'; give a number of days, e.g. 2",
        "--horizon: cannot read duration 'soon' at 'soon'; write e.g. '7d', '8h', '15m', '90s' or '1h30m'"]),
    "usage": (["usage", "--png", "chart.txt", "--tasks", "0", "--url", "http://x", "--days", "3"], [
        "--days: does not apply to --url: it shapes a simulated state; drop it",
        "--png: 'chart.txt' is not a .png file name; give a file name ending in .png, e.g. --png usage.png",
        "--tasks: must be a whole number >= 1, got '0'; give a count, e.g. 2400"]),
    "dashboard": (["dashboard", "--port", "http", "--at", "3d", "--seed=-2"], [
        "--at: time 259200s is after the end of the 2-day simulation; lower --at or raise --days",
        "--port: expected a whole number, got 'http'; give e.g. 8080 (0 picks a free one)",
        "--seed: must be a whole number >= 0, got '-2'; give a whole number, e.g. 0"]),
}


@pytest.mark.parametrize("command", ALL_AT_ONCE)
def test_a_view_command_says_every_problem_of_its_flags_at_once(command, capsys, monkeypatch, tmp_path):
    """argparse stops at the first value its type refuses; a view command reads them all and
    says each with the other problems of its flags, before any state is read."""
    import engine.views.source as source

    def never(*args, **kwargs):
        raise AssertionError("a state was read before the flags were checked")

    monkeypatch.setattr(source, "simulated_state", never)
    monkeypatch.chdir(tmp_path)
    argv, said = ALL_AT_ONCE[command]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [*said, f"{len(said)} problems found"]


def test_an_unknown_option_of_a_view_command_is_still_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["queue", "--at", "nonsense", "--bogus", "3"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bogus 3" in capsys.readouterr().err


def test_no_numeric_flag_is_read_unchecked():
    """A bare ``type=int`` or ``type=float`` takes any number; every numeric flag of every
    command uses a checked type (engine.commands), or lists its choices."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    loose = [(name, a.option_strings) for name, p in sub.choices.items() for a in p._actions
             if a.type in (int, float) and not a.choices]
    assert loose == []


def test_a_problem_without_a_line_reads_without_one():
    assert str(Problem("--window", 0, 0, "bad window '5:1'", "write START:END")) == \
        "--window: bad window '5:1'; write START:END"
    assert str(Problem("budgets/a.yaml", 3, 7, "bad share")) == "budgets/a.yaml:3:7: bad share"


def test_the_dashboard_reports_a_port_in_use_before_preparing_its_state(capsys, monkeypatch):
    import engine.commands.dashboard as dashboard

    def never(args):
        raise AssertionError("the state was prepared before the port was checked")

    monkeypatch.setattr(dashboard, "load_state", never)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["dashboard", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"--port: cannot listen on 127.0.0.1:{port}: " in err
    assert "choose another --port (0 picks a free one)" in err


def test_an_output_directory_that_cannot_be_made_is_reported_before_the_work(tmp_path, capsys,
                                                                             monkeypatch):
    import engine.sim.experiment as experiment

    def never(*args, **kwargs):
        raise AssertionError("the simulation ran before the output directory was checked")

    monkeypatch.setattr(experiment, "run_experiment", never)
    taken = tmp_path / "a-file"
    taken.write_text("")
    assert main(["simulate", "--out", str(taken)]) == 1
    assert capsys.readouterr().err.startswith(
        f"--out: cannot make the directory {str(taken)!r}: File exists; give a directory you can write")


def test_a_file_that_cannot_be_written_is_a_problem_not_a_traceback(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "CODEOWNERS"  # under a file: no directory can be made there
    assert main(["codeowners", "--output", str(target)]) == 1
    err = capsys.readouterr().err
    # (its parent directory is made first, where a file already is)
    assert err.startswith(f"{target.parent}: cannot use this file: File exists; check the path")
    assert "Traceback" not in err


def test_a_refused_command_leaves_no_output_directory_behind(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["simulate", "--trace", "philly", "--tasks", "50", "--out", str(out)]) == 1
    assert not out.exists()


def test_a_flag_that_does_nothing_for_the_chosen_trace_is_reported(capsys):
    """--tasks sizes only a synthetic trace; --window, --warmup, --mapping, --columns,
    --trace-format and --tree only shape a trace read from a file or bundled: given with the
    other kind they would be ignored silently."""
    assert main(["simulate", "--trace", "philly", "--tasks", "50"]) == 1
    assert capsys.readouterr().err.startswith(
        "--tasks: does not apply to --trace philly; drop it, or use --trace synthetic")
    assert main(["simulate", "--trace", "synthetic", "--window", "1d:2d", "--warmup", "1h",
                 "--tree", "equal"]) == 1
    err = capsys.readouterr().err
    assert [line.split(":")[0] for line in err.splitlines()[:-1]] == ["--tree", "--warmup", "--window"]
    assert err.splitlines()[-1] == "3 problems found"
    # --demand-ratio 0 keeps a trace's own rate: a generated trace has none (it once meant 1.1)
    assert main(["simulate", "--trace", "synthetic", "--demand-ratio", "0"]) == 1
    assert capsys.readouterr().err.startswith("--demand-ratio: 0 keeps a trace's own rate, and a synthetic trace")


def test_every_help_text_renders(capsys):
    """``allot --help``, ``allot`` alone and every ``allot COMMAND --help`` print their help
    (a bare ``%`` in a help string once made the first two a traceback: argparse formats it)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for argv in [["--help"], *([name, "--help"] for name in sub.choices)]:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0, argv
        out = capsys.readouterr().out
        assert out.startswith("usage: allot"), argv
    assert main([]) != 0
    assert "build-core" in capsys.readouterr().out


def test_at_may_be_the_very_end_of_the_simulation_not_past_it():
    """``--at`` is the state's simulated time: the last instant of a 2-day run is valid (the
    default is the end), a second later is not."""
    from engine.views.source import view_flag_problems

    def problems(*argv: str) -> list[str]:
        return [str(p) for p in view_flag_problems(build_parser().parse_args(["queue", *argv]))]

    assert problems("--days", "2", "--at", "2d") == []
    assert problems("--days", "2", "--at", "2d1s") == [
        "--at: time 172801s is after the end of the 2-day simulation; lower --at or raise --days"]
