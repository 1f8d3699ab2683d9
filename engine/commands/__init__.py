"""One module per ``allot`` subcommand. Each exposes ``register(subparsers)``, which adds its
parser and sets ``func(args) -> int`` as the default. Commands do I/O and printing; they call
into the library modules for everything else."""

import argparse

from engine.durations import parse_duration


def seconds_arg(text: str) -> float:
    """argparse type for a time span: ``30`` (seconds), ``30s``, ``2m``, ``1d`` -> seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
