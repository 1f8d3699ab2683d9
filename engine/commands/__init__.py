"""One module per ``allot`` subcommand. Each exposes ``register(subparsers)``, which adds its
parser and sets ``func(args) -> int`` as the default. Commands do I/O and printing; they call
into the library modules for everything else.

The argparse types below check a flag's value where it is read, so a negative count or ratio
is a usage error naming the flag, never a traceback or a nonsensical run. A flag added with
``action=Checked, kind=TYPE`` is read the same way, but a value its type refuses is kept as a
problem (:func:`refused_flags`) instead of ending the parse at the first, so the command says
the problems of all its flags at once (the view commands); the helpers after them make the
directory a command writes into and read a JSON file a user names, with the same kind of
problems."""

import argparse
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from engine.durations import parse_duration
from engine.errors import Problem, UserError


def seconds_arg(text: str) -> float:
    """argparse type for a time span: ``30`` (seconds), ``30s``, ``2m``, ``1d`` -> seconds (>= 0)."""
    try:
        value = float(text)
    except ValueError:
        try:
            return parse_duration(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a time span >= 0, got {text!r}")
    return value


def non_negative(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = _number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def positive(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def count(text: str) -> int:
    """argparse type: a whole number >= 1."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


MAX_DAYS = 3650.0  # ten years of simulated time: more is a typo, not an experiment
MAX_TASKS = 10_000_000  # a synthetic trace's tasks: about 10 GB of memory at most


def _at_most(value: float, most: float, said: str, text: str):
    """``value``, unless above ``most``: then the argparse error ``must be at most {said}``."""
    if value > most:
        raise argparse.ArgumentTypeError(f"must be at most {said}, got {text!r}")
    return value


def days(text: str) -> float:
    """argparse type: simulated days, > 0 and at most :data:`MAX_DAYS`."""
    return _at_most(positive(text), MAX_DAYS, f"{MAX_DAYS:g} days", text)


def days_or_all(text: str) -> float:
    """argparse type: simulated days, 0 (all) or up to :data:`MAX_DAYS`."""
    return _at_most(non_negative(text), MAX_DAYS, f"{MAX_DAYS:g} days (0: all)", text)


def tasks(text: str) -> int:
    """argparse type: a synthetic trace's size, 1 to :data:`MAX_TASKS`."""
    return _at_most(count(text), MAX_TASKS, f"{MAX_TASKS:,}", text)


def seed(text: str) -> int:
    """argparse type: a seed, a whole number >= 0 (numpy's generators take no negative one)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}")
    return value


def port(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    value = _whole(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 to 65535, got {text!r}")
    return value


REFUSED = "refused_flags"  # the attribute of a parsed namespace that keeps the refused values


class Checked(argparse.Action):
    """An option whose value ``kind`` (an argparse type above) converts; a value it refuses is
    kept on the namespace as a problem naming the flag, with ``hint`` (what to give, unless the
    type's message says it), and the parse goes on: :func:`refused_flags` returns them all. The option keeps its default."""

    def __init__(self, option_strings: Sequence[str], dest: str, kind: Callable[[str], Any],
                 hint: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.kind, self.hint = kind, hint

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        try:
            setattr(namespace, self.dest, self.kind(values))
        except argparse.ArgumentTypeError as err:
            # (a type that says what to write, "...; write e.g. 8h", gives its own hint)
            message, _, own = str(err).partition("; ")
            said = Problem(option_string or self.dest, 0, 0, message, own or self.hint, "usage")
            setattr(namespace, REFUSED, [*getattr(namespace, REFUSED, []), said])


def refused_flags(args: argparse.Namespace) -> list[Problem]:
    """The values :class:`Checked` options refused when ``args`` was parsed (none: [])."""
    return list(getattr(args, REFUSED, []))


def flag_problems(args: argparse.Namespace) -> list[Problem]:
    """Every problem of a command's flags, before it runs: the values refused
    (:func:`refused_flags`) and what the command's own ``flag_checks`` (``args -> problems``,
    a default of its parser, run on the flags read) finds."""
    checks = getattr(args, "flag_checks", None)
    return refused_flags(args) + (checks(args) if checks else [])


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def output_dir(flag: str, path: str | Path) -> Path:
    """Make the directory a command writes into, before its work (not after minutes of
    simulation): a path that cannot be a directory is a problem named by ``flag``."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError([Problem(flag, 0, 0, f"cannot make the directory {str(out)!r}: "
                                 f"{err.strerror or err}", "give a directory you can write")]) from None
    return out


def remove_outputs(out: Path, patterns: Iterable[str]) -> None:
    """Remove the files an earlier run of a command left in its ``--out`` directory ``out``:
    those matching ``patterns`` (globs relative to ``out``; nothing else), and the directories
    under ``out`` that this leaves empty, so that the directory holds this run's files only."""
    gone = sorted({p for pattern in patterns for p in out.glob(pattern) if p.is_file()})
    for p in gone:
        p.unlink()
    for d in sorted({p.parent for p in gone if p.parent != out}, reverse=True):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def read_json(path: Path, what: str, hint: str):
    """The JSON document in the file ``path`` names (``what`` it should be: "view state"),
    or the problem: a file that cannot be read, or text that is not JSON (at its line and
    column)."""
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise UserError([Problem(str(path), 0, 0, f"cannot read the {what}: {err.strerror or err}",
                                 hint)]) from None
    except json.JSONDecodeError as err:
        raise UserError([Problem(str(path), err.lineno, err.colno, f"not a {what}: not JSON ({err.msg})",
                                 hint)]) from None
    except UnicodeDecodeError as err:
        raise UserError([Problem(str(path), 0, 0, f"not a {what}: not UTF-8 text (byte "
                                 f"0x{err.object[err.start]:02x})", hint)]) from None
