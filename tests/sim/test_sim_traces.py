"""Traces: the documented format round-trips, agrees with its schema, and bad rows are all
reported; the importers read the bundled real traces; contracts and compression follow their
documented rules (owners to leaves: test_sim_owners.py)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from engine.errors import UserError
from engine.sim.importers import gang_shape, load_trace
from engine.sim.prepare import (ContractRules, assign_contract, compress, compression_for_ratio,
                                demand_ratio)
from engine.sim.clusters import with_clusters
from engine.sim.trace import NodeFailure, Task, Trace, read_trace_file, save_trace
from tests.sim.conftest import tiny_config

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "trace.schema.json").read_text())

def sample() -> Trace:
    return Trace.of([Task("t1", 0.0, 2, 8, 3600.0, "u1", leaf="a", min_runtime=600.0, resumable=True,
                          priority=2, klass="small"),
                     Task("t2", 5.5, 1, 1, 60.0, "u2")],
                    [NodeFailure(100.0, "c-n0000", 7200.0)])


def test_jsonl_round_trip_keeps_every_field(tmp_path):
    trace = sample()
    back = read_trace_file(save_trace(trace, tmp_path / "t.jsonl"))
    assert back.tasks == trace.tasks and back.failures == trace.failures


def test_a_yaml_trace_is_read_strictly_with_the_line_of_each_problem(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("# jobs\n"                                   # 1
                    "tasks:\n"                                   # 2
                    "  - {id: a, submit: 0, runtime: 60, owner: o}\n"          # 3
                    "  - id: b\n"                                # 4
                    "    submit: 5\n"                            # 5
                    "    runtime: -1\n"                          # 6
                    "    owner: o\n"                             # 7
                    "node_failurs:\n"                            # 8: a typo
                    "  - {time: 10, node: c-n0000, repair_s: 60}\n"
                    "node_failures:\n"                           # 10
                    "  - {time: 10, node: c-n0000}\n"            # 11
                    "  - {time: 20, node: c-n0001, repair_s: 5, cluster: c}\n")  # 12
    with pytest.raises(UserError) as err:
        read_trace_file(path)
    assert sorted((p.line, p.message) for p in err.value.problems) == [
        (4, "runtime must be >= 0, got -1"),
        (8, "unknown field 'node_failurs' of a trace document"),
        (11, "missing required field 'repair_s'"),
        (12, "unknown field(s) of a node failure cluster; known: time, node, repair_s")]
    path.write_text("tasks:\n  - {id: a, submit: 0, runtime: 60, owner: bob, owner: carol}\n")
    with pytest.raises(UserError) as err:  # (the last owner does not silently win)
        read_trace_file(path)
    assert "duplicate key" in err.value.problems[0].message and err.value.problems[0].line == 2


def test_a_jsonl_record_of_an_unknown_type_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "a", "submit": 0, "runtime": 60, "owner": "o"}) + "\n"
                    + json.dumps({"type": "nodefailure", "time": 5, "node": "c-n0000", "repair_s": 60}) + "\n")
    with pytest.raises(UserError) as err:
        read_trace_file(path)
    assert [str(p) for p in err.value.problems] == [
        f"{path}:2:0: type must be task or node_failure, got 'nodefailure'; see schemas/trace.schema.json"]


def test_csv_round_trip(tmp_path):
    trace = Trace.of(sample().tasks)
    assert read_trace_file(save_trace(trace, tmp_path / "t.csv")).tasks == trace.tasks


def test_records_validate_against_the_schema():
    trace = sample()
    doc = {"tasks": [t.to_record() for t in trace.tasks],
           "node_failures": [{"time": f.time, "node": f.node, "repair_s": f.repair_s}
                             for f in trace.failures]}
    jsonschema.validate(doc, SCHEMA)


def test_every_bad_row_is_reported_with_its_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("id,submit,runtime,owner,pods,resumable\n"
                    "a,0,10,x,1,true\nb,-1,10,x,1,true\nc,0,ten,x,0,maybe\na,1,1,x,1,\n")
    with pytest.raises(UserError) as err:
        read_trace_file(path)
    text = str(err.value)
    assert "bad.csv:3:0: submit must be >= 0" in text
    assert "bad.csv:4:0: runtime must be a number" in text
    assert "pods must be >= 1" in text and "resumable must be true or false" in text
    assert "duplicate task id 'a'" in text


def test_a_csv_of_another_layout_is_one_problem_at_its_header(tmp_path):
    """Not one problem per row: a large file in another layout would print them by the
    hundred; the one problem says how to read such a file."""
    path = tmp_path / "jobs.csv"
    path.write_text("ts,secs,n,team\n" + "".join(f"{i},60,1,red\n" for i in range(1000)))
    with pytest.raises(UserError) as err:
        read_trace_file(path)
    [problem] = err.value.problems
    assert (problem.line, problem.message) == (
        1, "the header lacks id, submit, runtime, owner; has columns the format does not know: "
           "ts, secs, n, team")
    assert "--trace-format generic --columns" in problem.hint


def test_a_generic_csv_value_that_cannot_be_read_names_its_field_and_column(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("when,secs,n,team\nyesterday,60,1,red\n5,60,two,red\n6,60,1.5,red\n7,60,8,red\n")
    with pytest.raises(UserError) as err:
        load_trace(path, fmt="generic", columns={"submit": "when", "runtime": "secs", "gpus": "n",
                                                  "owner": "team"})
    assert [str(p) for p in err.value.problems] == [
        f"{path}:2:0: submit must be seconds or an ISO timestamp, got 'yesterday'; column 'when'",
        f"{path}:3:0: gpus must be a whole number >= 0, got 'two'; column 'n'",
        f"{path}:4:0: gpus must be a whole number >= 0, got '1.5'; column 'n'"]
    path.write_text("when,secs,n,team\nyesterday,-200,-2,red\n")  # (every problem of a row, not the first)
    with pytest.raises(UserError) as err:
        load_trace(path, fmt="generic", columns={"submit": "when", "runtime": "secs", "gpus": "n",
                                                  "owner": "team"})
    assert sorted(p.message for p in err.value.problems) == [
        "gpus must be a whole number >= 0, got '-2'", "runtime must be >= 0, got '-200'",
        "submit must be seconds or an ISO timestamp, got 'yesterday'"]


def test_a_row_missing_a_field_still_has_its_other_fields_checked(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("id,submit,runtime,owner,gpus_per_pod\nj1,0,1e400,,1.5\n")
    with pytest.raises(UserError) as err:
        read_trace_file(path)
    assert sorted(p.message for p in err.value.problems) == [
        "gpus_per_pod must be a whole number, got '1.5'", "missing required field 'owner'",
        "runtime must be finite, got '1e400'"]


def test_past_200_problems_the_rest_are_counted_not_dropped(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("id,submit,runtime,owner\n" + "".join(f"j{i},0,x,red\n" for i in range(250)))
    with pytest.raises(UserError) as err:
        read_trace_file(path)
    problems = err.value.problems
    assert len(problems) == 201
    assert problems[-1].message == "... and 50 more problems"  # last, though it has no line
    assert all("runtime must be a number" in p.message for p in problems[:-1])


def test_gang_shape_spreads_gpus_over_whole_pods():
    assert gang_shape(4) == (1, 4)
    assert gang_shape(16) == (2, 8)
    assert gang_shape(12) == (2, 6)
    assert gang_shape(24) == (3, 8)
    assert gang_shape(1_000_000_007) == (1_000_000_007, 1)  # (a prime: 1-GPU pods, found at once)


def test_bundled_philly_and_helios_import_with_readme_statistics():
    philly = load_trace("philly")
    assert len(philly.tasks) == 82247 and len(philly.owners()) == 15
    assert philly.span / 86400 == pytest.approx(108.9, abs=0.05)
    assert sum(t.gpus for t in philly.tasks if t.gpus == 128) == 3 * 128
    helios = load_trace("helios")
    assert len(helios.tasks) == 10796 and len(helios.owners()) == 95
    assert max(t.gpus for t in helios.tasks) == 160


def test_generic_csv_with_a_column_mapping(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("when,secs,n,team\n2020-01-01 00:00:10,60,16,red\n2020-01-01 00:00:00,30,1,blue\n")
    trace = load_trace(path, fmt="generic", columns={"submit": "when", "runtime": "secs",
                                                     "gpus": "n", "owner": "team"})
    assert [(t.submit, t.pods, t.gpus_per_pod, t.owner) for t in trace.tasks] == [
        (0.0, 1, 1, "blue"), (10.0, 2, 8, "red")]


def test_a_generic_csv_drops_rows_without_gpus_and_refuses_a_duplicate_id(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("when,secs,n,team,jid\n0,60,8,red,j1\n5,60,0,red,j2\n10,60,1,blue,j1\n"
                    "20,60,2,blue,j3\n")
    columns = {"submit": "when", "runtime": "secs", "gpus": "n", "owner": "team", "id": "jid"}
    with pytest.raises(UserError) as err:  # (the simulator would start j1 twice)
        load_trace(path, fmt="generic", columns=columns)
    assert [str(p) for p in err.value.problems] == [
        f"{path}:4:0: duplicate task id 'j1' (first on line 2); column 'jid': ids must be unique"]
    path.write_text("when,secs,n,team,jid\n0,60,8,red,j1\n5,60,0,red,j2\n20,60,2,blue,j3\n")
    trace = load_trace(path, fmt="generic", columns=columns)  # j2 asks for no GPU: not GPU work
    assert [(t.id, t.gpus) for t in trace.tasks] == [("j1", 8), ("j3", 2)]


def test_contract_rules():
    cfg = tiny_config()
    rules = ContractRules(resumable_share=0.0, unfunded_share=0.0)
    short = assign_contract(Task("d", 0, 1, 2, 300.0, "o", leaf="a"), cfg, rules, 0)
    assert (short.min_runtime, short.resumable, short.klass) == (900.0, False, "debug")
    long = assign_contract(Task("l", 0, 1, 8, 3 * 86400.0, "o", leaf="a"), cfg, rules, 0)
    assert (long.min_runtime, long.resumable) == (3600.0, True)  # outlives the cap: resumable
    mid = assign_contract(Task("m", 0, 8, 8, 7200.0, "o", leaf="a"), cfg, rules, 0)
    assert (mid.min_runtime, mid.resumable, mid.klass) == (7200.0, False, "large")
    free = assign_contract(Task("f", 0, 1, 8, 7200.0, "o", leaf="a"), cfg,
                           ContractRules(unfunded_share=1.0), 0)
    assert free.min_runtime == 0.0 and not free.funded
    kept = assign_contract(Task("k", 0, 1, 1, 60.0, "o", leaf="a", min_runtime=5.0, resumable=True),
                           cfg, rules, 0)
    assert (kept.min_runtime, kept.resumable) == (5.0, True)


def test_contract_draws_depend_on_seed_and_id_only():
    cfg = tiny_config()
    tasks = [Task(f"t{i}", i, 1, 8, 7200.0, "o", leaf="a") for i in range(400)]
    one = [assign_contract(t, cfg, ContractRules(), 7) for t in tasks]
    again = [assign_contract(t, cfg, ContractRules(), 7) for t in reversed(tasks)][::-1]
    assert one == again
    share = np.mean([t.resumable for t in one if t.funded])
    assert 0.4 < share < 0.6


def test_compression_reaches_the_demand_ratio():
    trace = Trace.of([Task(str(i), i * 100.0, 1, 1, 100.0, "o") for i in range(100)],
                     meta={"horizon": 10000.0})
    assert demand_ratio(trace, 1) == pytest.approx(1.0)
    f = compression_for_ratio(trace, 1, 2.0)
    assert demand_ratio(compress(trace, f), 1) == pytest.approx(2.0, rel=1e-4)
    assert compress(trace, 2.0).meta["horizon"] == 5000.0


def test_a_window_squeezed_below_an_hour_to_reach_the_ratio_is_refused():
    """A window that offers little at its own rate needs a large factor to reach the ratio,
    which squeezes it into minutes: a run that measures nothing is refused, not run."""
    from engine.sim.prepare import prepare_trace

    config = tiny_config()  # 4 GPUs
    quiet = Trace.of([Task(str(i), i * 900.0, 1, 1, 60.0, "o", leaf="a") for i in range(8)],
                     meta={"horizon": 7200.0})  # (2 h offering 1.7% of the capacity)
    with pytest.raises(UserError) as err:
        prepare_trace(quiet, config, demand_ratio_target=1.1)
    (problem,) = err.value.problems
    assert problem.file == "--demand-ratio" and "s of simulated time" in problem.message
    assert prepare_trace(quiet, config, demand_ratio_target=0.02).meta["horizon"] >= 3600.0


def test_cluster_flag_refusals():
    with pytest.raises(UserError) as err:
        with_clusters(tiny_config(), "c:2,c:3,c:100000001")
    assert [p.message for p in err.value.problems] == ["cluster 'c' given twice", "cluster 'c' given twice"]
    with pytest.raises(UserError) as err:
        with_clusters(tiny_config(), "c:100000001")
    assert err.value.problems[0].hint.startswith("write name:nodes with 1 to 100,000 nodes")


def test_trace_and_mapping_files_that_are_not_text_say_so(tmp_path):
    from engine.sim.owners import load_mapping

    (tmp_path / "t.csv").write_bytes(b"id,submit,gpus,runtime,owner\n1,0,1,60,\xff\n")
    (tmp_path / "t.csv.gz").write_bytes(b"not gzip data")
    (tmp_path / "m.yaml").write_bytes(b"owners: {a: \xff}\n")
    for path, words in (("t.csv", "the file is not UTF-8 text (byte 0xff)"),
                        ("t.csv.gz", "not a whole gzip file")):
        with pytest.raises(UserError) as err:
            load_trace(tmp_path / path)
        assert err.value.problems[0].message.startswith(words), path
    with pytest.raises(UserError) as err:
        load_mapping(tmp_path / "m.yaml")
    assert err.value.problems[0].message.startswith("file is not valid UTF-8 (byte 0xff")


def test_a_csv_trace_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Spreadsheet tools write a UTF-8 byte-order mark first: it is not part of the first column."""
    text = "id,submit,pods,gpus_per_pod,runtime,owner\n1,0,1,1,60,o\n"
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.csv").write_text(text)
    assert load_trace(tmp_path / "bom.csv").tasks == load_trace(tmp_path / "plain.csv").tasks


