"""The public API (`import lakestats`): compute, open, prune and spark_bridge, typed and
documented; its answers are the command line's --json, checked against a plain computation
over the data."""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
import typing
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakestats
from lakestats.errors import LakestatsError, StatisticsMissing, TableNotFound, UsageError
from tests.tables import mixed, run_cli, write


@pytest.fixture(scope="module")
def table(tmp_path_factory, redis_url, s3_endpoint):
    root = tmp_path_factory.mktemp("api") / "orders"
    for i in range(3):
        write(root / f"part-{i}.parquet", mixed(500 + 100 * i, seed=i + 1))
    settings = lakestats.Settings(redis_url=redis_url, workers=2)
    report = lakestats.compute(str(root), settings=settings, ranks=["qty"])
    return root, report, settings


def _rows(root) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted(root.glob("*.parquet")))


def test_compute_publishes_a_version_with_the_ranks_asked_for(table):
    root, report, _ = table
    assert isinstance(report, lakestats.Report)
    assert report.published and report.version and set(report.ranks) == {"qty"}
    assert report.row_count == _rows(root).num_rows
    assert lakestats.open(str(root)).version == report.version


def test_lookups_answer_what_the_command_line_prints(table):
    root, _, _ = table
    stats = lakestats.open(str(root))
    for method, command in ((lambda: stats.show(), ["show"]),
                            (lambda: stats.partitions(), ["partitions"]),
                            (lambda: stats.frequencies("city"), ["frequencies", "city"]),
                            (lambda: stats.histogram("qty"), ["histogram", "qty"]),
                            (lambda: stats.quantiles("qty", [0.5]),
                             ["quantiles", "qty", "0.5"]),
                            (lambda: stats.rank("qty", "10"), ["rank", "qty", "10"])):
        done = run_cli(command[0], str(root), *command[1:], "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == json.loads(json.dumps(method())), command


def test_lookups_agree_with_the_data(table):
    root, _, _ = table
    rows = _rows(root)
    stats = lakestats.open(str(root))
    summary = stats.show(columns=["qty"])
    assert summary["row_count"] == rows.num_rows
    assert [c["column"] for c in summary["columns"]] == ["qty"]
    counts = Counter(rows["city"].to_pylist())
    got = {v["value"]: v["frequency"] for v in stats.frequencies("city")["values"]}
    assert got == dict(counts)
    top = stats.frequencies("city", top=2)["values"]
    assert [v["frequency"] for v in top] == sorted(counts.values(), reverse=True)[:2]
    qty = sorted(rows["qty"].to_pylist())
    assert stats.rank("qty", "10") == {"column": "qty", "value": "10",
                                       "smaller": sum(q < 10 for q in qty),
                                       "count": qty.count(10)}
    exact = stats.quantiles("qty", [0.5], exact=True)
    assert exact["exact"] and exact["quantiles"] == [{"q": 0.5,
                                                      "value": str(qty[(len(qty) - 1) // 2])}]
    assert sum(b["count"] for b in stats.histogram("qty")["bins"]) == len(qty)
    assert len(stats.partitions()["partitions"]) == 3


def test_prune_keeps_exactly_the_files_that_may_match(table):
    root, _, _ = table
    plan = lakestats.prune(str(root), where="id < 2000000")
    assert isinstance(plan, lakestats.PruneResult)
    # ids are seed * 1,000,000 onwards: only part-0 (seed 1) holds ids below 2,000,000
    assert plan.kept == ["part-0.parquet"] and plan.unknown == []
    assert sorted(plan.skipped) == ["part-1.parquet", "part-2.parquet"]
    assert plan.as_json()["version"] == lakestats.open(str(root)).version


def test_errors_are_the_hierarchys(table, tmp_path):
    root, _, settings = table
    stats = lakestats.open(str(root))
    with pytest.raises(UsageError, match="nope"):
        stats.frequencies("nope")
    with pytest.raises(UsageError):
        stats.rank("qty", "not a number")
    with pytest.raises(StatisticsMissing):
        lakestats.open(str(tmp_path)).show()
    with pytest.raises(TableNotFound):
        lakestats.compute(str(tmp_path / "absent"), settings=settings)
    with pytest.raises(lakestats.RanksRefused) as refused:
        lakestats.compute(str(root), settings=settings, ranks=["nope"])
    assert refused.value.report.version == stats.version
    assert isinstance(refused.value, LakestatsError)


def test_every_public_name_is_typed_and_documented():
    from lakestats.fleet.invokers import Invoker
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.monostore.compute import Progress
    # the names lakestats.api imports for type checking alone
    typing_only = {"Invoker": Invoker, "StatisticsReader": StatisticsReader,
                   "Progress": Progress, "Report": lakestats.Report,
                   "PruneResult": lakestats.PruneResult}
    assert lakestats.__doc__ and "spark_bridge" in lakestats.__doc__
    for name in lakestats.__all__:
        obj = getattr(lakestats, name)
        assert inspect.getdoc(obj), name
    for function in (lakestats.compute, lakestats.open, lakestats.prune,
                     *(m for n, m in vars(lakestats.TableStatistics).items()
                       if callable(m) and not n.startswith("_"))):
        hints = typing.get_type_hints(function, localns=typing_only)
        assert "return" in hints, function.__name__
        assert set(inspect.signature(function).parameters) - {"self", "how"} <= set(hints), \
            function.__name__
    from lakestats import spark_bridge
    assert callable(spark_bridge.read)
    with pytest.raises(AttributeError):
        lakestats.no_such_name


def test_importing_lakestats_loads_no_dependency():
    """The functions' workers import lakestats.*: the API's names load on first use."""
    code = "import sys, lakestats; print(sorted({'pyarrow', 'redis', 'boto3'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
