"""Exact quantiles: lakestats' distributed sort vs DuckDB quantile_disc vs Spark percentile.

TPC-H lineitem (SF1, 80 files), columns l_extendedprice and l_orderkey, one run, same cores:

    .venv/bin/python benchmarks/bench_quantiles.py [--scale 1] [--parts 80] [--skip-spark]

lakestats: compute_ranks (the distributed sort writing ranks.parquet; table statistics computed
first and not timed) plus the quantile lookups. DuckDB: quantile_disc over the Parquet files.
Spark: percentile (exact) over the same files.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import generate, parse_args  # noqa: E402

COLUMNS = ["l_extendedprice", "l_orderkey"]
QS = [0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999]


def main() -> None:
    args = parse_args(__doc__)
    table = generate(args.data_dir, args.scale, args.parts)

    import duckdb

    from lakestats.algorithms.ranks.driver import compute_ranks
    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.monostore.compute import compute

    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    results = {}
    with redis_url() as url, make_invoker("local", args.workers) as invoker:
        compute(str(table), invoker, Settings(redis_url=url))
        for column in COLUMNS:
            start = time.perf_counter()
            report = compute_ranks(str(table / "_lakestats"), invoker, Settings(redis_url=url),
                                   [column])
            values = StatisticsReader(str(table / "_lakestats")).exact_quantiles(column, QS)
            results[column] = {"lakestats": time.perf_counter() - start,
                               "steps": report.columns[column], "values": values}

    con = duckdb.connect()
    con.execute(f"SET threads = {args.workers}")
    for column in COLUMNS:
        start = time.perf_counter()
        truth = con.execute(f"SELECT quantile_disc({column}, {QS}) "
                            f"FROM read_parquet('{table}/*.parquet')").fetchall()[0][0]
        results[column]["duckdb"] = time.perf_counter() - start
        assert [str(v) for v in truth] == results[column]["values"], (truth, results[column])

    if not args.skip_spark:
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master(f"local[{args.workers}]")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", "8g")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.read.parquet(str(table)).createOrReplaceTempView("lineitem")
        for column in COLUMNS:
            start = time.perf_counter()
            spark.sql(f"SELECT percentile({column}, array({', '.join(map(str, QS))})) "
                      "FROM lineitem").collect()
            results[column]["spark"] = time.perf_counter() - start
        spark.stop()

    print(f"\nTPC-H lineitem SF{args.scale:g}, {args.parts} files, {args.workers} workers\n")
    for column, r in results.items():
        print(f"{column}: lakestats {r['lakestats']:.2f} s (steps {r['steps']['seconds']}, "
              f"{r['steps']['bytes_exchanged'] / 1e6:.0f} MB exchanged), "
              f"DuckDB {r['duckdb']:.2f} s -> lakestats/DuckDB {r['lakestats'] / r['duckdb']:.2f}x"
              + (f", Spark {r['spark']:.2f} s -> Spark/lakestats {r['spark'] / r['lakestats']:.2f}x"
                 if "spark" in r else ""))


if __name__ == "__main__":
    main()
