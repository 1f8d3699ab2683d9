"""``allot simulate --sweep KNOB=V1,V2,...``: one knob of the scheduling policy, several values,
the same replay under each, side by side.

The lab in the brief tuned its knobs by simulating before rollout; a manager weighing a pull
request asks the same question of more than one value ("how far can reservationShare go down
before the large gangs starve?"). A sweep is exactly one ``allot simulate --set KNOB=VALUE
--baseline none`` per value (per combination, with several ``--sweep`` flags: every
combination of their values), so each column is what that run would report, and the table is
``allot simulate``'s with one column per value.

* Checked first, all at once: every value is loaded with the configuration as ``--set`` would
  load it (the policy file's schema and rules), and no simulation starts while one is refused;
  a knob given both to ``--sweep`` and ``--set`` is refused too. A sweep compares values under
  the budget scheduler: ``--baseline`` is refused with it (compare a baseline with a plain run).
* The runs are independent and deterministic: at most ``--jobs`` at once, in forked workers
  (:func:`engine.sim.forked.run_all`), each building its own inputs (the trace is prepared
  against each configuration: contract rules read the policy); the same results one after the
  other.
* Output: the table on stdout (or the JSON with ``--format json``) under a note on where the
  runs' knob values come from (:func:`knob_note`: the file's line, or ``--set``), and in ``--out``
  (``allot-sweep`` by default) ``sweep.json`` (each value's settings and its whole budget
  summary, the same as ``summary.json`` of that run; sorted keys, no wall-clock figures:
  byte-identical for the same inputs), ``sweep.md`` (the table, and each team's share of its
  entitlement per value), unless ``--no-pictures`` ``sweep.png`` (the headline figures per
  value; :mod:`engine.commands.sweepreport` writes these three), and ``point-N/run.json``, the
  record of column N's run as ``allot simulate`` writes it (:mod:`engine.commands.runrecord`),
  so the view commands show that run at any instant (``allot explain JOB --report DIR/point-N
  --at TIME``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable

from engine.commands import output_dir, runrecord
from engine.commands.progress import Progress, bar
from engine.commands.siminputs import (build_experiment_inputs, knob_problems, knob_values,
                                       load_with_settings, sim_options)
from engine.commands.sweepreport import heading, table_text, write
from engine.errors import Problem, UserError

DEFAULT_OUT = "allot-sweep"


def split_values(text: str) -> list[str]:
    """``0.1,0.2`` -> ``["0.1", "0.2"]``; commas inside ``[...]`` or ``{...}`` do not split (a
    YAML flow list is one value)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def points(items: list[str]) -> list[list[tuple[str, str]]]:
    """``--sweep`` flags -> every combination of their values, each as ``[(knob, value text)]``
    (the first flag's values vary slowest)."""
    axes: list[tuple[str, list[str]]] = []
    problems: list[Problem] = []
    for item in items:
        knob, sep, text = item.partition("=")
        values = split_values(text) if sep else []
        if not sep or not knob.strip() or not all(values):
            problems.append(Problem("--sweep", 0, 0, f"{item!r} is not KNOB=VALUE,VALUE,...",
                                    "write e.g. --sweep placement.reservationShare=0.1,0.25", "usage"))
            continue
        if any(knob.strip() == k for k, _ in axes):
            problems.append(Problem("--sweep", 0, 0, f"{knob.strip()} is swept twice",
                                    "give all its values in one --sweep", "usage"))
            continue
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            problems.append(Problem("--sweep", 0, 0, f"{knob.strip()}: {', '.join(twice)} given twice",
                                    "give each value once", "usage"))
            continue
        axes.append((knob.strip(), values))
    if problems:
        raise UserError(problems)
    return [list(zip([k for k, _ in axes], combo)) for combo in itertools.product(*(v for _, v in axes))]


def label(point: list[tuple[str, str]]) -> str:
    """A point's column heading: its values in the order of the ``--sweep`` flags (``0.1``,
    ``0.1/true``; :func:`~engine.commands.sweepreport.heading` names the knobs)."""
    return "/".join(v for _, v in point)


