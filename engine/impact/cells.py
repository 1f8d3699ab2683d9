"""How the impact report writes a value and lays out GitHub-flavoured Markdown.

Cells: GPU-hours (:func:`gpu_h`), signed changes, percentages, shares of parent, policy knobs,
durations, counts and GPUs, each a dash ("–") when there is no value, and ``before → after``
(:func:`arrow`, one value when both sides agree). Layout: tables capped at ``MAX_ROWS`` rows
with a "… and N more" line (:func:`table`), ``<details>`` folds (:func:`fold`) and revisions
as short code spans (:func:`short_rev`). What goes in which table is :mod:`engine.impact.report`'s.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from engine.durations import approx_duration

MAX_ROWS = 40


def duration(seconds: float | None) -> str:
    """:func:`engine.durations.approx_duration` with this report's dash for "no value"."""
    return approx_duration(seconds, missing="–")


def gpu_h(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def signed(value: float | None, fmt=gpu_h) -> str:
    if value is None:
        return "–"
    if abs(value) < 0.05:
        return "±0"
    return ("+" if value > 0 else "−") + fmt(abs(value))


def pct(fraction: float | None, digits: int = 2) -> str:
    if fraction is None:
        return "–"
    return f"{100.0 * fraction:.{digits}f}%"


def share(value: float | None) -> str:
    return "–" if value is None else f"{value:g}%"


def knob(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key.endswith("_s") and isinstance(value, (int, float)):
        return f"{duration(float(value))} ({value:g} s)"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def gpus(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def number(spec: str, unit: str = "") -> Callable[[float | None], str]:
    """A formatter: ``value`` in the format ``spec`` followed by ``unit``, or a dash."""
    return lambda v: "–" if v is None else f"{v:{spec}}{unit}"


def arrow(before: str, after: str) -> str:
    return before if before == after else f"{before} → {after}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], limit: int = MAX_ROWS) -> str:
    rows = list(rows)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows[:limit]]
    if len(rows) > limit:
        out.append(f"\n_… and {len(rows) - limit} more rows (see the JSON report)._")
    return "\n".join(out)


def fold(summary: str, body: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def short_rev(rev: str | None) -> str:
    return f"`{rev[:12]}`" if rev else "`?`"
