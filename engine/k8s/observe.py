"""Observation: Jobs, Pods and Nodes (plain dicts as the API returns them) -> a Snapshot.

Pure and deterministic: no I/O, the time is a parameter. The loop lists the objects, this
module reads them, :func:`engine.core.decide.decide` decides.

Jobs
----
A Job is *managed* when it carries at least one contract key (``config.policy.labels``) as a
label or an annotation; every other Job is left alone. Its workload (contract and shape) is
read by :mod:`engine.k8s.jobs`. A managed Job is then exactly one of:

- **finished**: a ``Complete`` or ``Failed`` condition is True. Not in the snapshot; when it was
  still marked running, its final run (until the condition's time) is returned for charging
  and it is marked finished.
- **running**: not suspended and marked ``state=running`` with a readable placement. Start,
  protection, placement and leaf come from the marks written at admission (label edits after
  admission cannot extend protection or move the charge; a Job charged to its leaf stays
  funded with the min runtime it was admitted with, even with its labels edited to ``0`` or
  to values that no longer parse).
- **held**: not suspended but not admitted by the reconciler (created unsuspended, or marks
  removed). It is suspended again and queued: the reconciler is the only way in.
- **pending**: suspended (new, preempted, or rejected). Rejected Jobs are offered again each
  pass, so fixing the labels makes them schedulable; while invalid they stay rejected.

One Job that cannot be read at all (a part of a type no validating API server accepts, such
as annotations that are a list) does not stop the pass: it is left out as if unmanaged (its
pods then count as other tenants' GPUs, so capacity stays right), and
``Observation.unreadable`` says which and why, for the loop to log.

Nodes
-----
A node counts when it has allocatable ``policy.node_labels.gpu_resource`` > 0 and belongs to a
policy cluster: its ``policy.node_labels.cluster`` label, or the only cluster when the policy
has one and the node has no label. Domain: the ``policy.node_labels.domain`` label, else the node
name. Unhealthy: ``Ready`` False or Unknown (a node without a Ready condition is trusted), a
condition in ``policy.drain.unhealthy_conditions`` True, the maintenance taint (any effect) or
the maintenance label (any value but ``false``). Cordoned: ``spec.unschedulable``; a node the
reconciler cordoned (its ``cordon-reason`` annotation) that is healthy again is *healed*
(``Observation.healed``): the loop uncordons it. One an operator cordoned is left alone. GPUs:
allocatable; of them ``foreign``: what running pods that belong to no running managed Job
request on that node (other tenants' pods, and the pods of a managed Job that was suspended or
failed while they still terminate: a preempted Job checkpointing in its grace period), at most
the allocatable: never free to managed work while they run, and a node holding them is not
empty (not drained), but no reason to reject a Job the node could hold (pods of running managed
Jobs are accounted by placements instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from engine.core.types import NodeState, Placement, Running, Snapshot, Workload, as_run
from engine.k8s import marks
from engine.k8s.jobs import Obj, finished_at, gpu_quantity, is_managed, meta_of, parse_job, \
    pod_spec_gpus, runs_on_its_placement, workload_id
from engine.model import Config


@dataclass(frozen=True)
class Occupancy:
    """A run to charge: ``end`` None means still running (charge up to now)."""

    workload_id: str
    leaf: str | None
    start: float
    end: float | None
    gpus: int
    weight: float


@dataclass(frozen=True)
class JobView:
    """One managed Job as observed: identity, its kind this pass, and the parsed workload."""

    id: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    kind: str  # "pending" | "running" | "held" | "finished"
    workload: Workload
    obj: Obj = field(repr=False, compare=False)

    @property
    def annotations(self) -> Mapping[str, str]:
        return (self.obj.get("metadata") or {}).get("annotations") or {}

    @property
    def state(self) -> str:
        return self.annotations.get(marks.STATE, "")


@dataclass(frozen=True)
class Observation:
    """What one pass saw. ``snapshot.usage`` is empty here: the loop fills it from the ledger
    after charging. ``finished`` Jobs ended since their last pass; ``occupancy`` lists every
    run the ledger may still owe (running Jobs, runs just finished, last runs of preempted
    Jobs)."""

    snapshot: Snapshot
    jobs: Mapping[str, JobView]
    nodes: Mapping[str, Obj]
    occupancy: tuple[Occupancy, ...]
    finished: tuple[str, ...]
    held: tuple[str, ...]
    node_cluster: Mapping[str, str]
    # managed Jobs that could not be read (left out as if unmanaged) -> why
    unreadable: Mapping[str, str] = field(default_factory=dict)
    # nodes the reconciler cordoned (its cordon-reason annotation) that are healthy again ->
    # that reason: the loop returns them to service, as the simulator does with a repaired node
    healed: Mapping[str, str] = field(default_factory=dict)


def node_state(node: Obj, config: Config) -> NodeState | None:
    """The node as the core sees it, or None when it is not a GPU node of a policy cluster
    (``foreign``, the GPUs of other tenants' pods on it, is set once the pods are read)."""
    policy = config.policy
    meta = meta_of(node)
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    gpus = gpu_quantity((status.get("allocatable") or {}).get(policy.node_labels.gpu_resource, 0))
    if gpus <= 0:
        return None
    clusters = {c.name for c in policy.clusters}
    cluster = labels.get(policy.node_labels.cluster)
    if cluster is None and len(clusters) == 1:
        cluster = next(iter(clusters))
    if cluster not in clusters:
        return None
    name = meta.get("name", "")
    spec = node.get("spec") or {}
    return NodeState(
        name=name,
        cluster=str(cluster),
        gpus=gpus,
        domain=str(labels.get(policy.node_labels.domain) or name),
        healthy=not unhealthy_because(node, config),
        cordoned=bool(spec.get("unschedulable")),
    )


def unhealthy_because(node: Obj, config: Config) -> list[str]:
    """What makes the node unhealthy, in the words an operator looks for (``condition
    GPUUnhealthy=True``, ``Ready=Unknown``, ``taint allot.dev/maintenance``, ``label
    allot.dev/maintenance=true``); empty when it is healthy (module docstring: Nodes)."""
    drain = config.policy.drain
    why = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        ctype, cstatus = cond.get("type"), cond.get("status")
        if (ctype == "Ready" and cstatus in ("False", "Unknown")) or (
                ctype in drain.unhealthy_conditions and cstatus == "True"):
            why.append(f"condition {ctype}={cstatus}")
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") == drain.maintenance_taint:
            why.append(f"taint {drain.maintenance_taint}")
    mark = (meta_of(node).get("labels") or {}).get(drain.maintenance_label)
    if mark is not None and str(mark).lower() != "false":
        why.append(f"label {drain.maintenance_label}={mark}")
    return why


def _pod_job(pod: Obj) -> str | None:
    """``ns/job`` owning the pod, from its owner reference or the job-name label."""
    meta = meta_of(pod)
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Job":
            return f"{meta.get('namespace', '')}/{ref.get('name', '')}"
    labels = meta.get("labels") or {}
    name = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
    return f"{meta.get('namespace', '')}/{name}" if name else None


def billing_weight(placement: Placement, node_cluster: Mapping[str, str], config: Config,
                   fallback: float = 1.0) -> float:
    """Billing weight of the placement's GPU type (its first known node's cluster)."""
    for node in placement.nodes:
        cluster = node_cluster.get(node)
        if cluster is not None:
            try:
                return config.policy.billing_weight(config.policy.cluster(cluster).gpu_type)
            except KeyError:
                break
    return fallback


def _read_job(job: Obj, wid: str, config: Config, node_cluster: Mapping[str, str],
              now: float | None) -> tuple[str, Workload, Running | None, list[Occupancy], bool]:
    """One managed Job: (kind, workload, its run when running, the runs the ledger may owe,
    whether it ended since its last pass), as :func:`observe` reads it."""
    meta = meta_of(job)
    run: Running | None = None
    runs: list[Occupancy] = []
    ended = False
    ann = meta.get("annotations") or {}
    workload = parse_job(job, config)
    suspended = bool((job.get("spec") or {}).get("suspend"))
    placement = marks.parse_placement(ann.get(marks.PLACEMENT))
    state = ann.get(marks.STATE, "")
    started = marks.parse_time(ann.get(marks.STARTED_AT))
    stored_weight = marks.number(ann.get(marks.WEIGHT), 1.0)
    leaf = ann.get(marks.LEAF) or None
    done = finished_at(job, now)
    if done is not None:
        kind = "finished"
        if state == "running" and placement is not None and started is not None:
            ended = True
            weight = billing_weight(placement, node_cluster, config, stored_weight)
            runs.append(Occupancy(wid, leaf, started, max(done, started), placement.gpus,
                                  weight))
    elif runs_on_its_placement(job):
        assert placement is not None and started is not None  # (read alike by the predicate)
        kind = "running"
        contract = workload.contract
        known = leaf if leaf is not None and leaf in config.tree.nodes else None
        if known is not None and contract.budget is not None and known != contract.budget:
            # (the running record names another budget than the Job's own contract, which
            # was checked against its submitter: an edit must not bill someone else)
            known = leaf = contract.budget if contract.budget in config.tree.nodes else None
        if leaf is None and contract.allocated:  # admitted on loan (Admit.loan): as it runs
            contract = as_run(workload, True).contract
        elif contract.budget != known:
            contract = replace(contract, budget=known)
        protected = marks.parse_time(ann.get(marks.PROTECTED_UNTIL))
        if known is not None and contract.budget == known and protected is not None and \
                (workload.invalid is not None or not contract.allocated) and protected > started:
            # (charged to its leaf, so funded with the min runtime it was admitted with, as
            # its marks say: labels edited to "0", to a budget it may not charge, or to
            # values that no longer parse must not make it free work that is still charged)
            contract = replace(contract, requested_budget=known, note="", min_runtime_s=min(
                protected - started, config.policy.min_runtime_cap_s))
        begun = started
        if now is not None and started > now:
            # a start in the future is an edit: the run began by now, unprotected (every
            # pass would otherwise see its protection start again), and its charges run
            # from the last charged instant (ledger_store.charge)
            begun = protected = now
        if protected is not None:  # (an edit can gain no more than any contract: the cap)
            protected = min(protected, begun + config.policy.min_runtime_cap_s)
        admitted = replace(workload, contract=contract, invalid=None)
        run = Running(admitted, placement, begun, begun if protected is None else protected)
        weight = billing_weight(placement, node_cluster, config, stored_weight)
        runs.append(Occupancy(wid, leaf, started, None, placement.gpus, weight))
    elif not suspended:
        kind = "held"  # suspended by the loop first; queued from the next pass on
    else:
        kind = "pending"
    if kind != "running":
        last = marks.RunRecord.parse(ann.get(marks.LAST_RUN))
        if last is not None and last.leaf:
            runs.append(Occupancy(wid, last.leaf, last.start, last.end, last.gpus,
                                  last.weight))
    return kind, workload, run, runs, ended


def observe(jobs: Iterable[Obj], pods: Iterable[Obj], nodes: Iterable[Obj],
            config: Config, now: float | None = None) -> Observation:
    """Read the cluster objects into an :class:`Observation` (see the module docstring).
    ``now``: a running record's start after it is an edit, read as ``now`` for the run."""
    views: dict[str, JobView] = {}
    running: list[Running] = []
    pending: list[Workload] = []
    occupancy: list[Occupancy] = []
    finished: list[str] = []
    held: list[str] = []
    placed_ids: set[str] = set()  # running managed Jobs: their GPUs are in their placements
    node_objs = {str(meta_of(n).get("name", "")): n for n in nodes}
    states: dict[str, NodeState] = {}
    for name, obj in node_objs.items():
        state = node_state(obj, config)
        if state is not None:
            states[name] = state
    node_cluster = {name: state.cluster for name, state in states.items()}

    unreadable: dict[str, str] = {}
    for job in sorted(jobs, key=workload_id):
        wid = workload_id(job)
        try:
            if not is_managed(job, config):
                continue
            read = _read_job(job, wid, config, node_cluster, now)
        except (AttributeError, TypeError, ValueError, OverflowError) as err:
            # (a part of a type no validating API server accepts: left out, pass goes on)
            unreadable[wid] = f"{type(err).__name__}: {err}"
            continue
        kind, workload, run, runs, ended = read
        occupancy.extend(runs)
        if ended:
            finished.append(wid)
        if kind == "running":
            assert run is not None  # (a running Job has its run)
            running.append(run)
            placed_ids.add(wid)
        elif kind == "held":
            held.append(wid)
        elif kind == "pending":
            pending.append(workload)
        meta = meta_of(job)
        views[wid] = JobView(wid, str(meta.get("namespace", "")), str(meta.get("name", "")),
                             str(meta.get("uid", "")), str(meta.get("resourceVersion", "")),
                             kind, workload, job)

    others: dict[str, int] = {}
    resource = config.policy.node_labels.gpu_resource
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if _pod_job(pod) in placed_ids:
            continue  # (a preempted, held or failed Job's pods still terminating hold GPUs)
        others[node] = others.get(node, 0) + pod_spec_gpus(spec, resource)

    node_states = [replace(states[name], foreign=min(states[name].gpus, max(0, others.get(name, 0))))
                   for name in sorted(states)]
    snapshot = Snapshot(nodes=tuple(node_states), running=tuple(running),
                        pending=tuple(pending))
    healed = {name: str(reason) for name, state in sorted(states.items())
              if state.healthy and state.cordoned
              and (reason := (meta_of(node_objs[name]).get("annotations") or {}).get(
                  marks.CORDON_REASON)) is not None}
    return Observation(snapshot, views, node_objs, tuple(occupancy), tuple(finished),
                       tuple(held), node_cluster, unreadable, healed)
