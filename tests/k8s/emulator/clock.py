"""The emulator's controllable clock: wall time by default, freezable and steppable from tests.

Every timestamp the emulator writes (creationTimestamp, Job startTime / completionTime, condition
transition times, pod start times, Event times) comes from this clock, so a test can make a Job
"run for 3 hours" by ``emu.clock.advance(3 * 3600)`` instead of sleeping. Passing ``emu.clock`` as
a ``Callable[[], float]`` to the code under test keeps both sides on the same time line.
"""
from __future__ import annotations

import datetime as dt
import threading
import time


class Clock:
    """Epoch seconds; ``clock()`` reads it, ``clock.now = t`` freezes it, ``advance`` steps it."""

    def __init__(self, start: float | None = None) -> None:
        self._lock = threading.Lock()
        self._frozen: float | None = start
        self._offset = 0.0

    def __call__(self) -> float:
        return self.now

    @property
    def now(self) -> float:
        with self._lock:
            if self._frozen is not None:
                return self._frozen
            return time.time() + self._offset

    @now.setter
    def now(self, value: float) -> None:
        with self._lock:
            self._frozen = float(value)

    @property
    def frozen(self) -> bool:
        return self._frozen is not None

    def advance(self, seconds: float) -> float:
        """Move time forward (frozen or not); returns the new now."""
        with self._lock:
            if self._frozen is not None:
                self._frozen += seconds
                return self._frozen
            self._offset += seconds
            return time.time() + self._offset

    def resume(self) -> None:
        """Let time flow again from the frozen instant."""
        with self._lock:
            if self._frozen is not None:
                self._offset = self._frozen - time.time()
                self._frozen = None


def rfc3339(epoch: float, micro: bool = False) -> str:
    """Kubernetes Time (seconds) or MicroTime rendering, always UTC with a ``Z``."""
    stamp = dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    """Inverse of :func:`rfc3339` (accepts fractional seconds and offsets)."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
