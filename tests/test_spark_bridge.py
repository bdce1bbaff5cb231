"""Spark integration on a real local SparkSession: CBO statistics without ANALYZE, statistics
computed by Spark tasks, statistics as a DataFrame."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from lakestats import spark_bridge
from lakestats.metastore.reader import StatisticsReader
from tests.tables import mixed, statistics_without_sketches, write


def describe(spark, table: str, column: str) -> dict:
    return {r.info_name: r.info_value
            for r in spark.sql(f"DESCRIBE EXTENDED {table} {column}").collect()}


def estimated_rows(spark, query: str) -> float | None:
    """The optimizer's row estimate for the query's top operator (EXPLAIN COST)."""
    plan = spark.sql(f"EXPLAIN COST {query}").collect()[0][0]
    found = re.search(r"Optimized Logical Plan ==\n.*?rowCount=([0-9.E+]+)", plan)
    return float(found.group(1)) if found else None


def join_strategy(spark, query: str) -> str:
    plan = spark.sql(query)._jdf.queryExecution().executedPlan().toString()
    return "broadcast" if "BroadcastHashJoin" in plan else "sort-merge" if "SortMergeJoin" in plan \
        else plan


@pytest.fixture(scope="module")
def orders(tmp_path_factory, run, spark):
    root = tmp_path_factory.mktemp("orders")
    for i in range(4):
        write(root / f"part-{i}.parquet", mixed(25_000, seed=i))
    run(root)
    spark.sql(f"CREATE TABLE orders USING parquet LOCATION '{root}'")
    applied = spark_bridge.apply_statistics(spark, "orders", str(root))
    assert applied["row_count"] == 100_000
    return root


def test_describe_extended_shows_our_statistics(orders, spark):
    ours = {c["column"]: c for c in StatisticsReader(f"{orders}/_lakestats").summary()["columns"]}
    truth = spark.sql("""select min(qty), max(qty), count(distinct qty), count(*) - count(qty),
                                min(day), max(day), max(length(city)), avg(length(city))
                         from orders""").collect()[0]
    qty, day, city = (describe(spark, "orders", c) for c in ("qty", "day", "city"))
    assert (qty["min"], qty["max"]) == (str(truth[0]), str(truth[1]))
    assert qty["distinct_count"] == str(truth[2]) == str(ours["qty"]["distinct_count"])
    assert qty["num_nulls"] == str(truth[3])
    assert (day["min"], day["max"]) == (str(truth[4]), str(truth[5]))
    assert city["max_col_len"] == str(truth[6])
    assert city["avg_col_len"] == str(round(truth[7]))
    assert qty["histogram"].endswith("num_of_bins: 254")
    assert day["histogram"].endswith("num_of_bins: 254")


@pytest.mark.parametrize("predicate", ["day < DATE '2024-03-01'", "qty BETWEEN 10 AND 14",
                                       "price > 130"])
def test_range_estimates_come_from_our_histograms(orders, spark, predicate):
    true_rows = spark.sql(f"select count(*) from orders where {predicate}").collect()[0][0]
    estimate = estimated_rows(spark, f"SELECT * FROM orders WHERE {predicate}")
    assert estimate == pytest.approx(true_rows, rel=0.05)


def test_join_strategy_matches_analyze(tmp_path, run, spark):
    """A selective filter on the dimension makes it small enough to broadcast: Spark only knows
    with column statistics. Ours and ANALYZE's lead to the same plan; no statistics do not."""
    rng = np.random.default_rng(5)
    fact, dim = tmp_path / "fact", tmp_path / "dim"
    write(fact / "f.parquet", pa.table({"k": rng.integers(0, 50_000, 200_000),
                                        "v": rng.normal(size=200_000)}))
    write(dim / "d.parquet", pa.table({"k": np.arange(50_000), "x": rng.integers(0, 1000, 50_000),
                                       "label": rng.choice(["alpha", "beta", "gamma"], 50_000)}))
    run(fact), run(dim)
    for suffix in ("ours", "analyzed", "bare"):
        spark.sql(f"CREATE TABLE fact_{suffix} USING parquet LOCATION '{fact}'")
        spark.sql(f"CREATE TABLE dim_{suffix} USING parquet LOCATION '{dim}'")
    spark_bridge.apply_statistics(spark, "fact_ours", str(fact))
    spark_bridge.apply_statistics(spark, "dim_ours", str(dim))
    for table in ("fact_analyzed", "dim_analyzed"):
        spark.sql(f"ANALYZE TABLE {table} COMPUTE STATISTICS FOR ALL COLUMNS")
    query = ("SELECT f.v, d.label FROM fact_{s} f JOIN dim_{s} d ON f.k = d.k "
             "WHERE d.x < 5")
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", str(64 * 1024))
    try:
        plans = {s: join_strategy(spark, query.format(s=s)) for s in ("ours", "analyzed", "bare")}
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)
    assert plans["ours"] == plans["analyzed"] == "broadcast"
    assert plans["bare"] == "sort-merge"


