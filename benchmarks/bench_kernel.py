"""The per-file kernel against vectorized engines as its kernel, same files, same run, one thread
each (a worker computes one file; the fleet runs files side by side).

    .venv/bin/python benchmarks/bench_kernel.py [--scale 1] [--parts 8] [--files 2]

TPC-H lineitem (`--parts` files; the first `--files` timed), every column:
- read: pyarrow reads and decodes the file (the anchor: a kernel "near the read" is <= 2x it);
- lakestats kernel: every statistic (value counts as canonical text, exact sums and moments,
  histograms, KLL, KMV, theta, Bloom filters, range sets), the three statistics files' tables;
- the part of it engines share: per column the exact value counts (what frequencies.parquet
  and the distinct count come from), null count, min and max, computed by pyarrow
  (pc.value_counts, pc.min_max), DuckDB (GROUP BY over read_parquet, threads=1) and Polars
  (value_counts, POLARS_MAX_THREADS=1). Each engine's value counts are checked against
  pyarrow's: the same number of distinct values and the same multiset of counts.
Polars is not a dependency of lakestats: `pip install polars` to include it.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")    # before polars is imported

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_compute import generate  # noqa: E402


def best_of_two(fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(2):                      # the better of two: the first warms the page cache
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def counts_of(counts) -> tuple[int, list[int]]:
    """What two engines' value counts must agree on: how many values, and their counts."""
    return len(counts), sorted(counts)


def by_pyarrow(path: Path) -> dict:
    table = pq.read_table(path, use_threads=False)
    out = {}
    for name in table.column_names:
        column = table[name].combine_chunks()
        if pa.types.is_string_view(column.type):
            column = column.cast(pa.large_string())
        vc = pc.value_counts(column.drop_null())
        pc.min_max(column)
        out[name] = counts_of(vc.field(1).to_numpy())
    return out


def by_duckdb(path: Path, con) -> dict:
    names = pq.read_schema(path).names
    con.execute(f"SELECT {', '.join(f'count({n}), min({n}), max({n})' for n in names)} "
                f"FROM read_parquet('{path}')").fetchall()
    out = {}
    for n in names:
        counts = con.execute(f"SELECT count(*) AS n FROM read_parquet('{path}') "
                             f"WHERE {n} IS NOT NULL GROUP BY {n}").fetchnumpy()["n"]
        out[n] = counts_of(counts)
    return out


def by_polars(path: Path) -> dict:
    import polars as pl
    frame = pl.read_parquet(path)
    frame.select([pl.all().null_count().name.suffix("_nulls"), pl.all().min().name.suffix(
        "_min"), pl.all().max().name.suffix("_max")])
    out = {}
    for n in frame.columns:
        vc = frame.get_column(n).drop_nulls().value_counts()
        out[n] = counts_of(vc.get_column("count").to_numpy())
    return out


def main() -> None:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--data-dir", type=Path, default=Path("/tmp/lakestats-bench/tpch-kernel"))
    args = p.parse_args()
    table = generate(args.data_dir, args.scale, args.parts)
    paths = sorted(table.glob("*.parquet"))[:args.files]

    import duckdb

    from lakestats.algorithms.partitions import kernel
    from lakestats.metastore.store import Store
    con = duckdb.connect()
    con.execute("SET threads = 1")
    try:
        import polars  # noqa: F401
        engines = ["pyarrow", "duckdb", "polars"]
    except ImportError:
        engines = ["pyarrow", "duckdb"]
    store = Store(str(table))
    totals = dict.fromkeys(["read", "kernel", *engines], 0.0)
    rows = 0
    for path in paths:
        rows += pq.read_metadata(path).num_rows
        totals["read"] += best_of_two(lambda: pq.read_table(path, use_threads=False))[0]
        totals["kernel"] += best_of_two(lambda: kernel.compute(store, path.name))[0]
        seconds, want = best_of_two(lambda: by_pyarrow(path))
        totals["pyarrow"] += seconds
        for engine in engines[1:]:
            run = (lambda: by_duckdb(path, con)) if engine == "duckdb" else \
                (lambda: by_polars(path))
            seconds, got = best_of_two(run)
            totals[engine] += seconds
            wrong = [n for n in want if got[n] != want[n]]
            if wrong:
                sys.exit(f"{engine}: value counts differ from pyarrow's in {wrong}")
    read = totals["read"]
    print(f"{len(paths)} files, {rows:,} rows, {len(pq.read_schema(paths[0]).names)} columns, "
          "one thread each")
    print(f"read (pyarrow read + decode)          {read:6.2f} s   1.00x")
    print(f"lakestats kernel, every statistic     {totals['kernel']:6.2f} s   "
          f"{totals['kernel'] / read:.2f}x  (target <= 2x)")
    for engine in engines:
        print(f"value counts + nulls/min/max: {engine:<8}{totals[engine]:6.2f} s   "
              f"{totals[engine] / read:.2f}x (same counts: checked)")


if __name__ == "__main__":
    sys.exit(main())
