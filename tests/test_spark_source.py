"""The `lakestats` Spark data source: ordinary DataFrame code and SQL on a `USING lakestats`
table return what `spark.read.parquet` over every file returns, read the files
`lakestats prune` keeps (and every file the statistics do not describe), and give the
cost-based optimizer the published statistics."""
from __future__ import annotations

import datetime as dt
import decimal
import shutil

import numpy as np
import pyarrow as pa
import pytest

from lakestats import spark_bridge
from tests.tables import write

# (predicate, limit): equality, ranges, IN, IS NULL, dates, timestamps, strings, AND/OR,
# arithmetic and functions (not pushed), partition columns, with and without LIMIT
SUITE = [
    ("k = 3005", None),
    ("k BETWEEN 2000 AND 2100", None),
    ("k IN (5, 4005, 7999)", None),
    ("k < 0", None),
    ("NOT (k >= 1000)", None),
    ("k + 1 = 4001", None),
    ("k % 1000 = 5", None),
    ("s IS NULL", None),
    ("s IS NOT NULL AND k < 1100", None),
    ("s = 'it\\'s ü'", None),
    ("s LIKE 'v3%'", None),
    ("s LIKE 'v_\\_1'", None),
    ("s NOT LIKE 'v3%' AND k < 4000", None),
    ("upper(s) = 'V6_2'", None),
    ("d >= DATE '2024-05-01'", None),
    ("d < DATE '2024-02-01' OR d > DATE '2024-07-15'", None),
    ("ts >= TIMESTAMP '2024-06-01 00:00:00'", None),
    ("ts < TIMESTAMP '2024-02-10 05:30:00+05:30'", None),
    ("ts < TIMESTAMP '2300-01-01 00:00:00' AND ts > TIMESTAMP '1600-01-01 00:00:00'", None),
    ("x > 400.5", None),
    ("x = 0.0", None),
    ("isnan(x)", None),
    ("x = double('NaN')", None),
    ("dec > 5000.125", None),
    ("b AND k < 2000", None),
    ("`é x``` = 25", None),
    ("region = 'r1'", None),
    ("region = 'r0' AND k > 6000", None),
    ("(k < 500 OR s = 'v7_3') AND region = 'r1'", None),
    ("x > 10", 5),
    ("k >= 0", 3),
    ("s = 'v2_3' OR k = 7000", 2),
    ("upper(s) = 'V6_2'", 4),
    # conjuncts Spark's scan never hands the index (a partition and a data column in one, a
    # subquery): LIMIT must not reach it
    ("k = 7000 OR region = 'r9'", 1),
    ("k = (SELECT max(id) FROM range(3001))", 1),
]
# (predicate, order, limit): top-k, Spark's null order (ASC: nulls first)
ORDERED = [
    ("k >= 0", "k DESC", 5),
    ("d >= DATE '2024-03-01'", "d ASC", 10),
    ("x > 10", "x ASC", 3),
    ("k < 7000", "s ASC", 4),
    ("b", "ts DESC", 7),
    ("upper(s) = 'V6_2'", "k ASC", 2),
    ("k = 7000 OR region = 'r9'", "k ASC", 1),
]


def month(m: int) -> pa.Table:
    """File m holds month m+1 of 2024: keys m*1000.., and every kind of value."""
    n = 400
    i = np.arange(n)
    x = i * 1.25
    if m == 4:
        x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    strings = [f"v{m}_{j % 7}" for j in i]
    if m == 2:
        strings[7] = "it's ü"
    return pa.table({
        "k": pa.array(m * 1000 + i, pa.int64()),
        "s": pa.array([None if m == 5 else v for v in strings], pa.string()),
        "d": pa.array([dt.date(2024, m + 1, 1 + j % 28) for j in i], pa.date32()),
        "ts": pa.array([dt.datetime(2024, m + 1, 1 + j % 28, j % 24, tzinfo=dt.timezone.utc)
                        for j in i], pa.timestamp("us", "UTC")),
        "x": pa.array(x, mask=(i % 50 == 1) if m == 4 else None),
        "dec": pa.array([decimal.Decimal(int(m * 1000 + j)) / 8 for j in i], pa.decimal128(12, 3)),
        "b": pa.array(i % 3 == 0),
        "é x`": pa.array(m * 10 + i % 10, pa.int32()),      # a name to be quoted
    })


