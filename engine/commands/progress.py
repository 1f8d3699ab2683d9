"""Progress on stderr for the long commands (``allot simulate``, ``allot impact``): one line
redrawn in place, with bars of how far each run is."""

from __future__ import annotations

import sys
import time


def bar(fraction: float, width: int) -> str:
    """``[#####     ]  50.0%`` for ``fraction`` in [0, 1]."""
    return f"[{'#' * int(width * fraction):<{width}}] {100 * fraction:5.1f}%"


class ProgressLine:
    """One line on stderr, redrawn in place (``\\r``): a draw within 0.2 s of the last one is
    skipped, except the final one, which ends the line (the next draw starts a new one)."""

    def __init__(self) -> None:
        self.last = 0.0

    def draw(self, text: str, final: bool = False) -> None:
        t = time.monotonic()
        if not final and t - self.last < 0.2:
            return
        self.last = t
        sys.stderr.write(f"\r{text}" + ("\n" if final else ""))
        sys.stderr.flush()


class Progress:
    """One progress line on stderr (:class:`ProgressLine`) with a bar per scheduler run, in the
    order ``names``, whether the runs go one after the other or side by side; the line ends
    once every run has reached its horizon."""

    def __init__(self, enabled: bool, names: list[str]):
        self.enabled = enabled
        self.line = ProgressLine()
        self.at: dict[str, tuple[float, float]] = {n: (0.0, 0.0) for n in names}
        self.ended = False

    def __call__(self, name: str, now: float, end: float) -> None:
        if not self.enabled or self.ended:
            return
        self.at[name] = (now, end)
        self._draw(all(e and t >= e for t, e in self.at.values()))

    def finish(self) -> None:
        """End the line once the runs are over, if the last reports did not (a run whose
        horizon is 0 never reports progress past its start)."""
        if self.enabled and not self.ended:
            self._draw(True)

    def _draw(self, final: bool) -> None:
        parts = []
        for n, (t, e) in self.at.items():
            frac = min(1.0, t / e) if e else (1.0 if t else 0.0)
            parts.append(f"{n} {bar(frac, 20)} day {t / 86400:.2f}")
        self.line.draw("  ".join(parts), final=final)
        self.ended = final
