"""The partitions as a query plan sees them: one read of the version's partition index (the
columns the query names), typed ranges per partition, and membership tests from the version's
value index, the index's value sets, or Bloom filter packs read when a predicate first asks
about a column."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema as statistics_schema
from lakestats.core import types as ty
from lakestats.core.bloom import BloomFilter
from lakestats.core.hashing import hash_text
from lakestats.metastore import files
from lakestats.metastore.layout import Layout
from lakestats.metastore.membership import read_blooms
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from lakestats.pruning.batch import MemberAll
from lakestats.pruning.predicate import StatsView
from lakestats.pruning.ranges import Flags

ALWAYS = Flags(True, False, False)


@dataclass
class Candidate:
    """A partition in the plan: its statistics, and what the predicate says of it."""
    path: str
    rows: int
    size: int
    fingerprint: str
    layout: Layout
    view: StatsView
    flags: Flags = field(default=ALWAYS)
    # false where the format deletes rows the statistics still count (Iceberg equality
    # deletes): the bounds hold, but no row is certain, so LIMIT and top-k boundaries skip it
    exact: bool = True

    @property
    def directory(self) -> Store:
        """Its statistics files."""
        return self.layout.partition(self.path, self.fingerprint)

    @property
    def fully(self) -> bool:
        return not (self.flags.false or self.flags.null)

    def values(self, column: str) -> list[dict] | None:
        """The column's values and counts in the partition, when it has few (the index
        keeps them)."""
        return self.view.stats[column].get("values")

    def has_bloom(self, column: str) -> bool:
        return self.view.stats[column].get("bloom") is not None


def candidates(stats: StatisticsReader, wanted: set[str], index: pa.Table | None = None
               ) -> tuple[list[Candidate], MemberAll]:
    """Every partition of the version, with the statistics of the `wanted` columns, and the
    membership test of many partitions at once (pruning.batch); from `index`, the partition
    index holding those columns, when the caller has read it."""
    table_schema = stats.schema()
    columns = sorted(c for c in wanted if c in table_schema.names)
    if index is None:
        index = stats.partition_index(columns)
    paths = index["path"].to_pylist()
    per_column = {c: _ranges(index, table_schema, c) for c in columns}
    blooms = _Blooms(stats, per_column)
    names = set(table_schema.names)
    inexact = stats.manifest.inexact
    out = []
    for i, (path, rows, size, fingerprint, hive) in enumerate(zip(
            paths, index["row_count"].to_pylist(), index["size"].to_pylist(),
            index["fingerprint"].to_pylist(), index["partition_values"].to_pylist())):
        held = {c: per_column[c][i] for c in columns if per_column[c][i] is not None}
        for name, value in hive:                               # Hive directories
            if name in wanted and name not in held:
                held[name] = {"row_count": rows, "null_count": 0, "nan_count": 0,
                              "low": _guess(value), "high": _guess(value)}
        candidate = Candidate(path, rows, size, fingerprint, stats.layout, None,
                              exact=path not in inexact)
        candidate.view = StatsView(held, rows, names | {k for k, _ in hive} if hive else names,
                                   _membership(candidate, i, table_schema, held, blooms))
        out.append(candidate)
    return out, _member_all(out, table_schema, blooms)


def hive_columns(parts: list[Candidate]) -> set[str]:
    """The columns the partitions know, Hive directory values included. Views without Hive
    values share one set, the table's: each distinct set is read once, not once a partition."""
    distinct = {id(p.view.table_columns): p.view.table_columns for p in parts}
    return set().union(*distinct.values())


def _member_all(parts: list[Candidate], table_schema: pa.Schema, blooms: _Blooms) -> MemberAll:
    def member_all(column: str, values: list, asked: np.ndarray) -> np.ndarray | None:
        """May each asked partition hold one of the values? Value sets, then every Bloom
        filter asked about, probed together; a partition with neither reads its
        frequencies."""
        if column not in table_schema.names:
            return None
        found = blooms.texts(column, table_schema.field(column).type, values)
        if found is None:
            return None
        texts, hashes = found
        wanted = set(texts.to_pylist())
        holders = blooms.holders(column, texts)
        out = np.ones(asked.size, bool)
        if holders is not None:              # the value index knows, for every partition
            held = set().union(*holders.values())
            for j, i in enumerate(asked.tolist()):
                if column in parts[i].view.stats:
                    out[j] = parts[i].path in held
            return out
        probed = []
        for j, i in enumerate(asked.tolist()):
            part = parts[i]
            if column not in part.view.stats:
                continue
            if part.values(column) is not None:
                out[j] = any(v["value"] in wanted for v in part.values(column))
            elif part.has_bloom(column):
                probed.append(j)
            else:
                held = files.read_frequencies(part.directory, [column])["value"].to_pylist()
                out[j] = not wanted.isdisjoint(held)
        if probed:
            out[probed] = BloomFilter.may_contain_any(
                blooms.only(column, asked[probed].tolist()), hashes)
        return out
    return member_all


