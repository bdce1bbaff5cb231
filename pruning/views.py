"""The partitions as a query plan sees them: one read of the version's partition index (the
columns the query names), typed ranges per partition, and membership tests from the version's
value index, the index's value sets, or Bloom filter packs read when a predicate first asks
about a column."""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import types as ty
from lakestats.core.bloom import BloomFilter
from lakestats.core.hashing import hash_text
from lakestats.formats.hive import SPARK_TIMESTAMP, guess
from lakestats.metastore import files
from lakestats.metastore.layout import Layout
from lakestats.metastore.membership import read_blooms
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from lakestats.pruning.columns import NOT_READ_AHEAD, ColumnStats, one_by_one
from lakestats.pruning.evaluator import MemberAll
from lakestats.pruning.predicate import StatsView, Views
from lakestats.pruning.arrays import FlagArrays, Ranges
from lakestats.pruning.ranges import UNKNOWN, Flags, column_values

ALWAYS = Flags(True, False, False)
# what a plan reads of each partition besides the columns' statistics (Partitions takes them
# in this order)
PLAN_BASE = ["path", "size", "fingerprint", "row_count", "partition_values", "etag", "reading"]


class Candidate:
    """A partition in the plan: its statistics, and what the predicate says of it."""
    __slots__ = ("path", "rows", "size", "fingerprint", "layout", "flags", "exact", "position",
                 "_partitions")

    def __init__(self, path: str, rows: int, size: int, fingerprint: str, layout: Layout,
                 exact: bool, i: int, partitions: Partitions):
        self.path, self.rows, self.size, self.fingerprint = path, rows, size, fingerprint
        self.layout, self.flags = layout, ALWAYS
        # false where the format deletes rows the statistics still count (Iceberg equality
        # deletes): the bounds hold, but no row is certain, so LIMIT and top-k boundaries
        # skip it
        self.exact = exact
        self.position, self._partitions = i, partitions

    @property
    def view(self) -> StatsView:
        return self._partitions.view(self.position)

    @property
    def table_columns(self) -> set[str]:
        return self._partitions.table_columns(self.position)

    @property
    def directory(self) -> Store:
        """Its statistics files."""
        return self.layout.partition(self.path, self.fingerprint)

    @property
    def fully(self) -> bool:
        return not (self.flags.false or self.flags.null)

    def stats(self, column: str) -> dict | None:
        """Its statistics of the column (its view's), None where it has none."""
        return self._partitions.stats_of(self.position, column)

    def values(self, column: str) -> list[dict] | None:
        """The column's values and counts in the partition, when it has few (the index
        keeps them)."""
        return self.stats(column).get("values")

    def has_bloom(self, column: str) -> bool:
        return self.stats(column).get("bloom") is not None

    def held_count(self, column: str, values: list) -> int | None:
        """Its rows holding one of `values`, exact, from the version's value index; None
        where the index does not cover the column or the values are not its."""
        return self._partitions.held_count(self.position, column, values)


