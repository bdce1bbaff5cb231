"""Join pruning at plan time: data-induced predicates (diPs) pushed through a query's joins.

A diP is a necessary condition on a join column, read off the statistics of the partitions of
the other side that are still to be read: the union of their range-sets (core.range_sets) for
numbers and times, their exact values for strings (value sets, or frequencies, while they
total at most STRING_VALUES_MAX) or else their [min, max]. A receiving partition is kept iff
one of its ranges meets the diP (and, for exact string values, its value set, Bloom filter or
frequencies may hold one); NaN meets NaN, as in Spark's joins. A diP is never executed: it
only removes partitions from scans.

The schedule (pruning.join_graph gives the graph): on a forest, from a root of least height, a
bottom-up pass (each scan to its parent) then a top-down pass; with a cycle, or an endpoint
fed by a UNION, rounds over every edge until nothing more is pruned (at most MAX_ROUNDS).
Partitions without statistics (--allow-partial) are always read, and their scan sends no diP.
"""
from __future__ import annotations

import functools
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from core import range_sets
from core import schema as statistics_schema
from core import types as ty
from core.range_sets import RangeSet
from metastore import files
from metastore.layout import Layout
from metastore.reader import TableStatistics
from metastore.store import Store
from pruning.batch import evaluate_all
from pruning.join_graph import NOT_IN, JoinGraph, Origin, extract, parse, tables_named
from pruning.predicate import StatsView
from pruning.views import bounds, candidates

MAX_ROUNDS = 8                  # rounds over a cyclic graph's edges
MAX_DIP_RANGES = 65_536         # a diP's ranges, compacted beyond (a superset: still sound)
STRING_VALUES_MAX = 100_000     # distinct strings a diP lists exactly; beyond, [min, max] zones
FREQUENCY_READS_MAX = 32        # partitions whose frequencies a string diP reads for its values
RANGE_VIEWS_MAX = 4_096         # ranges a local predicate is evaluated over, per column


@dataclass
class TablePruning:
    """One table of the query: its files and what each step kept (the JSON contract)."""
    name: str
    uri: str
    paths: list[str]
    sizes: np.ndarray
    exists: np.ndarray                 # false: in the statistics' version, gone from the table
    after_local: int = 0
    dips: list[dict] = field(default_factory=list)
    kept_mask: np.ndarray | None = None

    def as_json(self) -> dict:
        kept, here = self.kept_mask, self.exists
        return {"kept": [p for p, k in zip(self.paths, kept) if k],
                "skipped": [p for p, k, e in zip(self.paths, kept, here) if e and not k],
                "files_before": int(here.sum()), "files_after_local": self.after_local,
                "files_after_dips": int(kept.sum()), "bytes_before": int(self.sizes[here].sum()),
                "bytes_after": int(self.sizes[kept].sum()), "dips": self.dips}


@dataclass
class QueryPruning:
    tables: dict[str, TablePruning]
    graph: JoinGraph
    schedule: _Schedule
    # each table reference of the query text -> the files its scans read (relative paths)
    reads: dict[int, list[str]]
    planning_ms: float

    def as_json(self) -> dict:
        return {"tables": {n: t.as_json() for n, t in self.tables.items()},
                "planning_ms": round(self.planning_ms, 3)}


def prune_query(sql: str, tables: dict[str, str], stats_roots: dict[str, str] | None = None
                ) -> QueryPruning:
    """The files each table of `sql` must be read from (tables: name -> table URI)."""
    started = time.perf_counter()
    tree = parse(sql)
    stats = {name: TableStatistics(Layout.of_table(tables[name], (stats_roots or {}).get(name)).uri)
             for name in tables_named(tree, list(tables))}
    graph = extract(tree, {name: s.schema().names for name, s in stats.items()})
    wanted: dict[str, set[str]] = {name: set() for name in stats}
    for scan in graph.scans:
        wanted[scan.table] |= {c.name for p in scan.predicates for c in p.find_all(exp.Column)}
    for edge in graph.edges:
        for origin in edge.left + edge.right:
            wanted[graph.scans[origin.scan].table].add(origin.column)
    sources = {name: _Table(name, tables[name], s, wanted[name]) for name, s in stats.items()}
    masks = {scan.id: sources[scan.table].local(scan.predicates) for scan in graph.scans}
    for table in sources.values():
        table.report.after_local = _kept_files(table, graph, masks)
    schedule = _Schedule(graph, sources, masks)
    schedule.run()
    reads: dict[int, np.ndarray] = {}
    for scan in graph.scans:
        seen = reads.get(scan.reference)
        reads[scan.reference] = masks[scan.id] if seen is None else seen | masks[scan.id]
    for table in sources.values():
        table.report.kept_mask = _files_mask(table, graph, masks)
    planning_ms = (time.perf_counter() - started) * 1000
    return QueryPruning(
        {n: t.report for n, t in sources.items()}, graph, schedule,
        {ref: [p for p, k in zip(sources[_table_of(graph, ref)].report.paths, mask) if k]
         for ref, mask in reads.items()}, planning_ms)


