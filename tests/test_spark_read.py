"""spark_bridge.read: pruned reads return what a full scan returns, on local files and on
moto's S3 server, and read only the kept files."""
from __future__ import annotations

import datetime as dt

import boto3
import numpy as np
import pyarrow as pa

from lakestats import spark_bridge
from tests.tables import write

QUERIES = [
    dict(where="d >= DATE '2024-03-01'"),
    dict(where="d >= DATE '2024-03-01' AND q > 45", order_by="d ASC", limit=5),
    dict(order_by="d DESC", limit=10),
    dict(where="q > 45", limit=7),
    dict(where="id = 1034"),
    dict(where="d < DATE '2000-01-01'"),
]


def months(n_files: int) -> list[pa.Table]:
    """Orders clustered by date: file m holds month m of 2024."""
    rng = np.random.default_rng(1)
    out = []
    for m in range(n_files):
        n = 200
        days = np.datetime64(f"2024-{m + 1:02d}-01") + rng.integers(0, 28, n)
        out.append(pa.table({"id": np.arange(m * n, (m + 1) * n), "d": pa.array(days, pa.date32()),
                             "q": rng.integers(0, 100, n)}))
    return out


def rows(df) -> list:
    return sorted(tuple(r) for r in df.collect())


def check(spark, uri: str, query: dict) -> None:
    pruned = spark_bridge.read(spark, uri, **query)
    everything = spark_bridge.read(spark, uri)            # no predicate: every file
    if query.get("where"):
        everything = everything.where(query["where"])
    if query.get("order_by"):
        column, direction = query["order_by"].split()
        everything = everything.orderBy(getattr(everything[column], direction.lower())())
    if query.get("limit") is not None:
        everything = everything.limit(query["limit"])
    if query.get("order_by"):       # ties may pick other rows: compare the ordered keys
        column = query["order_by"].split()[0]
        assert [r[column] for r in pruned.collect()] == [r[column] for r in everything.collect()]
    else:
        assert rows(pruned) == rows(everything) if query.get("limit") is None else \
            len(pruned.collect()) == len(everything.collect())


def test_read_local_matches_a_full_scan_and_reads_fewer_files(tmp_path, spark, run):
    for m, t in enumerate(months(6)):
        write(tmp_path / f"m{m}.parquet", t)
    run(tmp_path)
    uri = str(tmp_path)
    for query in QUERIES:
        check(spark, uri, query)
    df = spark_bridge.read(spark, uri, where="d >= DATE '2024-05-01'")
    assert sorted(f.rsplit("/", 1)[-1] for f in df.inputFiles()) == ["m4.parquet", "m5.parquet"]
    top = spark_bridge.read(spark, uri, order_by="d DESC", limit=10)
    assert [f.rsplit("/", 1)[-1] for f in top.inputFiles()] == ["m5.parquet"]
    assert spark_bridge.read(spark, uri, where="d < DATE '2000-01-01'").count() == 0
    assert spark_bridge.prune(uri, where="id = 1034").kept == ["m5.parquet"]


def test_read_on_s3_matches_a_full_scan(tmp_path, spark, run, s3_endpoint):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="pruned")
    for m, t in enumerate(months(4)):
        path = write(tmp_path / f"region=r{m % 2}" / f"m{m}.parquet", t)
        s3.upload_file(str(path), "pruned", f"orders/region=r{m % 2}/m{m}.parquet")
    uri = "s3://pruned/orders"
    run(uri)
    for query in QUERIES[:4] + [dict(where="region = 'r1' AND q < 10")]:
        check(spark, uri, query)
    assert spark_bridge.prune(uri, where="d >= DATE '2024-04-01'").kept == ["region=r1/m3.parquet"]
    # Hive directory values typed as Spark types them (ints here, ordered as numbers), not as text
    for n, t in zip((1, 2, 10), months(3)):
        path = write(tmp_path / "typed" / f"n={n}" / "a.parquet", t)
        s3.upload_file(str(path), "pruned", f"typed/n={n}/a.parquet")
    run("s3://pruned/typed")
    local = spark.read.parquet(str(tmp_path / "typed"))
    for assume_current in (False, True):
        top = spark_bridge.read(spark, "s3://pruned/typed", where="n >= 2", order_by="n DESC",
                                limit=3, assume_current=assume_current)
        assert top.schema["n"].dataType == local.schema["n"].dataType
        assert [r.n for r in top.collect()] == [10, 10, 10]
        none = spark_bridge.read(spark, "s3://pruned/typed", where="n > 100",
                                 assume_current=assume_current)
        assert none.schema == local.schema and none.count() == 0


