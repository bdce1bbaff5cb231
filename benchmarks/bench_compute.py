"""Whole-table statistics: lakestats compute vs DuckDB SUMMARIZE vs Spark ANALYZE TABLE.

Same files, same cores, one run. Run with `make bench` (installs the bench extra: PySpark,
DuckDB, tpchgen-cli), or:

    .venv/bin/python benchmarks/bench_compute.py [--scale 1] [--parts 80] [--skip-spark]

What each engine computes:
  lakestats  per partition and per table: exact row/null/NaN counts, exact min/max (full
             strings), exact sums, mean, stddev, string lengths, exact frequencies of
             low-cardinality columns, exact distinct counts per partition, 1,000-bin exact
             histograms of every numeric and temporal column, HLL and KLL sketches
  DuckDB     SUMMARIZE: min, max, approx distinct, avg, std, approx quartiles, null %
  Spark      ANALYZE ... FOR ALL COLUMNS with histograms: row count, distinct (HLL++),
             min/max, nulls, avg/max length, 254-bin equi-height histograms
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def generate(data: Path, scale: float, parts: int) -> Path:
    table = data / "lineitem"
    if len(list(table.glob("*.parquet"))) == parts:
        return table
    shutil.rmtree(table, ignore_errors=True)
    tool = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    subprocess.run([tool, "parquet", "-s", str(scale), "--tables=lineitem", f"--parts={parts}",
                    f"--output-dir={data}"], check=True)
    return table


def parse_args(doc: str) -> argparse.Namespace:
    """The options every TPC-H benchmark takes."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--parts", type=int, default=80)
    p.add_argument("--data-dir", type=Path, default=ROOT / ".data")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--skip-spark", action="store_true")
    return p.parse_args()


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def run_lakestats(table: Path, workers: int) -> tuple[float, float]:
    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.monostore.compute import compute

    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    with redis_url() as url, make_invoker("local", workers) as invoker:
        full, report = timed(lambda: compute(str(table), invoker, Settings(redis_url=url)))
        assert report.computed and not report.failed, report.as_json()
        again, report = timed(lambda: compute(str(table), invoker, Settings(redis_url=url)))
        assert report.computed == 0
    return full, again


def run_duckdb(table: Path, workers: int) -> float:
    import duckdb
    con = duckdb.connect()
    con.execute(f"SET threads = {workers}")
    seconds, _ = timed(lambda: con.execute(
        f"SUMMARIZE SELECT * FROM read_parquet('{table}/*.parquet')").fetchall())
    return seconds


def run_spark(table: Path, workers: int) -> tuple[float, float]:
    start, spark = timed(lambda: __import__("pyspark.sql", fromlist=["SparkSession"])
                         .SparkSession.builder.master(f"local[{workers}]")
                         .config("spark.driver.memory", "8g")
                         .config("spark.sql.statistics.histogram.enabled", "true")
                         .config("spark.ui.enabled", "false")
                         .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE TABLE lineitem USING parquet LOCATION '{table}'")
    seconds, _ = timed(lambda: spark.sql(
        "ANALYZE TABLE lineitem COMPUTE STATISTICS FOR ALL COLUMNS").collect())
    spark.stop()
    return start, seconds


def main() -> None:
    args = parse_args(__doc__)

    table = generate(args.data_dir, args.scale, args.parts)
    rows = __import__("duckdb").sql(
        f"select count(*) from read_parquet('{table}/*.parquet')").fetchall()[0][0]
    print(f"TPC-H lineitem SF{args.scale:g}: {rows:,} rows in {args.parts} files, "
          f"{args.workers} workers/threads\n")

    lakestats, incremental = run_lakestats(table, args.workers)
    duck = run_duckdb(table, args.workers)
    results = [("lakestats compute (from scratch)", lakestats),
               ("lakestats compute (nothing changed)", incremental),
               ("DuckDB SUMMARIZE", duck)]
    if not args.skip_spark:
        spark_start, spark = run_spark(table, args.workers)
        results.append(("Spark ANALYZE TABLE ... FOR ALL COLUMNS", spark))
    for name, seconds in results:
        print(f"{name:<42} {seconds:8.2f} s")
    print(f"\nDuckDB SUMMARIZE / lakestats: {duck / lakestats:.2f}x")
    if not args.skip_spark:
        print(f"Spark ANALYZE / lakestats:    {spark / lakestats:.2f}x   "
              f"(Spark session start, not counted: {spark_start:.1f} s)")


if __name__ == "__main__":
    main()
