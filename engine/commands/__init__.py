"""One module per ``allot`` subcommand. Each exposes ``register(subparsers)``, which adds its
parser and sets ``func(args) -> int`` as the default. Commands do I/O and printing; they call
into the library modules for everything else."""