def test_read_types_directories_over_the_whole_table(tmp_path, spark, run):
    """Spark types a directory's values over the directories it lists: read over the kept
    files alone, p=05 would be 5 where the whole table, with p=abc, makes it '05'; an empty
    read has the whole table's columns too."""
    for p, x in (("05", 200), ("10", 300), ("abc", 1)):
        write(tmp_path / "mixed" / f"p={p}" / "f.parquet", pa.table({"x": pa.array([x])}))
    for p in (1, 2):
        write(tmp_path / "ints" / f"p={p}" / "f.parquet", pa.table({"x": pa.array([p])}))
    for name, where in (("mixed", "x = 200"), ("mixed", "x > 100"), ("ints", "x > 5")):
        uri = str(tmp_path / name)
        run(uri)
        pruned = spark_bridge.read(spark, uri, where=where, order_by="p ASC")
        whole = spark.read.parquet(uri).where(where).orderBy("p")
        assert pruned.schema == whole.schema
        assert pruned.collect() == whole.collect()
    assert spark_bridge.read(spark, str(tmp_path / "mixed"), where="x = 200").inputFiles() \
        == [f"file://{tmp_path}/mixed/p=05/f.parquet"]


def test_directories_spark_reads_as_timestamps_are_compared_as_spark_compares_them(
        tmp_path, spark, run):
    """`ts=2024-01-05 10:00:00` is a timestamp to Spark and text to the statistics: as text,
    `... 10:00:00` is before `... 9:00:00` and `... 09:30:00` differs from `... 9:30:00`, so
    comparing texts skipped the files that hold the rows. Such columns are left to Spark."""
    uri = str(tmp_path / "stamps")
    for i, stamp in enumerate(("2024-01-05 10:00:00", "2024-01-05 08:00:00",
                               "2024-01-05 09:30:00", "2024-01-06 00:00:00.5")):
        write(tmp_path / "stamps" / f"ts={stamp.replace(':', '%3A')}" / "f.parquet",
              pa.table({"a": [i]}))
    run(uri)
    whole = spark.read.parquet(uri)
    assert dict(whole.dtypes)["ts"] == "timestamp"
    for where in ("ts > '2024-01-05 9:00:00'", "ts = '2024-01-05 9:30:00'",
                  "ts < '2024-01-06' AND a >= 1", "ts >= '2024-01-05T09:30'"):
        assert rows(spark_bridge.read(spark, uri, where=where)) == rows(whole.where(where)), where
    for order in ("ASC", "DESC"):
        pruned = spark_bridge.read(spark, uri, order_by=f"ts {order}", limit=1)
        assert pruned.collect() == whole.orderBy(getattr(whole.ts, order.lower())()).limit(1) \
            .collect(), order


def test_directories_are_text_when_spark_infers_no_types(tmp_path, spark, run):
    """With partitionColumnTypeInference off, Spark reads `a=10` as the text '10', which
    sorts before '9': a top-k by the statistics' numbers kept the wrong files, in `read` and
    in the lakestats source. Such columns are left to Spark."""
    uri = str(tmp_path / "t")
    for a in (5, 10, 9):
        write(tmp_path / "t" / f"a={a}" / "f.parquet", pa.table({"x": [a * 100]}))
    run(uri)
    conf = "spark.sql.sources.partitionColumnTypeInference.enabled"
    spark.conf.set(conf, "false")
    try:
        whole = spark.read.parquet(uri)
        assert dict(whole.dtypes)["a"] == "string"
        source = spark.read.format("lakestats").load(uri)
        for order in ("ASC", "DESC"):
            expected = whole.orderBy(getattr(whole.a, order.lower())()).limit(1).collect()
            assert spark_bridge.read(spark, uri, order_by=f"a {order}", limit=1).collect() \
                == expected, order
            assert source.orderBy(getattr(source.a, order.lower())()).limit(1).collect() \
                == expected, order
        for where in ("a > '5'", "a < '6'", "a = 10", "x > 500 AND a <= '9'"):
            assert rows(spark_bridge.read(spark, uri, where=where)) \
                == rows(whole.where(where)) == rows(source.where(where)), where
    finally:
        spark.conf.unset(conf)


