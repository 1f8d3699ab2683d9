"""``allot build-core [--check] [--force]``: compile the decision core with mypyc (:mod:`engine.accel`).

The build goes to the cache directory under a hash of the engine's sources; every later
``allot`` (and ``import engine``) of the same sources loads it, any edit falls back to the
interpreted core until the next build. ``--check`` only says which core this process runs
and whether a build for these sources exists (exit 0 if one does, 1 if not).
"""

from __future__ import annotations

import argparse
import sys

from engine import accel
from engine.errors import Problem, UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build-core",
        help="compile the decision core with mypyc (about 30%% less time per decision)",
        description="Compile engine.core with mypyc into the cache directory, for the sources "
                    "as they are; later commands load it (ALLOT_CORE=python: never). Needs a C "
                    "compiler, Python's headers and mypy; about 40 s.",
    )
    parser.add_argument("--check", action="store_true",
                        help="only report which core runs and whether a build exists")
    parser.add_argument("--force", action="store_true", help="compile again even if built")
    parser.set_defaults(func=run)


def describe() -> str:
    """One line: the core this process runs."""
    where = accel.active()
    return f"compiled ({where})" if where is not None else "interpreted"


def run(args: argparse.Namespace) -> int:
    where = accel.build_dir()
    if args.check:
        found = accel.built(where)
        print(f"core: {describe()}; build for these sources: {where if found else 'none'}")
        return 0 if found else 1
    try:
        accel.build(say=lambda line: print(line, file=sys.stderr), force=args.force)
    except accel.BuildError as err:
        raise UserError([Problem("engine/core", 0, 0, str(err),
                                 "the interpreted core keeps working; nothing was changed")]) from None
    if accel.declined():
        print("built; ALLOT_CORE=python is set, so allot keeps running the interpreted core until "
              "it is unset")
    else:
        print("the next allot command runs the compiled core (ALLOT_CORE=python: the interpreted one)")
    return 0