@pytest.fixture(scope="module")
def lake(tmp_path_factory, run):
    root = tmp_path_factory.mktemp("source") / "events"
    for m in range(8):
        write(root / f"region=r{m % 2}" / f"part-{m}.parquet", month(m))
    run(root)
    return str(root)


def sorted_rows(df) -> list[str]:
    """Rows as text, in order (NaN equals NaN)."""
    return sorted(repr(tuple(r)) for r in df.collect())


def check_suite(spark, uri: str, frame, table: str) -> None:
    """Every predicate through `frame` and through SQL on `table`: the rows of a plain Parquet
    scan of every file; the files kept are lakestats prune's."""
    everything = spark.read.parquet(uri)
    for predicate, limit in SUITE:
        expected = everything.where(predicate)
        for df in (frame.where(predicate),
                   spark.sql(f"SELECT * FROM {table} WHERE {predicate}")):
            if limit is None:
                assert sorted_rows(df) == sorted_rows(expected), predicate
            else:
                df = df.limit(limit)
                got = df.collect()
                assert len(got) == min(limit, expected.count()), predicate
                assert {repr(tuple(r)) for r in got} <= set(sorted_rows(expected)), predicate
            check_plan(spark, uri, df, predicate)
    for predicate, order, limit in ORDERED:
        column, direction = order.split()

        def ordered(df):
            return df.where(predicate).orderBy(getattr(df[column], direction.lower())())
        expected = [r[column] for r in ordered(everything).limit(limit).collect()]
        for df in (ordered(frame).limit(limit),
                   spark.sql(f"SELECT * FROM {table} WHERE {predicate} ORDER BY {order} "
                             f"LIMIT {limit}")):
            assert [r[column] for r in df.collect()] == expected, (predicate, order)
            check_plan(spark, uri, df, predicate)


def check_plan(spark, uri: str, df, predicate: str) -> None:
    """What Spark hands over (its own IS NOT NULL conjuncts too) is planned as `lakestats
    prune` plans it."""
    planned = spark_bridge.explain(df)
    pruned = spark_bridge.prune(uri, where=" AND ".join(planned["pushed"]) or None,
                                limit=planned["limit"], order_by=planned["order_by"],
                                time_zone=spark.conf.get("spark.sql.session.timeZone"))
    assert sorted(planned["kept"]) == sorted(pruned.kept), (predicate, planned)


def test_a_predicate_suite_reads_what_a_full_scan_reads(spark, lake):
    frame = spark.read.format("lakestats").load(lake)
    spark_bridge.register_table(spark, "source_events", lake)
    assert sorted(frame.columns) == sorted(spark.read.parquet(lake).columns)
    check_suite(spark, lake, frame, "source_events")
    planned = spark_bridge.explain(frame.where("k = 3005"))
    assert planned["kept"] == ["region=r1/part-3.parquet"] and len(planned["skipped"]) == 7
    assert spark_bridge.explain(frame.where("k % 1000 = 5"))["not_pushed"] == \
        ["((k % 1000L) = 5L)"]
    few = spark_bridge.explain(frame.where("k >= 0").limit(3))
    assert few["limit"] == 3 and len(few["kept"]) == 1
    top = spark_bridge.explain(frame.where("k >= 0").orderBy("k", ascending=False).limit(3))
    assert (top["order_by"], top["kept"]) == ("`k` DESC", ["region=r1/part-7.parquet"])
    # not every conjunct pushed: neither LIMIT nor the order may prune
    assert spark_bridge.explain(frame.where("upper(s) = 'V6_2'").limit(2))["limit"] is None


