"""Join pruning: the files and bytes that data-induced predicates (diPs) skip in the 22 TPC-H
queries, the planning time it adds, and Spark over every file vs over the kept ones:

    .venv/bin/python benchmarks/bench_joins.py [--scale 1] [--data-dir DIR] [--queries 1,2,...]
                                                [--no-spark]

Two layouts of many Parquet files per table (lineitem ~1,000 files of ~6,000 rows at SF1, the
others in proportion), statistics by `lakestats compute`:
  clustered   the paper's tuned replication: lineitem cut by l_shipdate and orders by
              o_orderdate into equal row counts, each file then sorted on its order key;
              partsupp sorted on ps_partkey, the other tables on their primary keys
  key-sorted  every table sorted on its primary key and cut the same way (the load order)
Spark: one local[2] session, 6 GB driver, adaptive query execution ON (Spark's default; it
coalesces the 200 shuffle partitions that would dominate at SF1 on two cores). Per query the
run over every file goes first (views over the table directories), then spark_bridge.sql; each
time includes building its DataFrames (listing files; the pruned run also plans); no warm-up.

Anchors (the diPs paper, TPC-H SF100): 50% of queries skip >= 33% of their input, ~40% get an
input cut >= 2x, planning adds 84 ms at the median; large savings for 15 of 22 queries (q2-q7,
q10, q12, q14-q17, q19-q21), none for q1, q6, q9, q13, q18, q22.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import traceback
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import timed  # noqa: E402
from tpch_queries import QUERIES, tables_of  # noqa: E402

BIN = Path(sys.executable).parent
# files per table at SF1: lineitem ~1,000 files of ~6,000 rows, the others in proportion
FILES = {"lineitem": 1000, "orders": 250, "partsupp": 133, "part": 33, "customer": 25,
         "supplier": 2, "nation": 1, "region": 1}
KEYS = {"lineitem": ["l_orderkey", "l_linenumber"], "orders": ["o_orderkey"],
        "partsupp": ["ps_partkey", "ps_suppkey"], "part": ["p_partkey"],
        "customer": ["c_custkey"], "supplier": ["s_suppkey"], "nation": ["n_nationkey"],
        "region": ["r_regionkey"]}
CLUSTER_BY = {"lineitem": "l_shipdate", "orders": "o_orderdate"}    # the clustered layout's
SHORT = dict(zip(FILES, ["L", "O", "PS", "P", "C", "S", "N", "R"]))
PAPER_LARGE = {2, 3, 4, 5, 6, 7, 10, 12, 14, 15, 16, 17, 19, 20, 21}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--data-dir", type=Path, default=Path("/tmp/lakestats-bench/tpch-joins"))
    p.add_argument("--queries", type=lambda t: [int(q) for q in t.split(",")],
                   default=list(QUERIES), help="comma-separated numbers (default: all 22)")
    p.add_argument("--no-spark", action="store_true", help="pruning only, no Spark runs")
    return p.parse_args()


def generate(root: Path, scale: float) -> Path:
    """dbgen's tables, one Parquet file each (removed once both layouts are written)."""
    raw = root / "raw"
    if len(list(raw.glob("*.parquet"))) != len(FILES):
        shutil.rmtree(raw, ignore_errors=True)
        subprocess.run([str(BIN / "tpchgen-cli"), "parquet", "-s", f"{scale:g}",
                        f"--output-dir={raw}"], check=True)
    return raw


def write_layout(root: Path, layout: str, scale: float) -> dict[str, Path]:
    """One directory of files per table; a table already written whole is reused."""
    dirs = {}
    for name, count in FILES.items():
        count, out = max(1, round(count * scale)), root / layout / name
        if len(list((dirs.setdefault(name, out)).glob("*.parquet"))) == count:
            continue
        table = pq.read_table(generate(root, scale) / f"{name}.parquet")
        # tpchgen writes string views; plain strings are what Spark and lakestats expect
        table = table.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_string_view(
            f.type) else f for f in table.schema]))
        first = [CLUSTER_BY[name]] if layout == "clustered" and name in CLUSTER_BY else []
        table = table.sort_by([(c, "ascending") for c in first + KEYS[name]])
        tmp = out.with_name(name + ".tmp")          # renamed when whole: a crash leaves no half
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, table.num_rows, count + 1).astype(int)
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            part = table.slice(a, b - a)            # cut by date, then sorted by key within
            part = part.sort_by([(c, "ascending") for c in KEYS[name]]) if first else part
            pq.write_table(part, tmp / f"part-{i:04d}.parquet")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return dirs


def compute_statistics(dirs: dict[str, Path]) -> float:
    """`lakestats compute` per table (incremental: a cached layout costs little again)."""
    total = 0.0
    for name, path in dirs.items():
        seconds, done = timed(lambda: subprocess.run(
            [str(BIN / "lakestats"), "compute", str(path), "--json", "--quiet"],
            check=True, capture_output=True, text=True))
        report = json.loads(done.stdout)
        print(f"  {name:<9} {report['computed']:>5} computed {report['reused']:>5} reused "
              f"{seconds:7.1f} s")
        total += seconds
    return total


