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
    (["queue", "--days", "0"], "--days: must be a number > 0"),
    (["simulate", "--days", "1e308"], "--days: must be at most 3650 days"),
    (["simulate", "--trace", "synthetic", "--tasks", "100000000000"], "--tasks: must be at most 10,000,000"),
    (["queue", "--days", "4000"], "--days: must be at most 3650 days"),
    (["queue", "--tasks", "20000000"], "--tasks: must be at most 10,000,000"),
    (["impact", "--base", "HEAD", "--days", "1e308"], "--days: must be at most 3650 days (0: all)"),
    (["queue", "--tasks", "-3"], "--tasks: must be a whole number >= 1"),
    (["queue", "--seed", "-1"], "--seed: must be a whole number >= 0"),
    (["queue", "--at=-5"], "--at: must be a time span >= 0"),
    (["eta", "x", "--horizon=-5"], "--horizon: must be a time span >= 0"),
    (["impact", "--base", "HEAD", "--demand-ratio", "-2"], "--demand-ratio: must be a number >= 0"),
    (["impact", "--base", "HEAD", "--seed", "-3"], "--seed: must be a whole number >= 0"),
    (["dashboard", "--port", "-5"], "--port: must be a port from 0 to 65535"),
    (["dashboard", "--port", "99999"], "--port: must be a port from 0 to 65535"),
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
