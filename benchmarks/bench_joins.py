"""Join pruning: the files and bytes that data-induced predicates (diPs) skip in the 22 TPC-H
queries, the planning time it adds, and Spark over every file vs over the kept ones.

TPC-H at --scale in two layouts of many Parquet files per table (lineitem ~1,000 files of
~6,000 rows at SF1, the other tables in proportion), statistics by `lakestats compute`:

    .venv/bin/python benchmarks/bench_joins.py [--scale 1] [--data-dir DIR] [--queries 1,2,...]
                                                [--no-spark]

  clustered   the tuned layout of the paper's replication: lineitem cut by l_shipdate, orders
              by o_orderdate (equal row counts), each file then sorted on its order key;
              partsupp sorted on ps_partkey, the other tables on their primary keys
  key-sorted  every table sorted on its primary key and cut the same way (the load order)

Spark: one local[2] session, 6 GB driver, adaptive query execution ON (Spark's default: it
coalesces the 200 shuffle partitions that would otherwise dominate at SF1 on two cores). The
unpruned run (temporary views over each table's directory) goes first, then the pruned one
(spark_bridge.sql, whose time includes its own pruning and view creation); no warm-up run.

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
# clustered layout: table -> the column files are cut by (each file then sorted on its keys)
CLUSTER_BY = {"lineitem": "l_shipdate", "orders": "o_orderdate"}
SHORT = {"lineitem": "L", "orders": "O", "partsupp": "PS", "part": "P", "customer": "C",
         "supplier": "S", "nation": "N", "region": "R"}
PAPER_LARGE = {2, 3, 4, 5, 6, 7, 10, 12, 14, 15, 16, 17, 19, 20, 21}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--data-dir", type=Path, default=Path("/tmp/lakestats-bench/tpch-joins"))
    p.add_argument("--queries", default=",".join(map(str, QUERIES)),
                   help="comma-separated query numbers (default: all 22)")
    p.add_argument("--no-spark", action="store_true", help="pruning only, no Spark runs")
    return p.parse_args()


def generate(root: Path, scale: float) -> Path:
    """dbgen's tables, one Parquet file each (kept until both layouts are written)."""
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
        dirs[name] = out
        if len(list(out.glob("*.parquet"))) == count:
            continue
        table = pq.read_table(generate(root, scale) / f"{name}.parquet")
        # Spark and Arrow agree on plain strings; tpchgen writes string views
        table = table.cast(pa.schema([pa.field(f.name, pa.string()) if pa.types.is_string_view(
            f.type) else f for f in table.schema]))
        first = CLUSTER_BY.get(name) if layout == "clustered" else None
        table = table.sort_by([(c, "ascending") for c in ([first] if first else []) + KEYS[name]])
        tmp = out.with_name(name + ".tmp")          # renamed when whole: a crash leaves no half
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        bounds = np.linspace(0, table.num_rows, count + 1).astype(int)
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            part = table.slice(a, b - a)
            if first:                               # clustered by date, sorted by key within
                part = part.sort_by([(c, "ascending") for c in KEYS[name]])
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
    """Ranges in the published partition indexes (16 bytes each: two doubles, as the paper
    counts them) and their size as a share of the data files' bytes."""
    from metastore.reader import TableStatistics
    ranges = data = 0
    for path in dirs.values():
        index = TableStatistics(f"{path}/_lakestats").partition_index()
        for column in index.column_names:
            kind = index.schema.field(column).type
            if pa.types.is_struct(kind) and kind.get_field_index("range_set") >= 0:
                sets = pc.struct_field(index[column].combine_chunks(), "range_set")
                ranges += int(pc.sum(pc.fill_null(pc.list_value_length(sets), 0)).as_py() or 0)
        data += sum(f.stat().st_size for f in path.glob("*.parquet"))
    return ranges, ranges * 16 / data


def prune(query: int, dirs: dict[str, Path]) -> dict:
    """prune_query's numbers summed over the query's tables, and the call's own time."""
    from pruning.joins import prune_query
    seconds, plan = timed(lambda: prune_query(QUERIES[query], {n: str(p) for n, p in
                                                               dirs.items()}))
    out = plan.as_json()
    tables = out["tables"].values()
    out.update(call_ms=seconds * 1e3, **{k: sum(t[k] for t in tables) for k in (
        "files_before", "files_after_dips", "bytes_before", "bytes_after")})
    # suspicious: a diP cannot add files; every table the query reads must be reported
    out["odd"] = [f"{n}: files_after_dips {t['files_after_dips']} > files_after_local "
                  f"{t['files_after_local']}" for n, t in out["tables"].items()
                  if t["files_after_dips"] > t["files_after_local"]]
    if sorted(out["tables"]) != tables_of(query):
        out["odd"].append(f"tables reported {sorted(out['tables'])} != {tables_of(query)}")
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
    """The query over every data file: a view per table, dropped afterwards so that the pruned
    run cannot fall back on it by name."""
    for name in tables_of(query):
        df = spark.read.parquet(str(dirs[name]))     # Spark skips _lakestats (leading _)
        stray = [f for f in df.inputFiles() if "/_" in f.split(str(dirs[name]), 1)[-1]]
        assert not stray, f"Spark reads statistics files as data: {stray[:3]}"
        df.createOrReplaceTempView(name)
    try:
        return timed(lambda: spark.sql(QUERIES[query]).collect())
    finally:
        for name in tables_of(query):
            spark.catalog.dropTempView(name)


def run_pruned(spark, query: int, dirs: dict[str, Path]) -> tuple[float, list]:
    import spark_bridge
    return timed(lambda: spark_bridge.sql(spark, QUERIES[query], tables={
        n: str(p) for n, p in dirs.items()}).collect())


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


