"""``allot impact --base REV --head REV``: the simulated impact of a change to budgets/policies.

Loads both revisions from git with pygit2 (no checkout: a bare or shallow CI clone with the
base commit fetched is enough), validates them, diffs them structurally
(:mod:`engine.impact.diff`), replays one trace under both through the simulator
(:mod:`engine.impact.replay`) and prints the report (:mod:`engine.impact.report`): Markdown
for a pull-request comment, or JSON. With ``--out DIR`` it also writes ``impact.md``,
``impact.json`` and ``impact.png`` (the per-team chart) there, and the replays' records
``DIR/base/run.json`` and ``DIR/head/run.json`` (:mod:`engine.commands.runrecord`), from which
the view commands show either replay (``allot explain JOB --report DIR/head --timeline``).

An invalid revision is a user error: its problems are printed as ``file:line:column`` lines
(JSON with ``--format json``), ``impact.md``/``impact.json`` in ``--out`` carry the same error
report for the CI comment, and the exit status is 1.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import shlex
import sys
from pathlib import Path

from engine.commands import days_or_all, non_negative, output_dir, remove_outputs, runrecord, seed
from engine.commands.progress import ProgressLine, bar
from engine.errors import Problem, UserError
from engine.impact.diff import diff_configs
from engine.impact.replay import DEFAULT_TRACE, ReplaySpec
from engine.impact.report import (error_json, error_markdown, invalid_title, render_json,
                                  render_markdown)
from engine.loader import load_config
from engine.model import Config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "impact",
        help="simulated impact of a change between two git revisions (the PR dry-run)",
        description="Diff budgets/ and policies/ between two git revisions and replay one trace "
                    "under both through the simulator: who gains and who loses GPU-hours, how "
                    "waits and preemptions move. Markdown for a PR comment, or JSON.",
    )
    parser.add_argument("--base", required=True, metavar="REV",
                        help="the revision the change applies to (branch, tag, sha, HEAD~1)")
    parser.add_argument("--head", default="HEAD", metavar="REV",
                        help="the proposed revision (default: HEAD)")
    parser.add_argument("--repo", default=".", metavar="PATH",
                        help="git repository (or a directory inside one; bare works) (default: .)")
    parser.add_argument("--trace", default=None, metavar="NAME|PATH",
                        help=f"trace to replay: a bundled name (philly, helios) or a trace file "
                             f"(default: {DEFAULT_TRACE})")
    parser.add_argument("--days", type=days_or_all, default=7.0, metavar="N",
                        help="simulated days to replay (default: 7; 0 = all of the trace)")
    parser.add_argument("--start-day", type=non_negative, default=None, metavar="D",
                        help="start the replay this many days into the trace (default: where allot simulate starts in "
                             "the default trace; else past the trace's ramp-up)")
    parser.add_argument("--mapping", default=None, metavar="FILE",
                        help="YAML mapping of trace owners to budget leaves (default: the "
                             "bundled trace's mapping.yaml when it fits the base tree, else "
                             "derived by demand against the base tree)")
    parser.add_argument("--demand-ratio", type=non_negative, default=1.1, metavar="X",
                        help="compress submissions so offered demand is X times the base capacity "
                             "(default: 1.1 as allot simulate; 0 keeps the trace's own timing)")
    parser.add_argument("--seed", type=seed, default=0, help="seed for contract draws (default: 0)")
    parser.add_argument("--cadence", choices=("watch", "interval"), default="watch",
                        help="when scheduling passes run in the replay: watch = at every event, as "
                             "the reconciler runs them; interval = only on the policy's interval "
                             "grid, several times faster, waits include up to one interval "
                             "(default: watch)")
    parser.add_argument("--jobs", type=int, choices=(1, 2), default=2,
                        help="simulate base and head in 2 processes at once, or 1 after the "
                             "other (default: 2; results are identical)")
    parser.add_argument("--no-replay", action="store_true",
                        help="only the structural diff, no simulation")
    parser.add_argument("--progress", action="store_true",
                        help="show the replays' progress on stderr even when it is not a "
                             "terminal (on a terminal it is always shown)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="also write impact.md, impact.json and impact.png into DIR, and the "
                             "replays' records DIR/base/run.json, DIR/head/run.json (for the views' "
                             "--report)")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown",
                        help="what to print on stdout (default: markdown)")
    parser.set_defaults(func=run)


class ReplayProgress:
    """One line on stderr (:class:`ProgressLine`): how far the base and head replays are,
    ended once both are done (later reports of the end draw nothing)."""

    def __init__(self) -> None:
        self.line = ProgressLine()
        self.ended = False

    def __call__(self, done: list[float]) -> None:
        if self.ended:
            return
        self.ended = all(d >= 1.0 for d in done)
        self.line.draw("allot impact: " + "  ".join(f"{name} {bar(d, 20)}" for name, d in
                                                    zip(("base", "head"), done)),
                       final=self.ended)


def _load_both(repo: str, base: str, head: str, out: Path | None, fmt: str) -> tuple[Config, Config]:
    """Both revisions' configurations; every problem of both when either is invalid."""
    loaded: dict[str, Config] = {}
    invalid: list[tuple[str, str, tuple[Problem, ...]]] = []
    for which, rev in (("base", base), ("head", head)):
        try:
            loaded[which] = load_config(repo, rev)
        except UserError as err:
            invalid.append((which, rev, err.problems))
    if not invalid:
        return loaded["base"], loaded["head"]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "impact.md").write_text(error_markdown(invalid), encoding="utf-8")
        (out / "impact.json").write_text(error_json(invalid), encoding="utf-8")
    if fmt != "json":
        print(f"allot impact: {invalid_title(invalid)}:", file=sys.stderr)
    if len(invalid) == 1:
        raise UserError(invalid[0][2])
    # both: each problem's file as git names a file of a revision, REV:PATH
    raise UserError(replace(p, file=f"{rev}:{p.file}") for _, rev, problems in invalid
                    for p in problems)


