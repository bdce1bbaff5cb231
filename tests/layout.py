"""The project's folders and the lakestats subpackages they install as (pyproject.toml's
[tool.setuptools] package-dir: core/ is lakestats.core), for the tests that walk the code."""
from __future__ import annotations

import importlib.abc
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
# package name -> folder
FOLDERS = {"lakestats": "lakestats", **SETUPTOOLS["package-dir"]}
PACKAGES = sorted(FOLDERS.values())
FORMER_TOP_LEVEL = [folder for folder in PACKAGES if folder != "lakestats"]


def module_name(path: Path) -> str:
    """The dotted name a source file imports as: core/settings.py is lakestats.core.settings."""
    parts = path.resolve().relative_to(ROOT).with_suffix("").parts
    package = next(name for name, folder in FOLDERS.items() if folder == parts[0])
    return ".".join((package, *parts[1:])).removesuffix(".__init__")


def installed_layout(dest: Path) -> Path:
    """The package as it installs (core/ as lakestats/core/, ...), copied under dest, links
    followed (lakestats/core links ../core): a copy whose modules a test may change."""
    shutil.copytree(ROOT / "lakestats", dest / "lakestats",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest)
    return dest


class FormerNamesRefused(importlib.abc.MetaPathFinder):
    """The tests run from the repository, whose folders are on sys.path: without this, an
    import of a folder by its old top-level name (`import core`) would load a second copy of
    its modules instead of failing as it does once installed."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in FORMER_TOP_LEVEL:
            raise ModuleNotFoundError(f"{name}: the package is lakestats.{name}", name=name)
        return None