def test_compute_on_spark_equals_local(tmp_path, run, spark):
    for i in range(3):
        write(tmp_path / f"p{i}.parquet", mixed(8000, seed=20 + i))
    run(tmp_path, stats_root=str(tmp_path / "_local"))
    report = spark_bridge.compute(spark, str(tmp_path), stats_root=str(tmp_path / "_spark"))
    assert (report.computed, report.failed) == (3, {})
    local, on_spark = (StatisticsReader(str(tmp_path / d)) for d in ("_local", "_spark"))
    assert statistics_without_sketches(on_spark.statistics()) == \
        statistics_without_sketches(local.statistics())
    for column in ("id", "price", "day"):
        assert on_spark.histogram(column) == local.histogram(column)
    assert on_spark.frequencies("city") == local.frequencies("city")
    for path in ("p0.parquet", "p2.parquet"):
        assert statistics_without_sketches(on_spark.statistics(partition=path)) == \
            statistics_without_sketches(local.statistics(partition=path))


def test_stale_statistics_are_refused(tmp_path, run, spark):
    write(tmp_path / "a.parquet", mixed(1000, seed=1))
    run(tmp_path)
    spark.sql(f"CREATE TABLE stale USING parquet LOCATION '{tmp_path}'")
    write(tmp_path / "b.parquet", mixed(1000, seed=2))
    with pytest.raises(spark_bridge.StaleStatistics, match=r"b\.parquet \(new\)"):
        spark_bridge.apply_statistics(spark, "stale", str(tmp_path))
    applied = spark_bridge.apply_statistics(spark, "stale", str(tmp_path), allow_stale=True)
    assert applied["row_count"] == 1000


def test_statistics_frame_is_queryable(orders, spark):
    frame = spark_bridge.statistics_frame(spark, str(orders))
    frame.createOrReplaceTempView("orders_stats")
    per_partition, table = spark.sql("""
        select sum(case when level = 'partition' then row_count end),
               max(case when level = 'table' then row_count end)
        from orders_stats where `column` = 'qty'""").collect()[0]
    assert per_partition == table == 100_000
    assert frame.count() == 5 * 5          # (table + 4 partitions) x 5 columns


HIVE_SESSION = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.warehouse.dir", sys.argv[1] + "/warehouse")
         .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                 f"jdbc:derby:;databaseName={sys.argv[1]}/metastore;create=true")
         .enableHiveSupport().getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
"""


def test_hive_catalog_keeps_statistics_across_sessions(tmp_path, run):
    table = tmp_path / "data"
    write(table / "a.parquet", mixed(2000, seed=3))
    run(table)
    first = HIVE_SESSION + textwrap.dedent(f"""
        from lakestats import spark_bridge
        spark.sql("CREATE TABLE h USING parquet LOCATION '{table}'")
        spark_bridge.apply_statistics(spark, "h", "{table}")
    """)
    second = HIVE_SESSION + textwrap.dedent("""
        rows = spark.sql("DESCRIBE EXTENDED h qty").collect()
        print({r.info_name: r.info_value for r in rows})
    """)
    for script in (first, second):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
    shown = eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 - our own subprocess's dict
    ours = {c["column"]: c for c in StatisticsReader(f"{table}/_lakestats").summary()["columns"]}
    assert shown["distinct_count"] == str(ours["qty"]["distinct_count"])
    assert (shown["min"], shown["max"]) == (ours["qty"]["min"], ours["qty"]["max"])
