"""The project's errors: one hierarchy, at the bottom so that every layer can raise them.

Every exception class the project defines derives from `LakestatsError`, most through one of
the kinds below; the command line prints one as its message alone, exiting 2 for a
`UsageError` and 1 for any other. Public as `lakestats.errors`.
"""
from __future__ import annotations


class LakestatsError(Exception):
    """An error of lakestats: its message alone says what failed."""


class UsageError(LakestatsError):
    """A bad argument: an unknown column, a value not of its type, a predicate Spark refuses."""


class TableNotFound(LakestatsError):
    """Nothing is at the table's path."""


class StatisticsMissing(LakestatsError):
    """The statistics asked for are not there, or no longer describe the table."""


class FormatUnsupported(LakestatsError):
    """The table is not of the format asked for, or holds what lakestats cannot read exactly."""


class DataCorrupt(LakestatsError):
    """A data file, or the table's data taken together, cannot be read as it should."""


class ServiceUnavailable(LakestatsError):
    """A service failed after its retries (Redis, S3, a worker), or lost a job's state."""


__all__ = ["LakestatsError", "UsageError", "TableNotFound", "StatisticsMissing",
           "FormatUnsupported", "DataCorrupt", "ServiceUnavailable"]