def test_s3_read_through_arrow_types_directories_as_the_session_does(tmp_path, spark, run,
                                                                    s3_endpoint):
    """Without S3A, S3 files are read through Arrow. Their directory values were typed by the
    statistics' inference whatever the session: `a=10` was 10 where a session inferring no
    types reads the text '10' (the first by `a ASC`), and `ts=...` was text where Spark reads a
    timestamp (`ts > '2024-01-05 9:00:00'` compared texts). Spark now types them itself, in
    the session's time zone, over the whole table's directories, also when assume_current
    lists none (p=05 kept beside p=abc skipped is text)."""
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="arrow-typed")
    for name, column, values, data in (
            ("ints", "a", ["5", "10", "9", "__HIVE_DEFAULT_PARTITION__"], "x"),
            ("stamps", "ts", ["2024-01-05 10%3A00%3A00", "2024-01-05 08%3A00%3A00"], "y"),
            ("mixed", "p", ["05", "abc"], "z")):
        for i, value in enumerate(values):
            path = write(tmp_path / name / f"{column}={value}" / "f.parquet",
                         pa.table({data: [i]}))
            s3.upload_file(str(path), "arrow-typed", f"{name}/{column}={value}/f.parquet")
        run(f"s3://arrow-typed/{name}")
    conf, zone = "spark.sql.sources.partitionColumnTypeInference.enabled", \
        "spark.sql.session.timeZone"
    saved = spark.conf.get(zone)
    for inferring, in_zone in (("true", saved), ("false", saved), ("true", "Asia/Kolkata")):
        spark.conf.set(conf, inferring)
        spark.conf.set(zone, in_zone)
        try:
            for name, column, where in (("ints", "a", "a > 6"),
                                        ("stamps", "ts", "ts > '2024-01-05 9:00:00'")):
                whole = spark.read.parquet(str(tmp_path / name))      # Spark's own read
                ours = spark_bridge.read(spark, f"s3://arrow-typed/{name}")
                assert ours.dtypes == whole.dtypes, (inferring, name)
                for order in ("ASC", "DESC"):
                    top = spark_bridge.read(spark, f"s3://arrow-typed/{name}",
                                            order_by=f"{column} {order}", limit=1)
                    assert top.collect() == whole.orderBy(getattr(
                        whole[column], order.lower())()).limit(1).collect(), (inferring, order)
                assert rows(spark_bridge.read(spark, f"s3://arrow-typed/{name}", where=where)) \
                    == rows(whole.where(where)), (inferring, where)
            # no listing: the directories the statistics describe, not the kept ones alone
            whole = spark.read.parquet(str(tmp_path / "mixed"))
            kept = spark_bridge.read(spark, "s3://arrow-typed/mixed", where="z = 0",
                                     assume_current=True)
            assert kept.dtypes == whole.dtypes and kept.collect() == whole.where("z = 0") \
                .collect(), inferring
        finally:
            spark.conf.unset(conf)
            spark.conf.set(zone, saved)
    for value in ("05", "abc"):          # a table emptied since its statistics reads empty
        s3.delete_object(Bucket="arrow-typed", Key=f"mixed/p={value}/f.parquet")
    assert spark_bridge.read(spark, "s3://arrow-typed/mixed").count() == 0


def test_dates_spark_may_read_as_julian_are_left_to_it(tmp_path, spark, run):
    """In its LEGACY rebase mode, Spark reads a date before 1582-10-15 (a timestamp before
    1900) of a file whose writer it does not know as a Julian date, days away from the
    statistics' proleptic Gregorian one: plans pruned by the statistics' bounds lost the file
    that holds the date Spark reads, in `read` and in the lakestats source. Such columns are
    left to Spark."""
    uri = str(tmp_path / "t")
    ancient = [dt.date(1500, 1, 1) + dt.timedelta(days=k) for k in range(20)]
    write(tmp_path / "t" / "old.parquet", pa.table({
        "d": ancient, "t": [dt.datetime(1850, 6, 1, tzinfo=dt.timezone.utc)] * 20,
        "x": list(range(20))}))
    write(tmp_path / "t" / "new.parquet", pa.table({
        "d": [dt.date(2020, 1, 1)], "t": [dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)],
        "x": [99]}))
    run(uri)
    confs = ("spark.sql.parquet.datetimeRebaseModeInRead",
             "spark.sql.parquet.int96RebaseModeInRead")
    for conf in confs:
        spark.conf.set(conf, "LEGACY")
    try:
        whole, source = spark.read.parquet(uri), spark.read.format("lakestats").load(uri)
        seen = sorted(r.d for r in whole.select("d").collect())
        assert seen[0] != ancient[0]               # Spark reads other dates than were written
        later = seen[-2].isoformat()               # the last ancient date as Spark reads it
        for where in (f"d = DATE '{later}'", f"d >= DATE '{later}'",
                      f"d BETWEEN DATE '{seen[0]}' AND DATE '{seen[0]}'",
                      "t < TIMESTAMP '1850-06-01 00:00:00'", "t >= TIMESTAMP '1850-05-01'"):
            assert rows(spark_bridge.read(spark, uri, where=where)) == rows(whole.where(where)) \
                == rows(source.where(where)), where
    finally:
        for conf in confs:
            spark.conf.unset(conf)


def test_order_by_a_quoted_name_orders_that_column_not_a_struct_field(tmp_path, spark, run):
    """`a.b` is the column named so, beside a struct a whose field b runs the other way; a
    name with spaces is quoted too. The pruned read's top rows are Spark's over every file."""
    for m in range(4):
        flat = np.arange(m * 50, (m + 1) * 50)
        write(tmp_path / f"f{m}.parquet", pa.table({
            "a.b": flat, "a": pa.StructArray.from_arrays([pa.array(-flat)], ["b"]),
            "my col": -flat}))
    run(tmp_path)
    everything = spark_bridge.read(spark, str(tmp_path))
    for order, spark_order in [("`a.b` DESC", everything["`a.b`"].desc()),
                               ("`my col` asc", everything["`my col`"].asc())]:
        top = spark_bridge.read(spark, str(tmp_path), order_by=order, limit=3)
        assert [tuple(r) for r in top.select("`a.b`", "`my col`").collect()] == \
            [tuple(r) for r in everything.orderBy(spark_order).limit(3)
             .select("`a.b`", "`my col`").collect()]
        assert [f.rsplit("/", 1)[-1] for f in top.inputFiles()] == ["f3.parquet"]
