"""The optimizer's statistics lookup on an Iceberg table, two ways: from lakestats' manifest-level
statistics, and from the per-file metrics in the manifests through pyiceberg (what an engine
does without them).

    .venv/bin/python benchmarks/bench_manifests.py [--files 10000] [--manifests 100]
        [--columns 50] [--rows 100] [--days 25] [--work DIR]

Builds a table of --files data files (--rows rows, --columns columns of four types),
committed --manifests times (one manifest per commit, --days days of commits, identity
partitioned by day), computes its statistics (lakestats compute, local workers), then times,
median of 5 after one warm-up:
  full      every column's record, null and NaN counts, column sizes and bounds, whole table
  filtered  the same under a partition filter on one day
Seed 001's arithmetic: files x columns x 5 statistics against manifests x columns x 5.
Its example prints 113M -> 864k (131x), but its own formula gives 5000 x 90 x 50 x 5 = 112.5M
and 24 x 90 x 50 x 5 = 540k: 208x, the ratio of files to manifests.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
from lakestats.core.settings import Settings  # noqa: E402
from lakestats.fleet.invokers import make_invoker  # noqa: E402
from lakestats.formats.manifest_statistics import Stored  # noqa: E402
from lakestats.infra.redis_server import redis_url  # noqa: E402
from lakestats.metastore.layout import Layout  # noqa: E402
from lakestats.monostore.compute import compute  # noqa: E402
from lakestats.pruning.manifests import lookup  # noqa: E402

FIRST_DAY = dt.date(2026, 1, 1)
SEED_PRINTED = 113e6 / 864e3
SEED_FORMULA = (5000 * 90 * 50 * 5) / (24 * 90 * 50 * 5)


def data(i: int, rows: int, columns: int, day: dt.date) -> pa.Table:
    rng = np.random.default_rng(i)
    out = {"day": pa.array([day] * rows, pa.date32())}
    for j in range(columns - 1):
        kind = j % 4
        if kind == 0:
            values = pa.array(rng.integers(-10**6, 10**6, rows))
        elif kind == 1:
            values = pa.array(rng.normal(0, 1, rows))
        elif kind == 2:
            values = pa.array(rng.choice(["alpha", "beta", "gamma", ""], rows))
        else:
            values = pa.array((np.datetime64(FIRST_DAY) + rng.integers(0, 3650, rows)
                               ).astype("datetime64[D]"))
        nulls = pa.array(rng.random(rows) < 0.05)
        out[f"c{j:03d}"] = pc.if_else(nulls, pa.nulls(rows, values.type), values)
    return pa.table(out)


def build(work: Path, files: int, manifests: int, columns: int, rows: int, days: int):
    """The table (reused when it exists), loaded through its SQL catalog."""
    from pyiceberg.catalog.sql import SqlCatalog
    work.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db",
                         warehouse=f"file://{work}")
    name = f"lake.t{files}x{columns}"
    if catalog.table_exists(name):
        return catalog.load_table(name)
    catalog.create_namespace_if_not_exists("lake")
    table = catalog.create_table(name, schema=data(0, 1, columns, FIRST_DAY).schema)
    with table.update_spec() as spec:
        spec.add_identity("day")
    per_commit = files // manifests
    location = Path(table.location().removeprefix("file://"))
    started = time.perf_counter()
    for m in range(manifests):
        day = FIRST_DAY + dt.timedelta(days=m * days // manifests)
        paths = []
        for k in range(per_commit):
            i = m * per_commit + k
            path = location / "data" / f"day={day}" / f"f{i:06d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(data(i, rows, columns, day), path)
            paths.append(f"file://{path}")
        table.add_files(paths)
        if m % 10 == 9:
            print(f"  built {m + 1}/{manifests} commits "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    return catalog.load_table(name)


def per_file(table, day: dt.date | None) -> dict:
    """The same lookup from every data file's metrics, as pyiceberg plans a scan: its
    manifests read, and pruned by the partition filter, then each file's metrics summed."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.expressions import AlwaysTrue, EqualTo
    scan = table.scan(row_filter=EqualTo("day", day.isoformat()) if day else AlwaysTrue())
    fields = {f.field_id: f for f in table.schema().fields}
    counts = {k: dict.fromkeys(fields, 0) for k in ("size", "null", "nan")}
    low, high, records = {}, {}, 0
    for task in scan.plan_files():
        f = task.file
        records += f.record_count
        for name, source in (("size", f.column_sizes), ("null", f.null_value_counts),
                             ("nan", f.nan_value_counts)):
            for fid, n in (source or {}).items():
                counts[name][fid] += n
        for fid, raw in (f.lower_bounds or {}).items():
            v = from_bytes(fields[fid].field_type, raw)
            if fid not in low or v < low[fid]:
                low[fid] = v
        for fid, raw in (f.upper_bounds or {}).items():
            v = from_bytes(fields[fid].field_type, raw)
            if fid not in high or v > high[fid]:
                high[fid] = v
    return {"record_count": records, "null": counts["null"], "low": low, "high": high}


def timed(fn, repeat: int = 5) -> tuple[object, float]:
    result = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return result, float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--manifests", type=int, default=100)
    p.add_argument("--columns", type=int, default=50)
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--days", type=int, default=25)
    p.add_argument("--work", type=Path, default=Path("/tmp/lakestats-bench-manifests"))
    a = p.parse_args()
    print(f"Iceberg table: {a.files:,} files, {a.manifests} commits, {a.columns} columns, "
          f"{a.rows} rows a file", flush=True)
    table = build(a.work, a.files, a.manifests, a.columns, a.rows, a.days)
    root = table.location().removeprefix("file://")
    started = time.perf_counter()
    with redis_url(None) as url, make_invoker("local", 2) as invoker:
        report = compute(root, invoker, dataclasses.replace(Settings(), redis_url=url))
    print(f"lakestats compute: {time.perf_counter() - started:.1f} s "
          f"(computed {report.computed:,}, reused {report.reused:,}); this builds the "
          "manifest statistics once per snapshot", flush=True)
    layout = Layout.of_table(root)
    snapshot = report.snapshot["snapshot"]
    day = FIRST_DAY + dt.timedelta(days=a.days // 2)
    manifests = Stored(layout, snapshot).read([]).num_rows
    ops_files, ops_manifests = a.files * a.columns * 5, manifests * a.columns * 5
    print(f"operations: files x columns x 5 = {ops_files:,}; manifests x columns x 5 = "
          f"{ops_manifests:,}: {ops_files / ops_manifests:.0f}x fewer "
          f"(seed 001's example: 113M -> 864k printed, {SEED_PRINTED:.0f}x; its formula "
          f"gives 112.5M -> 540k, {SEED_FORMULA:.0f}x)")
    for label, where, on in (("full", None, None),
                             ("filtered", f"day = DATE'{day}'", day)):
        ours, ours_s = timed(lambda: lookup(Stored(layout, snapshot), None, where))
        theirs, theirs_s = timed(lambda: per_file(table, on), repeat=3)
        assert ours["record_count"] == theirs["record_count"], (ours, theirs["record_count"])
        print(f"{label:9s} manifest-level {ours_s * 1000:8.1f} ms "
              f"({ours['manifests_kept']}/{ours['manifests']} manifests) | pyiceberg per-file "
              f"{theirs_s * 1000:9.1f} ms | {theirs_s / ours_s:6.1f}x | "
              f"{ours['record_count']:,} rows", flush=True)


if __name__ == "__main__":
    main()
