"""Where Allot's own files are: the schemas, the embedded default config and the bundled traces.

They live at the top of the repository (``schemas/``, ``budgets/``, ``policies/``,
``traces/``), where managers and editors use them. Run from a checkout (an editable install,
``pip install -e .``, or the source tree itself) the package reads them there. An installed
wheel (``pip install .``, the reconciler's image, the CI bot) carries a copy of the four
directories inside the package, in ``engine/_embedded/`` (``setup.py`` copies them at build
time), laid out the same way, so every command finds them wherever it is installed.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
EMBEDDED = PACKAGE / "_embedded"  # the copy an installed wheel carries
DIRECTORIES = ("schemas", "budgets", "policies", "traces")  # what the copy holds


def repo_root() -> Path:
    """The checkout this package runs from, when it runs from one (its ``pyproject.toml`` and
    ``schemas/`` beside the package); else the copy the installed wheel carries."""
    checkout = PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "schemas").is_dir():
        return checkout
    if EMBEDDED.is_dir():
        return EMBEDDED
    return checkout  # neither: the callers' own checks say what is missing
