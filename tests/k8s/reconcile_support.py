"""Test support for the reconciler tests: a small policy on disk, Job and Node objects, and a
harness that runs :class:`engine.k8s.loop.Reconciler` passes against the emulator.

The policy is written by the tests (not the repo's own budgets) so that the numbers in the
scenarios are obvious: root ``lab`` split between leaves ``team-a`` and ``team-b`` (chargeable
by namespaces ``team-a`` / ``team-b``), one cluster ``gpu`` of 8-GPU nodes with billing weight
1, min-runtime cap 8 h, lookback 7 d, debug = at most 8 GPUs and 15 min.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from engine.k8s import marks
from engine.k8s.client import KubeClient
from engine.k8s.loop import LoopOptions, Reconciler
from engine.k8s.policy_source import PolicySource

POLICY_NS = "allot-system"

BUDGET_ROOT = """\
apiVersion: allot.dev/v1
kind: Budget
budget:
  name: lab
  owners: ["@lab/council"]
  children:
{children}
"""

CLUSTERS = """\
apiVersion: allot.dev/v1
kind: Clusters
clusters:
  - name: gpu
    gpuType: {gpu_type}
    nodes: {nodes}
    gpusPerNode: 8
    nodesPerDomain: {nodes}
"""

SCHEDULING = """\
apiVersion: allot.dev/v1
kind: SchedulingPolicy
fairShare:
  lookback: {lookback}
  schedulingInterval: 60s
contract:
  minRuntimeCap: 8h
  defaultMinRuntime: 1h
debug:
  maxGpus: 8
  maxMinRuntime: 15m
preemption:
  gracePeriod: 2m
placement:
  gangInOneDomain: true
  loans: {loans}
drain:
  unhealthyConditions: [GPUUnhealthy]
  maintenanceTaint: allot.dev/maintenance
  maintenanceLabel: allot.dev/maintenance
  evictUnallocatedImmediately: true
  drainedLabel: allot.dev/drained
billing:
  weights:
    {gpu_type}: {weight}
nodeLabels:
  cluster: allot.dev/cluster
  domain: allot.dev/topology-domain
  gpuResource: nvidia.com/gpu
