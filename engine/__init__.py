"""Allot: budgets of GPU time, hierarchical fair share and scheduling contracts, as code."""

__version__ = "0.1.0"

from engine.accel import activate as _activate  # noqa: E402  (before engine.core is imported)

_activate()  # the compiled core, where one is built for these sources (engine.accel)
