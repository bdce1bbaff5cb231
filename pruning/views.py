"""The partitions as a query plan sees them: one read of the version's partition index (the
columns the query names), typed ranges per partition, and membership tests that read a
partition's Bloom filter or exact frequencies only when a predicate asks."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from core import schema as statistics_schema
from core import types as ty
from core.bloom import BloomFilter
from metastore import files
from metastore.layout import STATISTICS
from metastore.reader import TableStatistics
from metastore.store import Store
from pruning.predicate import StatsView
from pruning.ranges import Flags

ALWAYS = Flags(True, False, False)


@dataclass
class Candidate:
    """A partition in the plan: its statistics, and what the predicate says of it."""
    path: str
    rows: int
    size: int
    directory: Store                 # its statistics files
    view: StatsView
    flags: Flags = field(default=ALWAYS)

    @property
    def fully(self) -> bool:
        return not (self.flags.false or self.flags.null)

    def has_bloom(self, column: str, bloom_min_distinct: int) -> bool:
        """The kernel writes a Bloom filter where a column has more distinct values than
        that."""
        return (self.view.stats[column].get("distinct_count") or 0) > bloom_min_distinct


def candidates(stats: TableStatistics, wanted: set[str]) -> list[Candidate]:
    """Every partition of the version, with the statistics of the `wanted` columns."""
    table_schema = stats.schema()
    columns = sorted(c for c in wanted if c in table_schema.names)
    index = stats.partition_index(columns)
    bloom_min = stats.manifest["settings"]["partition"]["bloom_min_distinct"]
    paths = index["path"].to_pylist()
    per_column = {c: _ranges(index, table_schema, c) for c in columns}
    out = []
    for i, (path, rows, size, fingerprint, hive) in enumerate(zip(
            paths, index["row_count"].to_pylist(), index["size"].to_pylist(),
            index["fingerprint"].to_pylist(), index["partition_values"].to_pylist())):
        directory = stats.layout.partition(path, fingerprint)
        held = {c: per_column[c][i] for c in columns if per_column[c][i] is not None}
        for name, value in hive:                               # Hive directories
            if name in wanted and name not in held:
                held[name] = {"row_count": rows, "null_count": 0, "nan_count": 0,
                              "low": _guess(value), "high": _guess(value)}
        candidate = Candidate(path, rows, size, directory, None)
        candidate.view = StatsView(held, rows, set(table_schema.names) | {k for k, _ in hive},
                                   _membership(candidate, table_schema, held, bloom_min))
        out.append(candidate)
    return out


def _ranges(index: pa.Table, table_schema: pa.Schema, column: str) -> list[dict | None]:
    """Each partition's counts and typed [low, high] of a column (None where it lacks it)."""
    struct = index[statistics_schema.index_column_name(table_schema.get_field_index(column))]
    struct = struct.combine_chunks()
    names = ["row_count", "null_count", "nan_count", "distinct_count"]
    rows = pa.table({n: pc.struct_field(struct, n) for n in names}).to_pylist()
    if "min" in [f.name for f in struct.type]:
        low, high = pc.struct_field(struct, "min"), pc.struct_field(struct, "max")
        if pa.types.is_timestamp(low.type) and low.type.unit == "ns":
            # Python datetimes hold microseconds: round the range outwards
            coarse = pa.timestamp("us", low.type.tz)
            low = pc.floor_temporal(low, unit="microsecond").cast(coarse)
            high = pc.ceil_temporal(high, unit="microsecond").cast(coarse)
        for row, lo, hi in zip(rows, low.to_pylist(), high.to_pylist()):
            row["low"], row["high"] = lo, hi
    held = struct.is_valid().to_pylist()
    return [row if h else None for row, h in zip(rows, held)]


def _membership(candidate: Candidate, table_schema: pa.Schema, held: dict, bloom_min: int):
    def member(column: str, values: list) -> list[bool] | None:
        """Which values the partition may hold: its Bloom filter or exact frequencies."""
        if column not in held or column not in table_schema.names:
            return None
        try:
            texts = ty.to_text(pa.array(values, ty.value_type(table_schema.field(column).type)))
        except (pa.ArrowException, TypeError, ValueError):
            return None
        if candidate.has_bloom(column, bloom_min):
            stats = files.filter_columns(candidate.directory.read_parquet(
                STATISTICS, columns=["column", "bloom_filter"]), [column])
            bloom = stats["bloom_filter"][0].as_py()
            return BloomFilter.from_bytes(bloom).contains_text(texts).tolist()
        held_values = files.read_frequencies(candidate.directory, [column])["value"]
        return pc.is_in(texts, value_set=held_values.combine_chunks()).to_pylist()
    return member


def _guess(text: str):
    """A Hive directory value as Spark infers it: an integer, a date, or text."""
    for parse_value in (int, dt.date.fromisoformat):
        try:
            return parse_value(text)
        except ValueError:
            pass
    return text
