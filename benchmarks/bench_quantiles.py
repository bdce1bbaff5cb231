"""Exact quantiles: lakestats quantiles --exact vs DuckDB quantile_disc vs Spark percentile.

TPC-H lineitem (SF1, 80 files), columns l_extendedprice, l_orderkey and l_comment, one run, same
cores:

    .venv/bin/python benchmarks/bench_quantiles.py [--scale 1] [--parts 80] [--skip-spark]

lakestats: `quantiles(column, QS, exact=True)` as the CLI runs it (table statistics computed
first and not timed; a warm worker pool): from the column's frequency list when it holds every
value, else the distributed sort writing ranks.parquet plus the lookups; the line says which.
DuckDB: quantile_disc over the Parquet files.
Spark: percentile (exact) over the same files.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import generate, parse_args  # noqa: E402

# the third, near-unique (its values seen once are not in its frequency list), is sorted
COLUMNS = ["l_extendedprice", "l_orderkey", "l_comment"]
NUMERIC = COLUMNS[:2]              # Spark's exact percentile takes numbers only
QS = [0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999]


def main() -> None:
    args = parse_args(__doc__)
    table = generate(args.data_dir, args.scale, args.parts)

    import duckdb

    import lakestats
    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.monostore.compute import compute

    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    results = {}
    with redis_url() as url, make_invoker("local", args.workers) as invoker:
        compute(str(table), invoker, Settings(redis_url=url))
        for column in COLUMNS:
            stats = lakestats.open(str(table))
            start = time.perf_counter()
            answer = stats.quantiles(column, QS, exact=True, settings=Settings(redis_url=url),
                                     invoker=invoker)
            seconds = time.perf_counter() - start
            sorted_ = stats.has_ranks(column)
            results[column] = {"lakestats": seconds, "values": [
                a["value"] for a in answer["quantiles"]],
                "path": "distributed sort" if sorted_ else "frequency list"}

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
        for column in NUMERIC:
            start = time.perf_counter()
            spark.sql(f"SELECT percentile({column}, array({', '.join(map(str, QS))})) "
                      "FROM lineitem").collect()
            results[column]["spark"] = time.perf_counter() - start
        spark.stop()

    print(f"\nTPC-H lineitem SF{args.scale:g}, {args.parts} files, {args.workers} workers\n")
    for column, r in results.items():
        print(f"{column}: lakestats {r['lakestats']:.2f} s ({r['path']}), "
              f"DuckDB {r['duckdb']:.2f} s -> lakestats/DuckDB {r['lakestats'] / r['duckdb']:.2f}x"
              + (f", Spark {r['spark']:.2f} s -> Spark/lakestats {r['spark'] / r['lakestats']:.2f}x"
                 if "spark" in r else ""))


if __name__ == "__main__":
    main()
