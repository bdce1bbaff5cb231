"""Timestamps as Spark reads them: a timestamp without a zone in a predicate is read in the
session's time zone. Random timestamp predicates under several session zones (a DST change in
the data), pruned reads against plain Spark over every file."""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from lakestats import spark_bridge
from tests.tables import run_cli, write

ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata", "Europe/London", "+05:30"]
START = dt.datetime(2024, 3, 8, tzinfo=dt.timezone.utc)      # LA changes clocks on 2024-03-10


@pytest.fixture(scope="module")
def sales(tmp_path_factory, run):
    """Ten files of six hours each around a DST change: a zoned timestamp, the same wall
    times without a zone (TIMESTAMP_NTZ), and their dates."""
    root = tmp_path_factory.mktemp("zones") / "sales"
    rng = np.random.default_rng(3)
    for f in range(10):
        seconds = np.sort(rng.integers(0, 6 * 3600, 500)) + f * 6 * 3600 * 2
        ts = [START + dt.timedelta(seconds=int(s)) for s in seconds]
        write(root / f"part-{f}.parquet", pa.table({
            "ts": pa.array(ts, pa.timestamp("us", "UTC")),
            "ntz": pa.array([t.replace(tzinfo=None) for t in ts], pa.timestamp("us")),
            "d": pa.array([t.date() for t in ts], pa.date32())}))
    run(root)
    return root


def moment(hours: int, minutes: int) -> str:
    return (START + dt.timedelta(hours=hours, minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S")


def day(days: int) -> str:
    return (START + dt.timedelta(days=days)).strftime("%Y-%m-%d")


HOURS, MINUTES, DAYS = st.integers(-12, 130), st.sampled_from([0, 30, 59]), st.integers(-1, 6)
OPS = st.sampled_from(["<", "<=", ">", ">=", "="])
atoms = st.one_of(
    st.builds(lambda c, op, h, m: f"{c} {op} '{moment(h, m)}'", st.sampled_from(["ts", "ntz"]),
              OPS, HOURS, MINUTES),
    st.builds(lambda c, op, h, m: f"{c} {op} TIMESTAMP '{moment(h, m)}'",
              st.sampled_from(["ts", "ntz"]), OPS, HOURS, MINUTES),
    st.builds(lambda op, h, m: f"ts {op} TIMESTAMP_NTZ '{moment(h, m)}'", OPS, HOURS, MINUTES),
    st.builds(lambda c, op, d: f"to_date({c}) {op} DATE '{day(d)}'",
              st.sampled_from(["ts", "ntz"]), OPS, DAYS),
    st.builds(lambda op, d: f"d {op} TIMESTAMP '{day(d)} 12:00:00'", OPS, DAYS),
    st.builds(lambda c, d: f"date_trunc('DAY', {c}) = TIMESTAMP '{day(d)} 00:00:00'",
              st.sampled_from(["ts", "ntz"]), DAYS),
    st.builds(lambda h, k: f"ts BETWEEN '{moment(h, 0)}' AND '{moment(h + k, 0)}'", HOURS,
              st.integers(0, 30)),
    st.builds(lambda y: f"year(ts) = {y}", st.sampled_from([2023, 2024])),
)
predicates = st.one_of(atoms, st.builds(lambda a, b: f"({a}) OR ({b})", atoms, atoms),
                       st.builds(lambda a, b: f"({a}) AND NOT ({b})", atoms, atoms))


@pytest.mark.slow
@seed(5)
@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(zone=st.sampled_from(ZONES), where=predicates)
def test_pruned_reads_follow_the_session_time_zone(sales, spark, zone, where):
    key = "spark.sql.session.timeZone"
    saved = spark.conf.get(key)
    spark.conf.set(key, zone)
    try:
        expected = spark.read.parquet(str(sales)).where(where).count()
        assert spark_bridge.read(spark, str(sales), where=where).count() == expected, \
            (zone, where)
    finally:
        spark.conf.set(key, saved)


def test_int96_timestamps_are_instants_in_every_session_zone(tmp_path, spark, run):
    """Spark reads INT96 timestamps (old Spark's, Hive's, Impala's) as instants, which a
    session shows in its zone. Arrow reads them without a zone: taken as wall-clock times, a
    session outside UTC pruned by other instants and skipped files holding matching rows."""
    root = tmp_path / "int96"
    for f in range(6):
        write(root / f"part-{f}.parquet", pa.table({"ts": pa.array(
            [(START + dt.timedelta(hours=4 * f + h)).replace(tzinfo=None) for h in range(4)],
            pa.timestamp("us"))}), use_deprecated_int96_timestamps=True)
    run(root)
    key = "spark.sql.session.timeZone"
    saved = spark.conf.get(key)
    try:
        for zone in ("America/Los_Angeles", "Asia/Kolkata"):
            spark.conf.set(key, zone)
            for where in [f"ts {op} '{moment(h, 0)}'" for op in ("<", ">=", "=")
                          for h in (3, 9, 14)]:
                expected = spark.read.parquet(str(root)).where(where).count()
                assert spark_bridge.read(spark, str(root), where=where).count() == expected, \
                    (zone, where)
                assert spark.read.format("lakestats").load(str(root)).where(where).count() \
                    == expected, (zone, where)
    finally:
        spark.conf.set(key, saved)


def test_cli_reads_timestamps_in_utc_unless_told(sales):
    """Midnight in Los Angeles is 08:00 UTC (PST): one more file may hold earlier rows."""
    def kept(*extra: str) -> list[str]:
        out = run_cli("prune", str(sales), "--where", "ts < '2024-03-09 00:00:00'", "--json",
                      *extra)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["kept"]
    assert kept() == kept("--time-zone", "UTC") == ["part-0.parquet", "part-1.parquet"]
    assert kept("--time-zone", "America/Los_Angeles") == \
        ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    bad = run_cli("prune", str(sales), "--where", "ts < '2024-03-09'", "--time-zone", "Mars/Base")
    assert bad.returncode == 2 and "Mars/Base" in bad.stderr
