"""The README's sample of ``allot explain`` and ``allot eta`` is what the commands print.

The README shows the commands on the embedded default simulation (``--sim``: 2 days, seeded),
with long lines cut short (``...``) and wrapped; each statement shown must begin the
statement the command prints, and the third job of ``allot queue`` must be the one shown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _sample() -> dict[str, list[str]]:
    """Command line -> the statements the README shows for it (wrapped lines joined)."""
    text = README.read_text()
    block = text[text.index("$ allot explain "):]
    block = block[:block.index("```")]
    shown: dict[str, list[str]] = {}
    for line in block.splitlines():
        if line.startswith("$ allot "):
            command = line[2:]
            shown[command] = []
        elif line.startswith("  - ") or not line.startswith(" "):
            shown[command].append(line)
        else:  # a wrapped continuation
            shown[command][-1] += " " + line.strip()
    return shown


def _run(capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_the_readme_sample_is_what_the_commands_print(capsys, tmp_path):
    state = tmp_path / "state.json"
    state.write_text(_run(capsys, ["queue", "--format", "json", "--full"]))
    queue = json.loads(state.read_text())["views"]["queue"]
    shown = _sample()
    assert list(shown) == ["allot explain syn-000582", "allot eta syn-000582"]
    assert queue[2]["id"] == "syn-000582"  # "the third job in that queue"
    for command, statements in shown.items():
        printed = _run(capsys, command.split()[1:] + ["--state", str(state)]).splitlines()
        for statement in statements:
            head = re.sub(r" \.\.\.$", "", statement)
            assert any(line.startswith(head) for line in printed), (command, head)