def test_philly_and_helios_rows_that_are_wrong_are_all_reported(tmp_path):
    """A bad row is a problem at its line, all at once, never a value quietly changed (a
    negative duration made 1 s) or a traceback; a header without the columns is said once."""
    def problems(name: str, fmt: str, text: str) -> list[str]:
        (tmp_path / name).write_text(text)
        with pytest.raises(UserError) as err:
            load_trace(tmp_path / name, fmt=fmt)
        return [f"{p.line}: {p.message}" for p in err.value.problems]

    head = "timestamp,duration,num_gpus,gpu_time,cluster\n"
    assert problems("p0.csv", "philly", head) == ["0: the trace holds no jobs"]
    assert problems("p1.csv", "philly", "when,duration\n2017-10-09 07:01:55,66\n") == [
        "1: not a Philly trace: no column(s) timestamp, num_gpus, cluster in the header"]
    assert problems("p2.csv", "philly", head + "2017-10-09 07:01:55,-5,1,0,a\n"
                    "2017-10-09 07:01:56,nan,1,0,a\n2017-10-09 07:01:57,60,-2,0,a\n") == [
        "2: bad Philly row: duration must be >= 0, got '-5'",
        "3: bad Philly row: duration must be finite, got 'nan'",
        "4: bad Philly row: num_gpus must be >= 0, got '-2'"]
    hhead = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time\n"
    assert problems("h1.csv", "helios", hhead + "abc,1,1,1,1,0,60\n1,1,1,1,1,-3,60\n2,1,1,1,1,0,60\n"
                    "2,1,1,1,1,0,60\n") == [
        "2: bad Helios row: u_id must be a number, got 'abc'",
        "3: bad Helios row: interval must be >= 0, got '-3'",
        "5: bad Helios row: u_id 2 again (first on line 4)"]


