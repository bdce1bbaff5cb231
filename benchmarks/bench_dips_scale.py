"""Join pruning at scale: planning time and Spark time for a star query whose dimension filter
prunes a fact table of 10,000 files through a data-induced predicate, before a byte of the
fact table is read.

    .venv/bin/python benchmarks/bench_dips_scale.py [--files 10000] [--data-dir DIR] [--skip-spark]

The fact table is laid out by day (as most fact tables are loaded), 200 rows a file; date_dim
holds ten years of days in 10 files, in date order as a date dimension is generated. The query keeps one year of date_dim; the
diP then keeps the fact files of that year's days. Peer: Spark runs the same query over every
file (its own pruning needs a partitioned table: dynamic partition pruning only prunes
directories), and over the kept files; results must be equal.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
QUERY = ("SELECT d.year, count(*) AS n, sum(f.amount) AS total FROM fact f "
         "JOIN date_dim d ON f.date_sk = d.date_sk WHERE d.year = 2021 GROUP BY d.year")
DAYS = 3650


def generate(data: Path, files: int) -> dict[str, Path]:
    tables = {"fact": data / f"fact-{files}", "date_dim": data / "date_dim"}
    rng = np.random.default_rng(7)
    if not (tables["date_dim"] / "_lakestats").exists():
        for i, chunk in enumerate(np.array_split(np.arange(DAYS), 10)):
            (tables["date_dim"]).mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"date_sk": pa.array(chunk + 2_450_000, pa.int64()),
                                     "year": pa.array(2015 + chunk // 365, pa.int32())}),
                           tables["date_dim"] / f"part-{i:02d}.parquet")
    if not (tables["fact"] / "_lakestats").exists():
        tables["fact"].mkdir(parents=True, exist_ok=True)
        for i in range(files):                         # loaded day by day
            day = i * DAYS // files
            sk = 2_450_000 + day + rng.integers(0, max(1, DAYS // files) + 1, 200)
            pq.write_table(pa.table({"date_sk": pa.array(np.minimum(sk, 2_450_000 + DAYS - 1)),
                                     "amount": pa.array(rng.integers(1, 1000, 200))}),
                           tables["fact"] / f"part-{i:05d}.parquet")
    for name, path in tables.items():
        if not (path / "_lakestats").exists():
            started = time.perf_counter()
            subprocess.run([str(ROOT / ".venv" / "bin" / "lakestats"), "compute", str(path)],
                           check=True, stdout=subprocess.DEVNULL)
            print(f"lakestats compute {name}: {time.perf_counter() - started:.1f} s")
    return tables


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--data-dir", type=Path, default=Path("/tmp/lakestats-bench/dips-scale"))
    p.add_argument("--skip-spark", action="store_true")
    args = p.parse_args()
    tables = {n: str(t) for n, t in generate(args.data_dir, args.files).items()}

    sys.path.insert(0, str(ROOT))
    from lakestats.pruning.joins import prune_query
    prune_query(QUERY, tables)                         # imports and first reads
    times = []
    for _ in range(5):
        plan = prune_query(QUERY, tables)
        times.append(plan.planning_ms)
    fact = plan.as_json()["tables"]["fact"]
    print(f"fact {fact['files_before']:,} files -> {fact['files_after_dips']:,} after the diP "
          f"({fact['bytes_before'] / max(1, fact['bytes_after']):.1f}x fewer bytes); planning "
          f"median {np.median(times):.0f} ms of 5 (min {min(times):.0f}, max {max(times):.0f})")
    if args.skip_spark:
        return

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lakestats import spark_bridge
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    for name, path in tables.items():
        spark.read.parquet(path).createOrReplaceTempView(name)
    started = time.perf_counter()
    full = spark.sql(QUERY).collect()
    spark_all = time.perf_counter() - started
    started = time.perf_counter()
    pruned = spark_bridge.sql(spark, QUERY, tables).collect()
    spark_kept = time.perf_counter() - started
    print(f"Spark over every file {spark_all:.1f} s; planned and run over the kept files "
          f"{spark_kept:.1f} s: {spark_all / spark_kept:.1f}x; results equal: {full == pruned}")
    if full != pruned:
        sys.exit(1)


if __name__ == "__main__":
    main()
