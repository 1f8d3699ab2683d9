"""Plain-text tables and the ``allot queue`` rendering.

:func:`table` aligns columns (numbers right, text left). :func:`queue_text` prints the ranked
queue with the metric that orders it: the leaf's Fair Tree rank (the metric shown is the leaf's
usage fraction over its effective share, 1.00 = on budget), then priority within the leaf, then
submit time; unallocated work comes last, by submit time. A Job whose contract was refused shows
``-`` for the terms it has none of (priority, GPUs, min runtime).
"""

from __future__ import annotations

from typing import Any, Sequence

from engine.durations import format_duration
from engine.views.state import ViewState


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_isnum(r[i]) for r in cells[1:]) and len(cells) > 1 for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [r[i].rjust(widths[i]) if numeric[i] else r[i].ljust(widths[i]) for i in range(len(r))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _isnum(s: str) -> bool:
    try:
        float(s.rstrip("%x"))
        return True
    except ValueError:
        return s in ("-", "inf")


def ago(seconds: float) -> str:
    return format_duration(round(max(0.0, seconds)))


def metric_text(m: Any) -> str:
    if m is None:
        return "-"
    if isinstance(m, str):
        return m
    return f"{m:.2f}"


def queue_text(state: ViewState, rows: list[dict[str, Any]], cluster: str | None, team: str | None) -> str:
    lookback = format_duration(state.config.policy.lookback_s)
    scope = []
    if cluster:
        scope.append(f"cluster {cluster}")
    if team:
        scope.append(f"budget subtree {team}")
    head = (f"Queue at t={state.now:.0f}{' (' + ', '.join(scope) + ')' if scope else ''}: "
            f"{sum(1 for r in rows if r['state'] != 'rejected')} waiting. Order: budget rank (Fair Tree "
            f"over charged usage in the last {lookback}; METRIC = usage fraction / effective share, "
            f"1.00 = on budget), then priority within a budget, then submit time; unallocated work last.")
    body = table(
        ("POS", "WORKLOAD", "BUDGET", "RANK", "METRIC", "PRIO", "GPUS", "MIN-RT", "WAITED", "STATE", "WHY"),
        [(r["position"], r["id"], r["leaf"] or f"({'refused' if r['state'] == 'rejected' else 'free'}) "
          f"{r['requested_budget'] or ''}".strip(), r["rank"],
          metric_text(r["metric"]), r["priority"], r["gpus"],
          None if r["min_runtime_s"] is None else format_duration(r["min_runtime_s"]),
          ago(r["wait_s"]), r["state"], r["cause"] or "-") for r in rows])
    notes = "\n".join(f"note: {n}" for n in state.notes)
    return "\n".join(x for x in (head, body if rows else "(empty)", notes) if x)