def test_the_suite_in_another_time_zone(spark, lake):
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        spark_bridge.register_table(spark, "source_events_ny", lake)
        check_suite(spark, lake, spark.read.format("lakestats").load(lake), "source_events_ny")
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_files_landed_or_removed_since_the_statistics(spark, lake, tmp_path):
    uri = str(tmp_path / "moving")
    shutil.copytree(lake, uri)
    spark_bridge.register_table(spark, "moving", uri)     # the relation the catalog keeps
    assert spark.sql("SELECT count(*) FROM moving WHERE k = 9001").collect()[0][0] == 0
    landed = month(0).set_column(0, "k", pa.array(9000 + np.arange(400), pa.int64()))
    write(tmp_path / "moving" / "region=r0" / "late.parquet", landed)
    frame = spark.read.format("lakestats").load(uri)
    for df in (frame.where("k = 9001"), spark.sql("SELECT * FROM moving WHERE k = 9001")):
        assert df.count() == 1
        assert spark_bridge.explain(df)["unknown"] == ["region=r0/late.parquet"]
    (tmp_path / "moving" / "region=r1" / "part-3.parquet").unlink()
    for df in (frame.where("k >= 3000"), spark.sql("SELECT * FROM moving WHERE k >= 3000")):
        assert sorted_rows(df) == sorted_rows(spark.read.parquet(uri).where("k >= 3000"))
        assert "region=r1/part-3.parquet" not in spark_bridge.explain(df)["kept"]


def test_the_optimizer_gets_the_statistics_without_analyze(spark, lake, tmp_path, run):
    dim = tmp_path / "dim"
    write(dim / "d.parquet", pa.table({"k": pa.array(np.arange(0, 8000, 2), pa.int64()),
                                       "label": [f"l{i}" for i in range(4000)]}))
    run(dim)
    spark_bridge.register_table(spark, "cbo_events", lake)
    spark_bridge.register_table(spark, "cbo_dim", str(dim))
    stats = spark.sql("SELECT * FROM cbo_events")._jdf.queryExecution().optimizedPlan().stats()
    assert stats.rowCount().get() == 3200      # py4j turns a BigInt into an int
    column = _column_stats(stats, "k")
    assert (column.distinctCount().get(), column.min().get(), column.max().get()) == \
        (3200, 0, 7399)
    # the histogram puts `k < 100` at ~100 of 3,200 rows: small enough to broadcast, where
    # the same files read as plain Parquet (no statistics) are too large
    query = "SELECT * FROM {e} e JOIN {d} d ON e.k = d.k WHERE e.k < 100"
    spark.read.parquet(lake).createOrReplaceTempView("plain_events")
    spark.read.parquet(str(dim)).createOrReplaceTempView("plain_dim")
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "20000")
    try:
        ours = spark.sql(query.format(e="cbo_events", d="cbo_dim"))
        plain = spark.sql(query.format(e="plain_events", d="plain_dim"))
        assert "BroadcastHashJoin" in _physical(ours) and "SortMergeJoin" in _physical(plain)
        assert sorted_rows(ours) == sorted_rows(plain)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


def test_a_new_version_reaches_the_optimizer(spark, tmp_path, run):
    root = tmp_path / "growing"
    write(root / "a.parquet", month(0))
    run(root)
    spark_bridge.register_table(spark, "growing", str(root))

    def rows() -> str:
        plan = spark.sql("SELECT * FROM growing")._jdf.queryExecution().optimizedPlan()
        return plan.stats().rowCount().get()
    assert rows() == 400
    write(root / "b.parquet", month(1))
    run(root)
    assert rows() == 800


