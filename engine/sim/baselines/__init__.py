"""Baseline schedulers the budget scheduler is compared with, each a pure function with the
signature of ``engine.core.decide.decide``: ``legacy`` (the priority scheduler the brief
replaces) and ``monopoly`` (static per-team GPU quotas). ``placement`` is their shared,
deliberately simple gang placer."""