class Partitions(Views):
    """The partitions of a plan, columnar: a column's counts and bounds as arrays over them
    all, read once from the partition index; a partition's StatsView is made only when
    something evaluates that partition alone (or reads its membership)."""

    def __init__(self, stats: StatisticsReader, per_column: dict[str, ColumnStats],
                 index: pa.Table, wanted: set[str]):
        """`index`: the partition index's PLAN_BASE fields (and any others)."""
        table_schema = stats.schema()
        self.table_schema, self.per_column, self.wanted = table_schema, per_column, wanted
        self.index = index          # the base fields: freshness compares them with a listing
        self.paths, self.sizes, self.fingerprints, self.rows = (
            index[k].to_pylist() for k in PLAN_BASE[:4])
        # Hive directories' values stay Arrow until a view asks (10,000 Python lists made,
        # then walked by the cycle collector: ~7 ms of a 20 ms plan at 10,000 partitions)
        self._hive_column, self._hive, self._hive_asked = index[PLAN_BASE[4]], None, 0
        self.names = set(table_schema.names)
        self.blooms = _Blooms(stats, per_column)
        self._known: dict[tuple, set[str]] = {(): self.names}
        self.hive_names = set(pc.unique(self._hive_column.combine_chunks().keys).to_pylist())
        self._views: list[StatsView | None] = [None] * len(self.rows)
        self._ranks: dict[str, tuple | None] = {}
        self._directories: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._arrays: dict[str, ColumnStats | None] = {}
        self.layout, inexact = stats.layout, stats.manifest.inexact
        # false where the format deletes rows the statistics still count (Candidate.exact)
        self.exact = np.fromiter((p not in inexact for p in self.paths), bool, len(self.paths))
        self._made: dict[int, Candidate] = {}
        self._all: list[Candidate] | None = None

    @classmethod
    def of(cls, stats: StatisticsReader, wanted: set[str], index: pa.Table | None
           ) -> Partitions:
        table_schema = stats.schema()
        columns = sorted(c for c in wanted if c in table_schema.names)
        lazy = index is None
        if lazy:
            index = stats.partition_index(columns, PLAN_BASE, leave_out=NOT_READ_AHEAD)
        return cls(stats, {c: ColumnStats.of(index, table_schema, c, functools.partial(
            stats.index_statistic, c, "values") if lazy else None) for c in columns},
            index, wanted)

    def candidate(self, i: int) -> Candidate:
        """Partition i's Candidate, made at the first ask (a plan asks for the few its
        predicate keeps)."""
        found = self._made.get(i)
        if found is None:
            found = self._made[i] = Candidate(self.paths[i], self.rows[i], self.sizes[i],
                                              self.fingerprints[i], self.layout,
                                              bool(self.exact[i]), i, self)
        return found

    @property
    def candidates(self) -> list[Candidate]:
        """Every partition's Candidate, in the index's order."""
        if self._all is None:
            self._all = [self.candidate(i) for i in range(len(self))]
        return self._all

    @property
    def views(self) -> list[StatsView]:
        return [self.view(i) for i in range(len(self))]

    def hive(self, i: int) -> list[tuple[str, str | None]]:
        """Partition i's Hive directory values: each alone for the first views, all at
        once when many are asked (columns.one_by_one)."""
        if not self.hive_names:
            return []
        if self._hive is None:
            self._hive_asked += 1
            if one_by_one(self._hive_asked, len(self.rows)):
                return self._hive_column[i].as_py()
            self._hive = self._hive_column.to_pylist()
        return self._hive[i]

    def table_columns(self, i: int) -> set[str]:
        """The columns partition i knows: the table's and its Hive directories' (made once)."""
        names = tuple(k for k, _ in self.hive(i))
        if names not in self._known:
            self._known[names] = self.names | set(names)
        return self._known[names]

    def view(self, i: int) -> StatsView:
        if self._views[i] is None:
            held = {c: row for c, row in ((c, s.row(i)) for c, s in self.per_column.items())
                    if row is not None}
            for name, value in self.hive(i):                   # Hive directories
                if name in self.wanted and name not in held:
                    held[name] = {"row_count": self.rows[i], "null_count": 0, "nan_count": 0,
                                  "low": guess(value), "high": guess(value)}
            self._views[i] = StatsView(held, self.rows[i], self.table_columns(i), self.table_schema)
        return self._views[i]

    def held_count(self, i: int, column: str, values: list) -> int | None:
        """Candidate.held_count of partition i (the index's answers asked once per plan)."""
        found = self.blooms.texts(column, self.table_schema.field(column).type, values)
        holders = None if found is None else self.blooms.holders(column, found[0])
        if holders is None:
            return None
        return sum(holders.get(t, {}).get(self.paths[i], 0) for t in set(found[0].to_pylist()))

    def arrays_of(self, column: str) -> ColumnStats | None:
        """The column's arrays, where they are all a view would hold of it (no Hive
        directory gives a value to a partition without its statistics); else None: ask
        the views."""
        found = self.per_column.get(column)
        if found is None or column not in self.hive_names:
            return found
        if column not in self._arrays:         # asked once a partition by membership tests
            owners, _ = self._directory_values(column)
            self._arrays[column] = found if found.held[owners].all() else None
        return self._arrays[column]

    def stats_of(self, i: int, column: str) -> dict | None:
        """Partition i's statistics of `column` (its view's), None where it has none."""
        found = self.arrays_of(column)
        return self.view(i).stats.get(column) if found is None else found.row(i)

    def has(self, column: str, asked: np.ndarray) -> np.ndarray:
        """Which asked partitions have statistics of `column`."""
        found = self.arrays_of(column)
        if found is None:
            return np.array([column in self.view(i).stats for i in asked.tolist()], bool)
        return found.held[asked]

    def order_arrays(self, at: np.ndarray, column: str) -> dict | None:
        """What top-k reads of the partitions at positions `at` for ORDER BY `column`, as
        arrays: whether each holds the column, its row, null and NaN counts, and the dense
        ranks of its bounds (ColumnStats.ranks); None where the bounds are not arrays here (a
        Hive column, a column without bounds)."""
        stats = self.arrays_of(column)
        if stats is None:
            return None
        if column not in self._ranks:
            self._ranks[column] = stats.ranks()
        if self._ranks[column] is None:
            return None
        low, high = self._ranks[column]
        return {"held": stats.held[at],
                "rows": stats.counts("row_count")[at], "nulls": stats.counts("null_count")[at],
                "nan": stats.counts("nan_count")[at], "low": low[at], "high": high[at]}

    def columns(self, name: str) -> Ranges:
        """StatsView.column of every partition, as arrays: the index's statistics, else a
        Hive directory's value (a view's statistics of a partition without the column's)."""
        rows = np.asarray(self.rows, np.int64)
        found = self.per_column.get(name)
        if found is None:         # not the table's: unknown where no directory names it
            out, held = Ranges.broadcast(UNKNOWN, len(rows)), np.zeros(len(rows), bool)
            out.column = name
        else:
            out, held = found.arrays(name, rows > 0), found.held
        if name in self.hive_names:
            at, values = self._directory_values(name)
            at, values = at[~held[at]], values[~held[at]]
            out.low[at] = out.high[at] = values
            out.values[at], out.nulls[at], out.nan[at] = rows[at] > 0, False, False
            out.known[at] = np.not_equal(values, None) | (rows[at] == 0)
        return out

    def _directory_values(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The partitions with a Hive directory (or format partition) value of `name`, and
        those values as Spark infers them (each distinct value guessed once; None where
        there is none to guess)."""
        if name not in self._directories:
            self._directories[name] = self._read_directory_values(name)
        return self._directories[name]

    def typed_by_spark(self, hive_types: bool = True) -> set[str]:
        """The columns Spark may read otherwise than here, whose comparisons and order plans
        leave to Spark: dates and times it may read as Julian (ColumnStats.maybe_julian), and
        Hive directory columns: all when it infers no `hive_types` (with spark.sql.sources
        .partitionColumnTypeInference.enabled=false, p=10 is text, before p=9), else those of
        text it may type as timestamps (`2024-01-05 9:00:00` is after `... 10:00:00` as text)."""
        julian = {name for name, c in self.per_column.items() if c.maybe_julian()}
        if not hive_types:
            return julian | self.hive_names
        return julian | {name for name in self.hive_names
                         if (name not in self.names or ty.kind_of(self.table_schema.field(
                             name).type) == ty.STRING) and pc.any(pc.match_substring_regex(
                                 self._directory_texts(name)[1], SPARK_TIMESTAMP)).as_py()}

    def _directory_texts(self, name: str) -> tuple[np.ndarray, pa.Array]:
        """The partitions with a Hive directory value of `name`, and those values' text."""
        values = self._hive_column.combine_chunks()
        offsets = values.offsets.to_numpy()      # positions in the keys of every map
        entries = np.flatnonzero(pc.equal(values.keys, name).to_numpy(zero_copy_only=False))
        entries = entries[(entries >= offsets[0]) & (entries < offsets[-1])]
        owners = np.searchsorted(offsets, entries, side="right") - 1
        return owners, values.items.take(pa.array(entries, pa.int64()))

    def _read_directory_values(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        owners, texts = self._directory_texts(name)
        distinct = pc.unique(texts)
        guessed = np.empty(len(distinct), object)
        guessed[:] = [None if t is None else guess(t) for t in distinct.to_pylist()]
        return owners, guessed[pc.index_in(texts, distinct).to_numpy(zero_copy_only=False)]

    def __len__(self) -> int:
        return len(self.rows)


def of_candidates(parts: list[Candidate]) -> Views:
    """What the evaluator reads of `parts`: their Partitions when they are all of one
    (columnar), else their views."""
    if parts and parts is parts[0]._partitions._all:
        return parts[0]._partitions
    return Views([p.view for p in parts])


class Matching:
    """The partitions a predicate may match, in index order: their positions in the plan's
    Partitions and, as arrays over them, what LIMIT and top-k read; a Candidate is made only
    for a partition looked at alone."""

    def __init__(self, partitions: Partitions, may: np.ndarray, flags: FlagArrays | None):
        self.partitions, self.at = partitions, np.flatnonzero(may)
        none = np.zeros(self.at.size, bool)
        self.false = none if flags is None else flags.false[self.at]
        self.null = none if flags is None else flags.null[self.at]
        self.fully = ~(self.false | self.null)
        self.rows = np.asarray(partitions.rows, np.int64)[self.at]
        self.exact = partitions.exact[self.at]

    def __len__(self) -> int:
        return self.at.size

    def candidate(self, j: int) -> Candidate:
        """The j-th matching partition's Candidate, its flags the predicate's."""
        p = self.partitions.candidate(int(self.at[j]))
        p.flags = Flags(True, bool(self.false[j]), bool(self.null[j]))
        return p

    def candidates(self) -> list[Candidate]:
        return [self.candidate(j) for j in range(len(self))]

    def order_arrays(self, column: str) -> dict | None:
        return self.partitions.order_arrays(self.at, column)


def membership_of(partitions: Partitions) -> MemberAll:
    """The membership test of many of `partitions` at once (pruning.evaluator)."""
    table_schema, blooms, paths = partitions.table_schema, partitions.blooms, partitions.paths

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
            known = partitions.has(column, asked)
            out[known] = [paths[i] in held for i in asked[known].tolist()]
            return out
        probed = []
        for j, i in enumerate(asked.tolist()):
            stats = partitions.stats_of(i, column)
            if stats is None:
                continue
            if stats.get("values") is not None:
                out[j] = any(v["value"] in wanted for v in stats["values"])
            elif stats.get("bloom") is not None:
                probed.append(j)
            else:
                held = files.values_as(partitions.candidate(i).directory, column,
                                       table_schema.field(column).type).to_pylist()
                out[j] = not wanted.isdisjoint(held)
        if probed:
            out[probed] = BloomFilter.may_contain_any(
                blooms.only(column, asked[probed].tolist()), hashes)
        return out
    return member_all


class _Blooms:
    """The Bloom filters of a column, of the partitions a question asks about (`only`). The
    values asked about are rendered and hashed once for all partitions."""

    def __init__(self, stats: StatisticsReader, per_column: dict[str, ColumnStats]):
        self.stats, self.per_column, self.asked = stats, per_column, {}
        self.found: dict[tuple, dict] = {}

    def texts(self, column: str, arrow_type: pa.DataType, values: list):
        """(texts, hashes) of the column's values equal to `values` (ranges.column_values)."""
        key = (column, repr(values))
        if key not in self.asked:
            try:
                values = column_values(values, arrow_type)
                texts = ty.to_text(pa.array(values, ty.value_type(arrow_type)))
                self.asked[key] = (texts, hash_text(texts))
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
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

    def only(self, column: str, held: list[int]) -> list[bytes]:
        """The filters of the partitions `held` alone (those the ranges kept)."""
        rows = self.per_column[column].rows
        return read_blooms(self.stats.layout, [rows[i]["bloom"] for i in held])

