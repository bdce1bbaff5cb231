"""Adversarial tables for the statistics oracle tests: every type at its edges."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.parquet as pq

NAN, INF = float("nan"), float("inf")
NEG_NAN = float(np.copysign(np.nan, -1.0))          # a NaN with its sign bit set
NAN_PAYLOAD = float(np.frombuffer(np.uint64(0x7FF0000000000123).tobytes(), np.float64)[0])
FLOAT_MAX, FLOAT_TINY = 1.7976931348623157e308, 5e-324
I64_MIN, I64_MAX, U64_MAX = -2**63, 2**63 - 1, 2**64 - 1
NY, KOLKATA = "America/New_York", "Asia/Kolkata"
UTC = dt.timezone.utc
TICKS = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


# -- writing tables -----------------------------------------------------------------------------

def write(path: Path, table: pa.Table, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


def texts(values: list, typ: pa.DataType) -> pa.Array:
    """Decimal columns from their text (pa.array mis-infers the precision of some negatives)."""
    return pa.array([None if v is None else str(v) for v in values], pa.string()).cast(typ)


def adversarial(part: int, n: int = 240) -> pa.Table:
    """One partition: in each column its type's hard values (which differ between partitions, so
    that table-level min/max, sums and sketches must combine them), then random values, ~10% null.
    """
    rng = np.random.default_rng(1000 + part)
    null = rng.random(n) < 0.1
    ints = rng.integers(-1000, 1000, n)

    def col(hard: dict, rest, typ: pa.DataType | None = None, as_text: bool = False) -> pa.Array:
        first = hard.get(part, [])
        values = list(first) + list(rest)[: n - len(first)]
        values = [v if i < len(first) or not null[i] else None for i, v in enumerate(values)]
        return texts(values, typ) if as_text else pa.array(values, typ)

    def stamp(*args, tz=UTC) -> dt.datetime:
        return dt.datetime(*args, tzinfo=tz)

    with localcontext(prec=100):
        near = [Decimal(10**20 + 7 * part) + Decimal(int(i) % 500).scaleb(-6) for i in ints]
    nines76 = "9" * 74 + ".99"
    return pa.table({
        "i8": col({0: [-128], 1: [127]}, ints % 128, pa.int8()),
        "i16": col({0: [-2**15, 2**15 - 1]}, ints * 30, pa.int16()),
        "i32": col({1: [-2**31, 2**31 - 1]}, ints * 10**6, pa.int32()),
        "i64": col({0: [I64_MIN, I64_MIN], 2: [I64_MAX, I64_MAX - 1]}, ints * 10**15, pa.int64()),
        # far from zero, close together: the spread is lost if deviations are taken in float64
        "i64_near": col({}, 2**62 + 13 * part + ints % 50, pa.int64()),
        "u8": col({1: [0, 255]}, np.abs(ints) % 256, pa.uint8()),
        "u16": col({2: [0, 2**16 - 1]}, np.abs(ints) * 60, pa.uint16()),
        "u32": col({0: [2**32 - 1]}, np.abs(ints) * 4_000_000, pa.uint32()),
        "u64": col({0: [U64_MAX, U64_MAX], 1: [0]}, np.abs(ints) * 10**15, pa.uint64()),
        "f64": col({0: [NAN, NEG_NAN, NAN_PAYLOAD, INF, -INF, -0.0, 0.0, FLOAT_TINY, -FLOAT_TINY,
                        FLOAT_MAX], 1: [-0.0, NAN, -INF], 2: [0.0, -FLOAT_MAX, INF]},
                   rng.normal(0, 1e6, n), pa.float64()),
        "f64_finite": col({1: [-0.0, 0.0]}, rng.normal(1e3 + part, 10, n), pa.float64()),
        # partition 1 holds NaN and nulls only: no min, no mean there
        "f64_nan_part": col({1: [NAN] * n}, rng.lognormal(0, 2, n), pa.float64()),
        "f32": col({0: [NAN, -0.0, 0.0, 3.4028235e38, -3.4028235e38], 1: [1.4e-45, 16777216.0, 0.1]},
                   rng.normal(0, 1e3, n).astype(np.float32), pa.float32()),
        "dec38": col({0: ["-" + "9" * 35 + ".999"], 1: ["9" * 35 + ".999", "0.001", "-0.001"]},
                     [Decimal(int(i)).scaleb(-3) for i in ints], pa.decimal128(38, 3), True),
        # every value 38 digits: a partition's sum needs 40
        "dec38_0": col({0: ["9" * 38] * 3, 1: ["-" + "9" * 38] * 2},
                       [("-" if i < 0 else "") + "9" * 37 + str(abs(int(i)) % 10) for i in ints],
                       pa.decimal128(38, 0), True),
        "dec_near": col({}, near, pa.decimal128(38, 6), True),
        # 76 digits: eight of them overflow 256-bit integers
        "dec256": col({0: [nines76] * 8, 2: [nines76] * 8 + ["-" + nines76]},
                      [Decimal(int(i)).scaleb(-2) for i in ints], pa.decimal256(76, 2), True),
        "dec9": col({0: ["9999999.99", "-9999999.99"]}, [Decimal(int(i)).scaleb(-2) for i in ints],
                    pa.decimal128(9, 2), True),
        "ts_ny": col({0: [stamp(1970, 1, 1), stamp(2024, 3, 10, 6, 59, 59, 999999),
                          stamp(2024, 3, 10, 7)],      # spring forward: 01:59:59.999999 then 03:00
                      1: [stamp(2024, 11, 3, 5, 30), stamp(2024, 11, 3, 6, 30),   # 01:30 twice
                          stamp(2040, 7, 1, 12)],      # summer time beyond the zone's listing
                      2: [stamp(1800, 1, 1, 12, 0, 1)]},                # local mean time -04:56:02
                     [stamp(2024, 3, 9) + dt.timedelta(minutes=int(i) * 7) for i in ints],
                     pa.timestamp("us", NY)),
        "ts_kolkata": col({1: [stamp(1900, 1, 1), stamp(2100, 12, 31, 23, 59, 59, 999000)]},
                          [stamp(2000, 1, 1) + dt.timedelta(seconds=int(i) * 997) for i in ints],
                          pa.timestamp("ms", KOLKATA)),
        # near both ends of int64 (DuckDB reserves the very ends for +-infinity)
        "ts_utc_ns": col({}, [I64_MIN + 10**6 + part, I64_MAX - 10**6 - part]
                         + list(ints * 999_999_937),
                         pa.int64()).cast(pa.timestamp("ns", "UTC")),
        "ts_s": col({0: [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)]},
                    [dt.datetime(2020, 1, 1) + dt.timedelta(seconds=int(i) * 86_399) for i in ints],
                    pa.timestamp("s")),
        # before 1970 with fractions of a second: the fraction of a negative count
        "ts_ns": col({2: [-1, -999_999_999, -1_000_000_001]}, ints * 1_000_000_007,
                     pa.int64()).cast(pa.timestamp("ns")),
        "day": col({0: [dt.date(1, 1, 1)], 1: [dt.date(9999, 12, 31)]},
                   [dt.date(2020, 2, 29) + dt.timedelta(days=int(i)) for i in ints], pa.date32()),
        "tod_us": col({0: [dt.time(0), dt.time(23, 59, 59, 999999)]},
                      [dt.time(int(i) % 24, abs(int(i)) % 60) for i in ints], pa.time64("us")),
        "tod_ns": col({1: [0, 86_400 * 10**9 - 1]}, np.abs(ints) * 86_399_999_999,
                      pa.int64()).cast(pa.time64("ns")),
        "tod_ms": col({}, np.abs(ints) * 86_399, pa.int32()).cast(pa.time32("ms")),
        # code point order (= UTF-8 byte order); the longest value is the 10,000-character max
        "text": col({0: ["", "é", "e\u0301", "😀", "\x00", "Z", "z"],
                     1: ["\U0010ffff" + "x" * 9_999, ""], 2: ["👩‍👩‍👧", "ß"]},
                    rng.choice(["Oslo", "Zürich", "東京", "", "naïve"], n)),
        "large_text": col({2: ["a" * 5000, "\U0001f600" * 3]}, rng.choice(["x", "yy", ""], n),
                          pa.large_string()),
        "dict_text": col({}, rng.choice(["b", "a", "c"], n)).dictionary_encode(),
        "blob": col({0: [b"", b"\x00", b"\x00\x00", b"\xff" * 40], 1: [b"\x7f"]},
                    [bytes([int(i) % 256]) * (int(i) % 5) for i in ints], pa.binary()),
        "fixed": col({}, [int(i).to_bytes(4, "big", signed=True) for i in ints],
                     pa.binary(4)),
        "flag": col({1: [True] * 5}, rng.random(n) < 0.3, pa.bool_()),
        "nothing": pa.nulls(n, pa.int32()),
        "nothing_text": pa.nulls(n, pa.string()),
        "nested": col({}, [{"a": int(i), "b": str(i)} for i in ints]),
        "listed": col({}, [[int(i)] * (abs(int(i)) % 3) for i in ints], pa.list_(pa.int64())),
    })


def cycle(values: list, n: int) -> list:
    return (values * (n // len(values) + 1))[:n]


def data_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_lakestats" not in p.parts)
