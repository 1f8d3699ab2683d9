"""Observation: Jobs, Pods and Nodes (plain dicts as the API returns them) -> a Snapshot.

Pure and deterministic: no I/O, the time is a parameter. The loop lists the objects, this
module reads them, :func:`engine.core.decide.decide` decides.

Jobs
----
A Job is *managed* when it carries at least one contract key (``config.policy.labels``) as a
label or an annotation; every other Job is left alone. Its contract is parsed from labels
merged with annotations (an annotation wins) with :func:`engine.core.contract.parse_contract`;
the submitters are the namespace plus ``allot.dev/submitter`` (see :mod:`engine.k8s.marks`);
GPUs per pod come from the pod template's ``nvidia.com/gpu`` limits (requests when no limit;
the largest init container's when that is more), pods from ``spec.parallelism`` (default 1,
and at most ``spec.completions``). A managed Job is then exactly one of:

- **finished**: a ``Complete`` or ``Failed`` condition is True. Not in the snapshot; when it was
  still marked running, its final run (until the condition's time) is returned for charging
  and it is marked finished.
- **running**: not suspended and marked ``state=running`` with a readable placement. Start,
  protection, placement and leaf come from the marks written at admission (label edits after
  admission cannot extend protection or move the charge).
- **held**: not suspended but not admitted by the reconciler (created unsuspended, or marks
  removed). It is suspended again and queued: the reconciler is the only way in.
- **pending**: suspended (new, preempted, or rejected). Rejected Jobs are offered again each
  pass, so fixing the labels makes them schedulable; while invalid they stay rejected.

Nodes
-----
A node counts when it has allocatable ``policy.node_labels.gpu_resource`` > 0 and belongs to a
policy cluster: its ``policy.node_labels.cluster`` label, or the only cluster when the policy
has one and the node has no label. Domain: the ``policy.node_labels.domain`` label, else the node
name. Unhealthy: ``Ready`` False or Unknown (a node without a Ready condition is trusted), a
condition in ``policy.drain.unhealthy_conditions`` True, the maintenance taint (any effect) or
the maintenance label (any value but ``false``). Cordoned: ``spec.unschedulable``. GPUs:
allocatable; of them ``foreign``: what running pods that belong to no managed Job request on
that node (other tenants' pods), at most the allocatable: never free to managed work while they
run, but no reason to reject a Job the node could hold (pods of managed Jobs are accounted by
placements instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from kubernetes.utils.quantity import parse_quantity

from engine.core.contract import ContractError, parse_contract
from engine.core.types import Contract, NodeState, Placement, Running, Snapshot, Workload, as_run
from engine.k8s import marks
from engine.model import Config, Principal

Obj = Mapping[str, Any]


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


def workload_id(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_managed(job: Obj, config: Config) -> bool:
    """True when the Job carries any contract label or annotation."""
    meta = _meta(job)
    keys = set((meta.get("labels") or {})) | set((meta.get("annotations") or {}))
    names = config.policy.labels
    contract_keys = {names.budget, names.min_runtime, names.resumable, names.priority,
                     names.gpus_per_pod, names.pods, names.cluster}
    return bool(keys & contract_keys)


def _quantity(value: Any) -> int:
    """A GPU quantity as an int, read as Kubernetes reads a quantity (``8``, ``"8"``, ``"1k"``,
    ``"2Ki"``, ``"1e3"``; a fraction such as ``"500m"`` rounds down, whole GPUs only); anything
    unreadable, negative or not finite (``"inf"``, ``"1e999"``) counts 0."""
    if isinstance(value, bool):  # (a YAML true is no quantity; Python reads it as 1)
        return 0
    try:
        amount = parse_quantity(value)
    except (TypeError, ValueError, ArithmeticError):
        return 0
    if not amount.is_finite() or amount <= 0 or amount > _MOST_GPUS:
        return 0
    return int(amount)


_MOST_GPUS = 10**6  # above it, no GPU count ("1e999" and the like): counts 0 as unreadable


def pod_spec_gpus(pod_spec: Obj, resource: str) -> int:
    """GPUs one pod of this spec asks for, as the Kubernetes scheduler counts them: the sum
    over its containers of the limit (else the request), or the largest init container's if
    that is more (init containers run one at a time, before the others)."""
    def gpus(container: Obj) -> int:
        res = (container.get("resources") or {}) if isinstance(container, dict) else {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        return _quantity(limits.get(resource, requests.get(resource, 0)))

    total = sum(gpus(c) for c in pod_spec.get("containers") or [])
    return max([total, *(gpus(c) for c in pod_spec.get("initContainers") or [])])


def _condition_time(job: Obj, types: Iterable[str]) -> float | None:
    """Transition time of the first True condition among ``types``, or None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in types and cond.get("status") == "True":
            return marks.parse_time(cond.get("lastTransitionTime")) or marks.parse_time(
                cond.get("lastProbeTime")) or 0.0
    return None


def finished_at(job: Obj) -> float | None:
    """When the Job completed or failed (None while it has not)."""
    when = _condition_time(job, ("Complete", "Failed"))
    if when is None:
        return None
    return when or marks.parse_time((job.get("status") or {}).get("completionTime"))