def range_set_share(dirs: dict[str, Path]) -> tuple[int, float]:
    """Ranges in the published partition indexes, and their size at 16 bytes each (two
    doubles, as the paper counts them) as a share of the data files' bytes."""
    from lakestats.metastore.reader import StatisticsReader
    ranges = data = 0
    for path in dirs.values():
        index = StatisticsReader(f"{path}/_lakestats").partition_index()
        for field in index.schema:
            if pa.types.is_struct(field.type) and field.type.get_field_index("range_set") >= 0:
                sets = pc.struct_field(index[field.name].combine_chunks(), "range_set")
                ranges += pc.sum(pc.fill_null(pc.list_value_length(sets), 0)).as_py() or 0
        data += sum(f.stat().st_size for f in path.glob("*.parquet"))
    return ranges, ranges * 16 / data


def prune(query: int, dirs: dict[str, Path]) -> dict:
    """prune_query's numbers summed over the query's tables, the call's own time, and what
    looks wrong: a diP adding files, a table the query reads missing from the report."""
    from lakestats.pruning.joins import prune_query
    seconds, plan = timed(lambda: prune_query(QUERIES[query], {n: str(p) for n, p in dirs.items()}))
    out = plan.as_json()
    tables = out["tables"]
    out.update(call_ms=seconds * 1e3, **{k: sum(t[k] for t in tables.values()) for k in (
        "files_before", "files_after_local", "files_after_dips", "bytes_before", "bytes_after")})
    out["odd"] = [f"{n}: files_after_dips {t['files_after_dips']} > files_after_local "
                  f"{t['files_after_local']}" for n, t in tables.items()
                  if t["files_after_dips"] > t["files_after_local"]]
    if sorted(tables) != tables_of(query):
        out["odd"].append(f"tables reported {sorted(tables)} != {tables_of(query)}")
    return out


def spark_session():
    from pyspark.sql import SparkSession
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "6g")
             .config("spark.ui.enabled", "false").config("spark.sql.adaptive.enabled", "true")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_unpruned(spark, query: int, dirs: dict[str, Path]) -> tuple[float, list]:
    """The query over every data file through a view per table (listing its directory is
    timed, as the pruned run's listing of its files is); the views are dropped afterwards so
    that the pruned run cannot fall back on them by name."""
    def run():
        for name in tables_of(query):
            spark.read.parquet(str(dirs[name])).createOrReplaceTempView(name)
        return spark.sql(QUERIES[query]).collect()
    try:
        seconds, rows = timed(run)
        for name in tables_of(query):       # Spark skips _lakestats (a leading _): check it
            assert sorted(f.rsplit("/", 1)[1] for f in spark.table(name).inputFiles()) == \
                sorted(f.name for f in dirs[name].glob("*.parquet")), f"{name}: not its files"
        return seconds, rows
    finally:
        for name in tables_of(query):
            spark.catalog.dropTempView(name)


def same_rows(a: list, b: list) -> bool:
    """Equal as multisets of rows; numbers within a relative 1e-9 (sums may differ in order)."""
    def key(row):
        return tuple((v is None, 0 if v is None else v) for v in row)

    def close(x, y):
        numbers = isinstance(x, (float, Decimal)) and isinstance(y, (float, Decimal))
        return x == y or numbers and math.isclose(float(x), float(y), rel_tol=1e-9)
    return len(a) == len(b) and all(
        len(r) == len(s) and all(close(x, y) for x, y in zip(r, s))
        for r, s in zip(sorted(map(tuple, a), key=key), sorted(map(tuple, b), key=key)))


def run_query(q: int, dirs: dict[str, Path], spark) -> dict:
    from lakestats import spark_bridge
    r = {"q": q}
    try:
        r.update(prune(q, dirs))
        if spark is not None:
            r["all_s"], full = run_unpruned(spark, q, dirs)
            start = time.perf_counter()
            df = spark_bridge.sql(spark, QUERIES[q], tables={n: str(p) for n, p in dirs.items()})
            kept, r["kept_s"] = df.collect(), time.perf_counter() - start
            r["equal"] = same_rows(full, kept)
            # the bridge must read exactly the files the plan keeps
            if {tuple(f.rsplit("/", 2)[1:]) for f in df.inputFiles()} != {
                    (t, k) for t, v in r["tables"].items() for k in v["kept"]}:
                r["odd"].append("Spark's input files are not the kept files")
    except Exception:  # noqa: BLE001 - the query counts as failed; the others still run
        r.update(error=traceback.format_exc(), equal=False)
    return r


