"""The vocabulary of the decision core: what goes into ``decide()`` and what comes out.

A :class:`Snapshot` is the whole state the core may look at (nodes, running and pending
workloads, charged usage over the lookback window). A :class:`Decision` is everything it
concludes: actions for the shell to apply, and for every workload a status that explains
itself with the numbers that produced it. Both shells (the simulator and the Kubernetes
reconciler) build snapshots and apply actions; neither decides anything itself.

All times are seconds on one clock chosen by the shell (epoch seconds in the cluster,
simulated seconds in the simulator). All objects are frozen and hashable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Literal, Mapping, NamedTuple, Union


@dataclass(frozen=True)
class Contract:
    """A workload's scheduling contract, already parsed and checked.

    ``budget`` is the leaf charged, or ``None`` for unallocated (free) work: no budget label,
    min runtime 0, or a budget the workload may not charge. ``requested_budget`` keeps what
    the label asked for, and ``note`` says why it is unallocated when it is.
    """

    budget: str | None
    min_runtime_s: float
    resumable: bool = True
    priority: int = 0
    gpus_per_pod: int = 1
    pods: int = 1
    cluster: str | None = None
    requested_budget: str | None = None
    note: str = ""

    # derived values, computed once per (immutable) contract: ``cached_property`` keeps them
    # in the instance dict, outside the dataclass fields (equality, hash and repr unchanged)

    @cached_property
    def gpus(self) -> int:
        return self.gpus_per_pod * self.pods

    @cached_property
    def allocated(self) -> bool:
        return self.budget is not None and self.min_runtime_s > 0


@dataclass(frozen=True)
class Workload:
    """A unit of work (a Job / a trace task). ``invalid`` holds why its contract was refused;
    ``decide()`` then rejects it."""

    id: str
    contract: Contract
    submitted_at: float
    owner: str = ""
    invalid: str | None = None


@dataclass(frozen=True)
class Placement:
    """Whole GPUs on nodes: ``((node, gpus), ...)`` sorted by node name."""

    assignments: tuple[tuple[str, int], ...]

    # derived values, computed once per placement (as for Contract)

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.assignments)

    @cached_property
    def gpus(self) -> int:
        return sum(g for _, g in self.assignments)


@dataclass(frozen=True)
class Running:
    """A workload that holds GPUs. ``started_at`` is the start of its current run (it resets
    when a preempted workload is admitted again); ``protected_until`` is ``started_at +
    min_runtime`` for allocated work and ``started_at`` for unallocated work (a run on loan,
    :class:`Admit`, is unallocated: its shell reports it with no budget)."""

    workload: Workload
    placement: Placement
    started_at: float
    protected_until: float


@dataclass(frozen=True)
class NodeState:
    """A schedulable host. ``healthy`` is False when a health condition or maintenance marker
    is set; ``cordoned`` is True when the node already refuses new work. ``gpus`` is its
    capacity; ``foreign`` of them are in use by work Allot does not manage (other tenants'
    pods): never free to Allot's work while they run, never preemptible, and no reason to
    reject a workload that fits the node's capacity."""

    name: str
    cluster: str
    gpus: int
    domain: str
    healthy: bool = True
    cordoned: bool = False
    foreign: int = 0


@dataclass(frozen=True)
class Snapshot:
    """The state ``decide()`` sees. ``usage`` is charged, billing-weighted GPU-seconds per leaf
    over the lookback window ending at ``now`` (leaves absent from it used nothing)."""

    nodes: tuple[NodeState, ...]
    running: tuple[Running, ...]
    pending: tuple[Workload, ...]
    usage: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


# ---------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Admit:
    """Start a pending workload on ``placement``. ``loan``: it starts *on loan* on GPUs a
    reservation holds (``policy.loans``): the shell runs it as unallocated work for this run
    (no charge, no min-runtime protection, preempted first); it is funded again once requeued."""

    workload_id: str
    placement: Placement
    reason: str
    loan: bool = False


def as_run(workload: Workload, loan: bool) -> Workload:
    """``workload`` as it runs once admitted: itself, or on loan (``Admit.loan``) the same
    workload without a budget (unallocated for this run). Every shell starts work through this.
    Only allocated work is ever lent: unallocated work is itself either way."""
    if not loan or not workload.contract.allocated:
        return workload
    return replace(workload, contract=replace(
        workload.contract, budget=None,
        note="runs unallocated: on loan on GPUs a reservation holds (funded again once requeued)"))


@dataclass(frozen=True)
class Preempt:
    """Stop a running workload and return it to the queue (``requeue``: it is resumable or
    will restart from scratch). ``preemptor`` is the workload that needs the GPUs, or None for
    a drain eviction."""

    workload_id: str
    preemptor: str | None
    reason: str
    requeue: bool = True


@dataclass(frozen=True)
class Reject:
    workload_id: str
    reason: str


@dataclass(frozen=True)
class Cordon:
    node: str
    reason: str


@dataclass(frozen=True)
class MarkDrained:
    node: str
    reason: str


Action = Union[Admit, Preempt, Reject, Cordon, MarkDrained]


# ---------------------------------------------------------------------------- explanation


class LevelFactor(NamedTuple):
    """One level of a leaf's path in the Fair Tree: the node, its share of its siblings
    (normalised), its usage as a fraction of its parent's usage, and the level fair-share
    value ``share / usage`` that ordered it among its siblings (``inf`` for zero usage).
    (Immutable like the dataclasses here; a named tuple because every decision makes one
    per tree node, and one costs less to make.)"""

    node: str
    share: float
    usage: float
    fairshare: float


class LeafRank(NamedTuple):
    """Where a leaf stands: ``rank`` 1 is served first. ``usage`` is its charged GPU-seconds in
    the window; ``share`` its effective share (0..1); ``metric`` its usage fraction over its
    effective share (1.0 = exactly on budget, 0 = unused, above 1 = over-used). (A named
    tuple, as :class:`LevelFactor`: one per leaf per decision.)"""

    leaf: str
    rank: int
    usage: float
    share: float
    metric: float
    levels: tuple[LevelFactor, ...] = ()


WorkloadState = Literal["pending", "admitted", "running", "preempted", "rejected"]


@dataclass(frozen=True)
class WorkloadStatus:
    """A workload's state after the decision and why, with the numbers that made it."""

    workload_id: str
    state: WorkloadState
    reason: str
    leaf: str | None = None
    queue_position: int | None = None
    rank: int | None = None
    metric: float | None = None
    protected_until: float | None = None
    preemptor: str | None = None


@dataclass(frozen=True)
class Decision:
    now: float
    actions: tuple[Action, ...]
    statuses: Mapping[str, WorkloadStatus]
    ranks: Mapping[str, LeafRank]
    # pending workload id -> why it still waits, in one word
    # (:func:`engine.core.statuses.waiting_causes`; a baseline scheduler gives none)
    waiting: Mapping[str, str] = field(default_factory=dict)
    # holder id -> (its reserved nodes, earliest start; inf: a drain hold, GPUs the hold's
    # nodes are short of work it may preempt; 0 for a timed one), this pass's reservations
    # (:mod:`engine.core.reservation`)
    reserved: Mapping[str, tuple[tuple[str, ...], float, int]] = field(default_factory=dict)
