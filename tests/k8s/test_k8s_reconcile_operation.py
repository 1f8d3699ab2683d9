"""Operating the reconciler: the ``allot reconcile`` command, Prometheus metrics and health
endpoints, the ledger ConfigMap, and the export of demand as a simulator trace."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from engine.cli import main
from engine.core.ledger import Ledger
from engine.k8s import marks
from engine.k8s.export import build_trace
from engine.k8s.ledger_store import LedgerState, charge
from engine.k8s.metrics import Health, Metrics, serve
from engine.k8s.observe import Occupancy
from engine.sim.trace import read_trace_file
from tests.k8s.reconcile_support import POLICY_NS, T0, Env, job


@pytest.fixture
def env(kube_emulator, kube_client, tmp_path):
    return Env(kube_emulator, kube_client, tmp_path / "policy")


# ------------------------------------------------------------------------------ command


def test_reconcile_once_with_a_kubeconfig(env, kube_kubeconfig, capsys):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m", gpus=2))
    code = main(["reconcile", "--kubeconfig", str(kube_kubeconfig), "--once",
                 "--policy-repo", str(env.policy_root), "--namespace", POLICY_NS,
                 "--log-format", "text"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["admitted"] == ["team-a/dbg"] and out["dry_run"] is False
    assert env.state("team-a", "dbg") == "running"
    # --once gives the Lease back so the regular leader is not held up
    assert env.emu.get("leases", POLICY_NS, "allot-reconciler")["spec"]["holderIdentity"] == ""


def test_reconcile_once_dry_run_plans_without_writing(env, kube_kubeconfig, capsys):
    env.nodes(1)
    env.submit(job("team-a", "dbg", budget="team-a", min_runtime="10m"))
    env.emu.clear_requests()
    code = main(["reconcile", "--kubeconfig", str(kube_kubeconfig), "--once", "--dry-run",
                 "--policy-repo", str(env.policy_root), "--namespace", POLICY_NS])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dry_run"] is True and out["planned"][0].startswith("admit team-a/dbg")
    assert {r.method for r in env.emu.requests} == {"GET"}


def test_reconcile_once_without_a_valid_policy_fails_cleanly(env, kube_kubeconfig, tmp_path,
                                                            capsys):
    broken = tmp_path / "broken"
    (broken / "budgets").mkdir(parents=True)
    (broken / "policies").mkdir()
    code = main(["reconcile", "--kubeconfig", str(kube_kubeconfig), "--once",
                 "--policy-repo", str(broken), "--namespace", POLICY_NS])
    assert code == 1
    assert "invalid" in capsys.readouterr().err


def test_reconcile_once_says_why_it_did_not_lead(env, kube_kubeconfig, tmp_path, capsys):
    """A pass not run for want of the Lease says whether another instance holds it or the
    API could not be reached, not one word for both."""
    now = marks.format_micro_time(T0)
    env.emu.create({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "allot-reconciler", "namespace": POLICY_NS},
        "spec": {"holderIdentity": "allot-other-pod", "leaseDurationSeconds": 3600,
                 "acquireTime": now, "renewTime": marks.format_micro_time(T0 + 10 ** 9)}})
    args = ["reconcile", "--once", "--policy-repo", str(env.policy_root), "--namespace", POLICY_NS]
    assert main([*args, "--kubeconfig", str(kube_kubeconfig)]) == 1
    assert (f"allot reconcile: pass not run: not the leader: the Lease {POLICY_NS}/allot-reconciler "
            f"is held by allot-other-pod") in capsys.readouterr().err.splitlines()
    text = kube_kubeconfig.read_text()
    server = next(line.split("server:", 1)[1].strip() for line in text.splitlines() if "server:" in line)
    away = tmp_path / "away"  # (nothing listens on port 1)
    away.write_text(text.replace(server, "http://127.0.0.1:1"))
    assert main([*args, "--kubeconfig", str(away)]) == 1
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("allot reconcile:")]
    assert len(said) == 1 and said[0].startswith(
        f"allot reconcile: pass not run: cannot read or write the Lease {POLICY_NS}/allot-reconciler: "), said


def test_reconcile_with_an_unreadable_kubeconfig_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    assert main(["reconcile", "--kubeconfig", str(bad), "--once"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"allot reconcile: cannot load Kubernetes configuration from --kubeconfig {bad}: ")
    assert err.rstrip().endswith("; pass --kubeconfig PATH, or run it in the cluster (deploy/)")
    assert main(["reconcile", "--kubeconfig", str(tmp_path / "none"), "--once"]) == 1
    assert capsys.readouterr().err == f"allot reconcile: --kubeconfig {tmp_path / 'none'}: no such file\n"
    assert main(["reconcile", "--once", "--policy-repo", " "]) == 1  # (not the embedded policy, quietly)
    assert capsys.readouterr().err.startswith("allot reconcile: --policy-repo is empty; give a git URL or a path")


def test_reconcile_with_no_configuration_at_all_says_where_it_looked(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["reconcile", "--once"]) == 1
    err = capsys.readouterr().err
    assert "(not in a cluster, and $KUBECONFIG or ~/.kube/config gave none)" in err
    assert "pass --kubeconfig PATH" in err


# ------------------------------------------------------------------------------ metrics


def test_metrics_after_a_pass(env):
    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="10m", gpus=8))
    env.submit(job("team-b", "b", budget="team-b", min_runtime="10m", gpus=8))
    r = env.reconciler()
    r.run_pass()
    env.advance(300)
    r.run_pass()
    m = r.metrics
    assert m.get("allot_queue_length") == 1 and m.get("allot_running_workloads") == 1
    assert m.get("allot_running_gpus") == 8 and m.get("allot_admissions_total") == 1
    # both leaves are unused at first, so either Job may win the tie: find the admitted one
    leaf = "team-a" if env.state("team-a", "a") == "running" else "team-b"
    assert m.get("allot_leaf_usage_gpu_seconds", leaf=leaf) == pytest.approx(8 * 300)
    assert m.get("allot_leaf_share", leaf="team-a") == pytest.approx(0.5)
    assert m.get("allot_leaf_rank", leaf=leaf) == 2.0  # it used GPUs, the other did not
    assert m.get("allot_ledger_charged_gpu_seconds_total") == pytest.approx(2400)
    # the other Job waits: its leaf ranks first, but the running Job is protected for 10
    # minutes, and a debug Job (8 GPUs, 10 minutes) gets no reservation: no room even with
    # every victim it may take now; its 8 GPUs under its budget and that cause, nothing else
    other = "team-b" if leaf == "team-a" else "team-a"
    assert m.get("allot_waiting_gpus", leaf=other, cause="no-room") == 8.0
    assert f'allot_waiting_gpus{{cause="no-room",leaf="{other}"}} 8' in m.render()
    assert m.render().count("allot_waiting_gpus{") == 1
    text = m.render()
    assert "# TYPE allot_loop_duration_seconds summary" in text
    assert "allot_loop_duration_seconds_count 2" in text
    assert f'allot_config_info{{revision="{r.policy.commit}"}} 1' in text
    assert "allot_is_leader 1" in text


def test_waiting_gpus_sum_per_budget_and_cause():
    """GPUs of waiting work summed per (cause, budget requested); unfunded work that requests
    none under ``(none)``; work the pass admits (no cause) not counted."""
    from types import SimpleNamespace as NS

    from engine.core.statuses import NO_TEAM
    from engine.k8s.metrics import waiting_gpus

    def w(wid: str, budget: str | None, gpus: int) -> NS:
        return NS(id=wid, contract=NS(requested_budget=budget, gpus=gpus))

    pending = [w("a1", "a", 8), w("a2", "a", 4), w("a3", "a", 2), w("b1", "b", 1), w("f1", None, 2),
               w("go", "a", 16)]
    decision = NS(waiting={"a1": "kept-off", "a2": "kept-off", "a3": "holding", "b1": "kept-off",
                           "f1": "free-work"})
    assert waiting_gpus(pending, decision) == {
        (("cause", "kept-off"), ("leaf", "a")): 12.0, (("cause", "holding"), ("leaf", "a")): 2.0,
        (("cause", "kept-off"), ("leaf", "b")): 1.0, (("cause", "free-work"), ("leaf", NO_TEAM)): 2.0}


def test_counters_are_zero_before_their_first_event():
    # an alert on rate(allot_pass_errors_total[5m]) must see 0, not "no data", until one happens
    from engine.k8s.metrics import FAMILIES, Metrics

    text = Metrics().render().splitlines()
    for name in ("allot_pass_errors_total", "allot_policy_invalid_total", "allot_admissions_total",
                 "allot_api_retries_total", "allot_uncordons_total"):
        assert f"{name} 0" in text
    assert 'allot_preemptions_total{cause="contention"} 0' in text
    assert 'allot_preemptions_total{cause="drain"} 0' in text
    assert not any(line.startswith("allot_api_errors_total") for line in text)  # (by status: none yet)
    assert all(f"{n} 0" in text for n, (kind, _) in FAMILIES.items()
               if kind == "counter" and n not in ("allot_preemptions_total", "allot_api_errors_total"))


def test_metrics_and_health_endpoints_over_http():
    metrics, health = Metrics(), Health(stall_s=60)
    metrics.set("allot_leaf_rank_metric", float("inf"), leaf='we"ird')
    metrics.inc("allot_preemptions_total", 2, cause="drain")
    server = serve(metrics, health, 0, host="127.0.0.1")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        body = urllib.request.urlopen(base + "/metrics").read().decode()
        assert 'allot_leaf_rank_metric{leaf="we\\"ird"} +Inf' in body
        assert 'allot_preemptions_total{cause="drain"} 2' in body
        assert "# HELP allot_queue_length" in body
        assert urllib.request.urlopen(base + "/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/readyz")
        assert err.value.code == 503
        health.ready = True
        assert urllib.request.urlopen(base + "/readyz").status == 200
        health.stall_s = 0
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "/healthz")
    finally:
        server.shutdown()


# ------------------------------------------------------------------------------ ledger


def test_charge_rule_is_exact_and_idempotent_per_instant():
    state = LedgerState(Ledger(["a", "b"], 7 * 86400), T0, T0, None)
    occ = [Occupancy("x", "a", T0 - 500, None, 8, 1.0),        # running since before: from T0
           Occupancy("y", "b", T0 + 100, T0 + 160, 2, 1.5),    # a whole run in between
           Occupancy("z", "a", T0 - 900, T0 - 10, 8, 1.0),     # charged before: nothing
           Occupancy("f", None, T0, None, 8, 1.0)]             # unallocated: never
    assert charge(state, occ, T0 + 600) == pytest.approx(8 * 600 + 2 * 60 * 1.5)
    assert charge(state, occ, T0 + 600) == 0.0  # the same instant again charges nothing
    assert state.ledger.usage(T0 + 600) == {"a": pytest.approx(4800), "b": pytest.approx(180)}


def test_ledger_survives_in_the_configmap(env):
    r = env.charged(900)
    cm = env.emu.get("configmaps", POLICY_NS, "allot-ledger")
    assert cm["data"]["charged-until"] == marks.format_time(T0 + 900)
    assert cm["data"]["config"] == r.policy.commit
    fresh = env.reconciler("r1")
    state = fresh.store.load(fresh.policy.poll() and fresh.policy.config)
    assert state.charged_until == T0 + 900
    assert state.ledger.usage(T0 + 900)["team-a"] == pytest.approx(4 * 900)


def test_a_conflicting_ledger_write_by_another_leader_is_not_overwritten(env):
    env.nodes(1)
    env.submit(job("team-a", "a", budget="team-a", min_runtime="10m", gpus=4))
    r = env.reconciler()
    r.run_pass()
    config = r.policy.config
    mine = r.store.load(config)
    theirs = r.store.load(config)
    env.advance(60)
    charge(theirs, [Occupancy("x", "team-a", T0, None, 4, 1.0)], T0 + 60)
    assert r.store.save(theirs, config, T0 + 60)
    charge(mine, [Occupancy("x", "team-a", T0, None, 4, 1.0)], T0 + 60)
    assert r.store.save(mine, config, T0 + 60) is False  # dropped, not double-counted
    assert env.ledger_usage()["team-a"] == pytest.approx(240)
    # a spurious 409 (nobody else charged) is simply retried
    again = r.store.load(config)
    env.emu.fail_next("PUT", r"/configmaps/allot-ledger$", 409, times=1)
    charge(again, [Occupancy("x", "team-a", T0, None, 4, 1.0)], T0 + 120)
    assert r.store.save(again, config, T0 + 120)
    assert env.ledger_usage()["team-a"] == pytest.approx(480)


# ------------------------------------------------------------------------------ export


def test_export_writes_recent_submissions_as_a_simulator_trace(env, tmp_path):
    env.nodes(1)
    env.submit(job("team-a", "done", budget="team-a", min_runtime="10m", gpus=2,
                   annotations={marks.SUBMITTER: "user:alice"}))
    env.advance(60)
    env.submit(job("team-b", "waits", budget="team-b", min_runtime="2h", gpus=8, pods=2))
    env.submit(job("team-b", "typo", budget="nope", min_runtime="1h"))
    path = tmp_path / "demand.jsonl"
    r = env.reconciler(export_path=str(path))
    r.run_pass()
    env.advance(1200)
    env.emu.complete_job("team-a", "done")
    env.advance(5)
    report = r.run_pass()
    trace = read_trace_file(path)
    by = {t.id: t for t in trace.tasks}
    assert set(by) == {"team-a/done", "team-b/waits"}  # the refused contract never ran
    done, waits = by["team-a/done"], by["team-b/waits"]
    assert (done.submit, done.owner, done.leaf, done.gpus_per_pod, done.pods) == \
        (0.0, "alice", "team-a", 2, 1)
    assert done.runtime == pytest.approx(1200, abs=1) and done.min_runtime == 600
    assert (waits.submit, waits.pods, waits.gpus_per_pod, waits.owner) == (60.0, 2, 8, "team-b")
    assert waits.runtime == 7200  # not run yet: its min runtime as a lower bound
    export = build_trace(report.observation, T0 + 1265, 7 * 86400)
    assert export.censored == 1 and export.start_epoch == T0
    assert build_trace(report.observation, T0 + 1265, 100).trace.tasks == ()


def test_usage_when_the_policy_lengthens_the_lookback_beyond_the_history():
    from engine.k8s.ledger_store import usage

    ledger = Ledger(["a"], lookback_s=3600, bucket_s=300)
    state = LedgerState(ledger, None, None, None)
    charge(state, [Occupancy("x", "a", T0, None, 1, 1.0)], T0 + 5 * 3600)
    assert usage(state, T0 + 5 * 3600, 3600) == {"a": pytest.approx(3600)}  # folds old buckets
    # a 7-day lookback now: only the history still kept counts, no crash
    longer = usage(state, T0 + 5 * 3600, 7 * 86400)
    assert 3600 <= longer["a"] <= 5 * 3600
    assert ledger.lookback_s == 7 * 86400