def _table_of(graph: JoinGraph, reference: int) -> str:
    return next(s.table for s in graph.scans if s.reference == reference)


def _files_mask(table: _Table, graph: JoinGraph, masks: dict[int, np.ndarray]) -> np.ndarray:
    """The files some scan of the table reads (every file when no scan reads it: the query
    names it only where it is not read, such as an unused common table expression)."""
    mine = [masks[s.id] for s in graph.scans if s.table == table.name]
    return np.logical_or.reduce(mine) if mine else table.exists.copy()


def _kept_files(table: _Table, graph: JoinGraph, masks: dict[int, np.ndarray]) -> int:
    return int(_files_mask(table, graph, masks).sum())


# -- a table's partitions and their join columns


@dataclass(eq=False)                # hashed by identity: keys() caches per column
class _Column:
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
    def keys(self, as_objects: bool) -> tuple[np.ndarray, np.ndarray]:
        return _numpy(self.lows, as_objects), _numpy(self.highs, as_objects)


class _Table:
    def __init__(self, name: str, uri: str, stats: TableStatistics, wanted: set[str]):
        self.name, self.stats, self.schema = name, stats, stats.schema()
        columns = sorted(c for c in wanted if c in self.schema.names)
        self.index = stats.partition_index(columns)
        self.parts, self.member_all = candidates(stats, set(wanted), self.index)
        self._taint(uri, stats)
        self.columns: dict[str, _Column | None] = {}

    def _taint(self, uri: str, stats: TableStatistics) -> None:
        """Files the statistics do not describe as they are now are tainted: always read,
        and their table sends no diP. They are the files --allow-partial left without
        statistics and, in a plain directory (whose files a listing tells), files new or
        changed since the version; files gone since are never read."""
        missing = sorted(stats.manifest.get("missing", {}))
        published = [p.path for p in self.parts]
        sizes = [p.size for p in self.parts] + [_size(uri, m) for m in missing]
        stale = np.zeros(len(published), bool)
        exists = np.ones(len(published), bool)
        new = []
        if stats.manifest.get("format", "parquet") == "parquet":
            now = {f.rel_path: f for f in Store(uri).list_files()}
            exists = np.array([p in now for p in published], bool)
            stale = np.array([p in now and now[p].fingerprint != part.fingerprint
                              for p, part in zip(published, self.parts)], bool)
            new = sorted(set(now) - set(published) - set(missing))
            sizes += [now[p].size for p in new]
        extra = len(missing) + len(new)
        self.always = np.concatenate([stale, np.ones(extra, bool)])
        self.exists = np.concatenate([exists, np.ones(extra, bool)])
        self.partial = bool(self.always.any())
        self.report = TablePruning(self.name, uri, published + missing + new,
                                   np.array(sizes, np.int64), self.exists)

    def local(self, predicates: list[exp.Expression]) -> np.ndarray:
        """The partitions the scan's local predicates keep (files without statistics too):
        by min and max, then by each numeric or temporal column's range-set."""
        mask = np.ones(len(self.report.paths), bool)
        if predicates:
            node = exp.and_(*predicates) if len(predicates) > 1 else predicates[0]
            flags = evaluate_all(node, [p.view for p in self.parts], self.member_all)
            keep = np.array([f.true for f in flags], bool)
            partial = keep & np.array([f.false or f.null for f in flags], bool)
            for column in sorted({c.name for c in node.find_all(exp.Column)}):
                keep &= self._by_ranges(node, column, partial)
            mask[:len(self.parts)] = keep
        return (mask | self.always) & self.exists

    def _by_ranges(self, node: exp.Expression, column: str, keep: np.ndarray) -> np.ndarray:
        """May the predicate be true in some range of the column's range-set? Each range of
        the `keep` partitions is evaluated as a partition of its own (the other columns as
        the partition has them): a row that satisfies it lies in one of them. Past
        RANGE_VIEWS_MAX ranges (a column the layout does not cluster) the range-sets are left
        unused: a bound on planning time."""
        col = self.column(column)
        out = np.ones(len(keep), bool)
        if col is None or ty.kind_of(col.type) not in ty.BINNED_KINDS:
            return out
        ranges = np.flatnonzero(keep[col.owners])
        if len(ranges) > RANGE_VIEWS_MAX:
            return out
        owners = col.owners[ranges]
        lows, highs = bounds(col.lows.take(pa.array(ranges)), col.highs.take(pa.array(ranges)))
        views = []
        for i, low, high in zip(owners.tolist(), lows, highs):
            view = self.parts[i].view
            views.append(StatsView({**view.stats, column: {**view.stats[column], "low": low,
                                                          "high": high}},
                                   view.row_count, view.table_columns))
        hits = np.array([f.true for f in evaluate_all(node, views, lambda *_: None)], bool)
        ranged = np.zeros(len(keep), bool)
        ranged[owners] = True
        out[ranged] = False
        out[owners[hits]] = True
        return out

    def column(self, name: str) -> _Column | None:
        if name not in self.columns:
            self.columns[name] = self._column(name) if name in self.schema.names else None
        return self.columns[name]

    def _column(self, name: str) -> _Column | None:
        arrow_type = self.schema.field(name).type
        if ty.kind_of(arrow_type) in (ty.OTHER, ty.BINARY, ty.BOOLEAN):
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
        return _Column(arrow_type, lows, highs, owners.astype(np.int64),
                       counts("nan_count") > 0, nulls, counts("distinct_count"))

    def values(self, column: str, asked: np.ndarray) -> list | None:
        """The exact distinct values of a string column in the asked partitions: the index's
        value sets, else each partition's frequencies; None past STRING_VALUES_MAX values or
        FREQUENCY_READS_MAX reads."""
        col = self.column(column)
        if col.distinct[asked].sum() > STRING_VALUES_MAX:
            return None
        parts = [self.parts[i] for i in np.flatnonzero(asked)]
        held = [p.values(column) if column in p.view.stats else [] for p in parts]
        unlisted = [p for p, h in zip(parts, held) if h is None]
        if len(unlisted) > FREQUENCY_READS_MAX:
            return None
        found = {v["value"] for h in held if h for v in h}
        for part in unlisted:
            found.update(files.read_frequencies(part.directory, [column])["value"].to_pylist())
        return sorted(found)


