"""Scale and load on the local stack (real redis-server, moto's S3+SQS server, local worker
processes), and the cost model checked against the S3 requests the stack served.

    .venv/bin/python benchmarks/bench_scale.py [--files 1000,10000] [--pack-bytes 0,...]
        [--burst 1000] [--width 1000] [--cost-files 20,60,40] [--workers 2] [--big-files 8]
        [--only L1,L2,L3,C,G]

L1 tables of N small files (5 columns, 200 rows each) computed from scratch by the CLI on
   local disk, on a fresh Redis, once per pack budget (0: one file a call), and the partition
   statistics alone in-process, one file a call against packs: seconds, the coordinator's peak
   RSS, Redis' peak memory, their growth from the first N to the last; DuckDB SUMMARIZE beside.
L2 a burst of --burst files landing in a bucket whose events go to SQS: `lakestats watch` until
   the published version holds them all: seconds, the watcher's peak RSS, Redis' peak; on
   moto's server or, with --burst-on localstack, on localstack (from .localstack-venv).
L3 a table of --width int64 columns (20 files x 2,000 rows): compute vs DuckDB SUMMARIZE.
C  the cost model's S3 requests: per statistic kind (and one packed compute from scratch) and
   method, a x files + b fitted on two S3 tables behind a counting proxy, checked on a third.
G  the cost model's compute: TPC-H SF1 lineitem in --big-files files, each statistic kind
   computed by one worker on local disk: seconds per GB of Parquet, and the Lambda GB-seconds
   per TB scanned at the template's 2 GB; beside it Spark's ANALYZE of the same files on one
   core, priced as Glue column statistics (DPU-hours) and as Spark on EMR.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))
from bench_compute import run_duckdb, run_spark  # noqa: E402
from bench_freshness import wide  # noqa: E402
from bench_throughput import SHIM  # noqa: E402

CLI = str(Path(sys.executable).with_name("lakestats"))
WORK = Path(tempfile.gettempdir()) / "lakestats-bench-scale"     # tables kept between runs


# list prices, us-east-1, November 2026
LAMBDA_GB_SECOND = 0.0000166667        # x86
GLUE_DPU_HOUR = 0.44
EMR_M5_XLARGE_HOUR = 0.192 + 0.048     # EC2 on demand + EMR's fee, 4 vCPU


def small(i: int, rows: int = 200) -> pa.Table:
    rng = np.random.default_rng(i)
    return pa.table({"id": np.arange(i * rows, (i + 1) * rows),
                     "qty": rng.integers(1, 50, rows).astype(np.int32),
                     "price": rng.normal(100, 30, rows),
                     "city": rng.choice(["Oslo", "Zürich", "São Paulo", "東京"], rows),
                     "day": (np.datetime64("2024-01-01") + rng.integers(0, 366, rows)
                             ).astype("datetime64[D]")})


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def small_table(work: Path, files: int, written_as: int | None = None) -> Path:
    """`files` small files' rows, written as they are or as `written_as` files."""
    written_as = written_as or files
    table = work / (f"small-{files}" + (f"-as-{written_as}" if written_as != files else ""))
    if not (table / f"part-{written_as - 1:05d}.parquet").exists():
        table.mkdir(parents=True, exist_ok=True)
        per = files // written_as
        for j in range(written_as):
            rows = pa.concat_tables([small(i) for i in range(j * per, (j + 1) * per)])
            (table / f"part-{j:05d}.parquet").write_bytes(parquet_bytes(rows))
    return table


def measured(argv: list[str], env: dict, until=None) -> tuple[float, float, float]:
    """Run a lakestats command on a fresh Redis (until `until()` holds, then stop it):
    seconds, its peak RSS (MB), Redis' peak memory (MB)."""
    import redis

    from lakestats.infra.redis_server import EmbeddedRedis
    server = EmbeddedRedis().start()
    try:
        started = time.monotonic()
        log = tempfile.TemporaryFile("w+")
        shim = subprocess.Popen([sys.executable, "-c", SHIM, *argv], stderr=log,
                                stdout=subprocess.DEVNULL, text=True,
                                env={**os.environ, **env, "REDIS_URL": server.url})
        if until is not None:
            while not until():
                assert shim.poll() is None, f"{argv[1]} ended early"
                time.sleep(0.5)
            log.seek(0)
            os.kill(int(log.readline()), signal.SIGTERM)
        shim.wait()
        seconds = time.monotonic() - started
        log.seek(0)
        lines = log.read().split()
        assert lines[-1].isdigit(), " ".join(lines[-50:])
        maxrss = int(lines[-1]) / 1024
        peak = redis.Redis.from_url(server.url).info("memory")["used_memory_peak"] / 2**20
    finally:
        server.stop()
    return seconds, maxrss, peak


