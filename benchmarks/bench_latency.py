"""Latency of the event flow on the local stack: from an object landing on S3 to a new
table-level version that includes it, for one file and for a burst of 200 files.

`lakestats local up` (moto's S3+SQS server and a real Redis, in processes of their own) and
`lakestats watch` (the same handlers as on Lambda),
2-second coalescing window, TPC-H-like files of 20,000 rows:

    .venv/bin/python benchmarks/bench_latency.py [--burst 200] [--window 2]

The peer column is `lakestats compute` run by hand over the same files after they land (what
a cron-driven refresh costs at best, not counting the wait for the cron).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def data_file(seed: int, rows: int) -> bytes:
    rng = np.random.default_rng(seed)
    table = pa.table({"l_orderkey": rng.integers(0, 6_000_000, rows),
                      "l_quantity": rng.integers(1, 51, rows),
                      "l_extendedprice": rng.normal(38_000, 23_000, rows).round(2),
                      "l_shipmode": rng.choice(["AIR", "MAIL", "SHIP", "RAIL", "TRUCK"], rows),
                      "l_shipdate": pa.array(np.datetime64("1992-01-01") +
                                             rng.integers(0, 2500, rows), pa.date32())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--burst", type=int, default=200)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--window", type=float, default=2.0)
    args = p.parse_args()

    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra import local_stack
    from lakestats.infra.redis_server import redis_url
    from lakestats.watch import watch
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.metastore.store import s3_client
    from lakestats.monostore.compute import compute

    state = Path(tempfile.mkdtemp(prefix="lakestats-latency-"))
    stack = local_stack.up(state)         # moto's server and Redis in processes of their own
    endpoint = stack["AWS_ENDPOINT_URL"]
    os.environ.update(AWS_ENDPOINT_URL=endpoint, **local_stack.LOCAL_ACCOUNT)
    s3_client.cache_clear()
    queue = local_stack.wire_bucket(endpoint, "lake", "events")
    s3 = boto3.client("s3")
    payloads = [data_file(i, args.rows) for i in range(args.burst + 2)]

    def published_files() -> int:
        try:
            return StatisticsReader("s3://lake/events/_lakestats").manifest.partition_count
        except Exception:  # noqa: BLE001 - nothing published yet
            return 0

    def land_and_wait(keys: list[int]) -> float:
        target = published_files() + len(keys)
        start = time.perf_counter()
        for i in keys:
            s3.put_object(Bucket="lake", Key=f"events/part-{i:04d}.parquet", Body=payloads[i])
        while published_files() < target:
            time.sleep(0.05)
        return time.perf_counter() - start

    with redis_url(stack["REDIS_URL"]) as url:
        settings = Settings(redis_url=url, tables=("s3://lake/events",),
                            reduce_window=args.window)
        stop = threading.Event()
        versions = []
        watcher = threading.Thread(target=watch, args=(queue, settings), kwargs=dict(
            wait_seconds=1, stop=stop.is_set, on_reduced=versions.append), daemon=True)
        watcher.start()
        land_and_wait([0])                                # warm the worker pool
        one = land_and_wait([1])
        before = len(versions)
        burst = land_and_wait(list(range(2, args.burst + 2)))
        burst_versions = len(versions) - before
        stop.set()
        watcher.join(timeout=30)
        with make_invoker("local") as invoker:
            start = time.perf_counter()
            compute("s3://lake/events", invoker, settings, stats_root="s3://lake/by-hand")
            by_hand = time.perf_counter() - start
    local_stack.down(state)
    print(f"window {args.window:g} s, {args.rows:,} rows per file, local stack (moto + Redis)")
    print(f"1 file lands -> new table version:          {one:6.2f} s")
    print(f"{args.burst} files land -> version with all of them: {burst:6.2f} s "
          f"({burst_versions} versions published during the burst)")
    print(f"lakestats compute by hand over the {args.burst + 2} files:  {by_hand:6.2f} s "
          f"(ratio to the burst: {by_hand / burst:.2f})")


if __name__ == "__main__":
    main()
