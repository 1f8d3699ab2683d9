"""Durations as people write them in YAML and job labels: ``7d``, ``8h``, ``15m``, ``90s``.

One parser for the whole project (policies, contract labels, CLI flags):
:func:`parse_duration` turns text into float seconds or raises ``ValueError`` whose message
is the precise reason, fit to show a user as is.

Grammar: one or more ``<number><unit>`` parts, largest unit first, each unit at most once,
no spaces between parts (surrounding whitespace is ignored), e.g. ``1h30m``, ``1.5h``,
``2d12h``. Units: ``w`` (week), ``d`` (day), ``h`` (hour), ``m`` (minute), ``s`` (second),
``ms`` (millisecond). Numbers are non-negative decimals (``1``, ``1.5``, ``.5``). A bare
``0`` is accepted (zero needs no unit: a min runtime of 0 means "do not charge me"); any
other bare number is refused, because ``90`` could mean seconds or minutes.

For reading: :func:`format_duration` (exact, ``1h30m``) and :func:`approx_duration` (rounded,
for reports); epoch times in a text: :mod:`engine.timestamps`.
"""

from __future__ import annotations

import math
import re

UNIT_SECONDS: dict[str, float] = {
    "w": 7 * 86400.0,
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 0.001,
}
_ORDER = ("w", "d", "h", "m", "s", "ms")
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([A-Za-z]*)")
_HINT = "write e.g. '7d', '8h', '15m', '90s' or '1h30m'"


def parse_duration(text: str) -> float:
    """Parse ``text`` into seconds (float >= 0); raise ``ValueError`` with the precise reason."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValueError(f"duration must be a string like '8h', got {type(text).__name__}")
    if not isinstance(text, str):
        if text == 0:
            return 0.0
        raise ValueError(f"duration {text!r} has no unit; {_HINT}")
    raw = text.strip()
    if not raw:
        raise ValueError(f"empty duration; {_HINT}")
    if raw.startswith("-"):
        raise ValueError(f"duration {text!r} is negative; durations must be >= 0")
    if re.fullmatch(r"0+(\.0*)?", raw):
        return 0.0
    if re.fullmatch(r"\d+(\.\d*)?|\.\d+", raw):
        raise ValueError(f"duration {text!r} has no unit; {_HINT}")
    total = 0.0
    pos = 0
    last_rank = -1
    while pos < len(raw):
        match = _PART.match(raw, pos)
        if match is None:
            raise ValueError(f"cannot read duration {text!r} at {raw[pos:]!r}; {_HINT}")
        number, unit = match.group(1), match.group(2)
        if not unit:
            after = raw[match.end():match.end() + 1]
            if after.isspace():
                raise ValueError(f"duration {text!r} contains a space; {_HINT}")
            raise ValueError(f"duration {text!r}: {number!r} has no unit; {_HINT}")
        if unit not in UNIT_SECONDS:
            raise ValueError(f"duration {text!r} has unknown unit {unit!r}; units are w, d, h, m, s, ms")
        rank = _ORDER.index(unit)
        if rank == last_rank:
            raise ValueError(f"duration {text!r} repeats the unit {unit!r}")
        if rank < last_rank:
            raise ValueError(
                f"duration {text!r} has unit {unit!r} after a smaller unit; write the largest unit first"
            )
        last_rank = rank
        total += float(number) * UNIT_SECONDS[unit]
        pos = match.end()
    if not math.isfinite(total):
        raise ValueError(f"duration {text!r} is too large")
    return total


def format_duration(seconds: float) -> str:
    """Seconds as the shortest exact-ish human form: ``7d``, ``8h``, ``1h30m``, ``90s``, ``0``."""
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"cannot format duration {seconds!r}")
    if seconds == 0:
        return "0"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    parts: list[str] = []
    rest = seconds
    for unit in ("d", "h", "m"):
        size = UNIT_SECONDS[unit]
        count = int(rest // size)
        if count:
            parts.append(f"{count}{unit}")
            rest -= count * size
    if rest > 1e-9 or not parts:
        parts.append(f"{round(rest, 3):g}s")
    return "".join(parts)


def approx_duration(seconds: float | None, missing: str = "-") -> str:
    """Seconds rounded for people reading a report: ``45 s``, ``12.5 min``, ``3.2 h``, ``4.0 d``
    (``missing`` for None or NaN). The one rounding every report uses (simulator, impact)."""
    if seconds is None or seconds != seconds:
        return missing
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"

