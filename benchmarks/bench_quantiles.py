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
from bench_compute import generate, parse_args, timed  # noqa: E402

# the third, near-unique (its values seen once are not in its frequency list), is sorted
COLUMNS = ["l_extendedprice", "l_orderkey", "l_comment"]
NUMERIC = COLUMNS[:2]              # Spark's exact percentile takes numbers only
QS = [0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999]


def beside_duckdb(table: Path, columns: list[str], qs: list[float], workers: int, url: str,
                  invoker) -> dict:
    """Each column's `quantiles --exact` as lakestats answers it (in-process, on a warm pool)
    and DuckDB's quantile_disc over the files, the answers checked equal: seconds of each,
    and the path lakestats took."""
    import duckdb

    import lakestats
    from lakestats.core.settings import Settings
    con = duckdb.connect()
    con.execute(f"SET threads = {workers}")
    results = {}
    for column in columns:
        stats = lakestats.open(str(table))
        ours, answer = timed(lambda c=column: stats.quantiles(
            c, qs, exact=True, settings=Settings(redis_url=url), invoker=invoker))
        duck, truth = timed(lambda c=column: con.execute(
            f"SELECT quantile_disc({c}, {qs}) FROM read_parquet('{table}/*.parquet')"
        ).fetchall()[0][0])
        assert [a["value"] for a in answer["quantiles"]] == [str(v) for v in truth], column
        results[column] = {"lakestats": ours, "duckdb": duck, "path": "distributed sort"
                           if stats.has_ranks(column) else "frequency list"}
    return results


def main() -> None:
    args = parse_args(__doc__)
    table = generate(args.data_dir, args.scale, args.parts)

    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.monostore.compute import compute

    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    with redis_url() as url, make_invoker("local", args.workers) as invoker:
        compute(str(table), invoker, Settings(redis_url=url))
        results = beside_duckdb(table, COLUMNS, QS, args.workers, url, invoker)

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
