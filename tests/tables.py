"""Small table builders shared by the tests."""
from __future__ import annotations

from pathlib import Path

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
