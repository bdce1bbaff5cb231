"""Planning against the table as it is now: what listing the table costs a prune, at 10,000 files.

`prune` first lists the table (Store.list_entries) to find files landed, rewritten or gone
since the statistics; `assume_current=True` skips the listing. Both are timed in-process (median of
5, after a warm-up) for seven queries, on local disk and on moto's S3 server, beside the listing
alone and a peer's listing of the same table: DuckDB's glob and Spark's file index (local),
pyarrow's recursive S3 get_file_info (S3).

    .venv/bin/python benchmarks/bench_planning_freshness.py [--files 10000] [--data-dir DIR]
                                                            [--skip-spark] [--skip-s3]

The table: N files of 100 rows (int64 `key` clustered by file, a `day` date, a `name` string),
100 files a directory (day=YYYY-MM-DD/). It is built and computed once under --data-dir and
reused. Statistics are fingerprinted by size and mtime locally, by size and ETag on S3, so
statistics copied up would describe none of the uploaded files: the S3 table is computed
there (`lakestats compute s3://...`), and its plans must keep the same files as the local ones.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from lakestats.formats.hive import Listing
from lakestats.metastore.layout import INDEX, Layout
from lakestats.metastore.manifest import read_manifest
from lakestats.metastore.store import Store
from lakestats.pruning import prune

LAKESTATS = str(ROOT / ".venv" / "bin" / "lakestats")
ROWS, PER_DIR, BUCKET = 100, 100, "bench"
NAMES = [f"name-{i:02d}" for i in range(40)]
START = datetime.date(2020, 1, 1)
DATA_DIR = Path("/tmp/lakestats-bench")


def queries(files: int) -> list[tuple[str, str | None, int | None, str | None]]:
    mid = files // 2 * ROWS
    return [("point: key = K", f"key = {mid + 7}", None, None),
            ("range: 1% of the keys", f"key BETWEEN {mid} AND {mid + files * ROWS // 100 - 1}",
             None, None),
            ("LIMIT 100, name = 'name-07'", "name = 'name-07'", 100, None),
            ("ORDER BY key DESC LIMIT 10", None, 10, "key DESC"),
            # shapes evaluated over the bounds as arrays: a Hive directory column, a date
            # function, arithmetic
            ("Hive column: day >= D",
             f"day >= DATE '{START + datetime.timedelta(days=files // PER_DIR // 2)}'", None, None),
            ("year(day) = Y AND key < K", f"year(day) = {START.year} AND key < {mid}", None, None),
            ("arithmetic: key * 2 + 1 > K", f"key * 2 + 1 > {2 * mid}", None, None)]


def rel_path(i: int) -> str:
    return f"day={START + datetime.timedelta(days=i // PER_DIR)}/part-{i:05d}.parquet"


def build(data: Path, files: int) -> Path:
    """The table and its statistics, unless a complete one is there already."""
    table = data / f"planning-freshness-{files}"
    layout = Layout.of_table(str(table))
    built = read_manifest(layout)
    if built is not None and built.partition_count == files:
        index = pq.read_schema(layout.version(built.version).path(INDEX))
        if "reading" in index.names:         # else an older lakestats computed it: anew
            return table
        shutil.rmtree(table / "_lakestats")
    rng = np.random.default_rng(files)
    for i in range(files):
        path = table / rel_path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({
            "key": pa.array(np.arange(i * ROWS, (i + 1) * ROWS), pa.int64()),
            "day": pa.array([START + datetime.timedelta(days=i // PER_DIR)] * ROWS, pa.date32()),
            "name": pa.array(rng.choice(NAMES, ROWS))}), path)
    lakestats_compute(str(table))
    return table


def lakestats_compute(table: str) -> None:
    started = time.perf_counter()
    subprocess.run([LAKESTATS, "compute", table, "--quiet", "--workers", "2"], check=True,
                   env={k: v for k, v in os.environ.items() if k != "REDIS_URL"})
    print(f"lakestats compute {table}: {time.perf_counter() - started:.1f} s", flush=True)


def median(run) -> float:
    run()                                              # warm-up: imports, connections
    times = []
    for _ in range(5):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(where: str, table: str, files: int, peers: dict, expected: dict | None) -> dict:
    """Times of the listing, each peer and each query's plan with and without the listing;
    returns each query's kept files (equal both ways, and to `expected` when given)."""
    stats_root = f"{table}/_lakestats"
    listing = median(lambda: Listing(Store(table).list_entries()))   # what a plan lists
    assert len(Store(table).list_files()) == files
    print(f"\n{where}, {files:,} files                        ms")
    print(f"  listing (Store.list_entries)        {listing * 1e3:9.1f}")
    for label, (run, listed) in peers.items():
        seconds = median(run)
        print(f"  {label:<35} {seconds * 1e3:9.1f}   listing / it {listing / seconds:5.2f}x  "
              f"({listed()})")
    print(f"  {'prune':<30} {'listing':>9} {'assume cur.':>12} {'ratio':>7} {'+ms':>8}  kept")
    kept = {}
    for label, where_, limit, order in queries(files):
        plans = {flag: prune(stats_root, where_, limit, order, assume_current=flag)
                 for flag in (False, True)}
        kept[label] = plans[False].kept
        assert plans[True].kept == kept[label] and not plans[False].unknown, label
        assert expected is None or expected[label] == kept[label], label
        fresh, assumed = (median(functools.partial(prune, stats_root, where_, limit, order,
                                                   assume_current=flag)) for flag in (False, True))
        print(f"  {label:<30} {fresh * 1e3:9.1f} {assumed * 1e3:12.1f} {fresh / assumed:6.2f}x "
              f"{(fresh - assumed) * 1e3:8.1f}  {len(kept[label]):,}")
    return kept