def check(args: argparse.Namespace, grid: list[list[tuple[str, str]]]) -> list[dict[str, object]]:
    """Each point's overrides (``--set`` and its own values), every value loaded as ``--set``
    loads one (module docstring): each value on its own, then, with several knobs, each
    combination (a rule may relate two knobs). Every refusal at once, as a :class:`UserError`."""

    if getattr(args, "baseline", None) is not None:
        raise UserError([Problem("--baseline", 0, 0, "a sweep runs the budget scheduler only",
                                 "drop --baseline; compare a baseline with a run without --sweep",
                                 "usage")])
    base = knob_values(args.set)
    load_with_settings(args.root, args.rev, args.set)  # (the files' and --set's problems, once)
    problems = [Problem("--sweep", 0, 0, f"{k} is given to both --sweep and --set",
                        "give it to one of them", "usage")
                for k in dict.fromkeys(k for k, _ in grid[0]) if k in base]

    def refused(point: list[tuple[str, str]], overrides: dict[str, object]) -> list[Problem]:
        return knob_problems("--sweep", point, overrides, args.root, args.rev)

    values = dict.fromkeys((k, v) for point in grid for k, v in point)  # (in order, once each)
    for k, v in values:
        try:
            mine = knob_values([f"{k}={v}"], "--sweep")
        except UserError as err:  # (not YAML: said, and the other values still checked)
            problems += err.problems
            continue
        found = refused([(k, v)], {**base, **mine})
        problems += [p for p in found if p not in problems]  # (an unknown knob: once)
    if problems:
        raise UserError(problems)
    overrides = [{**base, **knob_values([f"{k}={v}" for k, v in point], "--sweep")} for point in grid]
    if not problems and len(grid[0]) > 1:
        for point, mine in zip(grid, overrides):
            problems += refused(point, mine)
    if problems:
        raise UserError(problems)
    return overrides


def _one(args: argparse.Namespace, point: list[tuple[str, str]], overrides: dict[str, object],
         built: tuple | None = None) -> Callable[[Callable[[float, float], None]], dict[str, Any]]:
    """One point's run: its inputs built (unless ``built``), the budget scheduler simulated;
    the summary of that run and its record (``run.json``, as ``allot simulate --set`` with
    the point's values writes it), plain data: it comes back from a worker."""
    def go(report: Callable[[float, float], None]) -> dict[str, Any]:
        from engine.sim.experiment import run_experiment

        config, trace = built or build_experiment_inputs(args, overrides)
        exp = run_experiment(config, trace, ["budget"], seed=args.seed,
                             options=sim_options(args, causes=True),
                             progress=lambda _n, now, end: report(now, end))
        summary = exp.summary()
        summary["wall_s"] = exp.results["budget"].wall_s  # (printed, not written)
        as_set = argparse.Namespace(**{**vars(args), "set": [*args.set, *(f"{k}={v}" for k, v in point)]})
        summary["record"] = runrecord.record(as_set, config, trace, exp.results["budget"].horizon)
        return summary

    return go


def run(args: argparse.Namespace) -> int:
    from engine.sim.forked import run_all

    t0 = time.monotonic()
    grid = points(args.sweep)
    overrides = check(args, grid)
    names = [label(p) for p in grid]
    progress = SweepProgress(args.progress or sys.stderr.isatty(), names)
    # the first point's inputs built here: a problem with the trace flags or file is reported
    # before any worker starts (the other points differ only in the policy's knobs)
    first = build_experiment_inputs(args, overrides[0])
    out = args.out or DEFAULT_OUT
    output_dir("--out", out)  # (not made when the inputs are refused)
    runs = [_one(args, p, o, first if i == 0 else None) for i, (p, o) in enumerate(zip(grid, overrides))]

    got = run_all(runs, lambda i, now, end: progress(names[i], now, end), args.jobs > 1, args.jobs)
    progress.finish()
    walls = [s.pop("wall_s") for s in got]
    records = [s.pop("record") for s in got]
    places = written_places(args, grid)
    files = the_files(grid, overrides, places)
    doc = document(grid, got, files, args.set, knob_note(args.set, grid, files, places, overrides[0]))
    paths = write(doc, Path(out), pictures=not args.no_pictures)
    paths += [runrecord.write(Path(out) / point_dir(i), rec) for i, rec in enumerate(records)]
    if args.format == "json":
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    exp = got[0]["experiment"]
    lo, hi = got[0]["schedulers"]["budget"]["measured_s"]
    print(f"sweep of {heading([k for k, _ in grid[0]])} ({len(grid)} runs of the budget scheduler): "
          f"{exp['trace']}, {exp['tasks']} tasks, {exp['config']['gpus']} GPUs, "
          f"{hi / 86400:.2f} simulated days" + (f", the first {lo / 3600:.1f} h a warm-up" if lo else ""))
    print(doc["note"])
    print(table_text(doc))
    print(f"wall: {time.monotonic() - t0:.1f}s total; runs " + ", ".join(f"{w:.1f}s" for w in walls))
    print(f"report: {Path(out) / 'sweep.md'} ({len(paths)} files); why a job waited in the run "
          f"of column N: allot explain JOB --report {shlex.quote(str(Path(out)))}/point-N "
          f"[--at TIME]")
    return 0


