"""Which data files a query must read: filter, LIMIT and top-k pruning over the published
statistics.

- filter: a partition is skipped iff the predicate cannot be true in it (pruning.evaluator),
  fully matching iff it can be neither false nor null.
- LIMIT k: rows certainly matching come from fully matching partitions (all their rows) and,
  for single-column predicates, from the histogram bins wholly inside the predicate's range.
  If they reach k, the fewest partitions that reach k are kept, largest first; otherwise all
  partitions that may match, fully matching first.
- ORDER BY c [DESC] LIMIT k: a boundary is set before any scan, the largest value v such that k
  rows certainly matching have c >= v (DESC; ASC mirrors): a fully matching partition holds
  one row at its max and all its non-null rows at or above its min, a partially matching one
  its certain rows at or above its min. Partitions whose max is below the boundary (strictly)
  are skipped; the rest are read by max descending. NaN sorts above every number; Spark puts
  nulls first in ASC order, so ASC with nulls in play prunes by the filter only.

All of it over the files the statistics describe as they are now (pruning.freshness): files
gone since are not read, files landed or rewritten since are `unknown` and always read, last.
"""
from __future__ import annotations

import contextlib
import functools
import gc
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from sqlglot import expressions as E

from lakestats.core import types as ty
from lakestats.core.binning import edge_type
from lakestats.metastore import files
from lakestats.metastore.histograms import histogram_bins
from lakestats.metastore.layout import HISTOGRAMS
from lakestats.metastore.reader import StatisticsReader
from lakestats.pruning.evaluator import constant_range, evaluate
from lakestats.pruning.freshness import Freshness, freshness, list_ahead
from lakestats.pruning.predicate import (PredicateError, StatsView, columns_of,
                                         columns_opaque, parse, parse_order,
                                         struct_fields_opaque)
from lakestats.pruning.temporal import session_zone
from lakestats.pruning.validate import UnresolvedColumn, unknown_column, validate
from lakestats.pruning.views import Candidate, Matching, Partitions, membership_of


@dataclass
class PruneResult:
    kept: list[str] = field(default_factory=list)             # in scan order
    skipped: list[str] = field(default_factory=list)
    fully_matching: list[str] = field(default_factory=list)   # by the predicate alone
    unknown: list[str] = field(default_factory=list)          # newer than the statistics: kept
    freshness: Freshness | None = field(default=None, compare=False)   # what was planned against

    def as_json(self) -> dict:
        out = {"kept": self.kept, "skipped": self.skipped, "fully_matching": self.fully_matching,
               "unknown": self.unknown}
        if self.freshness is not None:
            out["version"] = self.freshness.version
            out["assume_current"] = self.freshness.assumed_current
        return out


def prune(stats_root: str | StatisticsReader, where: str | None = None, limit: int | None = None,
          order_by: str | None = None, *, table_uri: str | None = None,
          assume_current: bool = False, time_zone: str | None = None,
          hive_types: bool = True) -> PruneResult:
    """`stats_root`: the table's statistics root, or its statistics already open; `table_uri`:
    the table they describe (by default the one the version records); `time_zone`: the one
    timestamps without a zone are read in (Spark's session time zone; None: UTC);
    `hive_types`: whether the reader infers Hive directory values' types (Spark's
    partitionColumnTypeInference; if not, they are text, and nothing is pruned by them)."""
    with session_zone(time_zone), _collector_paused():
        return _prune(stats_root, where, limit, order_by, table_uri, assume_current, hive_types)


