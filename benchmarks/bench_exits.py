"""Clean exits: `lakestats show TABLE --json` on an S3 table (moto's server), run 200 times one
after the other while 2 processes keep the CPU busy; prints how many runs exited non-zero or
wrote to stderr, and how many printed JSON that does not parse. Done when 0 of 200.

    .venv/bin/python benchmarks/bench_exits.py [--runs 200] [--busy 2]

The command is the installed console script, in a process of its own, as a user runs it.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakestats.infra.local_stack import LOCAL_ACCOUNT, moto_in_process

LAKESTATS = str(Path(sys.executable).with_name("lakestats"))


def data_file(seed: int, rows: int) -> bytes:
    rng = np.random.default_rng(seed)
    price = rng.normal(100, 30, rows)
    price[rng.random(rows) < 0.05] = np.nan
    table = pa.table({"id": rng.integers(0, 10**9, rows),
                      "qty": rng.integers(1, 51, rows).astype(np.int32),
                      "price": price,
                      "city": rng.choice(["Oslo", "Lima", "Pune", "Kyiv", "Lyon"], rows),
                      "day": pa.array(np.datetime64("2024-01-01") + rng.integers(0, 365, rows),
                                      pa.date32())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--busy", type=int, default=2, help="processes that spin meanwhile")
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--rows", type=int, default=5_000, help="rows a file")
    args = p.parse_args()

    server, endpoint = moto_in_process()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}    # an embedded Redis
    env.update(AWS_ENDPOINT_URL=endpoint, **LOCAL_ACCOUNT)
    os.environ.update(AWS_ENDPOINT_URL=endpoint, **LOCAL_ACCOUNT)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bench")
    for i in range(args.files):
        s3.put_object(Bucket="bench", Key=f"t/part-{i}.parquet", Body=data_file(i, args.rows))
    table = "s3://bench/t"
    subprocess.run([LAKESTATS, "compute", table, "--quiet"], env=env, check=True)

    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.busy)]
    codes: collections.Counter = collections.Counter()
    with_stderr, bad_json, seconds, sample = 0, 0, [], ""
    try:
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run([LAKESTATS, "show", table, "--json"], capture_output=True,
                                  text=True, env=env, timeout=300)
            seconds.append(time.perf_counter() - start)
            codes[done.returncode] += 1
            if done.stderr:
                with_stderr += 1
                sample = sample or done.stderr.strip()[-300:]
            try:
                json.loads(done.stdout)
            except ValueError:
                bad_json += 1
    finally:
        for process in spinning:
            process.kill()
            process.wait()
        server.stop()

    failed = args.runs - codes[0]
    print(f"lakestats show --json on {table} ({args.files} files on moto's S3), "
          f"{args.runs} runs, {args.busy} busy processes")
    print(f"  exited non-zero: {failed} of {args.runs}"
          + (f" (exit codes {dict(sorted(codes.items()))})" if failed else ""))
    print(f"  wrote to stderr: {with_stderr}; JSON that does not parse: {bad_json}")
    print(f"  median run: {statistics.median(seconds):.2f} s")
    if sample:
        print(f"  stderr, first: {sample}")


if __name__ == "__main__":
    main()