def print_row(r: dict) -> None:
    line = f"q{r['q']:<4} {','.join(SHORT[t] for t in tables_of(r['q'])):<14}"
    if "files_before" in r:
        cut = r["bytes_before"] / max(r["bytes_after"], 1)
        line += (f" {r['files_before']:>5} → {r['files_after_local']:>5} → "
                 f"{r['files_after_dips']:<5} {r['bytes_before'] / 1e6:>7.1f} → "
                 f"{r['bytes_after'] / 1e6:<7.1f} {cut:>6.1f}× "
                 f"{r['planning_ms']:>8.1f} {r['call_ms']:>8.1f}")
    if "kept_s" in r:
        line += (f" {r['all_s']:>9.2f}s {r['kept_s']:>7.2f}s {r['all_s'] / r['kept_s']:>7.2f}×"
                 f" {'yes' if r['equal'] else 'NO':>5}")
    print(line + "".join(f"\n      suspicious: {odd}" for odd in r.get("odd", [])) + (
        "\n      error: " + r["error"].strip().replace("\n", "\n      ") if "error" in r else ""),
        flush=True)


def summarize(layout: str, rows: list[dict], dirs: dict[str, Path]) -> None:
    ok = [r for r in rows if "files_before" in r]
    after = np.array([r["bytes_after"] / r["bytes_before"] for r in ok])
    plan = np.array([r["planning_ms"] for r in ok])
    large = {r["q"] for r, a in zip(ok, after) if a <= 0.67}
    by_dips = {r["q"] for r in ok if r["files_after_dips"] < r["files_after_local"]}
    asked = {r["q"] for r in rows} & PAPER_LARGE
    ranges, share = range_set_share(dirs)
    fmt = lambda qs: ",".join(f"q{q}" for q in sorted(qs)) or "none"  # noqa: E731
    print(f"\n{layout}: {len(ok)} of {len(rows)} queries planned")
    print(f"  skip >= 33% of input bytes: {np.mean(after <= 0.67):4.0%} of queries (paper: 50%)")
    print(f"  input cut >= 2x:            {np.mean(after <= 0.5):4.0%} of queries (paper: ~40%)")
    print(f"  input cut >= 10x:           {np.mean(after <= 0.1):4.0%} of queries")
    print(f"  planning: median {np.median(plan):.1f} ms, p90 {np.percentile(plan, 90):.1f} ms "
          f"(paper: +84 ms at the median)")
    print(f"  range-sets: {ranges:,} ranges, {share:.3%} of the data's bytes at 16 B a range")
    print(f"  skip >= 33% here: {fmt(large)}\n  diPs removed files beyond the local "
          f"predicates in: {fmt(by_dips)}")
    print(f"  paper's large savings missed here: {fmt(asked - large)}; here but not in the "
          f"paper's list: {fmt(large - PAPER_LARGE)}")
    timed_rows = [r for r in rows if "kept_s" in r]
    if timed_rows:
        every, kept = (sum(r[k] for r in timed_rows) for k in ("all_s", "kept_s"))
        speedups = [r["all_s"] / r["kept_s"] for r in timed_rows]
        print(f"  Spark: {every:.1f} s over every file, {kept:.1f} s pruned ({every / kept:.2f}x"
              f" in total, median {np.median(speedups):.2f}x); results equal in "
              f"{sum(r['equal'] for r in rows)} of {len(rows)} queries")


def main() -> int:
    args = parse_args()
    root = args.data_dir / f"sf{args.scale:g}"
    seconds, layouts = timed(lambda: {name: write_layout(root, name, args.scale)
                                      for name in ("clustered", "key-sorted")})
    shutil.rmtree(root / "raw", ignore_errors=True)
    print(f"TPC-H SF{args.scale:g} under {root}: both layouts ready in {seconds:.1f} s")
    for name, dirs in layouts.items():
        print(f"lakestats compute, {name}:")
        print(f"  total {compute_statistics(dirs):.1f} s")
    spark = None if args.no_spark else spark_session()
    failed = 0
    for name, dirs in layouts.items():
        print(f"\n{name}\n{'query':<5} {'tables':<14} {'files before → local → diPs':<27} "
              f"{'MB before → after':<17} {'cut':>7} {'plan ms':>8} {'call ms':>8}"
              + ("" if spark is None else f" {'Spark all':>10} {'pruned':>8} {'speed-up':>8}"
                 f" {'equal':>5}"))
        rows, start = [], time.perf_counter()
        for q in args.queries:          # printed as they come: a long run shows its progress
            rows.append(run_query(q, dirs, spark))
            print_row(rows[-1])
        summarize(name, rows, dirs)
        print(f"  layout run: {time.perf_counter() - start:.1f} s")
        failed += sum(1 for r in rows if "error" in r or r.get("equal") is False)
    if spark is not None:
        spark.stop()
    print(f"\n{failed} of {len(args.queries) * 2} query runs failed or differed" if failed
          else "\nevery query planned" + ("" if args.no_spark else " and matched"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
