"""A table of a query as join pruning sees it: its files (those the statistics do not
describe always read), its scans' local predicates evaluated by min and max then by range-sets,
and its join columns' ranges and exact string values, from one read of the partition index.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lakestats.core import range_sets
from lakestats.core import schema as statistics_schema
from lakestats.core import types as ty
from lakestats.formats import Selection, Snapshot, detect, open_snapshot
from lakestats.metastore import files
from lakestats.metastore.reader import NotPublished, StatisticsReader
from lakestats.metastore.store import Store
from lakestats.pruning.evaluator import evaluate
from lakestats.pruning.freshness import Freshness, freshness
from lakestats.pruning.join_conditions import conjuncts
from lakestats.pruning.predicate import StatsView, columns_opaque
from lakestats.pruning.columns import bounds
from lakestats.pruning.views import Partitions, membership_of, of_candidates

STRING_VALUES_MAX = 100_000     # distinct strings a diP lists exactly; beyond, [min, max] zones
FREQUENCY_READS_MAX = 32        # partitions whose frequencies a string diP reads for its values
RANGE_VIEWS_MAX = 4_096         # ranges a local predicate is evaluated over, per column


@dataclass
class TablePruning:
    """One table of the query: its files and what each step kept (the JSON contract)."""
    uri: str
    paths: list[str]
    sizes: np.ndarray
    exists: np.ndarray                 # false: in the statistics' version, gone from the table
    freshness: Freshness               # the table as it is now, planned against
    after_local: int = 0
    dips: list[dict] = field(default_factory=list)
    kept_mask: np.ndarray | None = None

    def as_json(self) -> dict:
        kept, here = self.kept_mask, self.exists
        return {"kept": [p for p, k in zip(self.paths, kept) if k],
                "skipped": [p for p, k, e in zip(self.paths, kept, here) if e and not k],
                "files_before": int(here.sum()), "files_after_local": self.after_local,
                "files_after_dips": int(kept.sum()), "bytes_before": int(self.sizes[here].sum()),
                "bytes_after": int(self.sizes[kept].sum()), "dips": self.dips,
                "unknown": self.freshness.unknown}

    @property
    def listed(self) -> bool:
        """A plain directory: its files are those a listing finds."""
        return self.freshness.form == "parquet"

    @property
    def snapshot(self) -> Snapshot | None:
        """A table format's snapshot whose rows a read returns."""
        return self.freshness.snapshot_to_read()


@dataclass(eq=False)                # hashed by identity: keys() caches per column
class JoinColumn:
    """A join column over the table's partitions: every partition's ranges (its range-set,
    else [min, max]) with their owners, and which partitions hold NaN or nulls."""
    type: pa.DataType
    lows: pa.Array
    highs: pa.Array
    owners: np.ndarray
    nan: np.ndarray
    nulls: np.ndarray
    distinct: np.ndarray

    @functools.cache
    def keys(self, how: str) -> tuple[np.ndarray, np.ndarray]:
        """Its ranges' bounds as numpy arrays, compared `how` (see comparable)."""
        if how == ROUNDED:
            return _rounded(self.lows, -np.inf), _rounded(self.highs, np.inf)
        return _numpy(self.lows, how == EXACT), _numpy(self.highs, how == EXACT)


