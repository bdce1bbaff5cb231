"""Join pruning at plan time: data-induced predicates (diPs) pushed through a query's joins.

A diP is a necessary condition on a join column, read off the statistics of the partitions of
the other side that are still to be read: the union of their range-sets (core.range_sets) for
numbers and times, their exact values for strings (value sets, or frequencies, within the
bounds of pruning.join_tables) or else their [min, max]. A receiving partition is kept iff
one of its ranges meets the diP (and, for exact string values, its value set, Bloom filter or
frequencies may hold one); NaN meets NaN, as in Spark's joins. A diP is never executed: it
only removes partitions from scans.

The schedule (pruning.join_extract gives the graph): on a forest, from a root of least height,
a bottom-up pass (each scan to its parent) then a top-down pass; with a cycle, or an endpoint
fed by a UNION, rounds over every edge until nothing more is pruned (at most MAX_ROUNDS).
Files the statistics do not describe are always read, and their table sends no diP.
"""
from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from lakestats.core import range_sets
from lakestats.core import types as ty
from lakestats.core.range_sets import RangeSet
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import NotPublished, StatisticsReader
from lakestats.pruning.join_extract import extract, parse, tables_named, unnamed
from lakestats.pruning.join_graph import NOT_IN, JoinGraph, Origin
from lakestats.pruning.join_tables import JoinTable, TablePruning, comparable, table_schema
from lakestats.pruning.plan import check
from lakestats.pruning.predicate import PredicateError
from lakestats.pruning.temporal import session_zone

MAX_ROUNDS = 8                  # rounds over a cyclic graph's edges
MAX_DIP_RANGES = 65_536         # a diP's ranges, compacted beyond (a superset: still sound)


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


def prune_query(sql: str, tables: dict[str, str], stats_roots: dict[str, str] | None = None,
                others: Callable[[list[str]], dict[str, list[str]]] | None = None,
                assume_current: bool = False, time_zone: str | None = None,
                check_predicates: bool = True, hive_types: bool = True) -> QueryPruning:
    """The files each table of `sql` must be read from (tables: name -> table URI). `others`
    looks up the further tables the query names (names -> their column names, for those it
    knows), such as a Spark catalog's: read as they are, they prune nothing.
    `assume_current`: trust that the statistics describe the tables as they are now
    (pruning.freshness); `time_zone`: the one timestamps without a zone are read in (Spark's
    session time zone; None: UTC); `check_predicates`: refuse a scan's predicate as `prune`
    does (pruning.validate); without, such a predicate prunes nothing, and the engine that
    runs the query judges it; `hive_types`: as `prune`'s."""
    with session_zone(time_zone):
        return _prune_query(sql, tables, stats_roots, others, assume_current, check_predicates,
                            hive_types)


def _prune_query(sql: str, tables: dict[str, str], stats_roots: dict[str, str] | None,
                 others: Callable[[list[str]], dict[str, list[str]]] | None,
                 assume_current: bool, check_predicates: bool, hive_types: bool
                 ) -> QueryPruning:
    started = time.perf_counter()
    tree = parse(sql)
    known = others(unnamed(tree, list(tables))) if others else {}
    stats = {name: _published(tables[name], (stats_roots or {}).get(name))
             for name in tables_named(tree, list(tables), known)}
    schemas = {name: table_schema(tables[name], s) for name, s in stats.items()}
    graph = extract(tree, {name: schema.names for name, schema in schemas.items()}, known)
    wanted: dict[str, set[str]] = {name: set() for name in stats}
    for scan in graph.scans:
        wanted[scan.table] |= {c.name for p in scan.predicates for c in p.find_all(exp.Column)}
    for edge in graph.edges:
        for origin in edge.left + edge.right:
            wanted[graph.scans[origin.scan].table].add(origin.column)
    sources = {name: JoinTable(name, tables[name], s, schemas[name], wanted[name],
                               assume_current, hive_types)
               for name, s in stats.items()}
    for scan in graph.scans:        # refused as `prune` refuses it: as Spark would
        if check_predicates and scan.predicates:
            source = sources[scan.table]
            try:
                check(exp.and_(*scan.predicates), None, source.schema, source.hive)
            except PredicateError as e:
                e.args = (f"table {scan.table}: {e}",)
                raise
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


def _published(uri: str, stats_root: str | None) -> StatisticsReader | None:
    """The table's published statistics; None when it has none yet (it is then read whole,
    with a warning naming it)."""
    try:
        return StatisticsReader(Layout.of_table(uri, stats_root).uri)
    except NotPublished as e:
        warnings.warn(f"{e}: every file of {uri} is read", stacklevel=3)
        return None


def _table_of(graph: JoinGraph, reference: int) -> str:
    return next(s.table for s in graph.scans if s.reference == reference)


def _files_mask(table: JoinTable, graph: JoinGraph, masks: dict[int, np.ndarray]) -> np.ndarray:
    """The files some scan of the table reads (every file when no scan reads it: the query
    names it only where it is not read, such as an unused common table expression)."""
    mine = [masks[s.id] for s in graph.scans if s.table == table.name]
    return np.logical_or.reduce(mine) if mine else table.exists.copy()


def _kept_files(table: JoinTable, graph: JoinGraph, masks: dict[int, np.ndarray]) -> int:
    return int(_files_mask(table, graph, masks).sum())


# -- the schedule


@dataclass
class _Dip:
    ranges: RangeSet
    nan: bool
    values: list | None = None        # exact string values, when known


class _Schedule:
    def __init__(self, graph: JoinGraph, tables: dict[str, JoinTable], masks: dict[int, np.ndarray]):
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
        made: dict[tuple, _Dip | None] = {}       # each source's diP once per way of comparing
        per_target = []
        for target in targets:
            parts = []
            for source in sources:
                how = self._comparison(source, target)
                key = (source, how)
                if key not in made:
                    made[key] = None if how is None else self.dip(source, how, kind)
                parts.append(made[key])
            if any(d is None for d in parts):
                return False
            per_target.append(parts)
        pruned = False
        for target, parts in zip(targets, per_target):
            dip = _Dip(range_sets.union([d.ranges for d in parts]), any(d.nan for d in parts),
                       None if any(d.values is None for d in parts) else
                       sorted({v for d in parts for v in d.values}))
            pruned |= self.apply(dip, target, kind, sources)
        return pruned

    def _comparison(self, source: Origin, target: Origin) -> str | None:
        """How the two join columns compare (join_tables.comparable); None: no diP."""
        col = self.tables[self.graph.scans[source.scan].table].column(source.column)
        other = self.tables[self.graph.scans[target.scan].table].column(target.column)
        return None if col is None or other is None else comparable(col.type, other.type)

    def dip(self, source: Origin, how: str, kind: str) -> _Dip | None:
        table = self.tables[self.graph.scans[source.scan].table]
        col = table.column(source.column)
        if table.partial:
            return None
        kept = self.masks[source.scan][:len(table.parts)]
        if kind == NOT_IN and col.nulls[kept].any():
            return None        # a null on the left of NOT IN: an emptied right side answers
        lows, highs = col.keys(how)
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
        lows, highs = col.keys(self._comparison(sources[0], target))
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