def test_configure_adds_the_jar_and_the_extensions_once():
    from pyspark.sql import SparkSession
    builder = spark_bridge.configure(SparkSession.builder)
    assert builder._options["spark.sql.extensions"].endswith(
        "org.apache.spark.sql.lakestats.Extensions")
    assert builder._options["spark.jars"].endswith(".jar")
    again = spark_bridge.configure(builder)
    assert again._options["spark.jars"].count(".jar") == 1
    assert again._options["spark.sql.parquet.fieldId.read.enabled"] == "true"


def _column_stats(stats, name: str):
    entries = stats.attributeStats().iterator()
    while entries.hasNext():
        entry = entries.next()
        if entry._1().name() == name:
            return entry._2()
    raise AssertionError(f"no statistics for {name}")


def _physical(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_s3_without_s3a_is_refused_in_one_line(spark, tmp_path, s3_endpoint):
    import boto3
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="source-s3")
    s3.upload_file(str(write(tmp_path / "a.parquet", month(0))), "source-s3", "t/a.parquet")
    with pytest.raises(Exception, match="S3A filesystem, which this session lacks"):
        spark.read.format("lakestats").load("s3://source-s3/t")


def test_plain_parquet_reads_prune_when_the_rule_is_on(spark, lake, tmp_path, run):
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    flat = tmp_path / "flat"                 # a catalog table without partition columns
    for m in range(4):
        write(flat / f"part-{m}.parquet", month(m))
    run(flat)
    spark.sql("DROP TABLE IF EXISTS plain_parquet")
    spark.sql(f"CREATE TABLE plain_parquet USING parquet LOCATION '{flat}'")
    predicate = "k = 3005 OR k = 1"
    spark.conf.set("spark.lakestats.parquet.enabled", "true")
    try:
        for df, root, kept in (
                (spark.read.parquet(lake).where(predicate), lake,
                 ["region=r0/part-0.parquet", "region=r1/part-3.parquet"]),
                (spark.sql(f"SELECT * FROM plain_parquet WHERE {predicate}"), str(flat),
                 ["part-0.parquet", "part-3.parquet"])):
            assert sorted(spark_bridge.explain(df)["kept"]) == kept
            oracle = ds.dataset(root, partitioning="hive").to_table(
                filter=(pc.field("k") == 3005) | (pc.field("k") == 1))
            assert sorted(r.k for r in df.collect()) == sorted(oracle["k"].to_pylist())
        # a read that picks its files itself is left alone
        picked = spark.read.option("basePath", lake).parquet(f"{lake}/region=r1")
        with pytest.raises(ValueError, match="no table through the lakestats source"):
            spark_bridge.explain(picked.where("k = 3005"))
    finally:
        spark.conf.set("spark.lakestats.parquet.enabled", "false")
    with pytest.raises(ValueError, match="no table through the lakestats source"):
        spark_bridge.explain(spark.read.parquet(lake).where(predicate))


def test_install_on_a_session_without_the_source_says_what_is_missing(spark, tmp_path):
    """A second driver, its session started without configure: install names what is missing
    in one line."""
    import subprocess
    import sys
    script = tmp_path / "plain.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "from lakestats import spark_bridge\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
        ".getOrCreate()\n"
        "try:\n"
        "    spark_bridge.install(spark)\n"
        "except RuntimeError as e:\n"
        "    print('REFUSED', e)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    line = next(x for x in done.stdout.splitlines() if x.startswith("REFUSED"))
    assert "spark_bridge.configure(SparkSession.builder)" in line, done.stderr[-2000:]


def test_a_table_without_statistics_is_read_whole(spark, tmp_path):
    for m in range(2):
        write(tmp_path / "bare" / f"part-{m}.parquet", month(m))
    df = spark.read.format("lakestats").load(str(tmp_path / "bare")).where("k = 5")
    assert df.count() == 1
    planned = spark_bridge.explain(df)
    assert planned["unknown"] == planned["kept"] == ["part-0.parquet", "part-1.parquet"]
    assert planned["version"] is None
