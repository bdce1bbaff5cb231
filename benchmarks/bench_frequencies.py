"""Exact table-level frequencies: each lakestats algorithm vs DuckDB GROUP BY vs Spark groupBy.

TPC-H lineitem (SF1, ~80 files), one run, same cores:

    .venv/bin/python benchmarks/bench_frequencies.py [--scale 1] [--parts 80] [--skip-spark]

lakestats: the table-level reduction of the partitions' stored frequencies (what a new table
version costs once partition statistics exist; partition statistics are computed first, once,
and timed separately), per column and algorithm, with a warm worker pool. Reported: seconds,
bytes exchanged between workers, Redis and the coordinator, and the coordinator's peak RSS
during the run (each run in a fresh process; Linux: VmHWM after resetting it). DuckDB and Spark: value counts of one
column ordered by decreasing count then value, written to Parquet, as lakestats writes them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import generate, parse_args  # noqa: E402

COLUMNS = ["l_shipmode", "l_partkey", "l_orderkey", "l_comment"]
ALGORITHMS = ["auto", "low-distinct", "low-duplicate", "binned"]


def peak_rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:   # "5" resets the peak RSS (Linux >= 4.0)
        f.write("5")


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def compare_bloom_filters(table: Path, n: int) -> None:
    """The low-duplicate step's Bloom filter over n values of l_comment, fed as the step feeds
    it, each partition's distinct values in turn: pybloom-live (one Python call per value)
    vs core.bloom (NumPy over vectorized hashes)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    from pybloom_live import BloomFilter as PyBloom

    from lakestats.core.bloom import BloomFilter
    values = pads.dataset(str(table)).head(n, columns=["l_comment"])["l_comment"]
    batches = [pc.unique(values.slice(i, 75_000)) for i in range(0, n, 75_000)]
    total = sum(len(b) for b in batches)
    start = time.perf_counter()
    ours, ours_seen = BloomFilter.sized(total, 0.01), 0
    for batch in batches:
        ours_seen += int(ours.contains_text(batch).sum())
        ours.add_text(batch)
    numpy_seconds = time.perf_counter() - start
    texts = [b.to_pylist() for b in batches]
    start = time.perf_counter()
    theirs = PyBloom(capacity=total, error_rate=0.01)
    theirs_seen = sum(theirs.add(v) for batch in texts for v in batch)   # True: seen before
    pybloom_seconds = time.perf_counter() - start
    print(f"Bloom filter, {total:,} values of l_comment: pybloom-live {pybloom_seconds:.2f} s, "
          f"core.bloom {numpy_seconds:.2f} s ({pybloom_seconds / numpy_seconds:.0f}x); "
          f"probable repeats found: {theirs_seen:,} vs {ours_seen:,}\n")


def run_duckdb(table: Path, column: str, workers: int, out: Path) -> float:
    import duckdb
    con = duckdb.connect()
    con.execute(f"SET threads = {workers}")
    start = time.perf_counter()
    con.execute(f"""COPY (SELECT {column} AS value, count(*) AS frequency
                          FROM read_parquet('{table}/*.parquet') GROUP BY {column}
                          ORDER BY frequency DESC, value) TO '{out}' (FORMAT parquet)""")
    return time.perf_counter() - start


def run_spark(table: Path, workers: int, out: Path) -> dict[str, float]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    spark = (SparkSession.builder.master(f"local[{workers}]")
             .config("spark.driver.memory", "8g").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(table))
    seconds = {}
    for column in COLUMNS:
        start = time.perf_counter()
        (df.groupBy(F.col(column).alias("value")).count()
         .orderBy(F.desc("count"), "value").write.mode("overwrite").parquet(str(out / column)))
        seconds[column] = time.perf_counter() - start
    spark.stop()
    return seconds


def run_one(stats_root: str, column: str, algorithm: str, workers: int, out: str) -> None:
    """One reduction in this (fresh) process, so that its peak RSS is its own; prints JSON."""
    from lakestats.algorithms.frequencies.driver import recompute
    from lakestats.core.settings import FrequencySettings, Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.metastore.store import Store
    with redis_url() as url, make_invoker("local", workers) as invoker:
        recompute(stats_root, invoker, Settings(redis_url=url), Store(out), ["l_shipmode"])  # warm
        peak_rss_reset()
        start = time.perf_counter()
        settings = Settings(redis_url=url, frequencies=FrequencySettings(algorithm))
        result = recompute(stats_root, invoker, settings, Store(out), [column])[column]
        seconds = time.perf_counter() - start
    print(json.dumps({"algorithm": result.algorithm, "seconds": seconds, "bytes": result.bytes,
                      "rss": peak_rss_mb(), "distinct": result.distinct_count}))


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        run_one(*sys.argv[2:5], int(sys.argv[5]), sys.argv[6])
        return
    args = parse_args(__doc__)
    table = generate(args.data_dir, args.scale, args.parts)

    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.monostore.compute import compute

    scratch = Path(tempfile.mkdtemp(prefix="lakestats-bench-"))
    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    rows = []
    with redis_url() as url, make_invoker("local", args.workers) as invoker:
        start = time.perf_counter()
        report = compute(str(table), invoker, Settings(redis_url=url))
        full = time.perf_counter() - start
        print(f"TPC-H lineitem SF{args.scale:g}: {report.row_count:,} rows, {args.parts} files, "
              f"{args.workers} workers/threads")
        print(f"lakestats compute, every statistic of all 16 columns incl. exact table-level "
              f"frequencies: {full:.2f} s\n")
        for column in COLUMNS:
            for algorithm in ALGORITHMS:
                out = subprocess.run(
                    [sys.executable, __file__, "--one", str(table / "_lakestats"), column,
                     algorithm, str(args.workers), str(scratch / "out")],
                    env={**os.environ, "REDIS_URL": url}, check=True, capture_output=True,
                    text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                rows.append((column, algorithm, r["algorithm"], r["seconds"], r["bytes"],
                             r["rss"], r["distinct"]))
    compare_bloom_filters(table, 1_000_000)
    duck = {c: run_duckdb(table, c, args.workers, scratch / f"{c}.parquet") for c in COLUMNS}
    spark = {} if args.skip_spark else run_spark(table, args.workers, scratch / "spark")
    shutil.rmtree(scratch, ignore_errors=True)

    print(f"{'column':<12} {'algorithm':<22} {'seconds':>8} {'MB moved':>9} {'peak RSS MB':>12} "
          f"{'distinct':>10} {'/DuckDB':>8} {'Spark/':>7}")
    for column, asked, used, seconds, moved, rss, distinct in rows:
        name = f"auto ({used})" if asked == "auto" else used
        vs_spark = f"{spark[column] / seconds:6.2f}x" if spark else "      -"
        print(f"{column:<12} {name:<22} {seconds:8.2f} {moved / 1e6:9.1f} {rss:12.0f} "
              f"{distinct:>10,} {seconds / duck[column]:7.2f}x {vs_spark}")
    print()
    for column in COLUMNS:
        line = f"{column:<12} DuckDB GROUP BY {duck[column]:6.2f} s"
        if spark:
            line += f"   Spark groupBy().count() {spark[column]:6.2f} s"
        print(line)


if __name__ == "__main__":
    main()
