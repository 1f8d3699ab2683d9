"""Pictures: matplotlib as every picture of Allot draws with it.

:func:`pyplot` gives ``matplotlib.pyplot`` on the file-only Agg backend with matplotlib's own
default style, whatever a ``matplotlibrc`` in the working directory (a pull request's checkout,
where the CI job runs), in ``$MATPLOTLIBRC`` or in the user's configuration says: the same
inputs draw the same PNG bytes anywhere, and a file a pull request adds cannot change how the
trusted engine draws (its size, say).
"""

from __future__ import annotations

from types import ModuleType


def pyplot() -> ModuleType:
    """``matplotlib.pyplot``, Agg backend, matplotlib's default style (module docstring)."""
    import matplotlib

    matplotlib.rcdefaults()  # (the internal defaults: no rc file's settings)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
