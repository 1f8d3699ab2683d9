"""Scheduling contracts: parse a workload's labels/annotations into a checked :class:`Contract`.

``meta`` is the workload's labels merged with its annotations; the keys are named by
``config.policy.labels`` (defaults ``allot.dev/budget``, ``allot.dev/min-runtime``,
``allot.dev/resumable``, ``allot.dev/priority``, ``allot.dev/gpus-per-pod``, ``allot.dev/pods``,
``allot.dev/cluster``). Rules, each with a precise reason when broken (every broken rule of a
workload is reported at once):

* every contract value must be a valid Kubernetes label value: at most 63 characters,
  ``[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`` (so priorities cannot be negative);
* budget: absent, empty or ``0`` -> unallocated. Otherwise it must name a *leaf* of the budget
  tree (unknown name or inner node -> :class:`ContractError` with a hint). If none of the
  submitter's principals (namespace / group / user) is listed on that leaf, the workload is
  never charged to it: it runs unallocated and ``note`` says why (a leaf listing no
  principals can be charged by nobody);
* min runtime: a duration (``15m``, ``2h``, ``0``); absent -> the policy default; above the
  policy cap -> refused (never clamped); ``0`` -> unallocated (free, never charged, always
  preemptible);
* resumable: ``true``/``false`` (also ``yes``/``no``, any case); default true;
* priority: integer 0..1000000, orders work inside one leaf only; default 0;
* GPUs per pod (>= 1) and pod count (>= 1, a gang): from the labels, or from the
  ``gpus_per_pod`` / ``pods`` arguments (what the pod specs request); if both are given
  they must agree (a refusal names the field that gives ``pods`` when the caller says which:
  ``pods_from``, a Job's ``spec.parallelism``); pods that request no GPUs (``gpus_per_pod=0``)
  are refused even with the label, which cannot give them any;
* cluster: optional, must name a cluster of the policy.

Unallocated work keeps ``min_runtime_s`` as written but ``Contract.allocated`` is False, so it
is never protected nor charged.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable, Mapping

from engine.core.types import Contract
from engine.durations import format_duration, parse_duration
from engine.model import Config, Principal

LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
MAX_PRIORITY = 1_000_000
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


class ContractError(ValueError):
    """A contract that cannot be accepted; the message is the precise reason (and a hint)."""


def check_label_value(key: str, value: object) -> str:
    """Return ``value`` if it is a valid Kubernetes label value, else raise ContractError."""
    if not isinstance(value, str):
        raise ContractError(f"{key}: value must be a string, got {type(value).__name__}")
    if len(value) > 63:
        raise ContractError(f"{key}: value {value[:20]!r}... is {len(value)} characters; "
                            f"label values are at most 63")
    if not LABEL_VALUE.match(value):
        raise ContractError(f"{key}: {value!r} is not a valid label value; use letters, digits, "
                            f"'-', '_' and '.', starting and ending with a letter or digit")
    return value


def _positive_int(key: str, text: str, upper: int) -> int:
    if not text.isdigit():
        raise ContractError(f"{key}: {text!r} is not a whole number")
    value = int(text)
    if not 1 <= value <= upper:
        raise ContractError(f"{key}: {value} is out of range; use 1..{upper}")
    return value


def _count(key: str, meta: Mapping[str, str], given: int | None, what: str,
           source: str | None = None) -> int:
    """The count ``key`` gives, checked against ``given`` (what the workload requests; ``source``
    names the field that gives it, for the refusal to say what to change)."""
    text = meta.get(key)
    if text is None or text == "":
        if given is None:
            return 1
        if given < 1:
            raise ContractError(f"{what} must be at least 1, got {given}" + (
                f" from {source}; set {source} to 1 or more" if source else ""))
        return int(given)
    value = _positive_int(key, text, 100_000)
    if given is not None and given != value:
        if source:
            raise ContractError(f"{key}: label says {value} but {source} is {given}; make them "
                                f"agree: set {source} to {value} or the label to {given} (or "
                                f"remove the label)")
        raise ContractError(f"{key}: label says {value} but the workload requests {given}; "
                            f"make them agree (or remove the label)")
    return value


def _hint_for(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def parse_contract(meta: Mapping[str, str], submitter: Iterable[Principal], config: Config,
                   gpus_per_pod: int | None = None, pods: int | None = None,
                   pods_from: str | None = None) -> Contract:
    """Parse and check a contract; raise :class:`ContractError` with the precise reason, every
    broken label at once (numbered when there are several), so one resubmission can fix them
    all. A label that fails its check is not read further (its value is not checked twice).
    ``pods_from`` names the field that gives ``pods`` (a Job's ``spec.parallelism``): a refusal
    of the pod count says to change it."""
    labels = config.policy.labels
    policy = config.policy
    tree = config.tree
    errors: list[str] = []
    keys = (labels.budget, labels.min_runtime, labels.resumable, labels.priority,
            labels.gpus_per_pod, labels.pods, labels.cluster)
    bad: set[str] = set()  # keys whose value is not a label value: not read further
    for key in keys:
        if key in meta:
            try:
                check_label_value(key, meta[key])
            except ContractError as err:
                errors.append(str(err))
                bad.add(key)
    meta = {k: v for k, v in meta.items() if k not in bad}

    # min runtime ------------------------------------------------------------------
    raw_min = meta.get(labels.min_runtime)
    min_runtime = policy.default_min_runtime_s
    if raw_min is not None and raw_min != "":
        try:
            min_runtime = parse_duration(raw_min)
        except ValueError as exc:
            errors.append(f"{labels.min_runtime}: {exc}")
        else:
            if min_runtime > policy.min_runtime_cap_s:
                cap = format_duration(policy.min_runtime_cap_s)
                errors.append(f"{labels.min_runtime}: {raw_min} is above the policy cap of {cap}; "
                              f"ask for at most {cap} (it is never clamped) and make the job "
                              f"resumable so it can continue after preemption")

    # resumable / priority -----------------------------------------------------------
    raw_res = meta.get(labels.resumable)
    resumable = True
    if raw_res is not None and raw_res != "":
        low = raw_res.lower()
        if low in _TRUE:
            resumable = True
        elif low in _FALSE:
            resumable = False
        else:
            errors.append(f"{labels.resumable}: {raw_res!r} is not a boolean; use true or false")
    raw_prio = meta.get(labels.priority)
    priority = 0
    if raw_prio is not None and raw_prio != "":
        if not raw_prio.isdigit():
            errors.append(f"{labels.priority}: {raw_prio!r} is not a whole number; "
                          f"use 0..{MAX_PRIORITY} (higher runs first within the budget)")
        elif int(raw_prio) > MAX_PRIORITY:
            errors.append(f"{labels.priority}: {int(raw_prio)} is out of range; use 0..{MAX_PRIORITY}")
        else:
            priority = int(raw_prio)

    # shape / cluster ----------------------------------------------------------------
    gpp = npods = 1
    if gpus_per_pod is not None and gpus_per_pod < 1:  # (pods that request none: no label helps)
        resource = policy.node_labels.gpu_resource
        errors.append(f"the workload's pods request no {resource}, so they would run without "
                      f"GPUs; request whole GPUs in a container's resources.limits ({resource}: N)"
                      + (f"; the {labels.gpus_per_pod} label cannot give pods GPUs"
                         if meta.get(labels.gpus_per_pod) else ""))
    else:
        try:
            gpp = _count(labels.gpus_per_pod, meta, gpus_per_pod, "GPUs per pod")
        except ContractError as err:
            errors.append(str(err))
    try:
        npods = _count(labels.pods, meta, pods, "pod count", pods_from)
    except ContractError as err:
        errors.append(str(err))
    cluster = meta.get(labels.cluster) or None
    if cluster is not None and cluster not in {c.name for c in policy.clusters}:
        names = [c.name for c in policy.clusters]
        errors.append(f"{labels.cluster}: unknown cluster {cluster!r}; clusters are "
                      f"{', '.join(names) or '(none)'}{_hint_for(cluster, names)}")

    # budget -------------------------------------------------------------------------
    requested = meta.get(labels.budget) or None
    if requested == "0":
        requested = None
    budget: str | None = requested
    note = ""
    if requested is not None:
        if requested not in tree.nodes:
            errors.append(f"{labels.budget}: unknown budget {requested!r}"
                          f"{_hint_for(requested, tree.leaves())} (budgets are leaves of the "
                          f"budget tree; run 'allot tree' to list them)")
        elif not tree.is_leaf(requested):
            leaves = [n for n in tree.walk() if tree.is_leaf(n) and requested in tree.path(n)]
            shown = ", ".join(leaves[:5]) + (", ..." if len(leaves) > 5 else "")
            errors.append(f"{labels.budget}: {requested!r} is not a leaf budget; charge one of "
                          f"its leaves: {shown}")
        else:
            allowed = set(tree.nodes[requested].principals)
            who = sorted(set(submitter), key=str)
            if not allowed & set(who):
                budget = None
                listed = ", ".join(str(p) for p in sorted(allowed, key=str)) or "nobody"
                note = (f"runs unallocated: {', '.join(map(str, who)) or 'the submitter'} may not "
                        f"charge budget {requested!r} (its principals: {listed})")
            elif min_runtime == 0:
                budget = None
                note = "runs unallocated: min runtime 0 means free, never charged, always preemptible"
    else:
        note = "runs unallocated: no budget label (free, never charged, always preemptible)"

    if len(errors) == 1:
        raise ContractError(errors[0])
    if errors:
        raise ContractError(f"{len(errors)} problems: " +
                            " ".join(f"({i}) {e}" for i, e in enumerate(errors, 1)))
    return Contract(budget=budget, min_runtime_s=float(min_runtime), resumable=resumable,
                    priority=priority, gpus_per_pod=gpp, pods=npods, cluster=cluster,
                    requested_budget=requested, note=note)
