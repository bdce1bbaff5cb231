"""core.theta against independent references: DataSketches' own sketches of the same values
(byte for byte where it hashes the same bytes Iceberg does), mmh3 over Iceberg's
serialization as pyiceberg writes it, and DataSketches' estimates and bounds."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import datasketches as ds
import mmh3
import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.types import (BooleanType, DateType, DecimalType, DoubleType, FloatType,
                             IntegerType, LongType, StringType, TimestamptzType)

from lakestats.core import theta


@pytest.mark.parametrize("n", [0, 1, 2, 100, 4096])
def test_exact_sketches_are_datasketches_own(n):
    """DataSketches hashes a long as its 8 little-endian bytes and a string as its UTF-8:
    Iceberg's serialization of long and string, so the sketches are the same bytes."""
    longs = (np.arange(n, dtype=np.int64) * 7919 - 2**62)
    texts = [f"wert-{i}-ü" for i in range(n)]
    for values, arrow in ((longs.tolist(), pa.array(longs)),
                          (texts, pa.array(texts, pa.string()))):
        reference = ds.update_theta_sketch(lg_k=12, seed=theta.SEED)
        for v in values:
            reference.update(v)
        assert theta.sketch(theta.hashes(arrow)) == reference.compact().serialize()


@pytest.mark.parametrize(("arrow", "iceberg_type", "values"), [
    (pa.int32(), IntegerType(), [0, -1, 2**31 - 1, -2**31]),
    (pa.int64(), LongType(), [0, -1, 2**63 - 1]),
    (pa.float32(), FloatType(), [0.0, 1.5, float("inf")]),
    (pa.float64(), DoubleType(), [0.1, -2.5, float("-inf")]),
    (pa.bool_(), BooleanType(), [True, False]),
    (pa.date32(), DateType(), [dt.date(1970, 1, 1), dt.date(2024, 2, 29)]),
    (pa.timestamp("us", "UTC"), TimestamptzType(), [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)]),
    (pa.decimal128(10, 2), DecimalType(10, 2), [Decimal("1.28"), Decimal("-1.28"),
                                                 Decimal("0.00"), Decimal("-128.00")]),
    (pa.decimal128(18, 0), DecimalType(18, 0), [
        Decimal(sign * (2 ** (8 * k - 1)) + d) for k in range(1, 8) for sign in (1, -1)
        for d in (-1, 0, 1)] + [Decimal(10**18 - 1), Decimal(-10**18 + 1), Decimal(0)]),
    (pa.decimal128(38, 5), DecimalType(38, 5), [Decimal("1.00000"), Decimal("-0.00001"),
                                                 Decimal(2**63).scaleb(-5),
                                                 Decimal(-2**63 - 1).scaleb(-5)]),
    (pa.string(), StringType(), ["", "😀", "a"]),
])
def test_hashes_are_murmur3_of_icebergs_serialization(arrow, iceberg_type, values):
    got = theta.hashes(pa.array(values, arrow)).tolist()
    # pyiceberg's to_bytes takes dates as days and timestamps as microseconds
    stored = [int(v.timestamp()) * 1_000_000 if isinstance(v, dt.datetime) else
              (v - dt.date(1970, 1, 1)).days if isinstance(v, dt.date) else v for v in values]
    want = [mmh3.hash64(to_bytes(iceberg_type, v), theta.SEED, signed=False)[0] >> 1
            for v in stored]
    assert got == want


def test_large_sketches_estimate_within_their_bounds_and_merge():
    parts = [pa.array(np.arange(start, start + 30_000, dtype=np.int64))
             for start in (0, 20_000, 40_000)]          # 70,000 distinct values in all
    sketches = [theta.sketch(theta.hashes(p)) for p in parts]
    for s in sketches:
        one = ds.compact_theta_sketch.deserialize(s, seed=theta.SEED)
        assert one.num_retained == theta.K
        assert one.get_lower_bound(3) <= 30_000 <= one.get_upper_bound(3)
    merged = ds.compact_theta_sketch.deserialize(theta.union(sketches), seed=theta.SEED)
    assert merged.get_lower_bound(3) <= 70_000 <= merged.get_upper_bound(3)
    assert theta.union([]) is None


def sample(arrow: pa.DataType, i: int):
    if pa.types.is_decimal(arrow):
        return Decimal(i * 1_000_003 - 5_000_000).scaleb(-3)
    return str(i * 31) * (i % 5) if arrow == pa.string() else bytes([i % 256]) * (i % 40)


@pytest.mark.parametrize("arrow", [pa.string(), pa.binary(), pa.decimal128(38, 3)])
def test_a_slice_hashes_as_its_values(arrow):
    values = pa.array([sample(arrow, i) for i in range(500)], arrow)
    assert theta.hashes(values.slice(37, 200)).tolist() == theta.hashes(values).tolist()[37:237]
