"""lakestats: exact column statistics for tables of Parquet files (plain directories, Iceberg,
Delta, Hudi), computed by a fleet of functions, one per data file.

    import lakestats
    report = lakestats.compute("s3://lake/orders")          # a new published version
    stats = lakestats.open("s3://lake/orders")
    stats.show(columns=["o_orderdate"])                      # what `lakestats show --json` prints
    stats.frequencies("o_orderstatus", top=10)
    lakestats.prune("s3://lake/orders", where="o_custkey = 7", limit=10).kept
    open("orders.html", "w").write(lakestats.html_report("s3://lake/orders"))   # a profile
    from lakestats import spark_bridge                       # the statistics in PySpark

Errors are lakestats.errors.LakestatsError and its kinds. The names below load on first use:
the functions' workers import lakestats.* without the API's dependencies.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakestats.api import RanksRefused, TableStatistics, compute, open, prune
    from lakestats.core.errors import LakestatsError
    from lakestats.core.settings import Settings
    from lakestats.monostore.report import ComputeFailed, Report
    from lakestats.profile import html_report
    from lakestats.pruning.plan import PruneResult

# public name -> the module that defines it
_PUBLIC = {"compute": "lakestats.api", "open": "lakestats.api", "prune": "lakestats.api",
           "html_report": "lakestats.profile",
           "TableStatistics": "lakestats.api", "RanksRefused": "lakestats.api",
           "Settings": "lakestats.core.settings", "Report": "lakestats.monostore.report",
           "ComputeFailed": "lakestats.monostore.report", "PruneResult": "lakestats.pruning.plan",
           "LakestatsError": "lakestats.core.errors"}
__all__ = ["ComputeFailed", "LakestatsError", "PruneResult", "RanksRefused", "Report",
           "Settings", "TableStatistics", "compute", "html_report", "open", "prune"]


def __getattr__(name: str):  # the names above, imported on first use
    if name not in _PUBLIC:
        raise AttributeError(f"module 'lakestats' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
