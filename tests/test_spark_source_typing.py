"""The `lakestats` Spark data source where Spark types columns otherwise than the statistics:
columns of files landed since, and Hive directory values (Spark's partition-type inference),
against plain Parquet reads of the same files."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakestats import spark_bridge
from tests.tables import write
from tests.test_spark_source import month, sorted_rows


def test_a_column_only_in_files_landed_since_is_read_not_refused(spark, tmp_path, run):
    """Files that landed after the statistics may bring a column they do not describe (Spark
    sees it with mergeSchema): its conjuncts are not pushed, every file is read as Spark
    reads it, and the other conjuncts still prune."""
    uri = tmp_path / "grown"
    for m in range(2):
        write(uri / f"part-{m}.parquet", month(m))
    run(str(uri))
    landed = month(2).append_column("extra", pa.array(np.arange(len(month(2))) % 7, pa.int64()))
    write(uri / "late.parquet", landed)
    frame = spark.read.format("lakestats").option("mergeSchema", "true").load(str(uri))
    plain = spark.read.option("mergeSchema", "true").parquet(str(uri))
    for predicate in ("extra = 3", "extra IS NULL AND k < 5", "extra = 3 OR k = 7"):
        assert sorted_rows(frame.where(predicate)) == sorted_rows(plain.where(predicate))
    top = [r.extra for r in frame.where("k >= 0").orderBy("extra").limit(3).collect()]
    assert top == [r.extra for r in plain.where("k >= 0").orderBy("extra").limit(3).collect()]
    planned = spark_bridge.explain(frame.where("extra IS NULL AND k < 5"))
    assert planned["not_pushed"] and all("extra" in c for c in planned["not_pushed"])
    assert "late.parquet" in planned["unknown"] and "part-1.parquet" in planned["skipped"]


HIVE_VALUES = [["1", "2"], ["1", "3000000000"], ["99999999999999999998", "99999999999999999999"],
               ["3000000000", "1.5"], ["NaN", "1"], ["1d", "2.5f"], ["0x1p3", "2"], ["5.", "7"],
               ["1e5", "2"], ["2024-01-01", "2024-01-02"], ["2024-01-01", "1"],
               ["99999999999999999999", "1.5"], ["-0", "+5"], ["x", "__HIVE_DEFAULT_PARTITION__"]]


@pytest.mark.parametrize("values", HIVE_VALUES, ids="|".join)
def test_directory_columns_are_typed_as_spark_infers_them(spark, tmp_path, run, values):
    """Spark's partition-column inference (int, bigint, decimal(p,0), double as Java parses it,
    date, string; widened as Spark widens) is the statistics' type of a directory column, so
    its bounds order as Spark orders its values: once, 99999999999999999998 and ...99 were both
    1e20 as doubles, and a pushed `c < 99999999999999999999` skipped the file holding it."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_type
    from lakestats.metastore.reader import StatisticsReader
    for i, v in enumerate(values):
        write(tmp_path / f"c={v}" / "part.parquet", pa.table({"x": [i, i + 10]}))
    run(tmp_path)
    plain = spark.read.parquet(str(tmp_path))
    stats = StatisticsReader(f"{tmp_path}/_lakestats").schema()
    assert stats.field("c").type == to_arrow_type(plain.schema["c"].dataType)
    frame = spark.read.format("lakestats").load(str(tmp_path))
    for order in (F.col("c").asc(), F.col("c").desc()):
        assert repr([r.c for r in frame.orderBy(order).limit(1).collect()]) == \
            repr([r.c for r in plain.orderBy(order).limit(1).collect()])


def test_filters_on_timestamp_directories_are_left_to_spark(spark, tmp_path, run):
    """Spark types `tp=2024-01-01 10%3A30%3A00/` a timestamp (in the session's time zone);
    the statistics keep it a string, so a filter on it is Spark's alone (not pushed) and the
    others still prune: once, the planner refused the comparison and the query failed."""
    for i, hour in enumerate((10, 11)):
        write(tmp_path / f"tp=2024-01-01 {hour}%3A30%3A00" / "part.parquet",
              pa.table({"x": [i, i + 10]}))
    run(tmp_path)
    plain = spark.read.parquet(str(tmp_path))
    frame = spark.read.format("lakestats").load(str(tmp_path))
    for predicate in ("tp = TIMESTAMP '2024-01-01 10:30:00'", "tp > '2024-01-01 10:45:00'",
                      "tp < TIMESTAMP '2024-01-01 12:00:00' AND x = 11"):
        assert sorted_rows(frame.where(predicate)) == sorted_rows(plain.where(predicate))
    planned = spark_bridge.explain(frame.where("tp < TIMESTAMP '2024-01-01 12:00:00' AND x = 11"))
    assert any("tp" in c for c in planned["not_pushed"]) and planned["skipped"] == [
        "tp=2024-01-01 10%3A30%3A00/part.parquet"]
    assert [r.x for r in frame.where("x >= 0").orderBy("tp").limit(1).collect()] == \
        [r.x for r in plain.where("x >= 0").orderBy("tp").limit(1).collect()]
    # in New York 02:30 on 2024-03-10 does not exist: Spark reads it as 03:30, after 03:00
    gap = tmp_path / "gap"
    for i, time in enumerate(("02%3A30%3A00", "03%3A00%3A00")):
        write(gap / f"tp=2024-03-10 {time}" / "part.parquet", pa.table({"x": [i]}))
    run(gap)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        first = spark.read.format("lakestats").load(str(gap)).orderBy("tp").limit(1).collect()
        assert [r.x for r in first] == [1]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
