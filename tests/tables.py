"""Small table builders shared by the tests, and the files' rows as the oracles read them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def write(path: Path, table: pa.Table, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


def mixed(n: int, seed: int) -> pa.Table:
    """Integers, floats with nulls, low-cardinality strings, dates: a small realistic table."""
    rng = np.random.default_rng(seed)
    price = rng.normal(100, 30, n)
    price[rng.random(n) < 0.05] = np.nan
    return pa.table({
        "id": pa.array(np.arange(seed * 1_000_000, seed * 1_000_000 + n), pa.int64()),
        "qty": pa.array(rng.integers(1, 50, n), pa.int32()),
        "price": pa.array(price, mask=rng.random(n) < 0.1),
        "city": pa.array(rng.choice(["Oslo", "Zürich", "São Paulo", "", "東京"], n)),
        "day": pa.array(np.datetime64("2024-01-01") + rng.integers(0, 366, n), pa.date32()),
    })


def statistics_without_sketches(table: pa.Table) -> list[dict]:
    keep = [c for c in table.column_names if not c.endswith("_sketch")]
    return table.select(keep).to_pylist()


def published_files(stats_root: str) -> dict[str, list]:
    """The published version's three files as rows, quantile sketches left out (KLL sketches
    compact at random: equal in distribution, not in bytes)."""
    from lakestats.metastore.reader import StatisticsReader
    stats = StatisticsReader(stats_root)
    out = {}
    for name in ("statistics.parquet", "frequencies.parquet", "histograms.parquet"):
        t = stats.version_dir().read_parquet(name)
        out[name] = t.drop_columns([c for c in t.column_names if c == "quantile_sketch"]
                                   ).replace_schema_metadata(None).to_pylist()
    return out


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`lakestats ARGS` in a process of its own, with `env` over this one's environment."""
    return subprocess.run([sys.executable, "-m", "lakestats.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.getcwd(), **env})


def scan(paths: list[str]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection whose table `rows` holds the files' rows as Arrow reads them. Not
    DuckDB's own Parquet scan for filters on floats: it skips row groups by their min/max,
    which Parquet writers keep without NaN, so a filter or top-N that NaN rows satisfy loses
    them (DuckDB 2.0)."""
    db = duckdb.connect()
    db.register("rows", pa.concat_tables([pq.read_table(p) for p in paths],
                                         promote_options="permissive"))
    return db