def compute_small(table: Path, workers: int, budget: int) -> tuple[float, float, float, int]:
    """The CLI's compute of a table on a fresh Redis: seconds, coordinator and Redis peaks
    (MB), and the partition step's calls (packs of `budget`)."""
    from lakestats.algorithms.partitions.driver import packs
    from lakestats.metastore.store import Store
    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    seconds, rss, redis_mb = measured([CLI, "compute", str(table), "--quiet", "--workers",
                                       str(workers)], {"LAKESTATS_PACK_BYTES": str(budget)})
    calls = len(packs([f.size for f in Store(str(table)).list_files()], budget, workers))
    return seconds, rss, redis_mb, calls


def l1(work: Path, counts: list[int], workers: int, budgets: list[int],
       in_process: bool = True) -> None:
    rows = []
    for n in counts:
        table = small_table(work, n)
        duck = run_duckdb(table, workers)
        for budget in budgets:
            seconds, rss, redis_mb, calls = compute_small(table, workers, budget)
            if budget == budgets[-1]:
                rows.append((n, seconds, rss, redis_mb))
            print(f"L1 {n:,} files, packs of {budget / 2**20:g} MB ({calls:,} calls): compute "
                  f"{seconds:.1f} s ({seconds / n * 1000:.1f} ms a file), coordinator peak "
                  f"{rss:.0f} MB, Redis peak {redis_mb:.1f} MB; DuckDB SUMMARIZE {duck:.1f} s "
                  f"-> {seconds / duck:.1f}x DuckDB", flush=True)
        if n > 100:
            few, _, _, few_calls = compute_small(small_table(work, n, 100), workers, budgets[-1])
            print(f"L1 the same rows in 100 files ({few_calls} calls): compute {few:.1f} s -> "
                  f"{n:,} files take {rows[-1][1] / few:.1f}x (target <= 2.5x)", flush=True)
        if in_process:
            packing(table, workers, budgets)
    if len(rows) > 1:
        (n0, s0, r0, m0), (n1, s1, r1, m1) = rows[0], rows[-1]
        print(f"L1 growth x{n1 / n0:.0f} files: time x{s1 / s0:.1f}, coordinator memory "
              f"x{r1 / r0:.2f}, Redis memory x{m1 / m0:.2f} (linear would be x{n1 / n0:.0f})")


def packing(table: Path, workers: int, budgets: list[int]) -> None:
    """The partition statistics alone, in-process on a warm pool, one file a call against
    the packs of the last budget, twice each, alternating: seconds and calls."""
    from lakestats.algorithms.partitions.driver import compute_partitions, packs
    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import EmbeddedRedis
    from lakestats.metastore.layout import Layout
    from lakestats.metastore.store import Store
    files = Store(str(table)).list_files()
    server = EmbeddedRedis().start()
    try:
        with make_invoker("local", workers) as invoker:
            for budget in [0, budgets[-1]] * 2:
                shutil.rmtree(table / "_lakestats", ignore_errors=True)
                started = time.monotonic()
                compute_partitions(invoker, str(table), Layout.of_table(str(table)), files,
                                   Settings(redis_url=server.url, pack_bytes=budget))
                calls = len(packs([f.size for f in files], budget, workers))
                print(f"L1 {len(files):,} files, partition statistics alone, packs of "
                      f"{budget / 2**20:g} MB: {time.monotonic() - started:.1f} s, {calls:,} "
                      "calls", flush=True)
    finally:
        server.stop()


def s3_stack():
    """moto's server, in this process's environment, and a counting proxy in front of it."""
    from lakestats.infra.faults import S3FaultProxy
    from lakestats.infra.local_stack import LOCAL_ACCOUNT, moto_in_process
    moto, endpoint = moto_in_process()
    os.environ.update(AWS_ENDPOINT_URL=endpoint, **LOCAL_ACCOUNT)
    return moto, S3FaultProxy(endpoint)


def upload(bucket: str, prefix: str, files: int) -> None:
    import boto3
    s3 = boto3.client("s3")
    for i in range(files):
        s3.put_object(Bucket=bucket, Key=f"{prefix}/part-{i:05d}.parquet",
                      Body=parquet_bytes(small(i)))


def l2(burst: int, stack: str) -> None:
    import boto3

    from lakestats.infra.local_stack import wire_bucket
    from lakestats.metastore.reader import StatisticsReader
    bucket = f"burst-{uuid.uuid4().hex[:8]}"
    queue = wire_bucket(os.environ["AWS_ENDPOINT_URL"], bucket, f"events-{bucket}")
    table = f"s3://{bucket}/t"
    upload(bucket, "t", burst)
    sqs = boto3.client("sqs")

    def settled() -> bool:
        try:
            return StatisticsReader(f"{table}/_lakestats").manifest.partition_count == burst
        except Exception:  # noqa: BLE001 - nothing published yet
            return False
    seconds, rss, redis_mb = measured([CLI, "watch", "--queue", queue, "--tables", table,
                                       "--window", "2"], {}, until=settled)
    print(f"L2 a burst of {burst:,} object events on {stack}: the version holding them all after "
          f"{seconds:.1f} s ({burst / seconds:.0f} files/s), watcher peak {rss:.0f} MB, "
          f"Redis peak {redis_mb:.1f} MB; {queued(sqs, queue)} messages left in the queue "
          f"(events of lakestats' own statistics files)", flush=True)