def _ranges(index: pa.Table, table_schema: pa.Schema, column: str) -> list[dict | None]:
    """Each partition's counts and typed [low, high] of a column (None where it lacks it)."""
    struct = index[statistics_schema.index_column_name(table_schema.get_field_index(column))]
    struct = struct.combine_chunks()
    names = ["row_count", "null_count", "nan_count", "distinct_count", "values"]
    rows = pa.table({n: pc.struct_field(struct, n) for n in names}).to_pylist()
    pointers = pa.table({n: pc.struct_field(struct, n) for n in (
        "bloom_pack", "bloom_offset", "bloom_length")}).to_pylist()
    for row, p in zip(rows, pointers):
        row["bloom"] = tuple(p.values()) if p["bloom_pack"] else None
    if "min" in [f.name for f in struct.type]:
        low, high = bounds(pc.struct_field(struct, "min"), pc.struct_field(struct, "max"))
        for row, lo, hi in zip(rows, low, high):
            row["low"], row["high"] = lo, hi
    held = struct.is_valid().to_pylist()
    return [row if h else None for row, h in zip(rows, held)]


def bounds(low: pa.Array, high: pa.Array) -> tuple[list, list]:
    """Typed lower and upper bounds as the evaluator takes them (Python values)."""
    if pa.types.is_timestamp(low.type) and low.type.unit == "ns":
        # Python datetimes hold microseconds: round the range outwards
        coarse = pa.timestamp("us", low.type.tz)
        low = pc.floor_temporal(low, unit="microsecond").cast(coarse)
        high = pc.ceil_temporal(high, unit="microsecond").cast(coarse)
    return low.to_pylist(), high.to_pylist()


class _Blooms:
    """The Bloom filters of a column: those of the partitions a batch question asks about
    (`only`), or, for questions one partition at a time, every partition's at the first
    (`of`). The values asked about are rendered and hashed once for all partitions."""

    def __init__(self, stats: StatisticsReader, per_column: dict[str, list[dict | None]]):
        self.stats, self.per_column, self.read, self.asked = stats, per_column, {}, {}
        self.found: dict[tuple, dict] = {}

    def texts(self, column: str, arrow_type: pa.DataType, values: list):
        """(canonical texts, hashes) of values of a column, or None if they are not its."""
        key = (column, repr(values))
        if key not in self.asked:
            try:
                texts = ty.to_text(pa.array(values, ty.value_type(arrow_type)))
                self.asked[key] = (texts, hash_text(texts))
            except (pa.ArrowException, TypeError, ValueError):
                self.asked[key] = None
        return self.asked[key]

    def holders(self, column: str, texts: pa.Array) -> dict[str, dict[str, int]] | None:
        """From the version's value index, when it indexes the column: each value text's
        partitions (StatisticsReader.holders)."""
        if column not in self.stats.manifest.value_index:
            return None
        key = (column, tuple(texts.to_pylist()))
        if key not in self.found:
            self.found[key] = self.stats.holders(column, list(key[1]))
        return self.found[key]

    def of(self, column: str, i: int) -> bytes:
        if column not in self.read:
            self.read[column] = read_blooms(self.stats.layout, [
                row["bloom"] if row else None for row in self.per_column[column]])
        return self.read[column][i]

    def only(self, column: str, held: list[int]) -> list[bytes]:
        """The filters of the partitions `held` alone (those the ranges kept)."""
        if column in self.read:
            return [self.read[column][i] for i in held]
        rows = self.per_column[column]
        return read_blooms(self.stats.layout, [rows[i]["bloom"] for i in held])


def _membership(candidate: Candidate, i: int, table_schema: pa.Schema, held: dict,
                blooms: _Blooms):
    def member(column: str, values: list) -> list[bool] | None:
        """Which values the partition may hold: its value set, Bloom filter or frequencies."""
        if column not in held or column not in table_schema.names:
            return None
        asked = blooms.texts(column, table_schema.field(column).type, values)
        if asked is None:
            return None
        texts, hashes = asked
        holders = blooms.holders(column, texts)
        if holders is not None:
            return [candidate.path in holders.get(t, ()) for t in texts.to_pylist()]
        if candidate.values(column) is not None:
            present = pa.array([v["value"] for v in candidate.values(column)], pa.string())
        elif candidate.has_bloom(column):
            return BloomFilter.may_contain(blooms.of(column, i), hashes).tolist()
        else:
            present = files.read_frequencies(candidate.directory, [column])["value"]
        return pc.is_in(texts, value_set=present.combine_chunks()
                        if isinstance(present, pa.ChunkedArray) else present).to_pylist()
    return member


def _guess(text: str):
    """A Hive directory value as Spark infers it: an integer, a date, or text."""
    for parse_value in (int, dt.date.fromisoformat):
        try:
            return parse_value(text)
        except ValueError:
            pass
    return text
