"""Problems found after a trace is read (a leaf the tree lacks, an owner the mapping lacks, a
cluster or node the configuration lacks) are said at the line of the trace that names them,
in every format that has lines, all of them at once."""

from __future__ import annotations

import json

import pytest

from engine.errors import UserError, also_on
from engine.sim.importers import load_trace
from engine.sim.prepare import prepare_trace
from tests.sim.conftest import tiny_config

# a leaf the tree lacks twice, a cluster the configuration lacks, a node it lacks
ROWS = [{"id": "a", "submit": 0, "runtime": 60, "owner": "o", "leaf": "nosuch"},
        {"id": "b", "submit": 10, "runtime": 60, "owner": "o", "cluster": "nope"},
        {"id": "c", "submit": 20, "runtime": 60, "owner": "o", "leaf": "nosuch"}]
FAILURE = {"time": 5, "node": "h100-n9999", "repair_s": 60}
GENERIC = ["--trace-format", "generic", "--columns", "submit=when,runtime=secs,gpus=n,owner=who,"
           "id=name,leaf=team"]  # (--columns maps no cluster)


def _write(tmp_path, fmt: str):
    """The trace of ROWS in ``fmt``: its path, extra flags, and the lines of the rows and of
    the failure (None where the format has no failures; the generic one maps no cluster)."""
    if fmt == "csv":
        path = tmp_path / "t.csv"
        path.write_text("id,submit,runtime,owner,leaf,cluster\n" + "".join(
            f"{r['id']},{r['submit']},{r['runtime']},{r['owner']},{r.get('leaf', '')},"
            f"{r.get('cluster', '')}\n" for r in ROWS))
        return path, [], (2, 3, 4), None
    if fmt == "generic":
        path = tmp_path / "g.csv"
        path.write_text("name,when,secs,n,who,team\n" + "".join(
            f"{r['id']},{r['submit']},{r['runtime']},1,{r['owner']},{r.get('leaf', '')}\n" for r in ROWS))
        return path, GENERIC, (2, None, 4), None
    if fmt == "jsonl":
        path = tmp_path / "t.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS)
                        + json.dumps({"type": "node_failure", **FAILURE}) + "\n")
        return path, [], (1, 2, 3), 4
    if fmt == "json":  # (pretty-printed: a record per line, each line known to the reader)
        path = tmp_path / "t.json"
        path.write_text('{"tasks": [\n' + ",\n".join(json.dumps(r) for r in ROWS)
                        + '\n], "node_failures": [\n' + json.dumps(FAILURE) + "\n]}\n")
        return path, [], (2, 3, 4), 6
    path = tmp_path / "t.yaml"
    path.write_text("# a trace\ntasks:\n" + "".join(f"  - {json.dumps(r)}\n" for r in ROWS)
                    + "node_failures:\n  - time: 5\n    node: h100-n9999\n    repair_s: 60\n")
    return path, [], (3, 4, 5), 7


@pytest.mark.parametrize("fmt", ["csv", "generic", "jsonl", "json", "yaml"])
def test_problems_found_after_reading_are_said_at_the_rows_lines(tmp_path, capsys, fmt):
    from engine.cli import main

    path, flags, (a, b, c), failure = _write(tmp_path, fmt)
    (tmp_path / "m.yaml").write_text("owners: {o: agents}\n")
    assert main(["simulate", "--trace", str(path), *flags, "--mapping", str(tmp_path / "m.yaml"),
                 "--cluster", "h100:4", "--demand-ratio", "0", "--no-pictures",
                 "--out", str(tmp_path / "out")]) == 1
    lines = capsys.readouterr().err.splitlines()
    expected = [f"{path}:{a}:0: leaf 'nosuch' is not a leaf of the budget tree (also on line {c}); "
                f"leaves are: "]
    if b:
        expected.append(f"{path}:{b}:0: 1 task(s) (b, ...) name cluster 'nope', which the configuration "
                        f"does not have; clusters: h100; ")
    if failure:
        expected.append(f"{path}:{failure}:0: a node failure names node 'h100-n9999', which the "
                        f"configuration does not have; nodes are named ")
    found = f"{len(expected)} problem{'s' if len(expected) > 1 else ''} found"
    assert len(lines) == len(expected) + 1 and lines[-1] == found, lines
    for line, start in zip(lines, expected):
        assert line.startswith(start), (line, start)


def test_the_example_of_the_audit_names_line_2(tmp_path, capsys):
    from engine.cli import main

    path = tmp_path / "x.csv"
    path.write_text("id,submit,pods,gpus_per_pod,runtime,owner,leaf\na,0,1,1,600,u1,nosuchleaf\n"
                    "b,10,1,1,600,u1,pretraining\n")
    assert main(["simulate", "--trace", str(path), "--no-pictures", "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.startswith(
        f"{path}:2:0: leaf 'nosuchleaf' is not a leaf of the budget tree; leaves are: ")


def test_an_owner_the_mapping_lacks_is_said_at_its_first_row(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "submit": 100 - i, "runtime": 60, "owner": owner})
                            + "\n" for i, owner in enumerate(["x", "gone", "x", "gone", "lost"], 1)))
    trace = load_trace(path)
    with pytest.raises(UserError) as err:
        prepare_trace(trace, tiny_config(), mapping={"x": "a"})
    assert [(p.file, p.line, p.message) for p in err.value.problems] == [
        (str(path), 2, "trace owner 'gone' is not in the mapping (also on line 4)"),
        (str(path), 5, "trace owner 'lost' is not in the mapping")]


def test_the_other_lines_are_listed_up_to_five_then_counted():
    assert also_on([0, 0]) == also_on([3]) == ""
    assert also_on([9, 3, 7, 0]) == " (also on lines 7, 9)"
    assert also_on(range(2, 12)) == " (also on lines 3, 4, 5, 6, 7 and 4 more)"


def test_a_view_replaying_a_trace_refuses_what_the_clusters_lack(tmp_path, capsys):
    """As ``allot simulate`` does: a task pinned to a cluster the configuration lacks would
    wait the whole run, so the view's state would show it waiting for nothing."""
    from engine.cli import main

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "a", "submit": 0, "runtime": 60, "owner": "o"}) + "\n"
                    + json.dumps({"id": "b", "submit": 0, "runtime": 60, "owner": "o", "cluster": "nope"})
                    + "\n")
    assert main(["queue", "--trace", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{path}:2:0: 1 task(s) (b, ...) name cluster 'nope', which the "
                             f"configuration does not have") and err[1:] == ["1 problem found"]
