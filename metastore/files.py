"""The three statistics files as Arrow tables: built from the kernel's results, written to and
read from a statistics directory (metastore.layout says which)."""
from __future__ import annotations

import base64
import bisect
import json
import math
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Collection, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import schema
from lakestats.core import types as ty
from lakestats.core import udf
from lakestats.metastore.layout import FREQUENCIES, STATISTICS
from lakestats.metastore.store import DataFile, Store, codec_for

if TYPE_CHECKING:
    from lakestats.metastore.layout import Layout

DATA_SCHEMA_KEY = b"lakestats.data_schema"
ROW_COUNT_KEY = b"lakestats.row_count"
# a table's statistics.parquet: one row per column, read a row group at a time
STATISTICS_ROW_GROUP = 64


# -- data schema, kept in statistics.parquet's metadata so tables can reconcile drifted files

def encode_schema(s: pa.Schema) -> str:
    return base64.b64encode(s.remove_metadata().serialize().to_pybytes()).decode()


def decode_schema(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


# -- statistics.parquet

def write_statistics(out: Store, table: pa.Table, row_group_size: int | None = None) -> None:
    """A partition's or a version's statistics.parquet. Its rows are found by position (a
    version's row groups hold STATISTICS_ROW_GROUP columns each), never by Parquet's
    statistics, which for the sketch columns are most of a small file: none are written (a
    partition's of 6 columns: 43 KB in 0.95 ms with them and dictionaries, 25 KB in 0.59 ms
    without)."""
    out.write_parquet(table, STATISTICS, row_group_size=row_group_size,
                      write_statistics=False, use_dictionary=False)


def statistics_table(rows: list[dict], data_schema: pa.Schema, row_count: int,
                     statistics: list[udf.Statistic] = (),
                     errors: dict[str, dict[str, str]] | None = None) -> pa.Table:
    """The built-in statistics, then each user-defined statistic's value and state columns
    (core.schema.STATISTIC_KEY describes the value's), then the plugins' errors (statistic ->
    column -> error) in the schema metadata."""
    table = pa.Table.from_pylist(rows, schema=schema.STATISTICS_SCHEMA)
    for s in statistics:
        values = udf.value_array(s, [r.get(s.name) for r in rows])
        described = json.dumps({"plugin": s.plugin, "merge": s.merge.name,
                                "type": str(values.type)})
        table = table.append_column(pa.field(s.name, values.type, metadata={
            schema.STATISTIC_KEY: described}), values)
        state = udf.state_column(s.name)
        table = table.append_column(pa.field(state, pa.binary()),
                                    pa.array([r.get(state) for r in rows], pa.binary()))
    meta = {DATA_SCHEMA_KEY: encode_schema(data_schema), ROW_COUNT_KEY: str(row_count)}
    if errors:
        meta[schema.STATISTIC_ERRORS_KEY] = json.dumps(errors)
    return table.replace_schema_metadata(meta)


def with_sibling_sizes(statistics: pa.Table, sizes: dict[str, int]) -> pa.Table:
    """A partition's statistics recording the sizes of the files written beside it (name ->
    bytes, as their writers return them: no request asks the store)."""
    return statistics.replace_schema_metadata({**(statistics.schema.metadata or {}),
                                               schema.SIBLING_SIZES_KEY: json.dumps(sizes)})


def intact(directory: Store, sizes: dict[str, int] | None = None) -> str | None:
    """Why a partition's statistics cannot be trusted (None if they can): a statistics.parquet
    that does not read whole (its pages' checksums included), or a file beside it whose size is
    not the recorded one (truncated, replaced, missing). FileNotFoundError if there are none.
    `sizes`: the directory's files as a listing found them, instead of asking for each."""
    try:
        statistics = directory.read_parquet(STATISTICS)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        return f"{STATISTICS} is corrupt ({e})"
    recorded = json.loads((statistics.schema.metadata or {}).get(schema.SIBLING_SIZES_KEY, b"{}"))
    for name, size in recorded.items():
        if (directory.size(name) if sizes is None else sizes.get(name)) != size:
            return f"{name} is not the size recorded ({size} bytes)"
    return None


# keys a LIST returns; a partition directory holds three
LISTED_KEYS = 1_000


def reusable(layout: Layout, changed: list[DataFile], published: int) -> list[bool]:
    """Whether each changed file's partition statistics, written by an earlier compute that
    did not publish them, can be trusted; ones that cannot are deleted, to be computed again.
    The partitions are listed once when that takes fewer requests than asking after each
    changed file (its statistics.parquet's GET, its siblings' HEADs): a first compute of
    10,000 files lists an empty directory instead of asking 10,000 times for files never
    written; a new file on a large table asks for its own."""
    where = [f"{f.rel_path}/{f.fingerprint}" for f in changed]
    listed = layout.partition_files(set(where)) \
        if 3 * (published + len(changed)) / LISTED_KEYS + 1 < len(changed) else None

    def one(data_file: DataFile, where: str) -> bool:
        sizes = None if listed is None else listed.get(where, {})
        if sizes is not None and STATISTICS not in sizes:
            return False                         # never computed, or not to the end
        directory = layout.partition(data_file.rel_path, data_file.fingerprint)
        try:
            reason = intact(directory, sizes)
        except FileNotFoundError:
            return False
        if reason is not None:
            directory.delete_dir()
        return reason is None

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, changed, where))


