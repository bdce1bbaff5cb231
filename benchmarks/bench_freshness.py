"""Freshness: what a new, removed or rewritten file costs, against a full compute and Spark.

Tables (TPC-H lineitem clustered by ship date): one file per ship month at SF1 (84 files),
the same rows in 840 files, optionally 84 files at SF10 (--sf10), small files (1,000 and
10,000, --small), and wide tables of int64 columns in 20 files of 2,000 rows (--wide
1000,5000: a new file's cost must follow its columns, not their square). Each lakestats step
is `lakestats compute TABLE` end to end, in a process of its own (its peak RSS, workers
included, is printed). Spark's way beside it: a new file dirties ANALYZE's statistics (the
re-ANALYZE is timed), and a query plan lists the files and reads their footers (timed).
Planning and lookups are timed in-process.

    .venv/bin/python benchmarks/bench_freshness.py [--sf10] [--small 1000,10000] [--small-only]
                                                   [--wide 1000,5000] [--skip-spark]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import ROOT  # noqa: E402
from bench_pruning import clustered  # noqa: E402

CLI = [sys.executable, "-m", "lakestats.cli"]
QUERIES = [("key point (Bloom)", "l_orderkey = 4000000", None, None),
           ("date range", "l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1995-01-31'", None,
            None),
           ("LIMIT 100 with a filter", "l_shipmode = 'AIR'", 100, None),
           ("top-k", None, 10, "l_shipdate DESC")]


def lakestats(*args: str) -> tuple[float, int, dict]:
    """Seconds, peak RSS in MB (the largest process) and JSON of one CLI run, measured from
    a process of its own so that the peak is this run's."""
    probe = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(json.dumps([time.perf_counter() - t, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode, p.stdout, "
             "p.stderr]))")
    done = subprocess.run([sys.executable, "-c", probe, *CLI, *args], capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items()
                                          if k != "REDIS_URL"})
    seconds, rss, code, out, err = json.loads(done.stdout)
    if code != 0:
        raise RuntimeError(f"lakestats {' '.join(args)}: {err.strip()}")
    return seconds, rss // 1024, json.loads(out) if out.strip() else {}


def split(source: Path, out: Path, parts: int) -> Path:
    """The rows of `source` (sorted by ship date) in `parts` files."""
    if len(list(out.glob("*.parquet"))) == parts:
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    table = pq.read_table(sorted(source.glob("*.parquet"))).sort_by("l_shipdate")
    bounds = [round(i * table.num_rows / parts) for i in range(parts + 1)]
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        pq.write_table(table.slice(a, b - a), out / f"part-{i:05d}.parquet")
    return out


def by_month(data: Path, scale: float) -> Path:
    """lineitem one file per ship month at `scale` (SF1: the pruning benchmark's table)."""
    if scale == 1:
        return clustered(data, 1)["lineitem"]
    out = data / f"freshness-sf{scale:g}"
    if any(out.glob("*.parquet")):
        return out
    raw = data / f"raw-sf{scale:g}"
    tool = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    subprocess.run([tool, "parquet", "-s", str(scale), "--tables=lineitem",
                    f"--output-dir={raw}"], check=True)
    table = pq.read_table(next(raw.glob("lineitem*")))
    table = table.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_string_view(
        f.type) else f for f in table.schema])).sort_by("l_shipdate")
    month = pc.strftime(table["l_shipdate"], format="%Y-%m").to_numpy(zero_copy_only=False)
    out.mkdir(parents=True)
    starts = [i for i in range(len(month)) if i == 0 or month[i] != month[i - 1]]
    for i, (a, b) in enumerate(zip(starts, starts[1:] + [len(month)])):
        pq.write_table(table.slice(a, b - a), out / f"part-{i:03d}.parquet")
    shutil.rmtree(raw)
    return out