class JoinTable:
    """A table the query names: its partitions from one read of the partition index (the
    columns its scans' predicates and joins name), and the files a listing finds. A table
    without statistics (`stats` None) has no partitions: every file is read, none sent."""

    def __init__(self, name: str, uri: str, stats: StatisticsReader | None, schema: pa.Schema,
                 wanted: set[str], assume_current: bool = False, hive_types: bool = True):
        self.name, self.schema = name, schema
        self.index, self.parts, self.member_all = None, [], lambda *_: None
        self.hive: set[str] = set()         # Hive directory columns beyond the files' own
        self.typed_by_spark: set[str] = set()     # never pruned by (Partitions.typed_by_spark)
        if stats is not None:
            columns = sorted(c for c in wanted if c in self.schema.names)
            self.index = stats.partition_index(columns)
            partitions = Partitions.of(stats, set(wanted), self.index)
            self.parts, self.member_all = partitions.candidates, membership_of(partitions)
            self.hive = partitions.hive_names - set(schema.names)
            self.typed_by_spark = partitions.typed_by_spark(hive_types)
        self._taint(uri, stats, assume_current)
        self.columns: dict[str, JoinColumn | None] = {}

    def _taint(self, uri: str, stats: StatisticsReader | None, assume_current: bool) -> None:
        """Files the statistics do not describe as they are now (pruning.freshness) are
        tainted: always read, and their table sends no diP. Files gone since are never
        read."""
        published = [p.path for p in self.parts]
        now = freshness(uri, stats.manifest if stats else None, self.index, assume_current)
        held = set(published)
        new = [p for p in now.unknown if p not in held]
        unknown = set(now.unknown)
        self.always = np.concatenate([np.array([p in unknown for p in published], bool),
                                      np.ones(len(new), bool)])
        self.exists = np.concatenate([np.array([p not in now.gone for p in published], bool),
                                      np.ones(len(new), bool)])
        self.partial = bool(self.always.any())
        sizes = [p.size for p in self.parts] + \
            [now.now[p].size if p in now.now else _size(uri, p) for p in new]
        self.report = TablePruning(uri, published + new, np.array(sizes, np.int64),
                                   self.exists, now)

    def local(self, predicates: list[exp.Expression]) -> np.ndarray:
        """The partitions the scan's local predicates keep (files without statistics too):
        by min and max, then by each numeric or temporal column's range-set."""
        mask = np.ones(len(self.report.paths), bool)
        if predicates:
            node = columns_opaque(exp.and_(*predicates), self.typed_by_spark)
            flags = evaluate(node, of_candidates(self.parts), self.member_all)
            keep = flags.true.copy()
            partial = keep & (flags.false | flags.null)
            for column in sorted({c.name for c in node.find_all(exp.Column)}):
                keep &= self._by_ranges(node, column, partial)
            mask[:len(self.parts)] = keep
        return (mask | self.always) & self.exists

    def _by_ranges(self, node: exp.Expression, column: str, asked: np.ndarray) -> np.ndarray:
        """May the predicate be true in some range of the column's range-set? Each range of
        the `asked` partitions is evaluated as a partition of its own: a row that satisfies
        it lies in one of them. The conjuncts on the column alone decide: the others do not
        change from range to range, and the partition as a whole may satisfy them (leaving
        out one that names other columns too only keeps more). Past RANGE_VIEWS_MAX ranges
        (a column the layout does not cluster) the range-sets are left unused: a bound on
        planning time."""
        col = self.column(column)
        out = np.ones(len(asked), bool)
        alone = [c for c in conjuncts(node) if {x.name for x in c.find_all(exp.Column)} ==
                 {column}]
        if not alone or col is None or ty.kind_of(col.type) not in ty.BINNED_KINDS:
            return out
        ranges = np.flatnonzero(asked[col.owners])
        if len(ranges) > RANGE_VIEWS_MAX:
            return out
        owners = col.owners[ranges]
        lows, highs = bounds(col.lows.take(pa.array(ranges)), col.highs.take(pa.array(ranges)))
        node = exp.and_(*alone)
        views = [StatsView({column: {**self.parts[i].stats(column), "low": low,
                                     "high": high}}, self.parts[i].rows, {column},
                               self.schema)
                 for i, low, high in zip(owners.tolist(), lows, highs)]
        hits = evaluate(node, views).true
        ranged = np.zeros(len(asked), bool)
        ranged[owners] = True
        out[ranged] = False
        out[owners[hits]] = True
        return out

    def column(self, name: str) -> JoinColumn | None:
        if name not in self.columns:
            self.columns[name] = self._column(name) if name in self.schema.names \
                and name not in self.typed_by_spark else None
        return self.columns[name]

    def _column(self, name: str) -> JoinColumn | None:
        arrow_type = self.schema.field(name).type
        if self.index is None or ty.kind_of(arrow_type) in (ty.OTHER, ty.BINARY, ty.BOOLEAN):
            return None
        struct = self.index[statistics_schema.index_column_name(
            self.schema.get_field_index(name))].combine_chunks()
        n = len(struct)
        held = struct.is_valid().to_numpy(zero_copy_only=False)
        rows = np.array([p.rows for p in self.parts], np.int64)

        def counts(field_name: str) -> np.ndarray:
            return pc.fill_null(pc.struct_field(struct, field_name), 0).to_numpy(
                zero_copy_only=False) if n else np.zeros(0, np.int64)
        nulls = np.where(held, counts("null_count") > 0, rows > 0)
        lows, highs = pc.struct_field(struct, "min"), pc.struct_field(struct, "max")
        zoned = lows.is_valid().to_numpy(zero_copy_only=False) & held
        owners = np.flatnonzero(zoned)
        if "range_set" in [f.name for f in struct.type]:
            sets = pc.struct_field(struct, "range_set")
            with_sets = sets.is_valid().to_numpy(zero_copy_only=False) & zoned
            flat = pc.list_flatten(sets.filter(pa.array(with_sets)))
            set_owners = np.flatnonzero(with_sets)[
                pc.list_parent_indices(sets.filter(pa.array(with_sets))).to_numpy()]
            zone_only = zoned & ~with_sets
            lows = pa.concat_arrays([flat.field("low"), lows.filter(pa.array(zone_only))])
            highs = pa.concat_arrays([flat.field("high"), highs.filter(pa.array(zone_only))])
            owners = np.concatenate([set_owners, np.flatnonzero(zone_only)])
        else:
            lows, highs = lows.filter(pa.array(zoned)), highs.filter(pa.array(zoned))
        return JoinColumn(arrow_type, lows, highs, owners.astype(np.int64),
                          counts("nan_count") > 0, nulls, counts("distinct_count"))

    def values(self, column: str, asked: np.ndarray) -> list | None:
        """The exact distinct values of a string column in the asked partitions: the index's
        value sets, else each partition's frequencies; None past STRING_VALUES_MAX values or
        FREQUENCY_READS_MAX reads."""
        col = self.column(column)
        if col.distinct[asked].sum() > STRING_VALUES_MAX:
            return None
        parts = [self.parts[i] for i in np.flatnonzero(asked)]
        held = [p.values(column) if p.stats(column) is not None else [] for p in parts]
        unlisted = [p for p, h in zip(parts, held) if h is None]
        if len(unlisted) > FREQUENCY_READS_MAX:
            return None
        found = {v["value"] for h in held if h for v in h}
        for part in unlisted:
            found.update(files.read_frequencies(part.directory, [column])["value"].to_pylist())
        return sorted(found)


