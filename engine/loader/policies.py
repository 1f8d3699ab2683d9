"""Semantic checks of the policy files and their assembly into a frozen :class:`Policy`.

``policies/`` holds ``Clusters`` documents (any number; cluster names unique across them) and
exactly one ``SchedulingPolicy`` document. Every SchedulingPolicy field is optional and
defaults to the value in :class:`engine.model.Policy`. Checks beyond the schema:

- cluster names unique; ``nodes`` a multiple of ``nodesPerDomain``; at least one cluster;
- durations parse (:func:`engine.durations.parse_duration`); ``lookback`` and
  ``schedulingInterval`` > 0 and lookback longer than the interval; ``minRuntimeCap`` > 0;
  ``defaultMinRuntime`` and ``debug.maxMinRuntime`` at most the cap;
- the contract label names are distinct (two knobs read from one label would be ambiguous).
"""

from __future__ import annotations

import difflib
from types import MappingProxyType
from typing import Any

from engine.durations import format_duration, parse_duration
from engine.errors import Problem
from engine.k8s.marks import CORDON_REASON, OWNED_KEYS, SUBMITTER
from engine.loader.yamlread import Document
from engine.model import Cluster, ContractLabels, DebugRule, DrainPolicy, NodeLabels, Policy, SourceRef

# the annotations the reconciler writes on Jobs (and nodes): no contract label may be one
_RECONCILER_KEYS = frozenset((*OWNED_KEYS, SUBMITTER, CORDON_REASON))
_LABEL_FIELDS = {  # YAML key -> ContractLabels field
    "budget": "budget", "minRuntime": "min_runtime", "resumable": "resumable", "priority": "priority",
    "gpusPerPod": "gpus_per_pod", "pods": "pods", "cluster": "cluster",
}
_NODE_LABEL_FIELDS = {"cluster": "cluster", "domain": "domain", "gpuResource": "gpu_resource"}


