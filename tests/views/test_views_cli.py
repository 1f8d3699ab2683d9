"""The view commands as a user runs them, on a saved simulation state (``--state``; ``--sim``
and ``--url`` build the same state): text for people, ``--format json`` for bots, user errors
as ``file:line:col: message`` with exit status 1."""

from __future__ import annotations

import json

import pytest

from engine.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_queue_lists_waiting_work_in_order_with_its_metric(capsys, state_file, sim_state):
    code, out, _ = _run(capsys, "queue", "--state", str(state_file))
    assert code == 0
    assert "Order: budget rank" in out and "METRIC" in out
    first = min(sim_state.snapshot.pending, key=lambda w: sim_state.decision.statuses[w.id].queue_position or 1e9)
    assert out.splitlines()[2].split()[1] == first.id
    code, out, _ = _run(capsys, "queue", "--state", str(state_file), "--format", "json", "--cluster", "b200")
    doc = json.loads(out)
    assert code == 0 and doc["cluster"] == "b200"
    assert all(r["cluster"] in (None, "b200") for r in doc["queue"])


def test_queue_refuses_unknown_team_and_cluster(capsys, state_file):
    code, _, err = _run(capsys, "queue", "--state", str(state_file), "--team", "nope", "--cluster", "x")
    assert code == 1
    assert "--team: no budget node 'nope'" in err and "no cluster 'x'" in err


def test_explain_prints_statements_and_json_carries_their_numbers(capsys, state_file, sim_state):
    wid = [w.id for w in sim_state.snapshot.pending if sim_state.decision.statuses[w.id].state == "pending"][-1]
    code, out, _ = _run(capsys, "explain", wid, "--state", str(state_file))
    assert code == 0 and out.startswith(f"{wid}: pending")
    st = sim_state.decision.statuses[wid]
    assert f"ranks {st.rank} of {len(sim_state.decision.ranks)}" in out
    code, out, _ = _run(capsys, "explain", wid, "--state", str(state_file), "--format", "json")
    doc = json.loads(out)
    rank = next(s for s in doc["statements"] if s["topic"] == "rank")
    assert rank["numbers"]["rank"] == st.rank
    code, _, err = _run(capsys, "explain", "no-such-job", "--state", str(state_file))
    assert code == 1 and err.startswith("JOB: no workload 'no-such-job'; see `allot queue` for the ids")
    many = sim_state.find("0")  # every id ending in 0
    assert len(many) > 8
    code, _, err = _run(capsys, "eta", "0", "--state", str(state_file))
    first = err.splitlines()[0]
    assert code == 1 and first.startswith(f"JOB: '0' matches {len(many)} workloads: {many[0]}, ")
    assert ", ...; see `allot queue` for the ids" in first  # 8 of them shown


def test_eta_forecasts_with_assumptions(capsys, state_file, sim_state):
    d = sim_state.decision
    wid = min((w for w in sim_state.snapshot.pending if d.statuses[w.id].state == "pending"),
              key=lambda w: d.statuses[w.id].queue_position).id
    code, out, _ = _run(capsys, "eta", wid, "--state", str(state_file), "--horizon", "12h")
    assert code == 0
    assert f"{wid}: forecast start" in out or "not started within" in out
    assert "Assumptions:" in out and "no new submissions" in out
    code, out, _ = _run(capsys, "eta", wid, "--state", str(state_file), "--format", "json", "--horizon", "12h")
    doc = json.loads(out)
    f = doc["forecast"][0]
    assert f["workload"] == wid and (f["start"] is None or f["start"] >= sim_state.now)


def test_usage_prints_table_burn_and_writes_a_png(capsys, state_file, tmp_path, sim_state):
    png = tmp_path / "usage.png"
    team = sim_state.config.tree.children(sim_state.config.tree.root)[0]
    code, out, _ = _run(capsys, "usage", "--state", str(state_file), "--subtree", team, "--png", str(png))
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Burn: charged now at" in out and "CHG/ALLOC" in out
    # the bins mix units: charged is billing-weighted (a B200 hour counts 1.6), the rest is not
    assert "CHARGED-W is billing-weighted" in out and " CHARGED " not in out
    code, out, _ = _run(capsys, "usage", "--state", str(state_file), "--subtree", team, "--format", "json")
    doc = json.loads(out)
    row = doc["rows"][0]
    assert row["node"] == team
    used = sum(sim_state.snapshot.usage.get(x, 0.0) for x in sim_state.config.tree.leaves()
               if team in sim_state.config.tree.path(x))
    assert row["charged_gpu_h"] * 3600 == pytest.approx(used, rel=1e-12)
    assert doc["burn"]["window_usage_now_gpu_h"] * 3600 == pytest.approx(used, rel=1e-12)
    code, _, err = _run(capsys, "usage", "--state", str(state_file), "--subtree", "nope")
    assert code == 1 and "no budget node 'nope'" in err
    # --png: a name without a suffix gets .png (and says so); another suffix or a directory is refused
    code, out, _ = _run(capsys, "usage", "--state", str(state_file), "--png", str(tmp_path / "sub" / "chart"))
    assert code == 0 and f"chart: {tmp_path / 'sub' / 'chart.png'}" in out
    assert (tmp_path / "sub" / "chart.png").read_bytes()[:4] == b"\x89PNG"
    for bad in (tmp_path / "chart.txt", tmp_path):
        code, _, err = _run(capsys, "usage", "--state", str(state_file), "--png", str(bad))
        assert code == 1 and err.startswith(f"--png: {str(bad)!r} is not a .png file name"), err


