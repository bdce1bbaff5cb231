"""Latency of the event flow on the local stack: from a put to a published table version that
includes it, for single files one at a time and for a burst.

`lakestats local up` (moto's S3+SQS server and a real Redis, in processes of their own; or
localstack's with --localstack) and `lakestats watch` (the same handlers as on Lambda, its
defaults unless --window / --wait say otherwise), TPC-H-like files of 20,000 rows:

    .venv/bin/python benchmarks/bench_latency.py [--puts 20] [--burst 20] [--localstack]

Each single put waits for the version that holds it. Its breakdown, from the watcher's JSON
log lines (lakestats.watch): queue (put -> the watcher received the message), worker (the
batch: the file's partition statistics, recorded as pending), window (handled -> the
reduction starts: the coalescing window and how soon the watcher notices it closed),
reduction (start -> the version written), publish (the LATEST swap -> a reader polling every
50 ms sees the version). The peer, in the same run: `lakestats compute` (the CLI, a process
of its own) over the same table after one new file lands, an incremental compute of that one
file; and a compute by hand over every file, beside the burst.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TABLE = "s3://lake/events"
PARTS = ("queue", "worker", "window", "reduction", "publish")
# the reduction's own moments: its compute lock taken, partitions, table-level statistics
STAGES = ("lock", "partitions", "table")


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


def tally_queue(bucket: str, rule: str) -> str:
    """A second target of the bucket's object-event rule: a queue that only counts."""
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"{bucket}-tally")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    boto3.client("events").put_targets(Rule=rule, Targets=[{"Id": "tally", "Arn": arn}])
    return url


def drain_count(url: str) -> int:
    sqs, count = boto3.client("sqs"), 0
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                     WaitTimeSeconds=1).get("Messages", []):
        count += len(got)
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    return count