def table_schema(uri: str, stats: StatisticsReader | None) -> pa.Schema:
    """The statistics' schema; without statistics, that of the table's first data file."""
    if stats is not None:
        return stats.schema()
    table = Store(uri)
    form = detect(table)
    first = next(iter(table.list_files() if form == "parquet" else
                      open_snapshot(uri, Selection(form)).files), None)
    if first is None:
        raise NotPublished(f"{uri}: no data files and no statistics")
    return table.open_parquet(first.rel_path).schema_arrow


def _size(table_uri: str, rel_path: str) -> int:
    found = Store(table_uri).data_file(rel_path)
    return found.size if found else 0


def _numpy(values: pa.Array, as_objects: bool) -> np.ndarray:
    """Bounds as numpy compares them: native numbers and datetimes, else Python objects (a
    trailing None keeps numpy from reading sequences in the values as dimensions)."""
    if as_objects or not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)
                          or pa.types.is_temporal(values.type)):
        return range_sets.values(np.array(values.to_pylist() + [None], dtype=object)[:-1])
    return values.to_numpy(zero_copy_only=False)


# how two join columns' values compare (comparable)
NATIVE, EXACT, ROUNDED = "native", "exact", "rounded"


def comparable(a: pa.DataType, b: pa.DataType) -> str | None:
    """How two join columns' values compare: NATIVE (numpy, the same kind), EXACT (Python
    objects: an integer against a decimal), ROUNDED (a float against an integer or a decimal,
    which Spark casts to a float: bounds rounded, see _rounded), or None: no diP between them."""
    ka, kb = ty.kind_of(a), ty.kind_of(b)
    numbers = (ty.INTEGER, ty.FLOAT, ty.DECIMAL)
    if ka in numbers and kb in numbers:
        if ka == kb and ka in (ty.INTEGER, ty.FLOAT):
            return NATIVE
        return ROUNDED if ty.FLOAT in (ka, kb) else EXACT
    if ka == kb == ty.STRING:
        return NATIVE
    if ka == kb == ty.TEMPORAL and type(a) is type(b):   # dates with dates, zoned with zoned
        return NATIVE if (getattr(a, "tz", None) is None) == (getattr(b, "tz", None) is None) \
            else None
    return None


def _rounded(bounds: pa.Array, outward: float) -> np.ndarray:
    """Bounds as float32, one step further `outward`. Spark casts the integer or decimal
    side to float or double (directly or through double); every such rounding is monotone
    and within a float32 step of this one, so a value that Spark finds equal stays covered."""
    exact = np.array(bounds.to_pylist(), dtype=np.float64)    # float(x): correctly rounded
    with np.errstate(over="ignore"):                           # beyond float32: infinite
        return np.nextafter(exact.astype(np.float32), np.float32(outward))
