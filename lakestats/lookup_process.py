"""How a lookup's own process is set up: lookups read a little of large files, and answer in a
fraction of a second within a small memory.

- pandas is declined. pyarrow imports it, when installed, at its first conversion of Python
  objects, only to ask whether they are DataFrames: 0.4 s of a 0.9 s lookup. Declined,
  pyarrow takes pandas for absent.
- Arrow allocates with the system allocator: mimalloc, Arrow's default, keeps what a scan of a
  large frequency list freed (RSS 80 MB above what Arrow holds, against 35 MB)."""
from __future__ import annotations

import importlib.abc
import os
import sys


class _Declined(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            raise ModuleNotFoundError("lakestats lookups run without pandas", name=name)
        return None


def prepare() -> None:
    """Before pyarrow allocates: from now on, `import pandas` fails in this process (unless it
    is imported already), and Arrow's default pool is the system allocator (unless set)."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _Declined())
