"""Throughput targets T1-T6, each with its peer in the same run, printed as ratios.

TPC-H SF1 lineitem written as one file per ship month (84 files, as the freshness benchmark
writes it), and a wide table of 1,000 int64 columns x 20 files x 2,000 rows:

    .venv/bin/python benchmarks/bench_throughput.py [--skip-spark] [--only T1,T3,T7]

T1 whole-table compute (every default statistic) vs DuckDB SUMMARIZE vs Spark ANALYZE ... FOR
   ALL COLUMNS with histograms
T2 the per-partition kernel vs a pyarrow read and decode of the same file, one process
T3 the wide table: compute vs DuckDB SUMMARIZE; Redis peak and the coordinator's peak RSS
T4 quantiles --exact as it answers (from the frequency list when complete, else the
   distributed sort) vs DuckDB quantile_disc
T5 lookups from stored statistics, CLI end to end (a fresh process each) and in-process
T6 the peak RSS of each lookup's process
T7 10,000 small files (5 columns x 200 rows) vs the same rows in 100 files: compute, peak
   RSS, calls, DuckDB SUMMARIZE beside (bench_scale's L1)
T8 prune planning at 10,000 partitions, the table listed (bench_planning_freshness)

T1, T2, T3, T4, T7 and T8 are the rows of the cost issue's table, each beside its anchor.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))
from bench_compute import run_duckdb, run_spark, timed  # noqa: E402
from bench_freshness import by_month, wide  # noqa: E402

CLI = str(Path(sys.executable).with_name("lakestats"))
QS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def compute_measured(table: Path, workers: int) -> dict:
    """A from-scratch compute in a process of its own, on a fresh Redis: seconds, the
    coordinator's peak RSS, Redis' peak memory."""
    import redis

    from lakestats.infra.redis_server import EmbeddedRedis
    shutil.rmtree(table / "_lakestats", ignore_errors=True)
    server = EmbeddedRedis().start()
    try:
        seconds, (_, maxrss) = timed(lambda: run_child(
            [CLI, "compute", str(table), "--quiet", "--workers", str(workers)],
            {"REDIS_URL": server.url}))
        peak = redis.Redis.from_url(server.url).info("memory")["used_memory_peak"]
    finally:
        server.stop()
    return {"seconds": seconds, "coordinator_mb": maxrss, "redis_mb": peak / 2**20}


# Linux counts the RSS a process had when it forked into its child's peak: commands run
# under this small process, which reports the command's pid on its first stderr line, and its
# exit code and own peak (wait4) on its last.
SHIM = """import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
print(child.pid, file=sys.stderr, flush=True)
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)"""


def run_child(argv: list[str], env: dict | None = None) -> tuple[bytes, float]:
    """Run a command; its output and its own peak RSS in MB."""
    done = subprocess.run([sys.executable, "-c", SHIM, *argv], capture_output=True,
                          env={**os.environ, **(env or {})})
    code, maxrss = map(int, done.stderr.decode().split()[-2:])
    assert code == 0, (argv, done.stderr.decode()[-2000:])
    return done.stdout, maxrss / 1024


def t1(table: Path, workers: int, spark: bool) -> None:
    ours = compute_measured(table, workers)
    duck = run_duckdb(table, workers)
    line = (f"T1 compute {ours['seconds']:.1f} s; DuckDB SUMMARIZE {duck:.1f} s "
            f"-> {ours['seconds'] / duck:.2f}x DuckDB (target <= 1.5x)")
    if spark:
        _, analyze = run_spark(table, workers)
        line += f"; Spark ANALYZE {analyze:.1f} s -> {analyze / ours['seconds']:.2f}x faster " \
                "than Spark (target >= 3x)"
    print(line, flush=True)


def t2(table: Path, files: int = 12) -> None:
    import pyarrow.parquet as pq

    from lakestats.algorithms.partitions import kernel
    from lakestats.metastore.store import Store
    paths = sorted(p for p in table.glob("**/*.parquet")
                   if p.is_file() and "_lakestats" not in p.parts)[:files]
    store = Store(str(table))
    read = sum(timed(lambda p=p: pq.read_table(p, use_threads=False))[0] for p in paths)
    ours = sum(timed(lambda p=p: kernel.compute(store, str(p.relative_to(table))))[0]
               for p in paths)
    print(f"T2 kernel {ours:.2f} s; pyarrow read+decode {read:.2f} s over {len(paths)} files "
          f"-> {ours / read:.1f}x (target <= 2x)", flush=True)


def t3(table: Path, workers: int) -> None:
    ours = compute_measured(table, workers)
    duck = run_duckdb(table, workers)
    print(f"T3 1,000 columns: compute {ours['seconds']:.1f} s; DuckDB SUMMARIZE {duck:.1f} s -> "
          f"{ours['seconds'] / duck:.1f}x (target <= 3x); Redis peak {ours['redis_mb']:.0f} MB "
          f"(<= 256); coordinator peak {ours['coordinator_mb']:.0f} MB (<= 1,024)", flush=True)


def t4(table: Path, workers: int) -> None:
    """Exact quantiles as `quantiles --exact` answers them (from the frequency list when it
    holds every value, else the distributed sort) beside DuckDB's quantile_disc
    (bench_quantiles)."""
    from bench_quantiles import beside_duckdb

    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    if not (table / "_lakestats").exists():
        compute_measured(table, workers)
    with redis_url() as url, make_invoker("local", workers) as invoker:
        found = beside_duckdb(table, ["l_extendedprice", "l_orderkey"], QS, workers, url, invoker)
    for column, r in found.items():
        print(f"T4 quantiles --exact {column}: {r['lakestats']:.2f} s ({r['path']}); DuckDB "
              f"quantile_disc {r['duckdb']:.2f} s -> {r['lakestats'] / r['duckdb']:.1f}x "
              "(target <= 4x)", flush=True)


def t7(workers: int) -> None:
    """10,000 small files (bench_scale's L1 table) against the same rows in 100 files."""
    from bench_scale import WORK, l1

    from lakestats.core.settings import PACK_BYTES
    WORK.mkdir(exist_ok=True)
    l1(WORK, [10_000], workers, [PACK_BYTES], in_process=False)


def t8() -> None:
    """Planning at 10,000 partitions with the listing (bench_planning_freshness)."""
    from bench_planning_freshness import DATA_DIR, build, local_peers, measure
    table = build(DATA_DIR, 10_000)
    print("T8 prune planning at 10,000 partitions (target <= 100 ms, listing included):")
    measure("local disk", str(table), 10_000, local_peers(table, True), None)


def t5_t6(table: Path) -> None:
    from lakestats.metastore.reader import StatisticsReader
    lookups = {
        "show --columns l_orderkey": ["show", str(table), "--columns", "l_orderkey", "--json"],
        "histogram l_extendedprice": ["histogram", str(table), "l_extendedprice", "--json"],
        "frequencies l_orderkey --top 10": ["frequencies", str(table), "l_orderkey", "--top",
                                            "10", "--json"],
        "frequencies l_comment --top 10": ["frequencies", str(table), "l_comment", "--top",
                                           "10", "--json"],
        "quantiles l_quantity (frequencies)": ["quantiles", str(table), "l_quantity",
                                               *map(str, QS), "--json"],
        "quantiles l_comment (frequencies)": ["quantiles", str(table), "l_comment", "0.5",
                                              "--json"],
    }
    root = f"{table}/_lakestats"
    in_process = {      # a fresh reader each time (nothing cached), imports warm
        "show --columns l_orderkey": lambda: StatisticsReader(root).statistics(
            columns=["l_orderkey"]),
        "histogram l_extendedprice": lambda: StatisticsReader(root).histogram("l_extendedprice"),
        "frequencies l_orderkey --top 10": lambda: StatisticsReader(root).frequency_list(
            "l_orderkey", top=10),
        "frequencies l_comment --top 10": lambda: StatisticsReader(root).frequency_list(
            "l_comment", top=10),
        "quantiles l_quantity (frequencies)": lambda: StatisticsReader(root).quantiles(
            "l_quantity", QS),
    }
    for lookup in in_process.values():
        lookup()
    for name, argv in lookups.items():
        seconds, (_, rss) = timed(lambda a=argv: run_child([CLI, *a]))
        inner = ""
        if name in in_process:
            median = sorted(timed(in_process[name])[0] for _ in range(3))[1]
            inner = f", in-process {median * 1000:.0f} ms"
        print(f"T5/T6 {name}: CLI {seconds:.2f} s (target <= 0.4){inner} (target <= 50); "
              f"peak RSS {rss:.0f} MB (target <= 200)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=ROOT / ".data")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--only", default="T1,T2,T3,T4,T5,T7,T8")
    args = p.parse_args()
    only = set(args.only.split(","))
    month = by_month(args.data_dir, 1)
    print(f"{os.cpu_count()} cores; lineitem SF1 by month: {month}\n", flush=True)
    if "T1" in only:
        t1(month, args.workers, not args.skip_spark)
    if "T2" in only:
        t2(month)
    if "T3" in only:
        t3(wide(args.data_dir / "freshness", 1000, 20, 2000), args.workers)
    if "T4" in only:
        t4(month, args.workers)
    if "T5" in only:
        if not (month / "_lakestats").exists():
            compute_measured(month, args.workers)
        t5_t6(month)
    if "T7" in only:
        t7(args.workers)
    if "T8" in only:
        t8()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"\nbenchmark process peak RSS {peak} MB")


if __name__ == "__main__":
    main()