def statistic_errors(statistics: pa.Table) -> dict[str, dict[str, str]]:
    """statistic -> column -> why the user-defined statistic failed there."""
    return json.loads((statistics.schema.metadata or {}).get(schema.STATISTIC_ERRORS_KEY, b"{}"))


def plugin_states(statistics: pa.Table) -> list[dict[str, bytes | None]]:
    """Per row (column) of a statistics table: statistic -> encoded state, None where the
    statistic failed; statistics without a state there (no values) are left out."""
    errors = statistic_errors(statistics)
    names = [n for n in statistics.column_names if udf.is_state_column(n)]
    columns = statistics["column"].to_pylist()
    out = [{} for _ in columns]
    for state in names:
        name = state[:-len(udf.STATE_SUFFIX)]
        failed = errors.get(name, {})
        for row, column, value in zip(out, columns, statistics[state].to_pylist()):
            if column in failed:
                row[name] = None
            elif value is not None:
                row[name] = value
    return out


def row_count_of(statistics: pa.Table) -> int:
    return int(statistics.schema.metadata[ROW_COUNT_KEY])


def data_schema_of(statistics: pa.Table) -> pa.Schema:
    return decode_schema(statistics.schema.metadata[DATA_SCHEMA_KEY].decode())


# -- frequencies.parquet

def retexted(rows: pa.Table, source: pa.DataType, target: pa.DataType) -> pa.Table:
    """Frequency rows whose values are text of `source` values, as the `target` type spells
    them (a column int32 in a file and float64 in the table; timestamp[ms] in timestamp[us])."""
    if source == target or not rows.num_rows:       # an empty file may type a column null
        return rows
    k = rows.schema.get_field_index("value")
    return rows.set_column(k, "value", ty.retext(rows["value"], source, target))


def values_as(store: Store, column: str, table_type: pa.DataType) -> pa.Array:
    """The column's values in a partition's frequencies, as the table's type spells them (a
    partition may type the column otherwise: a timestamp[ms] file's "...05.000" is
    "...05.000000" in a timestamp[us] table)."""
    rows = read_frequencies(store, [column])
    own = decode_schema(store.open_parquet(STATISTICS).schema_arrow.metadata[
        DATA_SCHEMA_KEY].decode())
    if column in own.names:
        rows = retexted(rows, own.field(column).type, table_type)
    return rows["value"].combine_chunks()


def frequencies_table(per_column: list[tuple[str, pa.Table]]) -> pa.Table:
    """A partition's rows of (column, value, frequency): columns in the order given, then
    decreasing frequency, ties in the order the values first appear in the data file, which
    is deterministic and spares sorting text (the table level orders ties by value)."""
    per_column = [(name, counts) for name, counts in per_column if counts.num_rows]
    if not per_column:
        return schema.FREQUENCIES_SCHEMA.empty_table()
    lengths = [counts.num_rows for _, counts in per_column]
    k = np.repeat(np.arange(len(per_column)), lengths)
    values = pa.concat_arrays([c["value"].combine_chunks() for _, c in per_column])
    frequency = np.concatenate([c["frequency"].to_numpy() for _, c in per_column])
    order = np.lexsort((-frequency, k))        # stable: ties keep their order of appearance
    names = pa.array([name for name, _ in per_column], pa.string())
    return pa.table({"column": names.take(k[order]), "value": values.take(order),
                     "frequency": frequency[order]}, schema=schema.FREQUENCIES_SCHEMA)


def column_runs(table: pa.Table, fields: tuple[str, ...] | None = None
                ) -> Iterator[tuple[str, pa.Table]]:
    """(column, its rows) of a table of frequencies in file order, one run per column: slices
    of the table (of its `fields` only, if given), not copies."""
    names = table["column"].combine_chunks()
    if not len(names):
        return
    if fields is not None:
        table = table.select(list(fields))
    runs = pc.run_end_encode(names)
    start = 0
    for name, end in zip(runs.values.to_pylist(), runs.run_ends.to_numpy()):
        yield name, table.slice(start, end - start)
        start = end


def write_frequencies(out: Store, table: pa.Table) -> int:
    """A column's list starts a row group of its own unless it is short: reading one column's
    frequencies reads its row groups only (picked from the row-group statistics of `column`),
    and short lists share groups of up to FREQUENCIES_ROW_GROUP rows (a table of a thousand
    short columns writes a few groups, not a thousand). A list's values are distinct, so
    where long lists hold most rows the values get no dictionary (lineitem's partition
    list: 20 ms to write and 1.5 MB without, 30 ms and 1.9 MB with); short lists sharing a
    group repeat their values from column to column, and keep it (a 1,000-column
    partition's: 41 ms and 1.15 MB with, 51 ms and 1.91 MB without)."""
    page = schema.FREQUENCIES_ROW_GROUP
    runs = list(column_runs(table))
    in_long = sum(rows.num_rows for _, rows in runs if rows.num_rows * 4 >= page)
    with out.parquet_writer(FREQUENCIES, schema.FREQUENCIES_SCHEMA, codec_for(table),
                            use_dictionary=["column", "frequency"]
                            if in_long * 2 > table.num_rows else True) as writer:
        short: list[pa.Table] = []
        for _, rows in runs:
            long = rows.num_rows * 4 >= page
            if short and (long or sum(t.num_rows for t in short) + rows.num_rows > page):
                writer.write_table(pa.concat_tables(short), row_group_size=page)
                short = []
            if long:
                writer.write_table(rows, row_group_size=page)
            else:
                short.append(rows)
        if short:
            writer.write_table(pa.concat_tables(short), row_group_size=page)
    return writer.file_size


