"""Partial lookups: a histogram range against the full histogram (bytes read and time, 1,000 and
10,000 bins), and `where` (value -> partitions) on tables of 10 and 1,000 partitions; DuckDB
answers the same questions from the data in the same run.

    .venv/bin/python benchmarks/bench_lookups.py [--rows 2000000]

Bytes read are the process's read() bytes (/proc/self/io rchar) during the lookup, in this
process, after a first warm-up lookup of another column (imports and caches aside).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lakestats.core.settings import PartitionSettings, Settings  # noqa: E402
from lakestats.fleet.invokers import make_invoker  # noqa: E402
from lakestats.infra.redis_server import redis_url  # noqa: E402
from lakestats.metastore.layout import Layout  # noqa: E402
from lakestats.metastore.reader import StatisticsReader  # noqa: E402
from lakestats.monostore.compute import compute  # noqa: E402


def read_bytes() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


def measured(fn, repeat: int = 5):
    """(result, median seconds, bytes read by the first call)."""
    before = read_bytes()
    result = fn()
    read = read_bytes() - before
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return result, float(np.median(times)), read


def run_compute(root: Path, stats_root: Path, **partition) -> StatisticsReader:
    settings = Settings(partition=PartitionSettings(**partition))
    with redis_url(None) as url, make_invoker("local", 2) as invoker:
        compute(str(root), invoker, dataclasses.replace(settings, redis_url=url),
                stats_root=str(stats_root))
    return StatisticsReader(Layout.of_table(str(root), str(stats_root)).uri)


def histogram_ranges(work: Path, rows: int) -> None:
    root = work / "numbers"
    root.mkdir()
    rng = np.random.default_rng(1)
    for k in range(8):
        pq.write_table(pa.table({"x": rng.integers(-10**6, 10**6, rows // 8),
                                 "y": rng.normal(0, 1, rows // 8)}), root / f"p{k}.parquet")
    print(f"histogram ranges: {rows:,} rows in 8 files, x uniform in [-1e6, 1e6)")
    print(f"{'bins':>6} {'range':>18} {'bins out':>8} {'bytes':>10} {'full bytes':>10} "
          f"{'ratio':>6} {'ms':>7} {'full ms':>7} {'duckdb ms':>9}")
    for bins in (1000, 10_000):
        stats = run_compute(root, work / f"stats{bins}", max_bins=bins)
        stats.histogram("y")                                    # warm-up: imports, footers
        full, full_s, full_read = measured(lambda: stats.histogram("x"))
        for low, high in [("-10", "30"), ("0", "99999"), ("-500000", "500000")]:
            part, s, read = measured(lambda: stats.histogram("x", low=low, high=high))
            duck_s = _duck_seconds(root, int(low), int(high), int(full[1]["lower"]) -
                                   int(full[0]["lower"]))
            print(f"{bins:>6} {low + '..' + high:>18} {len(part):>8} {read:>10,} "
                  f"{full_read:>10,} {read / full_read:>6.2f} {s * 1e3:>7.2f} "
                  f"{full_s * 1e3:>7.2f} {duck_s * 1e3:>9.1f}")


def _duck_seconds(root: Path, low: int, high: int, width: int) -> float:
    sql = (f"SELECT floor(x / {width}) AS b, count(*) FROM read_parquet('{root}/*.parquet') "
           f"WHERE x BETWEEN {low} AND {high} GROUP BY b")
    duckdb.sql(sql).fetchall()
    start = time.perf_counter()
    duckdb.sql(sql).fetchall()
    return time.perf_counter() - start


def where_lookups(work: Path) -> None:
    print("\nwhere: value -> partitions (1,000 rows a partition; 'common' is in every "
          "partition, 'rare' in 3)")
    print(f"{'partitions':>10} {'value':>7} {'held by':>7} {'ms':>7} {'bytes':>10} "
          f"{'duckdb ms':>9} {'duckdb/lakestats':>16}")
    for count in (10, 1000):
        root = work / f"cities{count}"
        root.mkdir()
        rng = np.random.default_rng(count)
        for k in range(count):
            city = rng.choice([f"city-{i}" for i in range(50)], 1000).astype(object)
            city[0] = "common"
            if k in (1, count // 2, count - 1):
                city[1] = "rare"
            pq.write_table(pa.table({"city": city.tolist(), "n": np.arange(1000)}),
                           root / f"part-{k:05}.parquet")
        stats = run_compute(root, work / f"cities-stats{count}")
        stats.partitions_with("n", "5")                         # warm-up
        for value in ("common", "rare"):
            got, s, read = measured(lambda: stats.partitions_with("city", value))
            sql = (f"SELECT filename, count(*) FROM read_parquet('{root}/*.parquet', "
                   f"filename=true) WHERE city = '{value}' GROUP BY filename")
            duckdb.sql(sql).fetchall()
            start = time.perf_counter()
            duck = duckdb.sql(sql).fetchall()
            duck_s = time.perf_counter() - start
            assert len(duck) == len(got["partitions"]), (value, len(duck))
            print(f"{count:>10} {value:>7} {len(got['partitions']):>7} {s * 1e3:>7.2f} "
                  f"{read:>10,} {duck_s * 1e3:>9.1f} {duck_s / s:>16.0f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-lookups-"))
    try:
        histogram_ranges(work, args.rows)
        where_lookups(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    main()
