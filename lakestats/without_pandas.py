"""A lookup's process declines pandas. pyarrow imports it, when installed, at its first
conversion of Python objects, only to ask whether they are DataFrames: 0.4 s of a 0.9 s
lookup. Declined, pyarrow takes pandas for absent."""
from __future__ import annotations

import importlib.abc
import sys


class _Declined(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            raise ModuleNotFoundError("lakestats lookups run without pandas", name=name)
        return None


def decline() -> None:
    """From now on, `import pandas` fails in this process (unless it is imported already)."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _Declined())