class SweepProgress(Progress):
    """:class:`~engine.commands.progress.Progress` for a sweep, whose runs may outnumber what
    a line holds: how many are done, then a bar for each run going (e.g. ``sweep 2 of 6
    done  0.15 [#####  ] day 1.20  0.25 [##    ] day 0.40``)."""

    def _draw(self, final: bool) -> None:
        done = sum(1 for t, e in self.at.values() if e and t >= e)
        going = [f"{n} {bar(min(1.0, t / e), 20)} day {t / 86400:.2f}"
                 for n, (t, e) in self.at.items() if e and t < e]
        self.line.draw("  ".join([f"sweep {done} of {len(self.at)} done", *going]), final=final)
        self.ended = final


def point_dir(index: int) -> str:
    """Where the record of the ``index``-th point (from 0) goes under ``--out``: ``point-1``..."""
    return f"point-{index + 1}"


def written_places(args: argparse.Namespace,
                   grid: list[list[tuple[str, str]]]) -> dict[str, tuple[Any, str, int]]:
    """What the policy file writes for the swept knobs and those ``--set`` gives, each with
    where (:func:`engine.loader.policy_places`): the policy files read once for
    :func:`the_files` and :func:`knob_note`."""
    from engine.loader import policy_places

    given = [item.partition("=")[0].strip() for item in args.set]
    return policy_places(args.root, args.rev, list(dict.fromkeys([*(k for k, _ in grid[0]), *given])))


def the_files(grid: list[list[tuple[str, str]]], overrides: list[dict[str, object]],
              places: dict[str, tuple[Any, str, int]]) -> list[bool]:
    """Per point: are its values (in ``overrides``, read as YAML, as given) those the policy
    file writes (``places``)? Its column is then marked ``(file)``; none is where the file
    leaves a knob to its default."""
    return [all(k in places and mine[k] == places[k][0] for k, _ in point)
            for point, mine in zip(grid, overrides)]


def knob_note(settings: list[str], grid: list[list[tuple[str, str]]], files: list[bool],
              places: dict[str, tuple[Any, str, int]], values: dict[str, object]) -> str:
    """Where the runs' knob values come from, said under the heading: the value the policy
    file writes for each swept knob, at its line (``places``), and the column it is
    (``files``: marked ``(file)``); each knob ``--set`` (``settings``, read as ``values``) gave
    every run instead of the file's value (the file's, at its line, or that the file leaves it
    to its default); the file for every other knob."""

    def shown(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    knobs = [k for k, _ in grid[0]]
    given = {item.partition("=")[0].strip(): item.partition("=")[2] for item in settings}
    written = [f"{k}: {shown(places[k][0])} ({places[k][1]}:{places[k][2]})" for k in knobs if k in places]
    left = [k for k in knobs if k not in places]
    swept = (([f"the policy file writes {' and '.join(written)}"] if written else [])
             + ([f"the file leaves {' and '.join(left)} to its default"] if left else []))
    marked = ", the column marked (file)" if any(files) else (
        "" if left else ", which no column has" if len(knobs) == 1 else ", together in no column")
    parts = [", ".join(swept) + marked]
    for knob, text in given.items():
        if knob not in places:
            parts.append(f"{knob}: {text} from --set in every run (the file leaves it to its default)")
            continue
        value, file, line = places[knob]
        parts.append(f"{knob}: {text} from --set in every run, " + (
            f"the file's value too ({file}:{line})" if values[knob] == value else
            f"not the file's {shown(value)} ({file}:{line})"))
    return "knobs: " + "; ".join([*parts, "every other knob as the policy file has it"])


def document(grid: list[list[tuple[str, str]]], summaries: list[dict[str, Any]],
             files: list[bool], settings: list[str], note: str) -> dict[str, Any]:
    """``sweep.json``: the knobs, the ``--set`` ``settings`` of every run and the note on
    where the knob values come from (:func:`knob_note`), and per point its settings (as
    given), whether they are the policy file's, and its summary."""
    return {"kind": "allot-sweep", "version": 1, "knobs": [k for k, _ in grid[0]],
            "set": list(settings), "note": note,
            "points": [{"label": label(p), "set": dict(p), "file": f, "summary": s}
                       for p, s, f in zip(grid, summaries, files)]}