def local_peers(table: Path, skip_spark: bool) -> dict:
    import duckdb
    # the files Store lists: those below the top-level directories not hidden (_lakestats)
    glob = f"SELECT count(*) FROM glob('{table}/[!_]*/**/*.parquet')"
    peers = {"DuckDB glob('[!_]*/**/*.parquet')": (
        lambda: duckdb.sql(glob).fetchall(), lambda: f"{duckdb.sql(glob).fetchall()[0][0]:,} files")}
    if not skip_spark:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        schema = spark.read.parquet(str(table / rel_path(0))).schema   # no footer read timed
        read = lambda: spark.read.schema(schema).parquet(str(table))
        peers["Spark read.parquet (file index)"] = (
            read, lambda: f"{len(read().inputFiles()):,} files")
    return peers


def upload(table: Path, files: int) -> str:
    """The data files in moto's S3 (started here), computed there: the table's s3:// URI."""
    from lakestats.infra.local_stack import LOCAL_ACCOUNT, moto_in_process
    from lakestats.metastore.store import s3_client
    _server, endpoint = moto_in_process()          # a daemon thread: it ends with the run
    os.environ.update(AWS_ENDPOINT_URL=endpoint, **LOCAL_ACCOUNT)
    s3_client.cache_clear()
    s3 = s3_client()
    s3.create_bucket(Bucket=BUCKET)
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: s3.upload_file(str(table / rel_path(i)), BUCKET,
                                               f"{table.name}/{rel_path(i)}"), range(files)))
    print(f"\nupload of {files:,} files to moto: {time.perf_counter() - started:.1f} s")
    uri = f"s3://{BUCKET}/{table.name}"
    lakestats_compute(uri)
    return uri


def s3_peers(uri: str) -> dict:
    import pyarrow.fs as pafs

    from lakestats.metastore.store import s3_filesystem
    selector = pafs.FileSelector(uri[len("s3://"):], recursive=True)
    run = lambda: s3_filesystem().get_file_info(selector)

    def listed() -> str:          # the prefix whole: the statistics' objects too
        infos = run()
        data = sum(i.type == pafs.FileType.File and "/_lakestats/" not in i.path for i in infos)
        return f"{data:,} data files among {len(infos):,} entries"
    return {"pyarrow S3 get_file_info(recursive)": (run, listed)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--data-dir", type=Path, default=DATA_DIR)
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--skip-s3", action="store_true")
    args = p.parse_args()
    started = time.perf_counter()
    table = build(args.data_dir, args.files)
    kept = measure("local disk", str(table), args.files,
                   local_peers(table, args.skip_spark), None)
    if not args.skip_s3:
        uri = upload(table, args.files)
        measure("moto S3", uri, args.files, s3_peers(uri), kept)
        print("\nS3 plans keep the same files as the local ones")
    print(f"\nwall time {time.perf_counter() - started:.0f} s; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
