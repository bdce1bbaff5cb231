"""The project's errors, one hierarchy (defined at the bottom layer, in core.errors), and how the
command line prints them: each is one line on stderr; a usage error exits 2, any other 1."""
from __future__ import annotations

import contextlib
import importlib

from lakestats.core.errors import (DataCorrupt, FormatUnsupported, LakestatsError,
                                   ServiceUnavailable, StatisticsMissing, TableNotFound, UsageError)

__all__ = ["LakestatsError", "UsageError", "TableNotFound", "StatisticsMissing",
           "FormatUnsupported", "DataCorrupt", "ServiceUnavailable", "CliError", "message_of",
           "is_usage"]

# the errors of the libraries a command talks to whose message alone says what failed (S3,
# Redis, an Iceberg catalog), as (module, class): imported only to print an error, if installed
LIBRARY_ERRORS = (("botocore.exceptions", "BotoCoreError"),
                  ("botocore.exceptions", "ClientError"),
                  ("redis.exceptions", "RedisError"), ("pyiceberg.exceptions", "RESTError"),
                  ("pyiceberg.exceptions", "NoSuchTableError"),
                  ("pyiceberg.exceptions", "NoSuchNamespaceError"),
                  ("pyiceberg.exceptions", "NotInstalledError"))


class CliError(LakestatsError):
    """A command failed (a compute that published nothing, a missing setting): exit 1."""


def message_of(e: BaseException) -> str:
    """The line printed for `e`: its message alone when that says what failed (a
    LakestatsError, a file system error, which names the path, or one of LIBRARY_ERRORS);
    anything else is a bug, printed with its type."""
    if isinstance(e, (LakestatsError, OSError)) or isinstance(e, _library_errors()):
        return str(e)
    return f"{type(e).__name__}: {e}"


def _library_errors() -> tuple[type, ...]:
    found = []
    for module, name in LIBRARY_ERRORS:
        with contextlib.suppress(ImportError, AttributeError):   # an optional library absent
            found.append(getattr(importlib.import_module(module), name))
    return tuple(found)


def is_usage(e: BaseException) -> bool:
    """A usage error (exit 2): a bad argument, a predicate that Spark would refuse."""
    return isinstance(e, UsageError)
