"""`allot validate`, `allot tree` and `allot codeowners`, driven through engine.cli.main."""

from __future__ import annotations

import json
import re

import pytest

from engine.cli import main
from engine.loader import repo_root

REPO = str(repo_root())


def test_validate_shipped_config(capsys):
    assert main(["validate", REPO]) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: 24 nodes, 17 leaves in 6 budget files; 2 clusters (h100 1024 GPUs, b200 88 GPUs)")


def test_validate_json(capsys):
    assert main(["validate", REPO, "--format", "json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["ok"], facts["nodes"], facts["leaves"], facts["revision"]) == (True, 24, 17, None)


def test_validate_reports_problems_without_traceback(base_copy, capsys):
    (base_copy / "budgets" / "alpha.yaml").write_bytes(b"\x00\xff")
    assert main(["validate", str(base_copy)]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "budgets/alpha.yaml:1:2: file is not valid UTF-8 (byte 0xff); save the file as UTF-8"
    assert "Traceback" not in err


def test_validate_unknown_revision(base_copy, capsys):
    assert main(["validate", str(base_copy), "--rev", "HEAD"]) == 1
    assert ": not inside a git repository; pass a directory inside a git repository" in capsys.readouterr().err


def _row(text: str, name: str) -> list[str]:
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name}")


def test_tree_table_shows_hand_computed_numbers(capsys):
    assert main(["tree", REPO]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["BUDGET", "SHARE", "EFFECTIVE", "H100", "GPUS", "B200", "GPUS",
                                          "OWNERS", "/", "PRINCIPALS"]
    # frontier 50% x pretraining 70% = 35% = 358.4 of 1,024 H100s and 30.8 of 88 B200s
    assert _row(out, "pretraining")[:5] == ["pretraining", "70%", "35%", "358.4", "30.8"]
    # applied 30% x multimodal 35% x vision 50% = 5.25%: 53.76 H100s, 4.62 B200s
    assert _row(out, "vision")[:5] == ["vision", "50%", "5.25%", "53.8", "4.6"]
    assert _row(out, "lab")[:5] == ["lab", "100%", "100%", "1024.0", "88.0"]
    # science keeps 10% unallocated: 1.5% of the lab
    assert re.search(r"^\s+\(unallocated\)\s+10%\s+1\.5%\s+15\.4\s+1\.3", out, re.M)
    # indentation shows depth
    assert re.search(r"^      vision ", out, re.M)
    assert "leaves hold 98.5% of GPU time" in out


def test_tree_one_cluster_json(capsys):
    assert main(["tree", REPO, "--cluster", "h100", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["clusters"] == [{"name": "h100", "gpu_type": "h100", "gpus": 1024}]
    rows = {row["name"]: row for row in doc["nodes"]}
    assert rows["pretraining"]["effective_pct"] == pytest.approx(35.0)
    assert rows["pretraining"]["gpus"] == {"h100": pytest.approx(358.4)}
    assert rows["long-context-training"]["gpus"]["h100"] == pytest.approx(61.44)
    assert rows["science"]["unallocated_pct"] == 10
    assert rows["multimodal"]["file"] == "budgets/applied-multimodal.yaml"
    assert rows["theory"]["principals"] == ["user:ada.lovelace", "namespace:sci-theory"]


def test_tree_unknown_cluster(capsys):
    assert main(["tree", REPO, "--cluster", "a100"]) == 1
    assert capsys.readouterr().err.startswith("--cluster: unknown cluster 'a100'; choose one of h100, b200")


def test_codeowners_generate_check_and_stale(base_copy, capsys):
    target = base_copy / "OWNERS"
    assert main(["codeowners", str(base_copy), "--output", str(target)]) == 0
    lines = target.read_text().splitlines()
    assert "/budgets/alpha.yaml @org/alpha" in lines
    assert "/budgets/root.yaml @org/heads" in lines
    assert "/policies/ @org/heads" in lines
    capsys.readouterr()
    assert main(["codeowners", str(base_copy), "--output", str(target), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out
    # a manager hands the alpha subtree to another team: the committed file is now stale
    alpha = base_copy / "budgets" / "alpha.yaml"
    alpha.write_text(alpha.read_text().replace("@org/alpha", "@org/alpha-new"))
    assert main(["codeowners", str(base_copy), "--output", str(target), "--check"]) == 1
    captured = capsys.readouterr()
    assert "-/budgets/alpha.yaml @org/alpha\n" in captured.out
    assert "+/budgets/alpha.yaml @org/alpha-new\n" in captured.out
    # the diff compares the file on disk (committed or not) with what the budgets give
    assert f"--- {target} (on disk)\n" in captured.out and f"+++ {target} (generated)\n" in captured.out
    assert "out of date" in captured.err


def test_codeowners_default_path_and_stdout(base_copy, capsys):
    assert main(["codeowners", str(base_copy), "--check"]) == 1  # nothing committed yet
    capsys.readouterr()
    assert main(["codeowners", str(base_copy)]) == 0
    assert (base_copy / ".github" / "CODEOWNERS").is_file()
    assert main(["codeowners", str(base_copy), "--check"]) == 0
    capsys.readouterr()
    assert main(["codeowners", str(base_copy), "--output", "-"]) == 0
    assert capsys.readouterr().out == (base_copy / ".github" / "CODEOWNERS").read_text()


def test_committed_codeowners_check_passes(capsys):
    assert main(["codeowners", REPO, "--check"]) == 0
