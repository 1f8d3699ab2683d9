"""User-facing problems: every error a user can cause is a :class:`Problem`, never a traceback.

Validation collects all problems at once and raises :class:`UserError` carrying them; the CLI
prints them as ``file:line:column: what is wrong; what to do`` (``file: ...`` where there is no
line: a command-line flag, a directory) or as JSON for bots, and exits non-zero.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence


MORE = "more"  # the code of a problem that stands for the problems left out after the first ones


@dataclass(frozen=True)
class Problem:
    """One user error: location, what is wrong, and what to do about it."""

    file: str
    line: int
    column: int
    message: str
    hint: str = ""
    code: str = "invalid"

    def __str__(self) -> str:
        # a flag, a directory or a whole file has no line: ``--window: bad window ...``
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        text = f"{where}: {self.message}"
        return f"{text}; {self.hint}" if self.hint else text

    def sort_key(self) -> tuple[str, bool, int, int, str]:
        # a file's "... and N more problems" (code ``more``) after the problems shown
        return (self.file, self.code == MORE, self.line, self.column, self.message)


class UserError(Exception):
    """Raised with every problem found; the CLI reports them and exits with status 1."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems: tuple[Problem, ...] = tuple(sorted(problems, key=Problem.sort_key))
        super().__init__("\n".join(str(p) for p in self.problems))


def render_problems(problems: Sequence[Problem], fmt: str = "text") -> str:
    """Problems as text lines or as a JSON document ``{"ok": false, "problems": [...]}``."""
    if fmt == "json":
        return json.dumps({"ok": not problems, "problems": [asdict(p) for p in problems]}, indent=2)
    lines = [str(p) for p in problems]
    lines.append(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found")
    return "\n".join(lines)
