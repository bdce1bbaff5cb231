"""One error hierarchy: every exception class the project defines is a LakestatsError, and the
command line prints one as its message alone on one line (exit 2 for a UsageError, 1 for any
other), and anything else, a bug, with its type."""
from __future__ import annotations

import importlib
import inspect

import pytest
import redis

from lakestats.core import errors as core_errors
from lakestats import cli, errors
from lakestats.errors import (CliError, DataCorrupt, FormatUnsupported, LakestatsError,
                              ServiceUnavailable, StatisticsMissing, TableNotFound, UsageError)

from tests.layout import PACKAGES, ROOT, module_name


def exception_classes() -> dict[str, type]:
    """Every exception class defined in the project's modules, by its dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = module_name(path)
            module = importlib.import_module(name)
            for cls in vars(module).values():
                if inspect.isclass(cls) and issubclass(cls, BaseException) \
                        and cls.__module__ == name:
                    found[f"{name}.{cls.__qualname__}"] = cls
    return found


def test_every_exception_class_is_a_lakestats_error():
    classes = exception_classes()
    assert {"lakestats.pruning.predicate.PredicateError", "lakestats.metastore.store.StoreError",
            "lakestats.monostore.report.NoSuchTable", "lakestats.errors.CliError"} <= classes.keys()
    assert [name for name, cls in classes.items() if not issubclass(cls, LakestatsError)] == []


def test_the_kinds_and_the_bases_callers_catch():
    from lakestats.formats import FormatError
    from lakestats.metastore.reader import NotPublished
    from lakestats.monostore.report import NoSuchTable
    from lakestats.pruning.predicate import PredicateError
    assert errors.LakestatsError is core_errors.LakestatsError
    assert errors.UsageError is core_errors.UsageError
    assert issubclass(PredicateError, UsageError) and issubclass(PredicateError, ValueError)
    assert issubclass(NotPublished, StatisticsMissing)
    assert issubclass(NoSuchTable, TableNotFound)
    assert issubclass(FormatError, FormatUnsupported)
    for kind in (UsageError, TableNotFound, StatisticsMissing, FormatUnsupported, DataCorrupt,
                 ServiceUnavailable, CliError):
        assert issubclass(kind, LakestatsError) and kind.__doc__, kind


def failing(error: BaseException):
    def command(args) -> int:
        raise error
    return command


@pytest.mark.parametrize("error, code, line", [
    (StatisticsMissing("t/_lakestats: no statistics published yet"), 1,
     "t/_lakestats: no statistics published yet"),
    (ServiceUnavailable("Redis at redis://h:6379 cannot be reached"), 1,
     "Redis at redis://h:6379 cannot be reached"),
    (CliError("3 of 9 files failed"), 1, "3 of 9 files failed"),
    (UsageError("[UNRESOLVED_COLUMN] 'regoin'"), 2, "[UNRESOLVED_COLUMN] 'regoin'"),
    (FileNotFoundError(2, "No such file or directory", "t/x"), 1,
     "[Errno 2] No such file or directory: 't/x'"),
    (redis.ConnectionError("Connection refused"), 1, "Connection refused"),   # a service's
    (ZeroDivisionError("division by zero"), 1, "ZeroDivisionError: division by zero"),  # a bug
])
def test_the_command_line_prints_one_line_and_exits(monkeypatch, capsys, error, code, line):
    monkeypatch.delenv("LAKESTATS_DEBUG", raising=False)
    monkeypatch.setitem(cli.COMMANDS, "show", failing(error))
    assert cli.main(["show", "some/table"]) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [f"lakestats: error: {line}"]


def test_a_predicate_error_is_a_usage_error(monkeypatch, capsys):
    from lakestats.pruning.predicate import PredicateError
    monkeypatch.setitem(cli.COMMANDS, "show", failing(PredicateError("predicate 'x': bad")))
    assert cli.main(["show", "some/table"]) == 2
    assert "PredicateError" not in capsys.readouterr().err