def _get(data: dict, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def assemble(cluster_docs: list[Document], policy_docs: list[Document], bad_policy_files: int) -> tuple[Policy | None, list[Problem]]:
    """Check the policy documents; return the policy (None when a problem prevents it) and problems.

    ``bad_policy_files`` counts policy files whose own problems are already reported (so a
    missing SchedulingPolicy is not reported twice).
    """
    problems: list[Problem] = []
    clusters: list[Cluster] = []
    seen: dict[str, str] = {}
    for doc in cluster_docs:
        for i, item in enumerate(doc.data["clusters"]):
            path = ("clusters", i)
            name = item["name"]
            line, column = doc.loc(path + ("name",))
            if name in seen:
                problems.append(doc.problem(path + ("name",), f"cluster {name!r} is already defined at {seen[name]}",
                                            "cluster names are unique; rename one", code="duplicate"))
                continue
            seen[name] = f"{doc.file}:{line}:{column}"
            per_domain = item.get("nodesPerDomain", item["nodes"])
            if item["nodes"] % per_domain:
                problems.append(doc.problem(path + ("nodesPerDomain",),
                                            f"cluster {name!r}: {item['nodes']} nodes are not a whole number of "
                                            f"domains of {per_domain} nodes",
                                            "make nodes a multiple of nodesPerDomain", code="topology"))
                continue
            clusters.append(Cluster(name, item["gpuType"], item["nodes"], item["gpusPerNode"], per_domain,
                                    SourceRef(doc.file, line, column)))
    if not cluster_docs and not bad_policy_files:
        problems.append(Problem("policies", 0, 0, "no Clusters file found under policies/",
                                "add policies/clusters.yaml with 'kind: Clusters'", "missing"))
    for extra in policy_docs[1:]:
        first = policy_docs[0].file
        problems.append(extra.problem(("kind",), f"a second SchedulingPolicy (the first is {first})",
                                      "keep exactly one SchedulingPolicy file", code="duplicate"))
    if not policy_docs:
        if not bad_policy_files:
            problems.append(Problem("policies", 0, 0, "no SchedulingPolicy file found under policies/",
                                    "add policies/scheduling.yaml with 'kind: SchedulingPolicy'", "missing"))
        return None, problems
    doc = policy_docs[0]
    data = doc.data
    defaults = Policy(clusters=())
    seconds: dict[tuple, float] = {}

    def duration(path: tuple, default: float) -> float:
        raw = _get(data, *path)
        if raw is None:
            seconds[path] = default
            return default
        try:
            seconds[path] = parse_duration(raw)
        except ValueError as err:  # schema patterns catch most; parse_duration has the last word
            reason, _, hint = str(err).partition("; ")
            problems.append(doc.problem(path, f"{'.'.join(path)}: {reason}", hint, code="duration"))
            seconds[path] = default
        return seconds[path]

    lookback = duration(("fairShare", "lookback"), defaults.lookback_s)
    interval = duration(("fairShare", "schedulingInterval"), defaults.scheduling_interval_s)
    cap = duration(("contract", "minRuntimeCap"), defaults.min_runtime_cap_s)
    default_min = duration(("contract", "defaultMinRuntime"), defaults.default_min_runtime_s)
    debug_min = duration(("debug", "maxMinRuntime"), defaults.debug.max_min_runtime_s)
    grace = duration(("preemption", "gracePeriod"), defaults.preemption_grace_s)

    def need(ok: bool, path: tuple, message: str, hint: str) -> None:
        if not ok:
            problems.append(doc.problem(path, message, hint, code="range"))

    need(lookback > 0, ("fairShare", "lookback"), "fairShare.lookback must be longer than 0", "the default is 7d")
    need(interval > 0, ("fairShare", "schedulingInterval"), "fairShare.schedulingInterval must be longer than 0",
         "the default is 60s")
    if lookback > 0 and interval > 0:
        need(lookback > interval, ("fairShare", "lookback"),
             "fairShare.lookback must be longer than fairShare.schedulingInterval", "the default is 7d")
    need(cap > 0, ("contract", "minRuntimeCap"), "contract.minRuntimeCap must be longer than 0",
         "the cap bounds the protected runtime a job may claim; the default is 8h")
    if cap > 0:
        need(default_min <= cap, ("contract", "defaultMinRuntime"),
             f"contract.defaultMinRuntime ({format_duration(default_min)}) is longer than "
             f"contract.minRuntimeCap ({format_duration(cap)})",
             "lower it to at most the cap")
        need(debug_min <= cap, ("debug", "maxMinRuntime"),
             f"debug.maxMinRuntime ({format_duration(debug_min)}) is longer than "
             f"contract.minRuntimeCap ({format_duration(cap)})",
             "debug workloads are short: keep it at most the cap (15m is typical)")

    labels_data = _get(data, "contract", "labels") or {}
    labels = ContractLabels(**{_LABEL_FIELDS[k]: v for k, v in labels_data.items()})
    used: dict[str, str] = {}
    for key, attr in _LABEL_FIELDS.items():
        value = getattr(labels, attr)
        if value in used:
            problems.append(doc.problem(("contract", "labels", key),
                                        f"contract label {value!r} is used for both {used[value]} and {key}",
                                        "give each contract field its own label name", code="duplicate"))
        else:
            used[value] = key
        if value in _RECONCILER_KEYS:
            problems.append(doc.problem(("contract", "labels", key),
                                        f"contract label {value!r} is an annotation the reconciler writes itself",
                                        "choose a key of your own for " + key, code="reserved"))
    node_labels_data = _get(data, "nodeLabels") or {}
    node_labels = NodeLabels(**{_NODE_LABEL_FIELDS[k]: v for k, v in node_labels_data.items()})
    drain_data = _get(data, "drain") or {}
    drain = DrainPolicy(
        unhealthy_conditions=tuple(drain_data.get("unhealthyConditions", defaults.drain.unhealthy_conditions)),
        maintenance_taint=drain_data.get("maintenanceTaint", defaults.drain.maintenance_taint),
        maintenance_label=drain_data.get("maintenanceLabel", defaults.drain.maintenance_label),
        evict_unallocated_immediately=drain_data.get("evictUnallocatedImmediately",
                                                     defaults.drain.evict_unallocated_immediately),
        drained_label=drain_data.get("drainedLabel", defaults.drain.drained_label),
    )
    debug = DebugRule(max_gpus=_get(data, "debug", "maxGpus") or defaults.debug.max_gpus,
                      max_min_runtime_s=debug_min)
    weights = {k: float(v) for k, v in (_get(data, "billing", "weights") or {}).items()}
    gpu_types = sorted({str(item["gpuType"]) for d in cluster_docs for item in d.data["clusters"]})
    for gpu_type in (sorted(set(weights) - set(gpu_types)) if gpu_types else ()):
        close = difflib.get_close_matches(gpu_type, gpu_types, n=1)
        problems.append(doc.problem(("billing", "weights", gpu_type),
                                    f"billing weight for GPU type {gpu_type!r}, which no cluster has",
                                    (f"did you mean {close[0]}? " if close else "")
                                    + f"the clusters' GPU types: {', '.join(gpu_types)}", code="unknown"))
    gang = _get(data, "placement", "gangInOneDomain")
    reservations = _get(data, "placement", "reservations")
    reservation_share = _get(data, "placement", "reservationShare")
    loans = _get(data, "placement", "loans")
    line, column = doc.loc(("kind",))
    policy = Policy(
        clusters=tuple(clusters),
        lookback_s=lookback,
        min_runtime_cap_s=cap,
        default_min_runtime_s=default_min,
        debug=debug,
        drain=drain,
        preemption_grace_s=grace,
        scheduling_interval_s=interval,
        billing_weights=MappingProxyType(weights),
        gang_in_one_domain=defaults.gang_in_one_domain if gang is None else bool(gang),
        reservations=defaults.reservations if reservations is None else int(reservations),
        reservation_share=(defaults.reservation_share if reservation_share is None
                           else float(reservation_share)),
        loans=defaults.loans if loans is None else bool(loans),
        labels=labels,
        node_labels=node_labels,
        source=SourceRef(doc.file, line, column),
    )
    return policy, problems