class LogSink:
    """The watcher's JSON lines, parsed as they come."""

    def __init__(self):
        self.lines: list[dict] = []

    def write(self, text: str) -> None:
        self.lines += [json.loads(line) for line in text.splitlines() if line.strip()]

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def find(self, version: str, key: str, seconds: float = 10) -> dict:
        """The line of `version` that has `key` (a batch's: received_at; a version's: moments)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in self.lines:
                if line.get("version") == version and key in line:
                    return line
            time.sleep(0.02)
        raise RuntimeError(f"no {key} line for {version} in the watcher's log")


def p95(values: list[float]) -> float:
    """Nearest rank: of 20 values, the 19th smallest."""
    return sorted(values)[math.ceil(0.95 * len(values)) - 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--puts", type=int, default=20)
    p.add_argument("--burst", type=int, default=20)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--window", type=float, help="reduce window (default: `lakestats watch`'s)")
    p.add_argument("--wait", type=int, help="the watcher's long poll (default: watch()'s)")
    p.add_argument("--localstack", action="store_true", help="localstack's S3+SQS, not moto's")
    args = p.parse_args()

    from lakestats.core.settings import WATCH_REDUCE_WINDOW_SECONDS, Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra import local_stack
    from lakestats.infra.redis_server import redis_url
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.metastore.store import s3_client
    from lakestats.monostore.compute import compute
    from lakestats.watch import watch

    state = Path(tempfile.mkdtemp(prefix="lakestats-latency-"))
    server = None
    if args.localstack:
        from lakestats.infra import localstack
        python = localstack.installed()
        server = lambda: localstack.detached(python)    # noqa: E731
    stack = local_stack.up(state, s3_server=server)
    endpoint = stack["AWS_ENDPOINT_URL"]
    os.environ.update(AWS_ENDPOINT_URL=endpoint, REDIS_URL=stack["REDIS_URL"],
                      **local_stack.LOCAL_ACCOUNT)
    s3_client.cache_clear()
    queue = local_stack.wire_bucket(endpoint, "lake", "events")
    counted = tally_queue("lake", "lake-objects")
    boto3.client("s3").create_bucket(Bucket="by-hand")      # the peers' statistics
    s3 = boto3.client("s3")
    total_files = 1 + args.puts + args.burst + 1
    payloads = [data_file(i, args.rows) for i in range(total_files)]
    landed = 0

    def published() -> tuple[str | None, int]:
        try:
            reader = StatisticsReader(f"{TABLE}/_lakestats")
            return reader.version, reader.manifest.partition_count
        except Exception:  # noqa: BLE001 - nothing published yet
            return None, 0

    def objects() -> int:
        return sum(page.get("KeyCount", 0) for page in s3.get_paginator(
            "list_objects_v2").paginate(Bucket="lake"))

    def land_and_wait(count: int) -> tuple[float, float, str]:
        """Put `count` new files; (put time, seen time, version) once a version holds them."""
        nonlocal landed
        target = published()[1] + count
        put = time.time()
        for i in range(landed, landed + count):
            s3.put_object(Bucket="lake", Key=f"events/part-{i:04d}.parquet", Body=payloads[i])
        landed += count
        while (seen := published())[1] < target:
            time.sleep(0.05)
        return put, time.time(), seen[0]

    try:
        with redis_url(stack["REDIS_URL"]) as url:
            window = WATCH_REDUCE_WINDOW_SECONDS if args.window is None else args.window
            settings = Settings(redis_url=url, tables=(TABLE,), reduce_window=window)
            options = {} if args.wait is None else {"wait_seconds": args.wait}
            stop, sink = threading.Event(), LogSink()
            watcher = threading.Thread(target=watch, args=(queue, settings), kwargs=dict(
                stop=stop.is_set, log=sink, **options), daemon=True)
            watcher.start()
            warm = land_and_wait(1)                   # the worker pool's first call
            rows = []
            for _ in range(args.puts):
                put, seen, version = land_and_wait(1)
                batch, made = sink.find(version, "received_at"), sink.find(version, "moments")
                at = made["moments"]
                rows.append({"total": seen - put, "queue": batch["received_at"] - put,
                             "worker": batch["handled_at"] - batch["received_at"],
                             "window": at["started"] - batch["handled_at"],
                             "reduction": at["publish"] - at["started"],
                             "publish": seen - at["publish"], "version": version,
                             "lock": at["listing"] - at["started"],
                             "partitions": at["table-level"] - at["listing"],
                             "table": at["publish"] - at["table-level"],
                             "objects": objects()})
            before = len([line for line in sink.lines if "moments" in line])
            put, seen, _ = land_and_wait(args.burst)
            burst, burst_versions = seen - put, len(
                [line for line in sink.lines if "moments" in line]) - before
            notifications = drain_count(counted)
            stop.set()
            watcher.join(timeout=60)
            with make_invoker("local") as invoker:
                start = time.perf_counter()
                compute(TABLE, invoker, settings, stats_root="s3://by-hand/events")
                by_hand = time.perf_counter() - start
            # one more file, the watcher stopped: the CLI computes it incrementally
            s3.put_object(Bucket="lake", Key=f"events/part-{landed:04d}.parquet",
                          Body=payloads[landed])
            start = time.perf_counter()
            subprocess.run([str(Path(sys.executable).parent / "lakestats"), "compute", TABLE,
                            "--stats-root", "s3://by-hand/events"], check=True,
                           stdout=subprocess.DEVNULL)
            cli = time.perf_counter() - start
    finally:
        local_stack.down(state)

    totals = [r["total"] for r in rows]
    print(f"{'localstack' if args.localstack else 'moto'} + Redis, window "
          f"{settings.reduce_window:g} s, {args.rows:,} rows a file, load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"warm-up put (not counted): {warm[1] - warm[0]:.2f} s")
    print("put  total " + " ".join(f"{p:>9}" for p in PARTS) + "  | reduction: "
          + " ".join(f"{p:>10}" for p in STAGES) + "  objects in the bucket")
    for i, r in enumerate(rows, 1):
        print(f"{i:3d} {r['total']:6.2f} " + " ".join(f"{r[p]:9.2f}" for p in PARTS)
              + "  |            " + " ".join(f"{r[p]:10.2f}" for p in STAGES)
              + f"  {r['objects']:,}")
    print(f"med {statistics.median(totals):6.2f} " + " ".join(
        f"{statistics.median(r[p] for r in rows):9.2f}" for p in PARTS) + "  |            "
        + " ".join(f"{statistics.median(r[p] for r in rows):10.2f}" for p in STAGES))
    print(f"single file, put -> version: median {statistics.median(totals):.2f} s "
          f"(target <= 2), p95 {p95(totals):.2f} s (target <= 4), min {min(totals):.2f}, "
          f"max {max(totals):.2f}, over {len(totals)} puts")
    print(f"  peer: `lakestats compute` (CLI) after one new file lands: {cli:.2f} s")
    watched = total_files - 1
    print(f"notifications per data file: {notifications / watched:.2f} "
          f"({notifications} for the {watched} files the watcher saw land, its statistics "
          "left out; target 1)")
    print(f"{args.burst} files at once -> a version with all of them: {burst:.2f} s "
          f"({burst_versions} versions)")
    print(f"  peer: compute by hand over the {landed} files, from scratch: {by_hand:.2f} s")


if __name__ == "__main__":
    main()
