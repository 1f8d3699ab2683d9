"""The live path: the reconciler (on the Kubernetes API emulator) feeds a LiveRecorder after each
pass, its metrics port serves the dashboard and ``/api/state``, and ``allot explain/queue --url``
read it and see the pass's own decision."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest

from engine.cli import main
from engine.k8s.metrics import Health, Metrics, serve
from engine.views.live import LiveRecorder
from tests.k8s.reconcile_support import Env, T0, job


def test_reconciler_serves_the_dashboard_and_the_cli_explains_its_decision(
        kube_emulator, kube_client, tmp_path, capsys):
    env = Env(kube_emulator, kube_client, tmp_path / "policy")
    env.nodes(1)
    env.submit(job("team-b", "big", budget="team-b", min_runtime="1h", gpus=8))
    rec = LiveRecorder()
    r = env.reconciler()
    r.listeners.append(rec.record)
    assert r.run_pass().result.admitted == ["team-b/big"]
    env.advance(600)
    env.submit(job("team-a", "waits", budget="team-a", min_runtime="1h", gpus=8))
    report = r.run_pass()
    state = rec.state()
    assert state is not None and state.source == "live" and state.now == T0 + 600
    # the recorded state reproduces the pass's decision exactly
    assert dict(state.decision.statuses) == dict(report.decision.statuses)
    assert state.decision.statuses["team-a/waits"].state == "pending"
    assert [x.workload for x in state.runs] == ["team-b/big"] and state.runs[0].end is None

    server = serve(Metrics(), Health(), 0, host="127.0.0.1", app=rec.app)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(url + "/") as resp:
            assert b"Allot dashboard" in resp.read()
        with urllib.request.urlopen(url + "/api/state") as resp:
            doc = json.loads(resp.read())
        assert doc["source"] == "live" and [q["id"] for q in doc["views"]["queue"]] == ["team-a/waits"]
        with urllib.request.urlopen(url + "/healthz") as resp:
            assert resp.status == 200  # the reconciler's own endpoints still answer
        assert main(["explain", "waits", "--url", url]) == 0
        out = capsys.readouterr().out
        assert out.startswith("team-a/waits: pending")
        assert "It needs 8 GPUs; 0 are free" in out and "0 GPUs run lower-ranked" in out
        assert "8 more are protected (the first become preemptible" in out
        # a live cluster's times read as RFC 3339, not as epoch seconds
        from engine.k8s.marks import format_kube_time
        assert f"preemptible {format_kube_time(T0 + 3600)} (in 50m)" in out
        assert "t=17" not in out
        assert main(["queue", "--url", url]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"Queue at {format_kube_time(T0 + 600)}: 1 waiting.") and "t=17" not in out
        assert main(["eta", "waits", "--url", url, "--horizon", "4h"]) == 0
        out = capsys.readouterr().out
        assert "waits: forecast start 2025-" in out and "t=17" not in out
        assert main(["queue", "--url", url, "--format", "json"]) == 0
        queue = json.loads(capsys.readouterr().out)["queue"]
        assert queue[0]["id"] == "team-a/waits" and queue[0]["rank"] == 1
        assert main(["eta", "waits", "--url", url, "--format", "json", "--horizon", "4h"]) == 0
        fc = json.loads(capsys.readouterr().out)
        # team-b/big has no declared end: it runs until team-a (ranked first) may preempt it,
        # when its min runtime ends (T0 + 1 h), at the next resync pass (every 60 s after the
        # last pass, as the reconciler runs them; the forecast's first pass is at its "now")
        now = fc["now"]
        assert fc["forecast"][0]["start"] == pytest.approx(now + math.ceil((T0 + 3600 - now) / 60 - 1e-9) * 60)
        assert any("run until preempted" in a for a in fc["assumptions"])
    finally:
        server.shutdown()


def test_a_rejected_job_reads_as_refused_not_as_free_work(kube_emulator, kube_client, tmp_path, capsys):
    env = Env(kube_emulator, kube_client, tmp_path / "policy")
    env.nodes(1)
    env.submit(job("team-a", "bad", budget="team-a", min_runtime="9h", gpus=1))  # above the 8 h cap
    rec = LiveRecorder()
    r = env.reconciler()
    r.listeners.append(rec.record)
    assert r.run_pass().result.rejected == ["team-a/bad"]
    server = serve(Metrics(), Health(), 0, host="127.0.0.1", app=rec.app)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert main(["explain", "bad", "--url", url]) == 0
        out = capsys.readouterr().out
        assert "refused, never admitted as it is:" in out and "9h is above the policy cap" in out
        assert "unallocated (free" not in out
        assert main(["queue", "--url", url]) == 0
        row = next(line for line in capsys.readouterr().out.splitlines() if "team-a/bad" in line)
        assert "(refused)" in row and "(free)" not in row
    finally:
        server.shutdown()


def test_a_job_refused_for_a_bad_label_shows_why_and_no_invented_contract(
        kube_emulator, kube_client, tmp_path, capsys):
    # its contract was refused, so it has none: explain and queue said "priority 0", "min
    # runtime 0" and "resumable" (the placeholder it is queued with) as if they were its terms
    env = Env(kube_emulator, kube_client, tmp_path / "policy")
    env.nodes(1)
    env.submit(job("team-a", "banana", budget="team-a", min_runtime="banana", gpus=1))
    env.submit(job("team-a", "prio", budget="team-a", min_runtime="1h", gpus=1,
                   labels={"allot.dev/priority": "high"}))
    rec = LiveRecorder()
    r = env.reconciler()
    r.listeners.append(rec.record)
    assert r.run_pass().result.rejected == ["team-a/banana", "team-a/prio"]
    # nor do they count as demand (of anyone: the placeholder's GPUs are nobody's ask)
    assert rec.state() is not None and rec.state().demand == []
    server = serve(Metrics(), Health(), 0, host="127.0.0.1", app=rec.app)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for name, why in (("banana", "allot.dev/min-runtime: cannot read duration 'banana'"),
                          ("prio", "allot.dev/priority: 'high' is not a whole number")):
            assert main(["explain", name, "--url", url]) == 0
            out = capsys.readouterr().out
            assert out.startswith(f"team-a/{name}: rejected")
            contract = next(line for line in out.splitlines() if "Contract:" in line)
            assert f"refused, never admitted as it is: {why}" in contract
            assert "no contract in force" in contract
            assert "priority 0" not in contract and "1 GPU" not in contract
            assert "resumable," not in contract and "min runtime of" not in contract
            assert main(["explain", name, "--url", url, "--format", "json"]) == 0
            statements = json.loads(capsys.readouterr().out)["statements"]
            numbers = next(s["numbers"] for s in statements if s["topic"] == "contract")
            assert numbers["priority"] is None and numbers["min_runtime_s"] is None
            assert numbers["gpus"] is None and numbers["leaf"] is None
        assert main(["queue", "--url", url]) == 0
        lines = capsys.readouterr().out.splitlines()
        head = next(line for line in lines if line.startswith("POS"))
        for name in ("banana", "prio"):
            row = next(line for line in lines if f"team-a/{name}" in line)
            cells = dict(zip(head.split(), row.split()))
            assert cells["BUDGET"] == "(refused)" and cells["STATE"] == "rejected"
            assert cells["PRIO"] == cells["GPUS"] == cells["MIN-RT"] == "-", row
        assert main(["queue", "--url", url, "--format", "json"]) == 0
        for row in json.loads(capsys.readouterr().out)["queue"]:
            assert row["state"] == "rejected" and "allot.dev/" in row["reason"]
            assert [row[k] for k in ("priority", "gpus", "shape", "min_runtime_s", "resumable")] \
                == [None] * 5
    finally:
        server.shutdown()


def test_demand_is_every_job_with_a_contract_in_force_and_no_refused_one(kube_emulator, kube_client,
                                                                         tmp_path):
    """The live demand records each Job whose contract was read, funded (its budget's leaf) or
    free (leaf None), with the GPUs it asks; a Job whose contract was refused (min-runtime
    'banana') asks for nothing and is not recorded, though the pass sees it beside them."""
    env = Env(kube_emulator, kube_client, tmp_path / "policy")
    env.nodes(1)
    env.submit(job("team-a", "banana", budget="team-a", min_runtime="banana", gpus=1))
    env.submit(job("team-a", "funded", budget="team-a", min_runtime="1h", gpus=2))
    env.submit(job("team-b", "free", gpus=3))  # (no budget label: unallocated work)
    rec = LiveRecorder()
    r = env.reconciler()
    r.listeners.append(rec.record)
    result = r.run_pass().result
    assert result.rejected == ["team-a/banana"] and result.admitted == ["team-a/funded", "team-b/free"]
    state = rec.state()
    assert state is not None
    assert sorted((d.workload, d.leaf, d.start, d.end, d.gpus) for d in state.demand) == [
        ("team-a/funded", "team-a", T0, None, 2), ("team-b/free", None, T0, None, 3)]