def test_a_missing_state_file_or_url_is_a_user_error(capsys, tmp_path):
    code, _, err = _run(capsys, "queue", "--state", str(tmp_path / "none.json"))
    assert code == 1 and err.startswith(f"{tmp_path / 'none.json'}: cannot read the view state: No such file")
    (tmp_path / "cut.json").write_text('{"version": ')
    code, _, err = _run(capsys, "queue", "--state", str(tmp_path / "cut.json"))
    assert code == 1 and err.startswith(f"{tmp_path / 'cut.json'}:1:13: not a view state: not JSON (")
    code, _, err = _run(capsys, "queue", "--url", "http://127.0.0.1:9")
    assert code == 1 and "cannot read the state from http://127.0.0.1:9/api/state" in err


def test_a_simulated_state_shows_its_progress_on_stderr_when_asked(capsys):
    """The embedded default takes tens of seconds: a progress line on stderr (on a TTY, or
    with --progress), ended at 100%; stdout holds only the view; none otherwise."""
    code, out, err = _run(capsys, "queue", "--days", "0.1", "--tasks", "60", "--progress",
                          "--format", "json")
    assert code == 0 and json.loads(out)["queue"] is not None
    assert err.startswith("\rallot: simulating the embedded default (0.1 days, 60 jobs) [")
    assert err.endswith("100.0%\n")
    code, out, err = _run(capsys, "queue", "--days", "0.1", "--tasks", "60", "--format", "json")
    assert code == 0 and err == ""  # (capsys's stderr is no TTY)


def test_the_embedded_default_s_state_is_kept_for_an_identical_later_run(capsys, monkeypatch, tmp_path):
    """A second identical command reads the first one's state back instead of simulating
    again (same output); another seed, --fresh, or a kept file that cannot be read simulate."""
    import os

    from engine.views import simstate

    runs = []
    real = simstate.default_simulation

    def counted(*a, **kw):
        runs.append(kw.get("seed"))
        return real(*a, **kw)

    monkeypatch.setattr(simstate, "default_simulation", counted)
    argv = ("queue", "--days", "0.1", "--tasks", "60", "--format", "json")
    first = _run(capsys, *argv)
    assert first[0] == 0 and runs == [0]
    (kept,) = (tmp_path / "allot-cache").iterdir()
    assert os.environ["ALLOT_CACHE_DIR"] == str(tmp_path / "allot-cache")
    assert _run(capsys, *argv) == first and runs == [0]  # read back, the same view
    assert "identical earlier run" in _run(capsys, *argv, "--progress")[2] and runs == [0]
    assert _run(capsys, *argv, "--seed", "1")[0] == 0 and runs == [0, 1]
    assert _run(capsys, *argv, "--fresh") == first and runs == [0, 1, 0]
    kept.write_text(kept.read_text()[:100])  # cut short: ignored, simulated and kept again
    assert _run(capsys, *argv) == first and runs == [0, 1, 0, 0]
    assert _run(capsys, *argv) == first and runs == [0, 1, 0, 0]
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for part in ("budgets", "policies"):  # the same budgets, one knob changed: another state
        shutil.copytree(repo / part, tmp_path / "cfg" / part)
    policy = tmp_path / "cfg" / "policies" / "scheduling.yaml"
    policy.write_text(policy.read_text().replace("reservations: 8", "reservations: 4"))
    assert _run(capsys, *argv, "--config", str(tmp_path / "cfg"))[0] == 0 and runs == [0, 1, 0, 0, 0]


