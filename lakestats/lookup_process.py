"""How a lookup's own process is set up: lookups read a little of large files, and answer in a
fraction of a second within a small memory.

- pandas is declined. pyarrow imports it, when installed, at its first conversion of Python
  objects, only to ask whether they are DataFrames: 0.4 s of a 0.9 s lookup. Declined,
  pyarrow takes pandas for absent.
- Arrow allocates with the system allocator: mimalloc, Arrow's default, keeps what a scan of a
  large frequency list freed (RSS 80 MB above what Arrow holds, against 35 MB).
- A lookup imports what it uses: the terminal's tables (rich) load when one is printed, not for
  `--json`; `lazy` is how (a lookup's time is mostly imports)."""
from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType


class _Declined:        # a meta path finder (importlib.abc's base class costs 8 ms to import)
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


def lazy(name: str) -> ModuleType:
    """Module `name`, loaded at its first attribute access (the standard library's recipe)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