def _size(table_uri: str, rel_path: str) -> int:
    found = Store(table_uri).data_file(rel_path)
    return found.size if found else 0


def _numpy(values: pa.Array, as_objects: bool) -> np.ndarray:
    if as_objects or not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)
                          or pa.types.is_temporal(values.type)):
        return range_sets.values(np.array(values.to_pylist() + [None], dtype=object)[:-1])
    return values.to_numpy(zero_copy_only=False)


def _comparable(a: pa.DataType, b: pa.DataType) -> bool | None:
    """How two join columns' values compare: natively (False), as Python objects (True: an
    integer against a decimal, exactly), or not at all (None: no diP between them)."""
    ka, kb = ty.kind_of(a), ty.kind_of(b)
    numbers = (ty.INTEGER, ty.FLOAT, ty.DECIMAL)
    if ka in numbers and kb in numbers:
        return not (ka == kb and ka in (ty.INTEGER, ty.FLOAT))
    if ka == kb == ty.STRING:
        return False
    if ka == kb == ty.TEMPORAL and type(a) is type(b) and getattr(a, "tz", None) is None \
            and getattr(b, "tz", None) is None or ka == kb == ty.TEMPORAL and \
            pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.tz and b.tz:
        return False
    return None


# -- the schedule


@dataclass
class _Dip:
    ranges: RangeSet
    nan: bool
    values: list | None = None        # exact string values, when known