def queued(sqs, queue: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + \
        int(attrs["ApproximateNumberOfMessagesNotVisible"])


def l3(work: Path, width: int, workers: int) -> None:
    table = wide(work, width, 20, 2000)
    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    seconds, rss, redis_mb = measured([CLI, "compute", str(table), "--quiet", "--workers",
                                       str(workers)], {})
    duck = run_duckdb(table, workers)
    print(f"L3 {width:,} columns x 20 files: compute {seconds:.1f} s, coordinator peak "
          f"{rss:.0f} MB, Redis peak {redis_mb:.1f} MB; DuckDB SUMMARIZE {duck:.1f} s -> "
          f"{seconds / duck:.1f}x DuckDB", flush=True)


def kinds(table: str, workers: int, rank_columns: list[str],
          served=None, whole: str | None = None) -> dict[str, dict]:
    """Each statistic kind computed on `table` from scratch (and `whole`, a copy, in one
    compute), on a fresh Redis: seconds and the S3 requests by method `served` counted."""
    from lakestats.algorithms.partitions.driver import compute_partitions
    from lakestats.algorithms.ranks.driver import compute_ranks
    from lakestats.core.settings import Settings
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import EmbeddedRedis
    from lakestats.metastore.layout import Layout
    from lakestats.metastore.store import Store
    from lakestats.monostore.compute import compute
    server = EmbeddedRedis().start()
    settings = Settings(redis_url=server.url)
    served = served if served is not None else {}
    out = {}
    try:
        with make_invoker("local", workers) as invoker:
            for name, run in [
                    ("partition statistics", lambda: compute_partitions(
                        invoker, table, Layout.of_table(table), Store(table).list_files(),
                        settings)),
                    ("table version (summary, frequencies, histograms)",
                     lambda: compute(table, invoker, settings)),
                    (f"exact ranks ({len(rank_columns)} columns)", lambda: compute_ranks(
                        f"{table}/_lakestats", invoker, settings, rank_columns)),
                    *([("one compute, packed (partitions, digests, version)",
                        lambda: compute(whole, invoker, settings))] if whole else [])]:
                before, started = dict(served), time.monotonic()
                run()
                out[name] = {"seconds": time.monotonic() - started, **{
                    m: served[m] - before.get(m, 0) for m in served}}
    finally:
        server.stop()
    return out


def s3_kinds(proxy, files: int, workers: int) -> dict[str, dict]:
    """kinds() on a fresh S3 table of `files` small files, counted by the proxy."""
    import boto3

    from lakestats.metastore.store import s3_client
    os.environ["AWS_ENDPOINT_URL"] = proxy.url           # its workers count through it too
    s3_client.cache_clear()
    try:
        bucket = f"cost-{uuid.uuid4().hex[:8]}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        for prefix in ("t", "u"):
            upload(bucket, prefix, files)
        proxy.faults.served.clear()
        return kinds(f"s3://{bucket}/t", workers, ["price", "city"], proxy.faults.served,
                     f"s3://{bucket}/u")
    finally:
        os.environ["AWS_ENDPOINT_URL"] = proxy.target.geturl()
        s3_client.cache_clear()


def gb_seconds(data_dir: Path, work: Path, files: int) -> None:
    """Lambda GB-seconds per TB: seconds per GB of Parquet with one worker (so the phase's
    seconds bound its steps' own), times 2 GB, times 1,000 GB."""
    from bench_freshness import by_month
    table = work / f"lineitem-{files}"
    if not (table / f"part-{files - 1:03d}.parquet").exists():
        import pyarrow.dataset as ds
        whole = ds.dataset(by_month(data_dir, 1)).to_table()
        table.mkdir(parents=True, exist_ok=True)
        step = -(-whole.num_rows // files)
        for i in range(files):
            pq.write_table(whole.slice(i * step, step), table / f"part-{i:03d}.parquet")
    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    gb = sum(p.stat().st_size for p in table.glob("*.parquet")) / 1e9
    print(f"G lineitem SF1 in {files} files of {gb / files * 1000:.0f} MB ({gb:.3f} GB), "
          f"one worker, local disk:", flush=True)
    lambda_tb = 0.0
    for kind, counts in kinds(str(table), 1, ["l_extendedprice", "l_comment"]).items():
        seconds = counts["seconds"]
        per_tb = seconds / gb * 1000 * 2
        print(f"G {kind}: {seconds:.1f} s, {seconds / gb:.0f} s a GB -> {per_tb:,.0f} "
              f"GB-seconds a TB at 2 GB (${per_tb * LAMBDA_GB_SECOND:.2f})", flush=True)
        if not kind.startswith("exact ranks"):
            lambda_tb += per_tb * LAMBDA_GB_SECOND
    # the peers, priced from Spark's ANALYZE of the same files on one core (Glue's column
    # statistics and EMR run Spark): core-hours a TB, four vCPUs to a DPU or an m5.xlarge
    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    with contextlib.chdir(tempfile.mkdtemp(dir=work)):      # Spark's warehouse and metastore
        _, spark_seconds = run_spark(table, 1)
    core_hours = spark_seconds / gb * 1000 / 3600
    print(f"G Spark ANALYZE ... FOR ALL COLUMNS, one core: {spark_seconds:.1f} s, "
          f"{spark_seconds / gb:.0f} s a GB -> {core_hours:,.1f} core-hours a TB", flush=True)
    print(f"G $ a TB: lakestats on Lambda ${lambda_tb:.2f} (summary, frequencies, histograms; "
          f"2 GB functions) | Glue column statistics ${core_hours / 4 * GLUE_DPU_HOUR:.2f} "
          f"(${GLUE_DPU_HOUR} a DPU-hour, 4 vCPU a DPU, every row) | Spark ANALYZE on EMR "
          f"${core_hours / 4 * EMR_M5_XLARGE_HOUR:.2f} (m5.xlarge, ${EMR_M5_XLARGE_HOUR} an "
          "hour with EMR's fee) -> Glue / lakestats "
          f"{core_hours / 4 * GLUE_DPU_HOUR / lambda_tb:.1f}x", flush=True)


def cost(proxy, files: list[int], workers: int) -> None:
    """Fit requests = a x files + b per kind and method on two sizes; check on a third."""
    runs = {n: s3_kinds(proxy, n, workers) for n in files}
    (n0, n1), n2 = files[:2], files[2]
    for kind in runs[n0]:
        for method in sorted(set(runs[n0][kind]) - {"seconds"}):
            a = (runs[n1][kind].get(method, 0) - runs[n0][kind].get(method, 0)) / (n1 - n0)
            b = runs[n0][kind].get(method, 0) - a * n0
            predicted, served = a * n2 + b, runs[n2][kind].get(method, 0)
            if served or predicted:
                print(f"C {kind}: {method} {a:.2f} a file + {b:.0f}; predicted for {n2} files "
                      f"{predicted:.0f}, served {served} ({served / max(predicted, 1):.2f})")
    print("C raw:", json.dumps(runs))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", default="1000,10000")
    p.add_argument("--pack-bytes", default=f"0,{32 << 20},{128 << 20},{512 << 20}",
                   help="L1: the pack budgets to run (LAKESTATS_PACK_BYTES), the last one's "
                        "rows for the growth line")
    p.add_argument("--burst", type=int, default=1000)
    p.add_argument("--burst-on", choices=["moto", "localstack"], default="moto")
    p.add_argument("--width", type=int, default=1000)
    p.add_argument("--cost-files", default="20,60,40",
                   help="the cost model's tables: fitted on the first two, checked on the third")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--big-files", type=int, default=8, help="G's files (lineitem SF1)")
    p.add_argument("--data-dir", type=Path, default=ROOT / ".data")
    p.add_argument("--only", default="L1,L2,L3,C,G")
    args = p.parse_args()
    only = set(args.only.split(","))
    WORK.mkdir(exist_ok=True)
    if "L1" in only:
        l1(WORK, [int(n) for n in args.files.split(",")], args.workers,
           [int(b) for b in args.pack_bytes.split(",")])
    if "L2" in only and args.burst_on == "localstack":
        from lakestats.infra.local_stack import LOCAL_ACCOUNT
        from lakestats.infra.localstack import Localstack, localstack_python
        with Localstack(localstack_python()) as stack:
            os.environ.update(AWS_ENDPOINT_URL=stack.endpoint, **LOCAL_ACCOUNT)
            l2(args.burst, "localstack")
        only.discard("L2")
    if only & {"L2", "C"}:
        moto, proxy = s3_stack()
        proxy.__enter__()
        try:
            if "L2" in only:
                l2(args.burst, "moto")
            if "C" in only:
                cost(proxy, [int(n) for n in args.cost_files.split(",")], args.workers)
        finally:
            proxy.__exit__()
            moto.stop()
    if "L3" in only:
        l3(WORK, args.width, args.workers)
    if "G" in only:
        gb_seconds(args.data_dir, WORK, args.big_files)


if __name__ == "__main__":
    main()
