"""The manifests under ``deploy/``: valid against the real Kubernetes OpenAPI schemas, complete,
least-privilege, and consistent with the ``allot reconcile`` command line."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from engine.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
VERSIONS = ("1.29.0", "1.33.0", kubernetes_validate.latest_version())


def documents() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


DOCS = documents()


def by_kind(kind: str) -> list[dict]:
    return [d for _, d in DOCS if d["kind"] == kind]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name,doc", DOCS, ids=[n for n, _ in DOCS])
def test_manifest_validates_against_the_kubernetes_schema(name, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_validation_really_rejects_a_broken_manifest():
    (deployment,) = by_kind("Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


def test_everything_needed_is_there():
    kinds = sorted(d["kind"] for _, d in DOCS)
    for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                 "RoleBinding", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"):
        assert kind in kinds
    (deployment,) = by_kind("Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == by_kind("ServiceAccount")[0]["metadata"]["name"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (service,) = by_kind("Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_deployment_arguments_are_valid_allot_reconcile_flags():
    (deployment,) = by_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (config,) = [c for c in by_kind("ConfigMap") if c["metadata"]["name"] ==
                 container["envFrom"][0]["configMapRef"]["name"]]
    env = dict(config["data"])
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in container["args"]]
    parsed = build_parser().parse_args(args)
    assert parsed.command == "reconcile" and parsed.metrics_port == 9090
    assert parsed.interval == 60.0 and parsed.lease_duration == 15.0
    assert parsed.policy_repo == env["ALLOT_POLICY_REPO"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == parsed.metrics_port


def rules() -> list[tuple[str, str, str, str | None]]:
    """(namespace or '*', apiGroup, resource, verb, resourceName) granted to the account."""
    out = []
    for role in by_kind("ClusterRole") + by_kind("Role"):
        ns = role["metadata"].get("namespace", "*")
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [None]:
                            out.append((ns, group, resource, verb, name))
    return out


def test_rbac_is_least_privilege():
    granted = rules()
    verbs = {v for *_, v, _ in granted}
    assert "delete" not in verbs and "deletecollection" not in verbs and "*" not in verbs
    assert not any(res in ("secrets", "*") for _, _, res, _, _ in granted)
    # lease and ledger writes are confined to the reconciler's namespace and objects
    for ns, group, res, verb, name in granted:
        if res in ("leases", "configmaps"):
            assert ns == "allot-system"
            if verb != "create":
                assert name in ("allot-reconciler", "allot-ledger")
    bindings = by_kind("ClusterRoleBinding") + by_kind("RoleBinding")
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "allot-reconciler",
                                  "namespace": "allot-system"}]


def request_rule(method: str, path: str, params: dict) -> tuple[str, str, str, str, str | None]:
    """An API request as the RBAC attributes it is authorised by."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    ns = "*"
    if rest[0] == "namespaces" and len(rest) > 2:
        ns, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    name = rest[1] if len(rest) > 1 else None
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        verb = "get" if name else ("watch" if params.get("watch") in ("true", "1") else "list")
    return ns, group, resource, verb, name


def allowed(request: tuple, granted: list) -> bool:
    ns, group, resource, verb, name = request
    for g_ns, g_group, g_res, g_verb, g_name in granted:
        if (g_group, g_res, g_verb) != (group, resource, verb):
            continue
        if g_ns != "*" and g_ns != ns:
            continue
        if g_name is not None and g_name != name:
            continue
        return True
    return False


def test_rbac_allows_every_request_the_reconciler_makes(kube_emulator, kube_client, tmp_path):
    """Run admission, preemption and re-admission, a drain, a rejection and the watch loop,
    and check every request against the Roles: the manifests are sufficient."""
    import threading
    import time

    from tests.k8s.reconcile_support import Env, job

    env = Env(kube_emulator, kube_client, tmp_path / "policy")
    env.nodes(2)
    env.emu.clear_requests()
    env.submit(job("team-b", "hog", budget="team-b", min_runtime="1h", gpus=8))
    env.submit(job("team-a", "typo", budget="nope", min_runtime="1h"))
    r = env.reconciler(interval_s=0.05)
    r.run_pass()
    env.advance(7200)
    env.submit(job("team-a", "a1", budget="team-a", min_runtime="1h", gpus=8))
    env.submit(job("team-a", "a2", budget="team-a", min_runtime="1h", gpus=8))
    r.run_pass()
    env.emu.set_node_condition("n1", "GPUUnhealthy", "True")
    env.advance(4000)
    r.run_pass()
    env.advance(60)
    r.run_pass()
    env.emu.add_node("n2", gpus=8, labels={"allot.dev/cluster": "gpu"})
    env.advance(60)
    assert r.run_pass().result.admitted  # a Job that ran before: re-pinned via jobs/status
    thread = threading.Thread(target=r.run, daemon=True)
    thread.start()
    time.sleep(0.5)
    r.stop()
    thread.join(timeout=5)
    granted = rules()
    # the test's own setup goes around HTTP: every logged request is the reconciler's
    ours = {request_rule(q.method, q.path, q.params) for q in env.emu.requests
            if q.path.startswith(("/api/", "/apis/"))}
    denied = sorted(s for s in ours if not allowed(s, granted))
    assert denied == []
    used = {(s[1], s[2], s[3]) for s in ours}
    for needed in (("batch", "jobs", "patch"), ("batch", "jobs/status", "patch"),
                   ("batch", "jobs", "watch"), ("", "nodes", "patch"), ("", "events", "create"),
                   ("coordination.k8s.io", "leases", "update"), ("", "configmaps", "update")):
        assert needed in used


def readme_example_job() -> dict:
    text = (DEPLOY.parent / "README.md").read_text()
    section = text[text.index("## Job contract labels"):]
    block = section[section.index("```yaml") + len("```yaml"):]
    return yaml.safe_load(block[:block.index("```")])


def test_readme_example_job_is_a_valid_job_with_a_valid_contract():
    from engine.k8s.observe import observe
    from engine.loader import load_config

    example = readme_example_job()
    kubernetes_validate.validate(example, VERSIONS[-1], strict=True)
    assert example["spec"]["suspend"] is True
    config = load_config()  # the repository's own budgets and policies
    obs = observe([example], [], [], config)
    (workload,) = obs.snapshot.pending
    c = workload.contract
    assert workload.invalid is None
    assert (c.budget, c.min_runtime_s, c.gpus_per_pod, c.pods) == ("vision", 7200.0, 8, 2)
    grace = example["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == config.policy.preemption_grace_s