class _Schedule:
    def __init__(self, graph: JoinGraph, tables: dict[str, _Table], masks: dict[int, np.ndarray]):
        self.graph, self.tables, self.masks = graph, tables, masks

    def run(self) -> None:
        if self.graph.is_tree():
            self._tree()
        else:
            for _ in range(MAX_ROUNDS):
                if not self.round():
                    break

    def round(self) -> bool:
        """Every edge's diPs, once each way it allows; True if one pruned."""
        return any([self.send(a, b, kind) for e in self.graph.edges for a, b, kind in e.sends()])

    def _tree(self) -> None:
        links: dict[int, dict[int, list]] = {s.id: {} for s in self.graph.scans}
        for e in self.graph.edges:
            for a, b, kind in e.sends():
                links[a[0].scan].setdefault(b[0].scan, []).append((a, b, kind))
                links[b[0].scan].setdefault(a[0].scan, [])
        done: set[int] = set()
        for start in links:
            if start in done or not links[start]:
                continue
            component = _reach(links, start)
            done |= set(component)
            root = min(component, key=lambda v: (max(_reach(links, v).values()), v))
            order = _reach(links, root)           # breadth first: parents before children
            parent = {}
            for v in order:
                for w in links[v]:
                    if w not in parent and w != root and order[w] == order[v] + 1:
                        parent[w] = v
            for v in reversed(order):             # bottom-up
                if v != root:
                    for a, b, kind in links[v].get(parent[v], []):
                        self.send(a, b, kind)
            for v in order:                       # top-down
                if v != root:
                    for a, b, kind in links[parent[v]].get(v, []):
                        self.send(a, b, kind)

    def send(self, sources: tuple[Origin, ...], targets: tuple[Origin, ...], kind: str) -> bool:
        """One diP from `sources` (their union) to each target; True if it pruned."""
        dips = [self.dip(o, t, kind) for o in sources for t in targets]
        if any(d is None for d in dips):
            return False
        pruned = False
        for j, target in enumerate(targets):
            parts = [dips[i * len(targets) + j] for i in range(len(sources))]
            dip = _Dip(range_sets.union([d.ranges for d in parts]), any(d.nan for d in parts),
                       None if any(d.values is None for d in parts) else
                       sorted({v for d in parts for v in d.values}))
            pruned |= self.apply(dip, target, kind, sources)
        return pruned

    def dip(self, source: Origin, target: Origin, kind: str) -> _Dip | None:
        table = self.tables[self.graph.scans[source.scan].table]
        receiving = self.tables[self.graph.scans[target.scan].table]
        col, other = table.column(source.column), receiving.column(target.column)
        if table.partial or col is None or other is None:
            return None
        as_objects = _comparable(col.type, other.type)
        if as_objects is None:
            return None
        kept = self.masks[source.scan][:len(table.parts)]
        if kind == NOT_IN and col.nulls[kept].any():
            return None        # a null on the left of NOT IN: an emptied right side answers
        lows, highs = col.keys(as_objects)
        chosen = kept[col.owners]
        ranges = range_sets.compact(range_sets.union(
            [RangeSet(lows[chosen], highs[chosen])]), MAX_DIP_RANGES)
        values = table.values(source.column, kept) \
            if ty.kind_of(col.type) == ty.STRING else None
        if values is not None:
            ranges = range_sets.compact(RangeSet.of((v, v) for v in values), MAX_DIP_RANGES) \
                if values else range_sets.empty(ranges.lows)
        return _Dip(ranges, bool(col.nan[kept].any()), values)

    def apply(self, dip: _Dip, target: Origin, kind: str, sources: tuple[Origin, ...]) -> bool:
        scan = self.graph.scans[target.scan]
        table = self.tables[scan.table]
        col = table.column(target.column)
        n = len(table.parts)
        source_type = self.tables[self.graph.scans[sources[0].scan].table].column(
            sources[0].column).type
        lows, highs = col.keys(_comparable(source_type, col.type))
        hit = range_sets.overlaps(lows, highs, col.owners, n, dip.ranges) | (dip.nan & col.nan)
        mask = self.masks[scan.id]
        if dip.values is not None and dip.values:
            asked = np.flatnonzero(mask[:n] & hit)
            may = table.member_all(target.column, dip.values, asked)
            if may is not None:
                hit[asked] = may
        if kind == NOT_IN:
            hit |= col.nulls               # a null on the right makes NOT IN null: read it
        hit |= table.always[:n]
        before = int(mask.sum())
        mask[:n] &= hit
        after_files = _kept_files(table, self.graph, self.masks)
        table.report.dips.append({
            "from": "|".join(dict.fromkeys(self.graph.scans[o.scan].table for o in sources)),
            "column": target.column, "files_after": after_files})
        return int(mask.sum()) < before


def _reach(links: dict[int, dict[int, list]], start: int) -> dict[int, int]:
    """Scans linked to `start`, breadth first, with their distance."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in links[v]:
            if w not in dist:
                dist[w] = dist[v] + 1
                queue.append(w)
    return dist