"""


def write_policy(root: Path, shares: dict[str, float] | None = None, *, nodes: int = 4,
                 lookback: str = "7d", gpu_type: str = "h100", weight: float = 1.0,
                 loans: bool = False) -> Path:
    """Write ``budgets/`` and ``policies/`` under ``root``; every leaf is chargeable by the
    namespace of the same name."""
    shares = shares or {"team-a": 50, "team-b": 50}
    children = "\n".join(
        f"    - name: {leaf}\n      share: {share}\n      principals:\n"
        f"        - namespace: {leaf}" for leaf, share in shares.items())
    (root / "budgets").mkdir(parents=True, exist_ok=True)
    (root / "policies").mkdir(parents=True, exist_ok=True)
    (root / "budgets" / "root.yaml").write_text(BUDGET_ROOT.format(children=children))
    (root / "policies" / "clusters.yaml").write_text(CLUSTERS.format(nodes=nodes,
                                                                     gpu_type=gpu_type))
    (root / "policies" / "scheduling.yaml").write_text(
        SCHEDULING.format(lookback=lookback, gpu_type=gpu_type, weight=weight,
                          loans="true" if loans else "false"))
    return root


def job(ns: str, name: str, *, budget: str | None = None, min_runtime: str | None = None,
        gpus: int = 1, pods: int = 1, suspend: bool = True, resumable: bool | None = None,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        grace: int = 120, contract: bool = True, created: str | None = None) -> dict[str, Any]:
    """A batch/v1 Job as a researcher writes it (suspended, contract labels)."""
    lab: dict[str, str] = {"app": name}
    if contract:
        if budget is not None:
            lab["allot.dev/budget"] = budget
        if min_runtime is not None:
            lab["allot.dev/min-runtime"] = min_runtime
        if resumable is not None:
            lab["allot.dev/resumable"] = "true" if resumable else "false"
        if budget is None and min_runtime is None:
            lab["allot.dev/min-runtime"] = "0"
    lab.update(labels or {})
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": lab,
                            "annotations": dict(annotations or {})}
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {
        "suspend": suspend, "parallelism": pods, "completions": pods, "backoffLimit": 0,
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}
    if pods > 1:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def node(name: str, gpus: int = 8, *, cluster: str | None = "gpu", domain: str | None = "d1",
         ready: str = "True", conditions: dict[str, str] | None = None,
         labels: dict[str, str] | None = None, taints: list[dict] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    """A Node object (for the pure tests; the emulator has ``add_node``)."""
    lab = {marks.HOSTNAME_LABEL: name}
    if cluster:
        lab["allot.dev/cluster"] = cluster
    if domain:
        lab["allot.dev/topology-domain"] = domain
    lab.update(labels or {})
    conds = [{"type": "Ready", "status": ready}] + [
        {"type": t, "status": s} for t, s in (conditions or {}).items()]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "conditions": conds}}


def node_labels(cluster: str = "gpu", domain: str = "d1", **extra: str) -> dict[str, str]:
    return {"allot.dev/cluster": cluster, "allot.dev/topology-domain": domain, **extra}


def reconciler(kube_client: Any, policy_root: Path | str, clock: Any, *,
               identity: str = "r1", dry_run: bool = False, lease_s: float = 15.0,
               refresh_s: float = 60.0, interval_s: float = 0.2, **kw: Any) -> Reconciler:
    """A reconciler on the emulator with a fast-retrying client and the given clock."""
    client = KubeClient(kube_client, retries=4, backoff_s=0.005)
    policy = PolicySource(str(policy_root), interval_s=0.0)
    options = LoopOptions(namespace=POLICY_NS, identity=identity, dry_run=dry_run,
                          lease_s=lease_s, refresh_s=refresh_s, interval_s=interval_s,
                          watch_timeout_s=5, **kw)
    return Reconciler(client, policy, options, clock=clock)


def ann(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def events_for(emu: Any, name: str, reason: str | None = None) -> list[dict[str, Any]]:
    """Core events whose involved object is ``name`` (and reason, when given)."""
    out = []
    for ev in emu.list("events"):
        if (ev.get("involvedObject") or {}).get("name") == name and \
                (reason is None or ev.get("reason") == reason):
            out.append(ev)
    return out


def write_policy_text(path: Path, text: str) -> None:
    path.write_text(textwrap.dedent(text))


T0 = 1_750_000_000.0  # the emulated clock starts here in every scenario


class Env:
    """A scenario: the emulator (clock frozen at T0), the reconciler's namespace, a policy on
    disk, helpers to add nodes, submit Jobs and build reconcilers."""

    def __init__(self, emu: Any, kube_client: Any, root: Path):
        self.emu = emu
        self.kube_client = kube_client
        emu.clock.now = T0
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POLICY_NS}})
        self.policy_root = write_policy(root)

    def nodes(self, count: int, gpus: int = 8, domain: str = "d1", prefix: str = "n") -> None:
        for i in range(count):
            self.emu.add_node(f"{prefix}{i}", gpus=gpus, labels=node_labels(domain=domain))

    def submit(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.emu.create(obj)

    def job(self, ns: str, name: str) -> dict[str, Any]:
        return self.emu.get("Job", ns, name)

    def advance(self, seconds: float) -> None:
        self.emu.clock.advance(seconds)

    def reconciler(self, identity: str = "r1", **kw: Any) -> Reconciler:
        return reconciler(self.kube_client, self.policy_root, self.emu.clock,
                          identity=identity, **kw)

    def ledger_usage(self) -> dict[str, float]:
        """Charged GPU-seconds per leaf as saved in the ledger ConfigMap."""
        import json

        cm = self.emu.get("configmaps", POLICY_NS, "allot-ledger")
        return json.loads(cm["data"]["usage-gpu-seconds.json"]) if cm else {}

    def admissions(self, ns: str, name: str) -> int:
        """How many times the Job was unsuspended by a PATCH (from the request log)."""
        count = 0
        for req in self.emu.requests:
            if req.method == "PATCH" and req.path.endswith(f"/namespaces/{ns}/jobs/{name}") \
                    and 200 <= req.status < 300 and isinstance(req.body, dict) and \
                    (req.body.get("spec") or {}).get("suspend") is False:
                count += 1
        return count

    def state(self, ns: str, name: str) -> str:
        return ann(self.job(ns, name)).get(marks.STATE, "")

    def charged(self, seconds: float) -> Reconciler:
        """A reconciler that ran one 4-GPU Job of team-a (``team-a/a``) on one node for
        ``seconds``: a pass, the time, a pass (its ledger ConfigMap holds the charge)."""
        self.nodes(1)
        self.submit(job("team-a", "a", budget="team-a", min_runtime="10m", gpus=4))
        r = self.reconciler()
        r.run_pass()
        self.advance(seconds)
        r.run_pass()
        return r
