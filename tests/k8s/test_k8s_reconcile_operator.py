"""What an operator sees when running ``allot reconcile``: the API server's own words in errors,
metrics that follow an outage, a readable text log, and the Job's status saying why it runs
unallocated."""

from __future__ import annotations

import pytest

from engine.cli import main
from tests.k8s.reconcile_support import POLICY_NS, Env, job


@pytest.fixture
def env(kube_emulator, kube_client, tmp_path):
    return Env(kube_emulator, kube_client, tmp_path / "policy")


FORBIDDEN = ('jobs.batch is forbidden: User "system:serviceaccount:allot-system:allot-reconciler" '
             'cannot list resource "jobs" in API group "batch" at the cluster scope')


def test_api_errors_carry_the_api_servers_message(env, kube_kubeconfig, capsys):
    """A refused call says what the API server said (which namespace is missing, which
    permission the service account lacks), not only the HTTP reason phrase."""
    env.nodes(1)
    env.emu.fail_next("GET", r"/apis/batch/v1/jobs$", 403, times=1, body={
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": FORBIDDEN, "reason": "Forbidden", "code": 403})
    report = env.reconciler().run_pass()
    assert report.error == f"403: list jobs: {FORBIDDEN}"
    args = ["reconcile", "--kubeconfig", str(kube_kubeconfig), "--once",
            "--policy-repo", str(env.policy_root), "--namespace", "allot-elsewhere"]
    assert main(args) == 1
    said = [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("allot reconcile:")]
    assert said == ["allot reconcile: pass not run: cannot read or write the Lease "
                    "allot-elsewhere/allot-reconciler: 404: create leases in allot-elsewhere: "
                    'namespaces "allot-elsewhere" not found'], said


def test_api_error_metrics_follow_an_outage_while_it_lasts(env):
    """``allot_api_errors_total`` and ``allot_api_retries_total`` count the failures of a pass
    that could not read the cluster: an alert on them fires during the outage, not after."""
    env.nodes(1)
    r = env.reconciler()
    assert r.run_pass().acted
    env.emu.fail_next("GET", r"/apis/batch/v1/jobs$", 503, times=20)
    report = r.run_pass()
    assert not report.acted and "503" in (report.error or "")
    text = r.metrics.render()
    assert 'allot_api_errors_total{status="503"} 5' in text, text
    assert "allot_api_retries_total 4" in text


def test_a_job_admitted_unallocated_says_why_at_once(env):
    """README: a Job whose submitter is not a principal of the budget it names runs unallocated
    "and its status says why": the Admitted Event and the reason annotation written with the
    admission say it, not only an explanation refreshed a minute later."""
    from engine.k8s import marks
    from tests.k8s.reconcile_support import ann, events_for

    env.nodes(1)
    env.submit(job("team-b", "stray", budget="team-a", min_runtime="1h", gpus=1))
    assert env.reconciler().run_pass().result.admitted == ["team-b/stray"]
    why = ("runs unallocated: namespace:team-b may not charge budget 'team-a' "
           "(its principals: namespace:team-a)")
    assert why in ann(env.job("team-b", "stray"))[marks.REASON]
    (event,) = events_for(env.emu, "stray", "Admitted")
    assert why in event["message"], event["message"]


def test_the_text_log_format_keeps_what_a_pass_did(env, kube_kubeconfig, capsys):
    """``--log-format text`` is for humans: its ``pass`` line still says what was admitted
    (the JSON format's fields), not the bare word ``pass``."""
    import logging

    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m", gpus=2))
    try:
        assert main(["reconcile", "--kubeconfig", str(kube_kubeconfig), "--once",
                     "--policy-repo", str(env.policy_root), "--namespace", POLICY_NS,
                     "--log-format", "text"]) == 0
    finally:
        logging.getLogger("allot").handlers[:] = []
    (line,) = [x for x in capsys.readouterr().err.splitlines() if " allot.k8s.loop: pass" in x]
    assert 'admitted=["team-a/dbg"]' in line and "pending=0" in line, line


def test_a_node_is_not_drained_while_an_evicted_jobs_pods_still_terminate(tmp_path):
    """An evicted (suspended) Job's pods keep their GPUs through the grace period (SIGTERM, the
    checkpoint, the kill): the node is not empty, so it is not labelled drained for repair
    automation to take, and those GPUs are not offered to other work, until the pods are gone."""
    from engine.core.decide import decide
    from engine.core.types import MarkDrained
    from engine.k8s import marks
    from engine.k8s.observe import observe
    from engine.loader import load_config
    from tests.k8s.reconcile_support import node, write_policy

    config = load_config(write_policy(tmp_path / "policy"))
    evicted = job("team-a", "ckpt", budget="team-a", min_runtime="1h", gpus=8)
    evicted["metadata"]["annotations"].update({marks.STATE: "preempted"})
    pod = {"metadata": {"name": "ckpt-0", "namespace": "team-a",
                        "deletionTimestamp": "2025-06-15T12:00:00Z",
                        "labels": {"batch.kubernetes.io/job-name": "ckpt"}},
           "spec": {"nodeName": "n1", "containers": [
               {"resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
           "status": {"phase": "Running"}}
    sick = node("n1", 8, conditions={"GPUUnhealthy": "True"}, unschedulable=True)
    now = 1_750_000_000.0
    terminating = observe([evicted], [pod], [sick], config, now).snapshot
    assert terminating.nodes[0].foreign == 8
    assert not [a for a in decide(terminating, config, now).actions if isinstance(a, MarkDrained)]
    gone = observe([evicted], [], [sick], config, now).snapshot
    assert [a.node for a in decide(gone, config, now).actions
            if isinstance(a, MarkDrained)] == ["n1"]


def test_watch_namespace_still_sees_other_namespaces_pods_on_its_nodes(env):
    """``--watch-namespace`` limits the Jobs managed, not the pods read: another namespace's
    pods on the same nodes are other tenants' GPUs, never offered to a managed Job."""
    env.nodes(1)
    env.submit(job("infra", "other", contract=False, suspend=False, gpus=8))
    assert [p["spec"].get("nodeName") for p in env.emu.job_pods("infra", "other")] == ["n0"]
    env.submit(job("team-a", "a", budget="team-a", min_runtime="1h", gpus=8))
    report = env.reconciler(watch_namespace="team-a").run_pass()
    assert report.acted and report.result.admitted == []
    assert report.observation.snapshot.nodes[0].foreign == 8


@pytest.mark.parametrize("value", ["0", "0s", "0.4"])
def test_a_lease_duration_no_api_server_accepts_is_refused_up_front(value, capsys):
    """The Lease holds whole seconds and the API server refuses ``leaseDurationSeconds: 0``: a
    reconciler started so could never lead; it is refused before anything runs."""
    with pytest.raises(SystemExit) as exit_:
        main(["reconcile", "--once", "--lease-duration", value])
    assert exit_.value.code == 2
    assert f"argument --lease-duration: must be at least 1s, got '{value}'" in capsys.readouterr().err


def test_a_dry_run_logs_the_patch_it_would_send(env, kube_kubeconfig, capsys):
    """``--dry-run`` logs what would be done: each ``would admit`` record carries the patch
    (in the JSON log's fields), not only the Job's name."""
    import json
    import logging

    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m", gpus=2))
    try:
        assert main(["reconcile", "--kubeconfig", str(kube_kubeconfig), "--once", "--dry-run",
                     "--policy-repo", str(env.policy_root), "--namespace", POLICY_NS]) == 0
    finally:
        logging.getLogger("allot").handlers[:] = []
    records = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    (would,) = [r for r in records if r["msg"] == "dry-run: would admit team-a/dbg"]
    assert would["patch"]["spec"]["suspend"] is False


@pytest.mark.parametrize("flag", ["--interval", "--policy-interval"])
@pytest.mark.parametrize("value", ["0", "0s"])
def test_a_period_of_zero_is_refused_rather_than_read_as_the_default(capsys, flag, value):
    with pytest.raises(SystemExit) as exc:
        main(["reconcile", "--once", flag, value])
    assert exc.value.code == 2
    assert f"argument {flag}: must be above 0, got '{value}'" in capsys.readouterr().err


def test_any_period_above_zero_and_a_lease_of_a_whole_second_are_accepted():
    """The bounds are 0 (excluded) for a period and 1 s (included) for the Lease: a fast
    loop of half a second, and the shortest Lease the API server takes, are valid."""
    from engine.commands.reconcile import lease_arg, period_arg

    assert period_arg("0.5") == 0.5 and period_arg("1") == 1.0 and period_arg("2m") == 120.0
    assert lease_arg("1") == 1.0 and lease_arg("1s") == 1.0