def run_layout(layout: str, dirs: dict[str, Path], queries: list[int], spark) -> list[dict]:
    print(f"\n{layout}: {'query':<5} {'tables':<14} {'files before → after':>21} "
          f"{'MB before → after':>19} {'cut':>7} {'plan ms':>8} {'call ms':>8} "
          f"{'Spark all':>10} {'pruned':>8} {'speed-up':>8} {'equal':>5}")
    rows = []
    for q in queries:
        r = {"q": q}
        try:
            r.update(prune(q, dirs))
            if spark is not None:
                r["all_s"], full = run_unpruned(spark, q, dirs)
                r["kept_s"], kept = run_pruned(spark, q, dirs)
                r["equal"] = same_rows(full, kept)
        except Exception:  # noqa: BLE001 - report the query as failed and go on with the rest
            r["error"] = traceback.format_exc()
            r["equal"] = False
        rows.append(r)
        print_row(layout, r)
    return rows


def print_row(layout: str, r: dict) -> None:
    names = ",".join(SHORT[t] for t in tables_of(r["q"]))
    line = f"{'':<{len(layout) + 1}} q{r['q']:<4} {names:<14}"
    if "files_before" in r:
        cut = r["bytes_before"] / max(r["bytes_after"], 1)
        line += (f" {r['files_before']:>9} → {r['files_after_dips']:<9} "
                 f"{r['bytes_before'] / 1e6:>8.1f} → {r['bytes_after'] / 1e6:<8.1f} "
                 f"{cut:>6.1f}× {r['planning_ms']:>8.1f} {r['call_ms']:>8.1f}")
    if "kept_s" in r:
        line += (f" {r['all_s']:>9.2f}s {r['kept_s']:>7.2f}s {r['all_s'] / r['kept_s']:>7.2f}×"
                 f" {'yes' if r['equal'] else 'NO':>5}")
    print(line, flush=True)
    for odd in r.get("odd", []):
        print(f"    suspicious: {odd}")
    if "error" in r:
        print("    " + r["error"].strip().replace("\n", "\n    "))


def summarize(layout: str, rows: list[dict], dirs: dict[str, Path], spark: bool) -> None:
    ok = [r for r in rows if "files_before" in r]
    cut = np.array([r["bytes_before"] / max(r["bytes_after"], 1) for r in ok])
    skip = np.array([1 - r["bytes_after"] / r["bytes_before"] for r in ok])
    plan = np.array([r["planning_ms"] for r in ok])
    large = {r["q"] for r, s in zip(ok, skip) if s >= 0.33}
    asked = {r["q"] for r in rows} & PAPER_LARGE
    ranges, share = range_set_share(dirs)
    print(f"\n{layout}: {len(ok)} of {len(rows)} queries planned")
    print(f"  queries skipping >= 33% of input bytes: {np.mean(skip >= 0.33):6.0%}   (paper: 50%)")
    print(f"  queries with input cut >= 2x:           {np.mean(cut >= 2):6.0%}   (paper: ~40%)")
    print(f"  queries with input cut >= 10x:          {np.mean(cut >= 10):6.0%}")
    print(f"  planning ms: median {np.median(plan):.1f}, p90 {np.percentile(plan, 90):.1f}"
          f"   (paper: +84 ms at the median)")
    print(f"  range-sets: {ranges:,} ranges, {share:.3%} of the data files' bytes at 16 B each")
    print(f"  skipping >= 33% here: {fmt(large)}; the paper's large savings among these "
          f"queries: {fmt(asked)}")
    print(f"  missed (paper saves, here not): {fmt(asked - large)}; "
          f"extra (here, not in the paper): {fmt(large - PAPER_LARGE)}")
    if spark:
        timed_rows = [r for r in rows if "kept_s" in r]
        total_all, total_kept = (sum(r[k] for r in timed_rows) for k in ("all_s", "kept_s"))
        print(f"  Spark: {total_all:.1f} s over every file, {total_kept:.1f} s pruned "
              f"({total_all / max(total_kept, 1e-9):.2f}x); results equal in "
              f"{sum(r['equal'] for r in rows)} of {len(rows)} queries")


def fmt(queries: set[int]) -> str:     # {3, 1} -> "q1,q3"
    return ",".join(f"q{q}" for q in sorted(queries)) or "none"


def main() -> int:
    args = parse_args()
    queries = [int(q) for q in args.queries.split(",")]
    root = args.data_dir / f"sf{args.scale:g}"
    seconds, layouts = timed(lambda: {
        name: write_layout(root, name, args.scale)
        for name in ("clustered", "key-sorted")})
    shutil.rmtree(root / "raw", ignore_errors=True)
    print(f"TPC-H SF{args.scale:g} under {root}: both layouts ready in {seconds:.1f} s")
    for name, dirs in layouts.items():
        print(f"lakestats compute, {name}:\n  total {compute_statistics(dirs):.1f} s")
    spark = None if args.no_spark else spark_session()
    failed = 0
    for name, dirs in layouts.items():
        seconds, rows = timed(lambda: run_layout(name, dirs, queries, spark))
        summarize(name, rows, dirs, spark is not None)
        print(f"  layout run: {seconds:.1f} s")
        failed += sum(1 for r in rows if "error" in r or r.get("equal") is False)
    if spark is not None:
        spark.stop()
    print(f"\n{failed} quer{'y' if failed == 1 else 'ies'} failed or differed" if failed
          else "\nevery query planned" + ("" if args.no_spark else " and matched"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
