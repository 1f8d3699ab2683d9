"""The view state: one serialisable picture of a cluster at an instant, for every view.

Built by a shell (:mod:`engine.views.simstate` from a simulation run, :mod:`engine.views.live`
from the reconciler's passes), served as JSON at ``/api/state`` and read back by the CLI with
``--url``. It holds:

* ``config`` and ``snapshot``: the exact inputs of the decision at ``now`` (see
  :mod:`engine.views.codec`). The :class:`~engine.core.types.Decision` is not stored: it is
  recomputed with ``decide()`` (pure and deterministic), so every reader sees the same numbers
  as the scheduler, and "what if" questions are answered by deciding again on a changed copy.
* ``ledger``: the usage ledger (:meth:`engine.core.ledger.Ledger.to_dict`), when known.
* ``runs``: runs of workloads on GPUs (:class:`Run`, one bar of the per-GPU timeline; ``end``
  None while running), as far back as the shell kept them (the sim: the whole run; the live
  recorder: its retention).
* ``demand``: intervals during which a workload wanted GPUs (submitted, not finished), for
  entitlement (allocation capped by demand).
* ``history``: per workload, ``[time, kind, detail]`` events (submit, start, preempt, ...).
* ``expected``: per running workload its expected end time, per pending workload its expected
  runtime (the ETA forecaster's assumptions; absent when unknown).
* ``finished``: workloads no longer in the snapshot (done, rejected, killed) with their end.
* ``notes``: what the shell wants every reader to know (e.g. "simulated state at t=...").

JSON: :meth:`ViewState.to_dict` writes these inputs; :func:`engine.views.derived.document`
adds the derived ``views`` (tree with ranks, queue, statuses) the dashboard draws;
:meth:`ViewState.from_dict` ignores them and rebuilds from the inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from engine.core.decide import decide
from engine.core.ledger import Ledger, rollup_usage
from engine.core.types import Decision, Snapshot
from engine.model import Config
from engine.views.codec import (config_from_dict, config_to_dict, num, snapshot_from_dict,
                                snapshot_to_dict, unnum)

VERSION = 1


@dataclass(frozen=True)
class Run:
    """One uninterrupted run of a workload on GPUs: a bar of the per-GPU timeline.

    ``gpus`` is ``((node, (gpu indices...)), ...)``; ``weight`` the billing weight per GPU
    (charged only when ``allocated``); ``end`` None while it still runs."""

    workload: str
    leaf: str | None
    start: float
    end: float | None
    gpus: tuple[tuple[str, tuple[int, ...]], ...]
    allocated: bool
    preempted: bool = False
    protected_until: float = 0.0
    weight: float = 1.0

    @property
    def gpu_count(self) -> int:
        return sum(len(i) for _, i in self.gpus)

    def to_list(self) -> list:
        return [self.workload, self.leaf, self.start, num(self.end),
                [[n, list(i)] for n, i in self.gpus], self.allocated, self.preempted,
                num(self.protected_until), self.weight]

    @staticmethod
    def from_list(x: list) -> "Run":
        return Run(x[0], x[1], float(x[2]), unnum(x[3]),
                   tuple((n, tuple(int(g) for g in i)) for n, i in x[4]), bool(x[5]), bool(x[6]),
                   float(x[7]), float(x[8]))


@dataclass(frozen=True)
class Demand:
    """``gpus`` GPUs wanted by ``workload`` of ``leaf`` over ``[start, end)`` (None: still)."""

    workload: str
    leaf: str | None
    start: float
    end: float | None
    gpus: int


@dataclass
class ViewState:
    source: str  # "sim" or "live"
    now: float
    config: Config
    snapshot: Snapshot
    ledger: dict[str, Any] | None = None
    runs: list[Run] = field(default_factory=list)
    demand: list[Demand] = field(default_factory=list)
    history: dict[str, list[list]] = field(default_factory=dict)
    expected: dict[str, float] = field(default_factory=dict)
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ derived

    @cached_property
    def decision(self) -> Decision:
        """The decision at ``now`` (recomputed: ``decide`` is pure and deterministic)."""
        return decide(self.snapshot, self.config, self.now)

    @cached_property
    def workloads(self) -> dict[str, Any]:
        """Workload id -> :class:`Workload` or :class:`Running` from the snapshot."""
        out: dict[str, Any] = {w.id: w for w in self.snapshot.pending}
        out.update({r.workload.id: r for r in self.snapshot.running})
        return out

    @cached_property
    def node_usage(self) -> dict[str, float]:
        """Window usage (GPU-s) of every tree node, leaves summed up."""
        return rollup_usage(self.config.tree, self.snapshot.usage)

    def ledger_obj(self) -> Ledger | None:
        return Ledger.from_dict(self.ledger) if self.ledger else None

    def one(self, query: str) -> str:
        """The one workload id ``query`` names (:meth:`find`); :class:`NotFound` says why not."""
        found = self.find(query)
        if len(found) != 1:
            raise NotFound(f"no workload {query!r}" if not found else
                           f"{query!r} matches {len(found)} workloads: {', '.join(found[:8])}"
                           + (", ..." if len(found) > 8 else ""))
        return found[0]

    def find(self, query: str) -> list[str]:
        """Workload ids matching ``query``: the exact id, else ids that end with or contain it."""
        known = set(self.workloads) | set(self.finished) | set(self.history)
        if query in known:
            return [query]
        tail = sorted(k for k in known if k.endswith("/" + query) or k.endswith(query))
        return tail or sorted(k for k in known if query in k)[:20]

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-safe data (:meth:`from_dict` reads it back); what the dashboard
        draws from it is added by :func:`engine.views.derived.document`."""
        return {
            "version": VERSION, "source": self.source, "now": self.now, "meta": self.meta,
            "notes": list(self.notes),
            "config": config_to_dict(self.config),
            "snapshot": snapshot_to_dict(self.snapshot),
            "ledger": self.ledger,
            "runs": [r.to_list() for r in self.runs],
            "demand": [[d.workload, d.leaf, d.start, num(d.end), d.gpus] for d in self.demand],
            "history": self.history,
            "expected": {k: num(v) for k, v in self.expected.items()},
            "finished": self.finished,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "ViewState":
        if not isinstance(d, Mapping):
            raise ValueError(f"a JSON object is needed, not {type(d).__name__}")
        if d.get("version") != VERSION:
            raise ValueError(f"view state version {d.get('version')!r}, expected {VERSION}")
        now = float(d["now"])
        if not math.isfinite(now) or now < 0:
            raise ValueError(f"its time 'now' is {d['now']!r}, not a finite number >= 0")
        history = {k: list(v) for k, v in d.get("history", {}).items()}
        for k, events in history.items():  # [time, kind, detail] each
            for i, e in enumerate(events):
                if not (isinstance(e, list) and len(e) == 3 and isinstance(e[0], (int, float))
                        and not isinstance(e[0], bool) and isinstance(e[1], str) and isinstance(e[2], str)):
                    raise ValueError(f"history[{k!r}][{i}] must be [time, kind, detail], got {e!r}")
        if d.get("ledger"):
            Ledger.from_dict(d["ledger"])  # (read when used: checked here, once)
        return ViewState(
            source=d["source"], now=now, config=config_from_dict(d["config"]),
            snapshot=snapshot_from_dict(d["snapshot"]), ledger=d.get("ledger"),
            runs=[Run.from_list(x) for x in d.get("runs", [])],
            demand=[Demand(x[0], x[1], float(x[2]), unnum(x[3]), int(x[4])) for x in d.get("demand", [])],
            history=history,
            expected={k: float(v) for k, v in d.get("expected", {}).items()},
            finished=dict(d.get("finished", {})), notes=list(d.get("notes", [])),
            meta=dict(d.get("meta", {})))


class NotFound(LookupError):
    """No workload, or more than one, matches what the user typed (:meth:`ViewState.one`)."""


def fmt_num(x: float | None, digits: int = 2) -> str:
    """A number as users read it: ``inf`` for infinity, ``-`` for None."""
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}f}"


def fmt_pair(a: float | None, b: float | None, digits: int = 2, most: int = 6) -> tuple[str, str]:
    """Two numbers read side by side (``x against y``): :func:`fmt_num` with ``digits``
    decimals, or with more, up to ``most``, when they differ but would read the same (a
    Fair Tree level is often won by 1.0015 against 1.0008, which would read 1.00 against 1.00)."""
    for d in range(digits, most + 1):
        sa, sb = fmt_num(a, d), fmt_num(b, d)
        if sa != sb or a == b:
            break
    return sa, sb
