"""Build step: an installed wheel carries the repository's own files (see engine/resources.py).

The schemas, the embedded default config (budgets/, policies/) and the bundled traces live at
the top of the repository, outside the package; ``build_py`` copies them into the built
package as ``engine/_embedded/`` so that ``pip install .`` (the reconciler's image, the CI
bot) finds them too. Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DIRECTORIES = ("schemas", "budgets", "policies", "traces")  # engine.resources.DIRECTORIES


class BuildWithEmbedded(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout
            return
        here = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "engine" / "_embedded"
        for name in DIRECTORIES:
            shutil.copytree(here / name, target / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithEmbedded})