def test_a_kept_state_is_keyed_by_the_configuration_and_the_code(monkeypatch):
    from dataclasses import replace

    from engine.loader import load_config
    from engine.views import statecache
    from engine.views.codec import config_to_dict

    config = load_config()
    cheaper = replace(config, policy=replace(config.policy, reservations=2))
    inputs = {"days": 2.0, "tasks": 2400, "seed": 0, "at": None}
    key = statecache.state_key({"config": config_to_dict(config), **inputs})
    assert key == statecache.state_key({"config": config_to_dict(load_config()), **inputs})
    assert key != statecache.state_key({"config": config_to_dict(cheaper), **inputs})
    import engine.cache

    monkeypatch.setattr(engine.cache, "_CODE", "another version of the engine")
    assert key != statecache.state_key({"config": config_to_dict(config), **inputs})


def test_at_most_keep_states_are_kept_the_newest(tmp_path, monkeypatch, sim_state):
    import os

    from engine.views import statecache

    monkeypatch.setattr(statecache, "KEEP", 3)
    where = tmp_path / "allot-cache"
    for i in range(5):
        path = statecache.save(statecache.state_key({"i": i}), sim_state)
        os.utime(path, ns=(i * 10**9, i * 10**9))  # written in this order, a second apart
    names = {p.name for p in where.iterdir()}
    assert names == {statecache.state_key({"i": i}) for i in (2, 3, 4)}
    state, path = statecache.load(statecache.state_key({"i": 4}))
    assert state.snapshot == sim_state.snapshot and path == where / statecache.state_key({"i": 4})


