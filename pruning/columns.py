"""One column's statistics in a version's partition index as a plan reads them: counts and
bounds as arrays over every partition (pruning.evaluator's ranges, top-k's ranks), a partition's
statistics as a row when one is asked for."""
from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema as statistics_schema
from lakestats.pruning.arrays import Ranges

# a column's rows (and a partition's Hive values) are made one by one for the first views
# asked (at least this many, up to an eighth of the partitions), then all at once
ROWS_ONE_BY_ONE = 64
ROW_FIELDS = ("row_count", "null_count", "nan_count", "distinct_count")
BLOOM_FIELDS = ("bloom_pack", "bloom_offset", "bloom_length")
# most of the index's bytes, left out of a plan's read: value lists are read at the first
# partition asked for its values; range sets are for join pruning (pruning.join_tables)
NOT_READ_AHEAD = ("values", "range_set")
# before these, Spark may read a file's dates and timestamps in the Julian calendar (files of
# Spark 2, or written in its LEGACY rebase mode, or any file in a session that reads in it)
JULIAN_DATES_BEFORE = dt.date(1582, 10, 15)
JULIAN_TIMESTAMPS_BEFORE = dt.datetime(1900, 1, 1, tzinfo=dt.timezone.utc)


@dataclass
class ColumnStats:
    """One column's statistics in the partition index: arrays over the partitions, and each
    partition's as a row (a dict, None where it lacks the column) when one is asked for."""
    struct: pa.StructArray
    low: list
    high: list
    # the bounds as Arrow arrays, as the evaluator takes them (rounded()); None without bounds
    arrow: tuple[pa.Array, pa.Array] | None
    # the partitions' short value lists (None: too many values to keep), or how to read them
    value_lists: pa.Array | Callable[[], pa.Array]
    _rows: list | None = None
    _asked: int = 0

    @classmethod
    def of(cls, index: pa.Table, table_schema: pa.Schema, column: str,
           read_values: Callable[[], pa.Array] | None = None) -> ColumnStats:
        """From `index`, read whole or without NOT_READ_AHEAD (then `read_values` reads the
        column's value lists)."""
        struct = index[statistics_schema.index_column_name(table_schema.get_field_index(
            column))].combine_chunks()
        fields = [f.name for f in struct.type]
        arrow, low, high = None, [None] * len(struct), [None] * len(struct)
        if "min" in fields:
            arrow = rounded(pc.struct_field(struct, "min"), pc.struct_field(struct, "max"))
            low, high = as_python(arrow[0]), as_python(arrow[1])
        return cls(struct, low, high, arrow, pc.struct_field(struct, "values")
                   if "values" in fields or read_values is None else read_values)

    @functools.cached_property
    def held(self) -> np.ndarray:
        """Which partitions have statistics of the column."""
        return self.struct.is_valid().to_numpy(zero_copy_only=False)

    def values(self) -> pa.Array:
        if callable(self.value_lists):
            self.value_lists = self.value_lists()
        return self.value_lists

    def ranks(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Each partition's low and high bound (as the evaluator takes them: rounded()) as
        its dense rank among all the bounds, equal bounds equal ranks, 0 where there is none;
        None for a column without bounds."""
        if self.arrow is None:
            return None
        both = pa.concat_arrays(list(self.arrow))
        ranked = pc.rank(both, tiebreaker="dense").to_numpy(zero_copy_only=False).astype(
            np.int64)
        ranked[both.is_null().to_numpy(zero_copy_only=False)] = 0
        n = len(self.struct)
        return ranked[:n], ranked[n:]

    def maybe_julian(self) -> bool:
        """Whether a partition holds a date or timestamp that Spark may read days away from
        the statistics' proleptic Gregorian one (JULIAN_DATES_BEFORE)."""
        if self.arrow is None:
            return False
        lows = self.arrow[0]
        if pa.types.is_date(lows.type):
            before = pa.scalar(JULIAN_DATES_BEFORE)
        elif pa.types.is_timestamp(lows.type):
            before = pa.scalar(JULIAN_TIMESTAMPS_BEFORE, pa.timestamp("us", "UTC"))
        else:
            return False
        return bool(pc.any(pc.less(lows, before.cast(lows.type))).as_py())

    def counts(self, name: str) -> np.ndarray:
        return pc.fill_null(pc.struct_field(self.struct, name), 0).to_numpy(
            zero_copy_only=False)

    def arrays(self, name: str, any_rows: np.ndarray) -> Ranges:
        """StatsView.column's Range fields over the partitions."""
        held = self.held
        nulls, nan = self.counts("null_count"), self.counts("nan_count")
        nonnull = self.counts("row_count") - nulls - nan
        lows, highs = np.empty(len(held), object), np.empty(len(held), object)
        lows[:], highs[:] = self.low, self.high
        bounded = np.fromiter((v is not None for v in self.low), bool, len(held))
        # a partition without the column (added later) holds it as nulls in every row
        return Ranges(lows, highs, held & (nonnull > 0), np.where(held, nulls > 0, any_rows),
                      held & (nan > 0), ~held | bounded | (nonnull == 0), column=name)

    def row(self, i: int) -> dict | None:
        """Partition i's statistics of the column (rows, once a plan asks for many)."""
        if self._rows is not None:
            return self._rows[i]
        self._asked += 1
        if not one_by_one(self._asked, len(self.struct)):
            return self.rows[i]
        one = self.struct[i]
        if not one.is_valid:
            return None
        row = {n: one[n].as_py() for n in ROW_FIELDS}
        row["values"] = self.values()[i].as_py()
        row["bloom"] = tuple(one[n].as_py() for n in BLOOM_FIELDS) \
            if one["bloom_pack"].is_valid else None
        row["low"], row["high"] = self.low[i], self.high[i]
        return row

    @property
    def rows(self) -> list[dict | None]:
        if self._rows is None:
            self._rows = self._as_rows(self.struct, self.low, self.high, self.values())
        return self._rows

    @staticmethod
    def _as_rows(struct: pa.StructArray, low: list, high: list, values: pa.Array
                 ) -> list[dict | None]:
        rows = pa.table({**{n: pc.struct_field(struct, n) for n in ROW_FIELDS},
                         "values": values}).to_pylist()
        pointers = pa.table({n: pc.struct_field(struct, n) for n in BLOOM_FIELDS}).to_pylist()
        for row, p, lo, hi in zip(rows, pointers, low, high):
            row["bloom"] = tuple(p.values()) if p["bloom_pack"] else None
            row["low"], row["high"] = lo, hi
        return [row if held else None for row, held in zip(rows, struct.is_valid().to_pylist())]


def one_by_one(asked: int, partitions: int) -> bool:
    """Is the `asked`-th partition a plan asks for still made alone (ROWS_ONE_BY_ONE)?"""
    return asked <= max(ROWS_ONE_BY_ONE, partitions // 8)


def bounds(low: pa.Array, high: pa.Array) -> tuple[list, list]:
    """Typed lower and upper bounds as the evaluator takes them (Python values)."""
    low, high = rounded(low, high)
    return as_python(low), as_python(high)


def rounded(low: pa.Array, high: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Bounds in units Python holds: nanosecond timestamps rounded outwards to microseconds
    (in integers: Arrow's ceil_temporal overflows within a microsecond of int64's end)."""
    if pa.types.is_timestamp(low.type) and low.type.unit == "ns":
        return _micros(low, up=False), _micros(high, up=True)
    return low, high


def _micros(ticks: pa.Array, up: bool) -> pa.Array:
    nanos = pc.fill_null(ticks.view(pa.int64()), 0).to_numpy(zero_copy_only=False)
    micros, rest = np.divmod(nanos, 1000)
    if up:
        micros += rest > 0
    return pa.array(micros, pa.timestamp("us", ticks.type.tz),
                    mask=ticks.is_null().to_numpy(zero_copy_only=False))


def as_python(values: pa.Array) -> list:
    """Arrow values as Python's (to_pylist); dates and timestamps through NumPy, 30 to 100
    times faster at 10,000 partitions: a zoned timestamp as the same instant in UTC, and a
    value past Python's year 9999 as its integer, which compares with no date or timestamp
    (the evaluator's unknown) where to_pylist would raise."""
    kind = values.type
    if not (pa.types.is_date32(kind) or pa.types.is_timestamp(kind) and kind.unit != "ns"):
        return values.to_pylist()
    out = values.to_numpy(zero_copy_only=False).astype(object).tolist()
    if pa.types.is_timestamp(kind) and kind.tz:
        return [v.replace(tzinfo=dt.timezone.utc) if isinstance(v, dt.datetime) else v
                for v in out]
    return out