@contextlib.contextmanager
def _collector_paused():
    """A plan makes a few objects per file of the table (listed, typed, fingerprinted), none
    in a cycle, so reference counting frees them; Python's cycle collector would walk them
    again and again as they are made (a fifth of a plan at 10,000 files)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _prune(stats_root: str | StatisticsReader, where: str | None, limit: int | None,
           order_by: str | None, table_uri: str | None, assume_current: bool,
           hive_types: bool) -> PruneResult:
    stats = stats_root if isinstance(stats_root, StatisticsReader) else StatisticsReader(stats_root)
    uri = table_uri or stats.manifest.table
    listed = list_ahead(uri, stats.manifest, assume_current)
    schema = stats.schema()
    node = parse(where) if where else None
    order = parse_order(order_by)
    if limit is not None and limit < 0:
        raise PredicateError(f"limit {limit}: must be at least 0")
    wanted = (columns_of(node) if node else set()) | ({order[0]} if order else set())
    partitions = Partitions.of(stats, wanted, None)
    hive = partitions.hive_names - set(schema.names)
    try:
        check(node, order, schema, hive)
    except UnresolvedColumn as e:
        landed = freshness(uri, stats.manifest, partitions.index, assume_current, listed).unknown
        if landed:
            files = f"{len(landed):,} files" if len(landed) > 1 else "a file"
            e.args = (f"{e}; {files} landed or changed since version {stats.version}, which "
                      "may hold it: `lakestats compute` describes them",)
        raise
    spark_typed = partitions.typed_by_spark(hive_types)
    if node is not None:
        node = columns_opaque(struct_fields_opaque(node, set(schema.names) | hive), spark_typed)
    if order and order[0].lower() in {c.lower() for c in spark_typed}:
        limit = None                # the order is Spark's: every matching file is read
    paths = partitions.paths
    flags = None
    if node is not None:    # over every partition: the membership test knows them by position
        flags = evaluate(node, partitions, membership_of(partitions))
    now = freshness(uri, stats.manifest, partitions.index, assume_current, listed)
    described = now.described_all(paths)
    may = fully = described
    if flags is not None:
        may = flags.true & described
        fully = may & ~flags.false & ~flags.null
    matching = Matching(partitions, may, flags)
    result = PruneResult(fully_matching=[paths[i] for i in np.flatnonzero(fully).tolist()],
                         unknown=now.unknown, freshness=now)
    if order and limit is not None:
        kept = _top_k(matching, node, order, limit, stats, schema)
    elif limit is not None:
        kept = _limit(matching, node, limit, stats, schema)
    else:
        kept = range(len(matching))
    result.kept = [paths[i] for i in matching.at[np.asarray(kept, np.int64)].tolist()] \
        + now.unknown
    held = set(result.kept)
    result.skipped = [paths[i] for i in np.flatnonzero(described).tolist()
                      if paths[i] not in held]
    return result


def check(node: E.Expression | None, order: tuple[str, bool] | None, schema: pa.Schema,
          hive: set[str]) -> None:
    """PredicateError unless Spark would accept the predicate and the order's column over
    this schema and these directory columns (pruning.validate)."""
    if node is not None:
        validate(node, schema, hive)
    if order and order[0] not in schema.names and order[0] not in hive:
        raise UnresolvedColumn(unknown_column(order[0], schema.names + sorted(hive)))


# -- rows that certainly match


def _certain_rows(p: Candidate, node, stats: StatisticsReader, schema: pa.Schema) -> int:
    """A lower bound of the rows matching in p: all of them when fully matching; else, for a
    predicate on one column, the rows of the values (exact frequencies, when the partition
    keeps them small enough to read: no Bloom filter) or of the histogram bins in which the
    predicate is surely true."""
    if not p.exact:
        return 0
    if p.fully:
        return p.rows
    names = columns_of(node) if node is not None else set()
    column = next(iter(names)) if len(names) == 1 else None
    if column not in schema.names:
        return 0
    wanted = _equal_values(node)
    held = None if wanted is None else p.held_count(column, wanted)
    if held is not None:            # the value index's exact counts (0 without the column)
        return held
    if p.stats(column) is None:
        return 0
    arrow_type = schema.field(column).type
    if p.values(column) is not None or not p.has_bloom(column):
        held = p.values(column)
        freq = pa.Table.from_pylist(held) if held is not None else \
            files.read_frequencies(p.directory, [column])
        values = ty.from_text(freq["value"], arrow_type).to_pylist()
        cells = [(v, v, n) for v, n in zip(values, freq["frequency"].to_pylist())]
    elif ty.kind_of(arrow_type) in ty.BINNED_KINDS:
        histograms = p.directory.read_parquet(HISTOGRAMS)
        if column not in histograms.column_names:          # no values in this partition
            return 0
        bins = histogram_bins(histograms, column)
        edges = ty.from_text([x for b in bins for x in (b["lower"], b["upper"])],
                             edge_type(arrow_type)).to_pylist()
        cells = [(edges[2 * i], edges[2 * i + 1], b["count"]) for i, b in enumerate(bins)]
    else:
        return 0
    if not cells:
        return 0
    views = []
    for low, high, count in cells:
        nan = isinstance(low, float) and low != low
        views.append(StatsView({column: {"row_count": count, "null_count": 0,
                                         "nan_count": count * nan, "low": None if nan else low,
                                         "high": None if nan else high}}, count, {column},
                               schema))
    flags = evaluate(node, views)      # each cell as a partition
    counts = np.array([count for _, _, count in cells], np.int64)
    return int(counts[~(flags.false | flags.null)].sum())


def _equal_values(node) -> list | None:
    """The values of `column = v` or `column IN (v, ...)`, none null or NaN: the rows holding
    them are the rows where it is true (pruning.views' value index counts them); None for any
    other predicate."""
    if isinstance(node, E.EQ):
        column, items = next(((c, [v]) for c, v in ((node.this, node.expression),
                                                     (node.expression, node.this))
                              if isinstance(c, E.Column)), (None, []))
    elif isinstance(node, E.In) and not node.args.get("query"):
        column, items = node.this, node.expressions
    else:
        return None
    if not isinstance(column, E.Column) or not items or any(x.find(E.Column) for x in items):
        return None
    ranges = [constant_range(x) for x in items]
    if not all(r.known and r.values and not r.nan and r.low == r.high for r in ranges):
        return None
    return [r.low for r in ranges]


# -- LIMIT


def _limit(m: Matching, node, k: int, stats: StatisticsReader, schema: pa.Schema) -> list[int]:
    """The matching partitions (positions in `m`) to read for LIMIT k, in scan order."""
    if k == 0:
        return []
    whole = np.flatnonzero(m.fully & m.exact)
    fully = whole[np.argsort(-m.rows[whole], kind="stable")].tolist()     # largest first
    reached = np.cumsum(m.rows[fully])
    if reached.size and reached[-1] >= k:
        return fully[:int(np.searchsorted(reached, k)) + 1]
    # not enough: partially matching partitions' certain rows, in scan order, until k
    total, certain = int(reached[-1]) if reached.size else 0, []
    partial = np.flatnonzero(~(m.fully & m.exact)).tolist()
    for j in partial:
        n = _certain_rows(m.candidate(j), node, stats, schema)
        if n:
            certain.append(j)
            total += n
            if total >= k:
                return fully + certain
    return fully + partial


# -- top-k


@functools.total_ordering
class _Key:
    """Order-column values as the sort sees them: NaN above every number; `reverse` turns
    ASC into DESC so that one algorithm serves both."""

    def __init__(self, value, nan: bool, reverse: bool):
        self.value, self.nan, self.reverse = value, nan, reverse

    def _cmp(self, other) -> int:
        a = (1, 0) if self.nan else (0, self.value)
        b = (1, 0) if other.nan else (0, other.value)
        c = (a > b) - (a < b)
        return -c if self.reverse else c

    def __eq__(self, other):
        return self._cmp(other) == 0

    def __lt__(self, other):
        return self._cmp(other) < 0


def _top_k(m: Matching, node, order: tuple[str, bool], k: int, stats: StatisticsReader,
           schema: pa.Schema) -> list[int]:
    """The matching partitions (positions in `m`) to read for ORDER BY ... LIMIT k, in scan
    order."""
    column, descending = order
    if k == 0:
        return []
    arrays = m.order_arrays(column)
    if arrays is not None:
        return _top_k_arrays(m, node, descending, k, stats, schema, arrays)
    candidates = m.candidates()
    where = {id(p): j for j, p in enumerate(candidates)}
    return [where[id(p)] for p in _top_k_one_by_one(candidates, node, order, k, stats, schema)]


def _top_k_one_by_one(candidates: list[Candidate], node, order: tuple[str, bool], k: int,
                      stats: StatisticsReader, schema: pa.Schema) -> list[Candidate]:
    """_top_k over each partition's bounds in Python: for bounds that are not arrays (a Hive
    column), and the reference _top_k_arrays is tested against."""
    column, descending = order
    spans = {}
    for p in candidates:
        s = p.stats(column)
        if s is None:
            return candidates            # a Hive column or a missing one: no bounds to use
        values = s["row_count"] - s["null_count"] - (s.get("nan_count") or 0) > 0
        nan = bool(s.get("nan_count"))
        if not descending and s["null_count"]:
            return candidates        # NULLS FIRST: nulls lead, no value boundary holds
        lo = _Key(s["low"], False, not descending) if values else _Key(None, True, not descending)
        hi = _Key(None, True, not descending) if nan else (
            _Key(s["high"], False, not descending) if values else None)
        top, bottom = (hi, lo) if descending else (lo, hi)   # the side the sort reaches first
        if not (values or nan):
            top = bottom = None
        spans[p.path] = (top, bottom, s["row_count"] - s["null_count"])
    # guaranteed rows at or beyond each threshold (in sort order), per contributing partition
    contributions = []
    for p in candidates:
        top, bottom, nonnull = spans[p.path]
        if top is None or not p.exact:
            continue
        if p.fully:
            contributions.append((top, bottom, nonnull))
        else:
            certain = _certain_rows(p, node, stats, schema) - (p.rows - nonnull)
            if certain > 0:
                contributions.append((bottom, bottom, certain))
    boundary = None
    for threshold in sorted((t for c in contributions for t in c[:2]), reverse=True):
        if sum(n if threshold <= bottom else 1 if threshold <= top else 0
               for top, bottom, n in contributions) >= k:
            boundary = threshold
            break
    kept = [p for p in candidates if boundary is None or (
        spans[p.path][0] is not None and not spans[p.path][0] < boundary)]
    # scan order: the partition the sort reaches first comes first, all-null ones last
    return sorted(kept, key=lambda p: (spans[p.path][0] is None,
                                       _Desc(spans[p.path][0]) if spans[p.path][0] else 0))


def _top_k_arrays(m: Matching, node, descending: bool, k: int, stats: StatisticsReader,
                  schema: pa.Schema, a: dict) -> list[int]:
    """_top_k over the partitions' arrays: bounds as ranks, which order as the bounds do
    (NaN above every number, one rank past them); "reached" keys grow the way the sort
    reaches rows (negated for ASC)."""
    if not a["held"].all() or (not descending and (a["nulls"] > 0).any()):
        return list(range(len(m)))  # a partition without the column; or NULLS FIRST
    nonnull = a["rows"] - a["nulls"]
    values, nan = nonnull - a["nan"] > 0, a["nan"] > 0
    some = values | nan                                   # a partition the sort reaches
    nan_rank = max(int(a["low"].max(initial=0)), int(a["high"].max(initial=0))) + 1
    low = np.where(values, a["low"], nan_rank)
    high = np.where(nan, nan_rank, a["high"])
    top, bottom = (high, low) if descending else (-low, -high)
    # guaranteed rows at or beyond each threshold, per contributing partition
    whole = some & m.exact & m.fully
    tops, bottoms, counts = [top[whole]], [bottom[whole]], [nonnull[whole]]
    for i in np.flatnonzero(some & m.exact & ~m.fully).tolist():
        certain = _certain_rows(m.candidate(i), node, stats, schema) - int(a["rows"][i]
                                                                           - nonnull[i])
        if certain > 0:
            tops.append(bottom[i:i + 1])
            bottoms.append(bottom[i:i + 1])
            counts.append(np.array([certain]))
    tops, bottoms, counts = map(np.concatenate, (tops, bottoms, counts))
    boundary = None
    if tops.size:
        thresholds = np.unique(np.concatenate([tops, bottoms]))[::-1]
        order = np.argsort(bottoms, kind="stable")
        below = np.concatenate([[0], np.cumsum(counts[order])])   # rows, by bottom
        at_b = np.searchsorted(bottoms[order], thresholds, side="left")
        rows_beyond = below[-1] - below[at_b]                  # all rows of bottom >= t
        reach = (tops.size - np.searchsorted(np.sort(tops), thresholds, side="left")) \
            - (bottoms.size - at_b)                            # one row of top >= t > bottom
        enough = np.flatnonzero(rows_beyond + reach >= k)
        if enough.size:
            boundary = thresholds[enough[0]]
    kept = np.arange(len(m)) if boundary is None else np.flatnonzero(some & (top >= boundary))
    # scan order: the partition the sort reaches first comes first, all-null ones last
    first = np.lexsort((np.where(some[kept], -top[kept], 0), ~some[kept]))
    return kept[first].tolist()


class _Desc:
    """Sorts keys largest first."""

    def __init__(self, key: _Key):
        self.key = key

    def __lt__(self, other):
        return other.key < self.key
