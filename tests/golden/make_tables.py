"""Writes the data files of the CLI contract test (run once; the files are committed, so that
their sizes, and with them fingerprints, never depend on the installed pyarrow)."""
from __future__ import annotations

import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).parent / "table"


def part(seed: int, n: int, first_id: int, drifted: bool = False) -> pa.Table:
    rng = np.random.default_rng(seed)
    price = rng.normal(100, 30, n)
    price[rng.random(n) < 0.05] = np.nan
    price[:min(n, 3)] = [-0.0, np.inf, -np.inf][:n]
    uid = np.full(n, None, object)
    uid[:min(n, 40)] = (np.arange(first_id, first_id + 40) * 7)[:n]
    big = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64, endpoint=True)
    big[:min(n, 2)] = [-2**63, 2**63 - 1][:n]
    columns = {
        "id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
        "uid": pa.array(uid.tolist(), pa.int64()),
        "qty": pa.array(rng.integers(1, 50, n), pa.int64() if drifted else pa.int32()),
        "price": pa.array(price, mask=rng.random(n) < 0.1),
        "city": pa.array(rng.choice(["Oslo", "Zürich", "São Paulo", "", "東京"], n)),
        "day": pa.array(np.datetime64("2024-01-01") + rng.integers(0, 366, n), pa.date32()),
        "ts": pa.array(rng.integers(0, 10**6, n) * 3_600_000_000 + 12_345,
                       pa.timestamp("us", "America/New_York")),
        "amount": pa.array([decimal.Decimal(int(x)).scaleb(-2) for x in rng.integers(-10**9, 10**9, n)],
                           pa.decimal128(12, 2)),
        "big": pa.array(big),
        "blob": pa.array([bytes([int(b)]) * int(k) for b, k in zip(rng.integers(0, 256, n),
                                                                   rng.integers(0, 4, n))]),
        "nothing": pa.array([None] * n, pa.string()),
        "nested": pa.array([[int(x)] for x in rng.integers(0, 9, n)], pa.list_(pa.int32())),
    }
    if not drifted:
        columns["flag"] = pa.array(rng.random(n) < 0.3)
    return pa.table(columns)


def main() -> None:
    layout = [("p=a/f1.parquet", part(1, 1500, 0)),
              ("p=a/f2.parquet", part(2, 1200, 10_000)),
              ("p=b/f3.parquet", part(3, 1000, 20_000, drifted=True)),
              ("p=b/empty.parquet", part(4, 0, 30_000))]
    for rel, table in layout:
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, row_group_size=700)


if __name__ == "__main__":
    main()