def read_frequencies(store: Store, columns: list[str]) -> pa.Table:
    """(column, value, frequency) rows of `columns`, in file order."""
    return FrequencyFile(store).read(columns)


class FrequencyFile:
    """A frequencies.parquet, opened once: its row groups' column names (the min and max of
    each group's `column`) are read once, for every column asked after."""

    def __init__(self, store: Store):
        self.parquet = store.open_parquet(FREQUENCIES)
        meta = self.parquet.metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        self._rows = [g.num_rows for g in groups]
        self._names = [_names_of(g.column(0).statistics) for g in groups]
        # as written: groups in column order, each after the last; then a name's groups
        # are found by bisection, not by a look at every group
        self._lows = [b[0] for b in self._names] if None not in self._names and all(
            a[1] <= b[0] for a, b in zip(self._names, self._names[1:])) else None

    def groups(self, columns: list[str]) -> list[int]:
        """The row groups that may hold any of `columns`: by the min and max of their
        `column` values (all, where a group has none)."""
        if self._lows is not None and len(columns) == 1:
            name = columns[0]
            first = max(bisect.bisect_left(self._lows, name) - 1, 0)
            end = bisect.bisect_right(self._lows, name)
            return [i for i in range(first, end) if self._names[i][1] >= name]
        names = sorted(columns)
        return [i for i, bounds in enumerate(self._names)
                if bounds is None or _any_between(names, *bounds)]

    def read(self, columns: list[str]) -> pa.Table:
        groups = self.groups(columns)
        table = self.parquet.read_row_groups(groups) if groups \
            else schema.FREQUENCIES_SCHEMA.empty_table()
        return table.filter(pc.is_in(table["column"], pa.array(columns, pa.string())))

    def top(self, column: str, k: int) -> pa.Table:
        """(value, frequency) of a column's k most frequent values: its first rows, read
        from the first row groups that hold them."""
        parts, held = [], 0
        for rows in self.batches(column)[1]():
            if held >= k:
                break
            parts.append(rows)
            held += rows.num_rows
        return pa.concat_tables(parts).slice(0, k) if parts \
            else schema.FREQUENCIES_SCHEMA.empty_table().select(["value", "frequency"])

    def batches(self, column: str
                ) -> tuple[int, Callable[[Collection[int] | None], Iterator[pa.Table]]]:
        """A column's (value, frequency) rows a row group at a time, in file order, as often
        as asked (all, or the `only` ordinals of them), and how many rows those row groups
        hold (the column's, unless it shares them)."""
        groups = self.groups([column])
        alone = {i for i in groups if self._names[i] == (column, column)}
        parquet = self.parquet

        def batches(only: Collection[int] | None = None) -> Iterator[pa.Table]:
            for i in groups if only is None else [groups[k] for k in sorted(only)]:
                if i in alone:          # the column's alone: its names need no decoding
                    yield parquet.read_row_group(i, columns=["value", "frequency"])
                    continue
                rows = parquet.read_row_group(i)
                yield rows.filter(pc.equal(rows["column"], column)).select(["value",
                                                                            "frequency"])
        return sum(self._rows[i] for i in groups), batches


def _names_of(stats) -> tuple[str, str] | None:
    """The first and last column name a row group holds; None when its statistics do not
    say."""
    if stats is None or not stats.has_min_max:
        return None
    return stats.min, stats.max


def _any_between(names: list[str], low: str, high: str) -> bool:
    """Whether one of the (sorted) `names` is in [low, high]."""
    first = bisect.bisect_left(names, low)
    return first < len(names) and names[first] <= high


# -- as JSON

def column_statistics(table: pa.Table) -> list[dict]:
    """statistics.parquet rows as JSON-ready dicts (sketches and plugin states left out).
    A non-finite float (the mean of +inf and -inf) is null, so that a number field is a
    number or null in every row: nan_count, min and max say why."""
    keep = light_columns(table.column_names)
    rows = table.select(keep).to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


def light_columns(names: list[str]) -> list[str]:
    """Of statistics.parquet's columns, all but sketches, Bloom filters and plugin states."""
    return [n for n in names if n not in schema.SKETCH_NAMES and not udf.is_state_column(n)]


def filter_columns(table: pa.Table, columns: list[str] | None) -> pa.Table:
    if not columns:
        return table
    return table.filter(pc.is_in(table["column"], pa.array(columns, pa.string())))