def test_a_trace_that_names_what_the_clusters_lack_is_refused_by_simulate(tmp_path, capsys):
    """A task pinned to a cluster the configuration lacks would wait the whole run, a failure
    of a node it lacks would never happen: both refused, each named, with list-valued
    fields refused when the trace is read."""
    from engine.cli import main

    bad = tmp_path / "t.jsonl"
    bad.write_text('{"id": "a", "submit": 0, "runtime": 60, "owner": "o", "cluster": "nope"}\n'
                   '{"type": "node_failure", "time": 5, "node": "h100-n9999", "repair_s": 60}\n')
    (tmp_path / "m.yaml").write_text("owners: {o: agents}\n")
    assert main(["simulate", "--trace", str(bad), "--mapping", str(tmp_path / "m.yaml"), "--cluster", "h100:4",
                 "--demand-ratio", "0", "--out", str(tmp_path / "out")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"{bad}:1:0: 1 task(s) (a, ...) name cluster 'nope', which the configuration does not have; clusters: "
        f"h100; fix the trace's cluster field, or keep that cluster (--cluster)",
        f"{bad}:2:0: a node failure names node 'h100-n9999', which the configuration does not have; nodes are "
        f"named {{cluster}}-n0000, {{cluster}}-n0001, ... up to each cluster's node count", "2 problems found"]
    listed = tmp_path / "l.jsonl"
    listed.write_text('{"id": "a", "submit": 0, "runtime": 60, "owner": ["x"]}\n')
    with pytest.raises(UserError) as err:
        load_trace(listed)
    assert err.value.problems[0].message == "owner must be text, got list ['x']"


def test_cluster_override():
    cfg = with_clusters(tiny_config(), "c:3")
    assert cfg.policy.clusters[0].nodes == 3
    with pytest.raises(UserError, match="unknown cluster"):
        with_clusters(cfg, "nope")
