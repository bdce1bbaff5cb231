"""User-defined statistics: the public import path of plugins (`from lakestats.udf import
statistic`). See core.udf."""
from lakestats.core.udf import MERGES, Statistic, statistic

__all__ = ["MERGES", "Statistic", "statistic"]
