"""The impact report: Markdown sized for a pull-request comment, its JSON twin, a PNG chart.

Markdown layout (GitHub-flavoured; a PR comment holds at most 65,536 characters, and this
report stays well under ``MAX_MARKDOWN`` by capping every table at ``MAX_ROWS`` rows with a
"... and N more" line; :mod:`engine.impact.cells` writes the values, tables and folds):

1. a title with both revisions and a one-line verdict;
2. the summary table: every team whose delivered GPU-hours moved (gainers first, then losers,
   largest first) with its effective share before -> after, delivered and entitled
   GPU-hours before -> after, the change, and the cause of waiting that moved most; then,
   per team that lost, its job whose time queued grew most and the command that shows why;
3. cluster-wide figures before -> after (occupancy, preemptions, debug and overall waits);
4. ``<details>`` folds: tree changes (leaves with share of parent, effective share and GPUs
   per cluster; added / removed / moved nodes; owners; principals), policy changes, waits per
   class, waits and deliveries per team, why each team's work waited (GPU-hours per cause,
   from the replays' decisions), and how the replay was made.

An invalid head (or base) gives :func:`error_markdown` instead: the ``file:line:column``
problems in a code block, which is what the CI comment then shows.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any, Callable, Sequence

from engine.errors import Problem
from engine.impact.cells import (MAX_ROWS, arrow, count, duration, fold, gpu_h, gpus, knob, number,
                                 pct, share, short_rev, signed, table)
from engine.impact.diff import ConfigDiff
from engine.impact.replay import ReplayImpact, TeamImpact
from engine.impact.runs import CAUSES_EVERY_S

MAX_MARKDOWN = 60000


# ------------------------------------------------------------------------------ markdown

def render_markdown(base_rev: str, head_rev: str, diff: ConfigDiff, replay: ReplayImpact | None,
                    chart: str | None = None) -> str:
    parts = [f"### Allot impact: {short_rev(base_rev)} → {short_rev(head_rev)}", "",
             _verdict(diff, replay), ""]
    effective = {c.name: c for c in diff.leaves}
    if replay is not None:
        movers = list(replay.gainers) + list(replay.losers)
        causes = any(t.waiting for t in replay.teams)  # (the runs collected causes)
        if movers:
            parts.append(table(
                ("team", "effective share", "delivered GPU-h", "change", "entitled GPU-h")
                + (("waiting that moved most",) if causes else ()),
                ((f"**{t.team}**" if t.team in effective else t.team,
                  _share_cell(t.team, effective),
                  _delivered_cell(t),
                  _change_cell(t),
                  arrow(gpu_h(t.entitled.before), gpu_h(t.entitled.after)))
                 + ((_most_moved(t),) if causes else ()) for t in movers)))
        else:
            parts.append("No team's delivered GPU-hours moved in the replay.")
        parts += _ask_why(replay)
        parts += ["", _overall_table(replay)]
        if chart:
            parts += ["", f"Chart of the per-team change: `{chart}` (workflow artifact)."]
    elif diff.leaves:
        parts.append(_leaf_table(diff))
    details = _details(diff, replay)
    if details:
        parts += [""] + details
    text = "\n".join(parts).rstrip() + "\n"
    if len(text) > MAX_MARKDOWN:
        text = text[:MAX_MARKDOWN] + "\n\n_(report cut at the comment size limit; see the JSON)_\n"
    return text


def _verdict(diff: ConfigDiff, replay: ReplayImpact | None) -> str:
    bits = []
    if diff.empty:
        bits.append("No change to budgets or policies.")
    else:
        what = []
        if diff.leaves:
            what.append(f"{len(diff.leaves)} leaf allocation{'s' if len(diff.leaves) != 1 else ''} change")
        for name, items in (("added", diff.added), ("removed", diff.removed), ("moved", diff.moved)):
            if items:
                what.append(f"{len(items)} node{'s' if len(items) != 1 else ''} {name}")
        if diff.owners:
            what.append(f"{len(diff.owners)} owner change{'s' if len(diff.owners) != 1 else ''}")
        if diff.principals:
            what.append(f"{len(diff.principals)} principal change{'s' if len(diff.principals) != 1 else ''}")
        if diff.policy:
            what.append(f"{len(diff.policy)} policy knob{'s' if len(diff.policy) != 1 else ''} change")
        bits.append(", ".join(what).capitalize() + ".")
    if replay is not None:
        span = _span(replay.horizon_s)
        ratio = f", demand {replay.demand_ratio:g}× capacity" if replay.demand_ratio else ""
        bits.append(f"Replayed {span} of `{replay.trace}` ({replay.tasks:,} jobs{ratio}) "
                    f"under both revisions: {len(replay.gainers)} team(s) gain, "
                    f"{len(replay.losers)} lose delivered GPU-hours.")
        against = _against_share(diff, replay)
        if against:
            moved = " and ".join(_change_cell(t, " GPU-h") for t in against)
            bits.append(f"{_names([t.team for t in against])} moved against "
                        f"{'its' if len(against) == 1 else 'their'} share change ({moved}): a "
                        f"share acts through the usage fair share remembers over the policy's lookback, "
                        f"so over {span} such moves are mostly chance; replay more days "
                        f"(`--days`) to see the change settle.")
    return " ".join(bits)


def _span(seconds: float) -> str:
    """A replay's length: ``14.0 days`` from three days up, else :func:`duration` (``12.0 h``,
    ``14.4 min``: a short replay is not ``0.0 days``)."""
    return f"{seconds / 86400.0:.1f} days" if seconds >= 3 * 86400 else duration(seconds)


def _against_share(diff: ConfigDiff, replay: ReplayImpact) -> list[TeamImpact]:
    """Teams whose effective share rose but delivered GPU-hours fell, or the other way round."""
    share = {c.name: (c.effective_before or 0.0, c.effective_after or 0.0) for c in diff.leaves}
    return [t for t in replay.teams if t.team in share and t.change
            and share[t.team][0] != share[t.team][1]
            and (t.change > 0) != (share[t.team][1] > share[t.team][0])]


def _names(teams: list[str]) -> str:
    quoted = [f"**{t}**" for t in teams]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _share_cell(team: str, effective: dict) -> str:
    change = effective.get(team)
    if change is None:
        return "unchanged"
    return arrow(pct(change.effective_before), pct(change.effective_after))


def _delivered_cell(t: TeamImpact) -> str:
    """Delivered before -> after; for a team the head removes, what its jobs still ran there
    unfunded (``4,343 → – (3,983 ran unfunded)``)."""
    after = gpu_h(t.delivered.after)
    if t.ran_unfunded is not None:
        after += f" ({gpu_h(t.ran_unfunded)} ran unfunded)"
    return arrow(gpu_h(t.delivered.before), after)


def _change_cell(t: TeamImpact, unit: str = "") -> str:
    base = t.delivered.before or 0.0
    rel = f" ({t.change / base:+.1%})".replace("-", "−") if base > 0 else ""
    return f"{signed(t.change)}{unit}{rel}"


def _ask_why(replay: ReplayImpact) -> list[str]:
    """For each team that lost, its job whose time queued grew most, and how to see why."""
    asks = [(t, t.waited_longer) for t in replay.losers if t.waited_longer is not None][:MAX_ROWS]
    if not asks:
        return []
    lines = ["", "Waited longer in the head, one job per team that lost; why, pass by pass: "
             "`allot explain JOB --report DIR/head --timeline` beside `DIR/base` (DIR: `--out`, "
             "or the workflow artifact `allot-impact` in a clone holding both commits, with "
             "`--config .`):", ""]
    for t, (job, before, after) in asks:
        lines.append(f"- {t.team}: `{job}` queued {duration(after)} (base: {duration(before)})")
    return lines


def _most_moved(t: TeamImpact) -> str:
    """The cause whose waiting GPU-hours moved most for ``t`` (``kept-off +542 GPU-h``; ties:
    :data:`~engine.core.statuses.WAIT_CAUSES` order), or a dash when none moved by 0.05."""
    moves = [(p.after - p.before, c) for c, p in t.waiting.items()
             if p.before is not None and p.after is not None]
    if not moves:
        return "–"
    delta, cause = max(moves, key=lambda m: abs(m[0]))
    return "–" if abs(delta) < 0.05 else f"{cause} {signed(delta)} GPU-h"


HIDDEN_WHEN_NONE = frozenset({"on_loan_gpu_h"})  # rows of a feature neither side used


def _overall_table(replay: ReplayImpact) -> str:
    labels: dict[str, tuple[str, Callable[[float | None], str]]] = {
        "offered_demand": ("offered demand / capacity", number(".2f", "×")),
        "queued_demand": ("mean queued demand / capacity", number(".2f", "×")),
        "occupancy": ("cluster occupancy", pct),
        "unallocated_share": ("unallocated share of delivered", pct),
        "on_loan_gpu_h": ("of it funded work on loan (GPU-h)", gpu_h),
        "delivered_gpu_h": ("delivered, all work (GPU-h)", gpu_h),
        "entitled_delivered": ("entitled GPU-h delivered", pct),
        "teams_at_95": ("teams at ≥ 95% of entitlement", number(".0f")),
        "preemptions": ("preemptions", number(",.0f")),
        "preemptions_of_charged": ("preemptions of runs charged to a budget", number(",.0f")),
        "gpu_hours_lost": ("GPU-h lost to preemption", gpu_h),
        "gpu_hours_lost_of_charged": ("GPU-h lost of runs charged to a budget", gpu_h),
        "wait_p50": ("queue wait p50, all jobs", duration),
        "wait_p90": ("queue wait p90, all jobs", duration),
        "debug_wait_p90": ("queue wait p90, debug jobs", duration),
    }
    rows = []
    for key, (label, fmt) in labels.items():
        if key in replay.overall:
            p = replay.overall[key]
            if key in HIDDEN_WHEN_NONE and not (p.before or p.after):
                continue  # e.g. no loans on either side (placement.loans off): no row
            rows.append((label, fmt(p.before), fmt(p.after)))
    return table(("cluster-wide", "before", "after"), rows)


def _leaf_table(diff: ConfigDiff) -> str:
    # clusters in the order the policy lists them (head first, then any the head removed)
    clusters = list(dict.fromkeys(k for c in diff.leaves for k in (*c.gpus_after, *c.gpus_before)))
    header = ("leaf", "parent", "share of parent", "effective share",
              *(f"{k} GPUs" for k in clusters))
    rows = []
    for c in diff.leaves:
        parent = arrow(c.parent_before or "–", c.parent_after or "–")
        status = "" if c.status == "changed" else f" ({c.status})"
        rows.append((f"{c.name}{status}", parent, arrow(share(c.share_before), share(c.share_after)),
                     arrow(pct(c.effective_before), pct(c.effective_after)),
                     *(arrow(gpus(c.gpus_before.get(k)), gpus(c.gpus_after.get(k))) for k in clusters)))
    return table(header, rows)


def _details(diff: ConfigDiff, replay: ReplayImpact | None) -> list[str]:
    out = []
    tree = []
    if diff.leaves and replay is not None:
        tree.append(_leaf_table(diff))
    for name, items in (("Added", diff.added), ("Removed", diff.removed)):
        if items:
            tree.append(f"**{name}:** " + ", ".join(f"`{n}`" for n in items))
    if diff.moved:
        tree.append(table(("moved node", "parent before", "parent after"),
                          ((m.name, m.parent_before or "–", m.parent_after or "–") for m in diff.moved)))
    if diff.inner:
        tree.append(table(("inner node", "share of parent", "unallocated"),
                          ((i.name, arrow(share(i.share_before), share(i.share_after)),
                            arrow(share(i.unallocated_before), share(i.unallocated_after)))
                           for i in diff.inner)))
    for title, changes in (("owners", diff.owners), ("principals", diff.principals)):
        if changes:
            tree.append(table(("node", f"{title} before", f"{title} after"),
                              ((c.name, ", ".join(c.before) or "–", ", ".join(c.after) or "–")
                               for c in changes)))
    if tree:
        out.append(fold(f"Budget tree changes ({len(diff.leaves)} {'leaf' if len(diff.leaves) == 1 else 'leaves'} affected)", "\n\n".join(tree)))
    if diff.policy:
        out.append(fold(f"Policy changes ({len(diff.policy)})", table(
            ("knob", "before", "after"),
            ((f"`{k.key}`", knob(k.key, k.before), knob(k.key, k.after)) for k in diff.policy))))
    if replay is not None:
        if replay.classes:
            out.append(fold("Queue waits per class", table(
                ("class", "jobs", "wait p50", "wait p90"),
                ((c.klass, arrow(count(c.jobs.before), count(c.jobs.after)),
                  arrow(duration(c.p50.before), duration(c.p50.after)),
                  arrow(duration(c.p90.before), duration(c.p90.after))) for c in replay.classes))))
        out.append(fold(f"Every team ({len(replay.teams)})", table(
            ("team", "delivered GPU-h", "change", "entitled GPU-h", "wait p50", "wait p90", "preemptions"),
            ((t.team, arrow(gpu_h(t.delivered.before), gpu_h(t.delivered.after)), signed(t.change),
              arrow(gpu_h(t.entitled.before), gpu_h(t.entitled.after)),
              arrow(duration(t.wait_p50.before), duration(t.wait_p50.after)),
              arrow(duration(t.wait_p90.before), duration(t.wait_p90.after)),
              arrow(count(t.preemptions.before), count(t.preemptions.after)))
             for t in sorted(replay.teams, key=lambda t: (-abs(t.change), t.team))))))
        waited = _waiting_table(replay)
        if waited:
            out.append(fold("Why work waited (GPU-h of pending work per cause)", waited))
        method = [f"- trace `{replay.trace}`, {replay.tasks:,} jobs over "
                  f"{duration(replay.horizon_s)}; capacity "
                  f"{arrow(count(replay.capacity_gpus.before), count(replay.capacity_gpus.after))} GPUs",
                  "- the same jobs, owner-to-leaf mapping and seed on both sides; contracts follow "
                  "each side's policy; the budget scheduler decides both runs",
                  "- delivered = GPU-hours the team's jobs ran (funded or free); entitled = its "
                  "allocation capped hour by hour by its demand (the simulator's metrics)",
                  f"- simulated in {replay.wall_s:.1f} s"]
        method += [f"- note: {n}" for n in replay.notes]
        out.append(fold("How this was computed", "\n".join(method)))
    return out


def _waiting_table(replay: ReplayImpact) -> str | None:
    """GPU-hours each team's pending work waited per cause, before -> after, for the teams
    whose work waited on either side, the largest change of the total first; ``None`` when no
    work waited (or the runs gave no causes)."""
    teams = [t for t in replay.teams
             if any((p.before or 0.0) >= 0.05 or (p.after or 0.0) >= 0.05 for p in t.waiting.values())]
    if not teams:
        return None
    causes = list(teams[0].waiting)  # every team has the same causes (compare)

    def total(t: TeamImpact, side: str) -> float | None:
        values = [getattr(p, side) for p in t.waiting.values()]
        return None if None in values else sum(values)

    def moved(t: TeamImpact) -> float:
        return (total(t, "after") or 0.0) - (total(t, "before") or 0.0)

    rows = [(t.team, *(arrow(gpu_h(t.waiting[c].before), gpu_h(t.waiting[c].after)) for c in causes),
             arrow(gpu_h(total(t, "before")), gpu_h(total(t, "after"))))
            for t in sorted(teams, key=lambda t: (-abs(moved(t)), t.team))]
    intro = ("GPU-hours each team's jobs waited in the queue, by the cause their status gave "
             f"(read every {CAUSES_EVERY_S / 60:g} simulated minutes): *no-room* "
             "(no room even preempting all it may), *pingpong* (the anti-ping-pong rule forbade "
             "it), *kept-off* (nodes reserved for better-ranked work), *reserved* / *holding* "
             "(it held a timed reservation / a drain hold), *no-reservation*, *free-work* "
             "(unfunded work waiting for idle GPUs).")
    return intro + "\n\n" + table(("team", *causes, "total"), rows)


Invalid = tuple[str, str, Sequence[Problem]]  # (which: "base" / "head", revision, its problems)


def invalid_title(invalid: Sequence[Invalid], rev: Callable[[str], str] = str) -> str:
    """``the head revision R is invalid`` / ``the base revision B and the head revision H are
    both invalid``."""
    named = " and ".join(f"the {which} revision {rev(r)}" for which, r, _ in invalid)
    return f"{named} {'are both' if len(invalid) > 1 else 'is'} invalid"


def error_markdown(invalid: Sequence[Invalid]) -> str:
    """The CI comment for invalid revisions: each one's problems under its name."""
    n = sum(len(problems) for _, _, problems in invalid)
    parts = [f"### Allot impact: {invalid_title(invalid, short_rev)}", "",
             f"{n} problem{'s' if n != 1 else ''} found; fix them and push again (run `allot "
             f"validate` locally, `allot validate --rev REV` for a revision)."]
    for which, rev, problems in invalid:
        if len(invalid) > 1:
            parts += ["", f"The {which} revision {short_rev(rev)}:"]
        parts += ["", "```", *(str(p) for p in problems), "```"]
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------------ JSON

def render_json(base_rev: str, head_rev: str, diff: ConfigDiff, replay: ReplayImpact | None) -> str:
    doc = {"ok": True, "base": base_rev, "head": head_rev, "diff": diff.to_dict(),
           "replay": replay.to_dict() if replay is not None else None}
    return json.dumps(_finite(doc), indent=2, sort_keys=False)


def error_json(invalid: Sequence[Invalid]) -> str:
    """``invalid``: ``base``, ``head`` or ``both``; ``revision``: the invalid one (``B..H`` for
    both); ``revisions``: which -> revision; each problem names its revision (``revision``)."""
    both = len(invalid) > 1
    return json.dumps({"ok": False, "invalid": "both" if both else invalid[0][0],
                       "revision": "..".join(rev for _, rev, _ in invalid),
                       "revisions": {which: rev for which, rev, _ in invalid},
                       "problems": [{**asdict(p), "revision": which}
                                    for which, _, problems in invalid for p in problems]},
                      indent=2)


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
