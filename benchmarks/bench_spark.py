"""Spark integration: apply_statistics vs ANALYZE TABLE, and compute on Spark vs local workers.

TPC-H SF1 lineitem (80 files) and orders (50 files), one run, same cores. Run with:

    .venv/bin/python benchmarks/bench_spark.py [--scale 1] [--workers 2]

1. lakestats compute with the local invoker (process pool), then again from scratch with the
   Spark invoker (Spark tasks as workers, same Redis coordinator);
2. spark_bridge.apply_statistics on both tables, then ANALYZE TABLE ... COMPUTE STATISTICS FOR
   ALL COLUMNS with histograms on the same files (other catalog names).
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
TABLES = {"lineitem": 80, "orders": 50}


def generate(data: Path, scale: float) -> dict[str, Path]:
    tool = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    out = {}
    for name, parts in TABLES.items():
        table = data / name
        if len(list(table.glob("*.parquet"))) != parts:
            shutil.rmtree(table, ignore_errors=True)
            subprocess.run([tool, "parquet", "-s", str(scale), f"--tables={name}",
                            f"--parts={parts}", f"--output-dir={data}"], check=True)
        out[name] = table
    return out


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--data-dir", type=Path, default=ROOT / ".data")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    args = p.parse_args()
    tables = generate(args.data_dir, args.scale)

    from pyspark.sql import SparkSession

    from lakestats import spark_bridge
    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.monostore.compute import compute

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"local[{args.workers}]")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "8g")
             .config("spark.sql.cbo.enabled", "true")
             .config("spark.sql.statistics.histogram.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    local = spark_on = 0.0
    for table in tables.values():
        shutil.rmtree(table / "_lakestats", ignore_errors=True)
        shutil.rmtree(table / "_lakestats_spark", ignore_errors=True)
        with redis_url() as url, make_invoker("local", args.workers) as invoker:
            local += timed(lambda: compute(str(table), invoker, Settings(redis_url=url)))[0]
        spark_on += timed(lambda: spark_bridge.compute(
            spark, str(table), stats_root=str(table / "_lakestats_spark")))[0]

    apply = analyze = 0.0
    for name, table in tables.items():
        spark.sql(f"CREATE TABLE {name} USING parquet LOCATION '{table}'")
        spark.sql(f"CREATE TABLE {name}_analyzed USING parquet LOCATION '{table}'")
        apply += timed(lambda: spark_bridge.apply_statistics(spark, name, str(table)))[0]
        analyze += timed(lambda: spark.sql(
            f"ANALYZE TABLE {name}_analyzed COMPUTE STATISTICS FOR ALL COLUMNS").collect())[0]
    spark.stop()

    print(f"\nTPC-H SF{args.scale:g}: lineitem (80 files) + orders (50 files), "
          f"{args.workers} cores\n")
    for label, seconds in [("lakestats compute, local invoker", local),
                           ("lakestats compute, Spark invoker", spark_on),
                           ("lakestats.spark_bridge.apply_statistics", apply),
                           ("ANALYZE TABLE ... FOR ALL COLUMNS", analyze)]:
        print(f"{label:<36} {seconds:8.2f} s")
    print(f"\nANALYZE / apply_statistics:          {analyze / apply:6.1f}x")
    print(f"Spark invoker / local invoker:       {spark_on / local:6.2f}x")


if __name__ == "__main__":
    main()