def test_without_a_home_directory_no_state_is_kept(monkeypatch, sim_state):
    from pathlib import Path

    from engine.views import statecache

    def homeless():
        raise RuntimeError("Could not determine home directory.")

    for var in ("ALLOT_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(homeless))
    assert statecache.cache_dir() is None
    assert statecache.save("k.json", sim_state) is None and statecache.load("k.json") is None


def test_one_source_of_state_and_no_flag_it_would_ignore(capsys, state_file):
    """Two sources, or a flag that shapes a simulation given with a saved or live state (or
    the embedded default's size given with a trace), are refused: ignored, ``--days 7`` would
    read as if the view were of a week's simulation."""
    code, _, err = _run(capsys, "queue", "--state", str(state_file), "--url", "http://127.0.0.1:9")
    assert code == 1 and err.startswith("--url and --state: give one source of the state, not several")
    code, _, err = _run(capsys, "queue", "--state", str(state_file), "--days", "7", "--at", "1h")
    assert code == 1 and err.splitlines()[:2] == [
        "--at: does not apply to --state: it shapes a simulated state; drop it",
        "--days: does not apply to --state: it shapes a simulated state; drop it"]
    code, _, err = _run(capsys, "queue", "--trace", "philly", "--tasks", "5")
    assert code == 1 and err.startswith("--tasks: does not apply to --trace philly")


def test_queue_full_is_refused_where_it_would_be_ignored(capsys, state_file):
    """``--full`` prints the whole state as JSON: without --format json, or with --team or
    --cluster (which it does not filter by), it was silently ignored; now refused, before any
    state is read."""
    code, out, err = _run(capsys, "queue", "--state", str(state_file), "--full")
    assert code == 1 and out == ""
    assert err.startswith("--full: prints the whole view state as JSON: it needs --format json")
    code, out, err = _run(capsys, "queue", "--state", str(state_file), "--format", "json", "--full",
                          "--team", "frontier", "--cluster", "h100")
    problems = json.loads(out)["problems"]  # (--format json: the problems as JSON)
    assert code == 1 and sorted((p["file"], p["hint"]) for p in problems) == [
        ("--cluster", "drop --cluster or --full"), ("--team", "drop --team or --full")]
    code, out, _ = _run(capsys, "queue", "--state", str(state_file), "--format", "json", "--full")
    assert code == 0 and json.loads(out)["version"] == 1


def test_a_state_file_of_the_wrong_shape_is_a_user_error(capsys, state_file, tmp_path):
    """Whatever the JSON of a --state file holds, the commands say what is wrong with it."""
    good = json.loads(open(state_file).read())
    cases = {"list": [1, 2], "null": None, "nan-now": {**good, "now": float("nan")},
             "bad-ledger": {**good, "ledger": {"version": 1}}, "bad-runs": {**good, "runs": [[1]]},
             "negative-now": {**good, "now": -5}, "bad-history": {**good, "history": {"a": [["x"]]}}}
    says = {"negative-now": "its time 'now' is -5, not a finite number >= 0",
            "bad-history": "history['a'][0] must be [time, kind, detail], got ['x']"}
    # a field of the wrong type, anywhere in the snapshot or config: named, with its path
    for name, where, value, message in (
            ("node-gpus", ("snapshot", "nodes", 0, "gpus"), "8", "snapshot.nodes[0].gpus must be an int, got '8'"),
            ("node-healthy", ("snapshot", "nodes", 0, "healthy"), 1, "snapshot.nodes[0].healthy must be a bool"),
            ("node-negative", ("snapshot", "nodes", 0, "gpus"), -8, "snapshot.nodes[0] (h100-n0000) has a negative"),
            ("pod-gpus", ("snapshot", "pending", 0, "contract", "gpus_per_pod"), "2",
             "snapshot.pending[0].contract.gpus_per_pod must be an int"),
            ("budget", ("snapshot", "running", 0, "workload", "contract", "budget"), 3,
             "snapshot.running[0].workload.contract.budget must be a str, got 3"),
            ("cluster-type", ("config", "policy", "clusters", 0, "gpu_type"), None,
             "config.policy.clusters[0].gpu_type must be a str, got None")):
        data = json.loads(json.dumps(good))
        inner = data
        for key in where[:-1]:
            inner = inner[key]
        inner[where[-1]] = value
        cases[name], says[name] = data, message
    for name, data in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        for argv in (["queue"], ["eta", "x"], ["usage"], ["explain", "x"]):
            assert main([*argv, "--state", str(path)]) == 1, (name, argv)
            err = capsys.readouterr().err
            assert err.startswith(f"{path}: not a view state: ") and "Traceback" not in err, (name, argv, err)
            assert says.get(name, "") in err, (name, err)
    (tmp_path / "bytes.json").write_bytes(b'{"now": "\xff"}')
    assert main(["queue", "--state", str(tmp_path / "bytes.json")]) == 1
    assert "not a view state: not UTF-8 text (byte 0xff)" in capsys.readouterr().err


def test_usage_covers_the_state_s_span_and_projects_within_a_short_window(sim_state):
    """The span covered starts at the state's first run (not a bin start rounded down before
    it); with a window shorter than the projection, the window ahead holds only the last
    lookback of the rate, never more than a whole window of the cluster."""
    from dataclasses import replace

    from engine.views.usage import usage_report

    rep = usage_report(sim_state)
    first = min(r.start for r in sim_state.runs)
    assert rep["covered_s"] == min(sim_state.config.policy.lookback_s, sim_state.now - first)
    from engine.loader import load_config
    from engine.views.simstate import default_simulation, state_from_sim

    short = 1800.0  # (shorter than the 24 h projection)
    config = load_config()
    config = replace(config, policy=replace(config.policy, lookback_s=short))
    rep = usage_report(state_from_sim(default_simulation(config, days=0.1, tasks=200, seed=3)))
    burn = rep["burn"]
    assert burn["window_usage_next_gpu_h"] == pytest.approx(burn["rate_gpu_h_per_h"] * short / 3600)
    cap = sum(c.gpus * config.policy.billing_weight(c.gpu_type) for c in config.policy.clusters)
    assert burn["window_usage_next_gpu_h"] <= cap * short / 3600 + 1e-9


def test_queue_waits_count_from_when_work_was_last_queued_and_the_tree_counts_what_team_keeps(sim_state):
    """WAITED: since submission, or since its last run ended (preempted work queued again).
    The tree's waiting count of a node is the queue that ``--team NODE`` shows."""
    from engine.views.derived import queue_rows, tree_rows

    rows = {r["id"]: r for r in queue_rows(sim_state)}
    ended: dict[str, float] = {}
    for run in sim_state.runs:
        if run.end is not None and run.end <= sim_state.now:
            ended[run.workload] = max(ended.get(run.workload, run.end), run.end)
    requeued = [wid for wid in rows if wid in ended]
    assert requeued, "the state needs preempted work queued again"
    for wid in requeued:
        assert rows[wid]["wait_s"] == sim_state.now - ended[wid] < sim_state.now - rows[wid]["submitted_at"]
    for node in tree_rows(sim_state):
        assert node["pending"] == len(queue_rows(sim_state, team=node["name"])), node["name"]


def test_usage_over_time_allocates_a_node_its_own_effective_share(sim_state):
    """The bins' ALLOCATION (and the PNG's 'allocation (share x capacity)') of a node with an
    unallocated part is its effective share x capacity, as its row and the burn line count it:
    science (15% of the lab, 10% of it unallocated) was given its leaves' 13.5%."""
    from engine.views.usage import usage_report

    tree = sim_state.config.tree
    assert tree.nodes["science"].unallocated_pct > 0
    cap = sum(c.gpus for c in sim_state.config.policy.clusters)
    for node in ("science", tree.root):
        rep = usage_report(sim_state, node)
        s = rep["series"]
        want = cap * s["bin_s"] / 3600.0 * tree.effective_share(node)
        assert s["allocation"][-1] == pytest.approx(want, rel=1e-6), node
    rep = usage_report(sim_state, tree.root)
    assert rep["children"]["science"]["allocation"][-1] == pytest.approx(
        cap * rep["series"]["bin_s"] / 3600.0 * 0.15, rel=1e-6)