# what an --out directory of allot impact holds (removed first: it holds this run's only)
IMPACT_FILES = ("impact.md", "impact.json", "impact.png", "base/run.json", "head/run.json")


def run(args: argparse.Namespace) -> int:
    out = output_dir("--out", args.out) if args.out else None
    if out is not None:
        remove_outputs(out, IMPACT_FILES)
    base, head = _load_both(args.repo, args.base, args.head, out, args.format)
    base_rev = base.revision or args.base
    head_rev = head.revision or args.head
    diff = diff_configs(base, head)
    replay = None
    if not args.no_replay:
        from engine.impact.replay import run_replay

        spec = ReplaySpec(trace=args.trace, days=args.days or None, start_day=args.start_day,
                          mapping=args.mapping, demand_ratio=args.demand_ratio or None,
                          seed=args.seed, parallel=args.jobs > 1, cadence=args.cadence)
        show = args.progress or sys.stderr.isatty()
        replay = run_replay(base, head, spec, log=lambda m: print(m, file=sys.stderr),
                            progress=ReplayProgress() if show else None)
    chart = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if replay is not None:
            from engine.impact.chart import write_chart

            chart = write_chart(replay, out / "impact.png").name
        (out / "impact.json").write_text(render_json(base_rev, head_rev, diff, replay), encoding="utf-8")
        (out / "impact.md").write_text(render_markdown(base_rev, head_rev, diff, replay, chart),
                                       encoding="utf-8")
        if replay is not None:  # (with spec: the replay ran)
            for side, rec in runrecord.impact_records(args.repo, (base_rev, head_rev), spec,
                                                      replay.runs).items():
                runrecord.write(out / side, rec)
            print(f"allot impact: why a job waited in a replay: allot explain JOB --report "
                  f"{shlex.quote(str(out / 'base'))} (or {shlex.quote(str(out / 'head'))}) [--at TIME]",
                  file=sys.stderr)
    if args.format == "json":
        print(render_json(base_rev, head_rev, diff, replay))
    else:
        print(render_markdown(base_rev, head_rev, diff, replay, chart), end="")
    return 0