def changes(name: str, source: Path, work: Path, spark, probe: str = "l_orderkey = 4000000"
            ) -> dict:
    """Full compute, then a new file, a removed one, a rewritten one and --exact, on a copy
    (without the source's statistics); `probe`: the predicate of Spark's plan."""
    table = work / name
    shutil.rmtree(table, ignore_errors=True)
    shutil.copytree(source, table, ignore=shutil.ignore_patterns("_lakestats"))
    files = sorted(table.glob("*.parquet"))
    held = work / f"{name}-held.parquet"
    files[-1].rename(held)
    out = {"files": len(files)}
    out["full"] = lakestats("compute", str(table), "--quiet", "--json")
    held.rename(files[-1])
    out["new file"] = lakestats("compute", str(table), "--quiet", "--json")
    removed = files[len(files) // 2]
    kept = pq.read_table(removed)
    removed.unlink()
    out["removed file"] = lakestats("compute", str(table), "--quiet", "--json")
    pq.write_table(kept, removed)
    out["file back"] = lakestats("compute", str(table), "--quiet", "--json")
    pq.write_table(kept.slice(0, kept.num_rows - 1), removed)     # rewritten: one row less
    out["rewritten file"] = lakestats("compute", str(table), "--quiet", "--json")
    out["--exact (compaction)"] = lakestats("compute", str(table), "--quiet", "--json",
                                            "--exact")
    if spark is not None:
        out["spark"] = spark_way(spark, table, name, probe)
    return out


def spark_way(spark, table: Path, name: str, probe: str) -> dict:
    """What a new file costs Spark: a re-ANALYZE, and a plan that lists and reads footers."""
    spark.sql(f"DROP TABLE IF EXISTS {name.replace('-', '_')}")
    spark.sql(f"CREATE TABLE {name.replace('-', '_')} USING parquet LOCATION '{table}'")
    start = time.perf_counter()
    spark.sql(f"ANALYZE TABLE {name.replace('-', '_')} COMPUTE STATISTICS FOR ALL COLUMNS")
    analyze = time.perf_counter() - start
    start = time.perf_counter()
    spark.read.parquet(str(table)).where(probe).inputFiles()
    return {"re-ANALYZE": analyze, "list + footers": time.perf_counter() - start}


def planning(stats_root: str) -> dict[str, float]:
    """In-process seconds of each planning query (the median of 5, after a warm-up)."""
    from lakestats.pruning import prune
    out = {}
    for label, where, limit, order in QUERIES:
        prune(stats_root, where, limit, order)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            prune(stats_root, where, limit, order)
            times.append(time.perf_counter() - start)
        out[label] = sorted(times)[2]
    return out


def lookup(stats_root: str, columns: list[str]) -> float:
    """In-process seconds of `show --columns` (the median of 5, each a fresh StatisticsReader)."""
    from lakestats.metastore.reader import StatisticsReader
    times = []
    for _ in range(6):
        start = time.perf_counter()
        StatisticsReader(stats_root).summary(columns=columns)
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[2]


def wide(work: Path, width: int, files: int, rows: int) -> Path:
    import numpy as np
    table = work / f"wide-{width}x{files}"
    if not any(table.glob("*.parquet")):
        table.mkdir(parents=True)
        rng = np.random.default_rng(width)
        for i in range(files):
            pq.write_table(pa.table({f"c{j:04d}": rng.integers(0, 1000, rows)
                                     for j in range(width)}), table / f"part-{i:05d}.parquet")
    lakestats("compute", str(table), "--quiet", "--json")
    return table


def show(results: dict) -> None:
    for name, out in results.items():
        full = out["full"][0]
        print(f"\n{name} ({out['files']} files)")
        for step, value in out.items():
            if step in ("files", "spark"):
                continue
            seconds, rss, report = value
            ratio = f"{seconds / full:5.2f}x full" if step != "full" else " " * 11
            print(f"  {step:<22} {seconds:7.2f} s  {ratio}  peak {rss:6,} MB  "
                  f"computed {report.get('computed')}")
        for step, seconds in out.get("spark", {}).items():
            print(f"  Spark {step:<16} {seconds:7.2f} s  ({seconds / out['new file'][0]:.1f}x "
                  "lakestats' new file)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=ROOT / ".data")
    p.add_argument("--sf10", action="store_true", help="also 84 files at SF10 (slow)")
    p.add_argument("--small", default="", help="also these many small files, e.g. 1000,10000")
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--small-only", action="store_true",
                   help="only the small-file tables (with --small or --wide) and the lookups")
    p.add_argument("--wide", default="", help="also wide tables of these many columns, e.g. "
                   "1000,5000")
    args = p.parse_args()
    work = args.data_dir / "freshness"
    work.mkdir(parents=True, exist_ok=True)
    spark = None
    if not args.skip_spark:
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "6g")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    month = by_month(args.data_dir, 1)
    tables = {} if args.small_only else {
        "SF1 by month": month, "SF1 in 840 files": split(month, work / "src-840", 840)}
    if args.sf10:
        tables["SF10 by month"] = by_month(args.data_dir, 10)
    for n in filter(None, args.small.split(",")):
        tables[f"SF1 in {int(n):,} small files"] = split(month, work / f"src-{n}", int(n))
    results = {name: changes(name.replace(" ", "-").replace(",", ""), source, work, spark)
               for name, source in tables.items()}
    for n in filter(None, args.wide.split(",")):
        name = f"{int(n):,} columns x 20 files"
        results[name] = changes(name.replace(" ", "-").replace(",", ""),
                                wide(work, int(n), 20, 2000), work, spark, "c0001 = 1")
    show(results)

    print("\nprune planning, in-process (median of 5)")
    for name in (n for n in results if "columns" not in n):
        root = str(work / name.replace(" ", "-").replace(",", "") / "_lakestats")
        for label, seconds in planning(root).items():
            print(f"  {name:<28} {label:<26} {seconds * 1000:8.1f} ms")

    print("\nshow --columns a,b, in-process (median of 5)")
    narrow, broad = wide(work, 10, 20, 2000), wide(work, 1000, 20, 2000)
    few = wide(work, 10, 10, 2000)
    times = {"10 columns, 20 files": lookup(f"{narrow}/_lakestats", ["c0001", "c0002"]),
             "1,000 columns, 20 files": lookup(f"{broad}/_lakestats", ["c0001", "c0002"]),
             "10 columns, 10 files": lookup(f"{few}/_lakestats", ["c0001", "c0002"])}
    for name in results:
        if "small" in name:
            root = str(work / name.replace(" ", "-").replace(",", "") / "_lakestats")
            times[name] = lookup(root, ["l_orderkey", "l_shipdate"])
    for label, seconds in times.items():
        print(f"  {label:<32} {seconds * 1000:7.2f} ms")
    print(f"  1,000 vs 10 columns: {times['1,000 columns, 20 files'] / times['10 columns, 20 files']:.2f}x")
    if spark is not None:
        spark.stop()
    print(f"\n(peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB)")


if __name__ == "__main__":
    main()
