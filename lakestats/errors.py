"""The command line's errors: each is one line on stderr; a usage error exits 2, any other 1."""
from __future__ import annotations

import sys


class CliError(Exception):
    """Printed as one line on stderr; the command exits non-zero."""


class UsageError(CliError):
    """A bad argument (a column the table lacks, a value not of its type): exit 2."""


def message_of(e: Exception) -> str:
    """The line printed for `e`: its message, with its type when it is not one of ours (a bug,
    or an error whose message alone would not say what failed)."""
    return str(e) if isinstance(e, CliError) or _is_ours(e) else f"{type(e).__name__}: {e}"


def _is_ours(e: Exception) -> bool:
    """An error whose message says what is wrong: the project's own, the file system's (it
    names the path) and those of the services a command talks to. Anything else is a bug,
    printed with its type."""
    return isinstance(e, OSError) or type(e).__module__.split(".")[0] in (
        "core", "metastore", "fleet", "algorithms", "monostore", "functions", "infra", "pruning",
        "formats", "botocore", "redis", "pyiceberg")


def is_usage(e: Exception) -> bool:
    predicate = sys.modules.get("pruning.predicate")   # not imported: not its error
    return isinstance(e, UsageError) or predicate is not None and isinstance(
        e, predicate.PredicateError)
