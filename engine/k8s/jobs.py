"""What Allot reads of one Job object (a plain dict as the API returns it), pure.

* **Managed** (:func:`is_managed`): the Job carries at least one contract key
  (``config.policy.labels``) as a label or an annotation.
* **Its workload** (:func:`parse_job`): the contract parsed from labels merged with annotations
  (an annotation wins) by :func:`engine.core.contract.parse_contract`; the submitters are the
  namespace plus ``allot.dev/submitter`` (:mod:`engine.k8s.marks`). Its shape as Kubernetes runs
  it: GPUs per pod from the pod template's limits (requests when no limit; the largest init
  container's when that is more), pods from ``spec.parallelism`` (default 1, at most
  ``spec.completions``); a pod count the contract refuses (an ``allot.dev/pods`` label that
  disagrees, no pods) is said with the field to change. A refused contract, or a spec no
  validating API server would accept (``parallelism: "abc"``, containers that are not a list),
  gives a workload whose ``invalid`` says why: the Job is rejected with that reason, not read
  as something else.
* **GPU quantities** (:func:`gpu_quantity`) as Kubernetes reads quantities (``8``, ``1k``,
  ``2Ki``; a fraction rounds down; unreadable, negative or not finite: 0).
* **When it finished** (:func:`finished_at`): its ``Complete`` or ``Failed`` condition.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from kubernetes.utils.quantity import parse_quantity

from engine.core.contract import ContractError, parse_contract
from engine.core.types import Contract, Workload
from engine.k8s import marks
from engine.model import Config, Principal

Obj = Mapping[str, Any]


def workload_id(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def meta_of(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_managed(job: Obj, config: Config) -> bool:
    """True when the Job carries any contract label or annotation."""
    meta = meta_of(job)
    keys = set((meta.get("labels") or {})) | set((meta.get("annotations") or {}))
    names = config.policy.labels
    contract_keys = {names.budget, names.min_runtime, names.resumable, names.priority,
                     names.gpus_per_pod, names.pods, names.cluster}
    return bool(keys & contract_keys)


def gpu_quantity(value: Any) -> int:
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
    that is more (init containers run one at a time, before the others). Parts of the wrong
    type (which only a lenient API server lets through) count nothing."""
    def gpus(container: Obj) -> int:
        res = _mapping(container.get("resources")) if isinstance(container, dict) else {}
        limits, requests = _mapping(res.get("limits")), _mapping(res.get("requests"))
        return gpu_quantity(limits.get(resource, requests.get(resource, 0)))

    def containers(key: str) -> list:
        found = pod_spec.get(key) if isinstance(pod_spec, dict) else None
        return found if isinstance(found, list) else []

    total = sum(gpus(c) for c in containers("containers"))
    return max([total, *(gpus(c) for c in containers("initContainers"))])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


class _Unreadable(ValueError):
    """A Job field of a type or value no API server that validates would accept."""


def _count(spec: Obj, key: str) -> int | None:
    """``spec[key]`` as a count of pods (None when absent); :class:`_Unreadable` otherwise."""
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Unreadable(f"spec.{key} {value!r} is not a whole number of pods (0 or more)")
    return value


def _job_shape(job: Obj, resource: str) -> tuple[int, int, str]:
    """(GPUs per pod, pods at once, the field that gives the pods: ``spec.parallelism``, or
    ``spec.completions`` when it is fewer) of a Job; :class:`_Unreadable` names what cannot be
    read."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        raise _Unreadable("spec is not a mapping")
    template = spec.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(pod_spec, dict) or not isinstance(pod_spec.get("containers"), list):
        raise _Unreadable("spec.template.spec.containers is not a list of containers")
    parallelism, completions = _count(spec, "parallelism"), _count(spec, "completions")
    pods, field = 1 if parallelism is None else parallelism, "spec.parallelism"
    if completions is not None and completions < pods:  # (never more pods at once than completions)
        pods, field = completions, "spec.completions"
    return pod_spec_gpus(pod_spec, resource), pods, field


def _condition_time(job: Obj, types: Iterable[str]) -> tuple[bool, float | None]:
    """(whether a condition among ``types`` is True, the transition or else probe time of the
    first such condition: None when it carries neither)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in types and cond.get("status") == "True":
            when = marks.parse_time(cond.get("lastTransitionTime"))
            return True, when if when is not None else marks.parse_time(cond.get("lastProbeTime"))
    return False, None


def finished_at(job: Obj, now: float | None = None) -> float | None:
    """When the Job completed or failed; None while it has not (no True ``Complete`` or
    ``Failed`` condition). The time is the condition's, else the status's ``completionTime``.
    A finished Job that carries no time at all (a real API server always sets one) ended by
    ``now``, the pass that sees it finished, so its last run is charged up to then, at most one
    pass too long; without ``now`` (a caller that only asks *whether*) it reads 0.0."""
    done, when = _condition_time(job, ("Complete", "Failed"))
    if not done:
        return None
    if when is None:
        when = marks.parse_time((job.get("status") or {}).get("completionTime"))
    if when is None:
        return now if now is not None else 0.0
    return when


def runs_on_its_placement(job: Obj) -> bool:
    """Does a pass count this Job's GPUs by its placement? So for a Job the reconciler admitted
    that still runs: not suspended, not finished, marked running with a placement and a start
    it can read. A pass counts every other Job's pods as holding their nodes' GPUs
    (:func:`engine.k8s.observe.observe`), so their pod counts matter to it
    (:mod:`engine.k8s.watches`)."""
    ann = meta_of(job).get("annotations") or {}
    return (finished_at(job) is None and not (job.get("spec") or {}).get("suspend")
            and ann.get(marks.STATE) == "running"
            and marks.parse_placement(ann.get(marks.PLACEMENT)) is not None
            and marks.parse_time(ann.get(marks.STARTED_AT)) is not None)


def parse_job(job: Obj, config: Config) -> Workload:
    """The Job as a :class:`Workload`; a refused contract sets ``invalid`` to the reason."""
    meta = meta_of(job)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    ns = meta.get("namespace", "")
    try:
        gpus_per_pod, pods, pods_from = _job_shape(job, config.policy.node_labels.gpu_resource)
        unreadable = None
    except _Unreadable as err:
        gpus_per_pod, pods, pods_from = 0, 1, "spec.parallelism"
        unreadable = f"the Job cannot be read: {err}; fix the Job"
    submitter: tuple[Principal, ...] = (Principal("namespace", ns),) + marks.parse_submitter(
        annotations.get(marks.SUBMITTER))
    users = [p.name for p in submitter if p.kind == "user"]
    owner = users[0] if users else ns
    merged = {**{str(k): str(v) for k, v in labels.items()},
              **{str(k): str(v) for k, v in annotations.items()}}
    submitted = marks.parse_time(meta.get("creationTimestamp")) or 0.0
    wid = workload_id(job)
    try:
        if unreadable is not None:
            raise ContractError(unreadable)
        contract = parse_contract(merged, submitter, config, gpus_per_pod=gpus_per_pod,
                                  pods=pods, pods_from=pods_from)
        return Workload(wid, contract, submitted, owner=owner)
    except ContractError as err:
        placeholder = Contract(budget=None, min_runtime_s=0.0, gpus_per_pod=max(gpus_per_pod, 1),
                               pods=max(pods, 1))
        return Workload(wid, placeholder, submitted, owner=owner, invalid=str(err))
