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


def also_on(lines: Iterable[int], shown: int = 5) -> str:
    """The other lines a problem said at the first of ``lines`` is on (a name a file repeats),
    as the end of its message: `` (also on lines 7, 9)``, the first ``shown`` and how many more;
    "" when there are none (lines 0, of no file, are left out)."""
    rest = sorted(set(n for n in lines if n))[1:]
    if not rest:
        return ""
    listed = ", ".join(str(n) for n in rest[:shown])
    more = f" and {len(rest) - shown} more" if len(rest) > shown else ""
    return f" (also on line{'s' if len(rest) > 1 else ''} {listed}{more})"


def first_line(lines: Iterable[int]) -> int:
    """The first line of ``lines`` (0 when none is of a file): where a problem is said."""
    return min((n for n in lines if n), default=0)


def render_problems(problems: Sequence[Problem], fmt: str = "text") -> str:
    """Problems as text lines or as a JSON document ``{"ok": false, "problems": [...]}``."""
    if fmt == "json":
        return json.dumps({"ok": not problems, "problems": [asdict(p) for p in problems]}, indent=2)
    lines = [str(p) for p in problems]
    lines.append(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found")
    return "\n".join(lines)