def parse_job(job: Obj, config: Config) -> Workload:
    """The Job as a :class:`Workload`; a refused contract sets ``invalid`` to the reason."""
    meta = _meta(job)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    ns = meta.get("namespace", "")
    spec = job.get("spec") or {}
    template_spec = (spec.get("template") or {}).get("spec") or {}
    gpus_per_pod = pod_spec_gpus(template_spec, config.policy.node_labels.gpu_resource)
    pods = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    if spec.get("completions") is not None:  # (never more pods at once than completions)
        pods = min(pods, int(spec["completions"]))
    submitter: tuple[Principal, ...] = (Principal("namespace", ns),) + marks.parse_submitter(
        annotations.get(marks.SUBMITTER))
    users = [p.name for p in submitter if p.kind == "user"]
    owner = users[0] if users else ns
    merged = {**{str(k): str(v) for k, v in labels.items()},
              **{str(k): str(v) for k, v in annotations.items()}}
    submitted = marks.parse_time(meta.get("creationTimestamp")) or 0.0
    wid = workload_id(job)
    try:
        contract = parse_contract(merged, submitter, config, gpus_per_pod=gpus_per_pod or None,
                                  pods=pods)
        return Workload(wid, contract, submitted, owner=owner)
    except ContractError as err:
        placeholder = Contract(budget=None, min_runtime_s=0.0, gpus_per_pod=max(gpus_per_pod, 1),
                               pods=max(pods, 1))
        return Workload(wid, placeholder, submitted, owner=owner, invalid=str(err))


def node_state(node: Obj, config: Config, used_by_others: int = 0) -> NodeState | None:
    """The node as the core sees it, or None when it is not a GPU node of a policy cluster."""
    policy = config.policy
    meta = _meta(node)
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    gpus = _quantity((status.get("allocatable") or {}).get(policy.node_labels.gpu_resource, 0))
    if gpus <= 0:
        return None
    clusters = {c.name for c in policy.clusters}
    cluster = labels.get(policy.node_labels.cluster)
    if cluster is None and len(clusters) == 1:
        cluster = next(iter(clusters))
    if cluster not in clusters:
        return None
    name = meta.get("name", "")
    healthy = True
    for cond in status.get("conditions") or []:
        ctype, cstatus = cond.get("type"), cond.get("status")
        if ctype == "Ready" and cstatus in ("False", "Unknown"):
            healthy = False
        elif ctype in policy.drain.unhealthy_conditions and cstatus == "True":
            healthy = False
    spec = node.get("spec") or {}
    if any(t.get("key") == policy.drain.maintenance_taint for t in spec.get("taints") or []):
        healthy = False
    mark = labels.get(policy.drain.maintenance_label)
    if mark is not None and str(mark).lower() != "false":
        healthy = False
    return NodeState(
        name=name,
        cluster=str(cluster),
        gpus=gpus,
        domain=str(labels.get(policy.node_labels.domain) or name),
        healthy=healthy,
        cordoned=bool(spec.get("unschedulable")),
        foreign=min(gpus, max(0, used_by_others)),
    )


def _pod_job(pod: Obj) -> str | None:
    """``ns/job`` owning the pod, from its owner reference or the job-name label."""
    meta = _meta(pod)
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
    managed_ids: set[str] = set()
    node_objs = {str(_meta(n).get("name", "")): n for n in nodes}
    node_cluster: dict[str, str] = {}
    for name, obj in node_objs.items():
        state = node_state(obj, config)
        if state is not None:
            node_cluster[name] = state.cluster

    for job in sorted(jobs, key=workload_id):
        if not is_managed(job, config):
            continue
        meta = _meta(job)
        wid = workload_id(job)
        managed_ids.add(wid)
        ann = meta.get("annotations") or {}
        workload = parse_job(job, config)
        suspended = bool((job.get("spec") or {}).get("suspend"))
        placement = marks.parse_placement(ann.get(marks.PLACEMENT))
        state = ann.get(marks.STATE, "")
        started = marks.parse_time(ann.get(marks.STARTED_AT))
        stored_weight = marks.number(ann.get(marks.WEIGHT), 1.0)
        leaf = ann.get(marks.LEAF) or None
        done = finished_at(job)
        if done is not None:
            kind = "finished"
            if state == "running" and placement is not None and started is not None:
                finished.append(wid)
                weight = billing_weight(placement, node_cluster, config, stored_weight)
                occupancy.append(Occupancy(wid, leaf, started, max(done, started),
                                           placement.gpus, weight))
        elif not suspended and state == "running" and placement is not None and started is not None:
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
            begun = started
            if now is not None and started > now:
                # a start in the future is an edit: the run began by now, unprotected (every
                # pass would otherwise see its protection start again), and its charges run
                # from the last charged instant (ledger_store.charge)
                begun = protected = now
            if protected is not None:  # (an edit can gain no more than any contract: the cap)
                protected = min(protected, begun + config.policy.min_runtime_cap_s)
            admitted = replace(workload, contract=contract, invalid=None)
            running.append(Running(admitted, placement, begun,
                                   begun if protected is None else protected))
            weight = billing_weight(placement, node_cluster, config, stored_weight)
            occupancy.append(Occupancy(wid, leaf, started, None, placement.gpus, weight))
        elif not suspended:
            kind = "held"  # suspended by the loop first; queued from the next pass on
            held.append(wid)
        else:
            kind = "pending"
            pending.append(workload)
        if kind != "running":
            last = marks.RunRecord.parse(ann.get(marks.LAST_RUN))
            if last is not None and last.leaf:
                occupancy.append(Occupancy(wid, last.leaf, last.start, last.end, last.gpus,
                                           last.weight))
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
        if _pod_job(pod) in managed_ids:
            continue
        others[node] = others.get(node, 0) + pod_spec_gpus(spec, resource)

    node_states = []
    for name in sorted(node_objs):
        state = node_state(node_objs[name], config, others.get(name, 0))
        if state is not None:
            node_states.append(state)
    snapshot = Snapshot(nodes=tuple(node_states), running=tuple(running),
                        pending=tuple(pending))
    return Observation(snapshot, views, node_objs, tuple(occupancy), tuple(finished),
                       tuple(held), node_cluster)
