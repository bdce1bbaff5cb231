"""What `lakestats report` shows, gathered from one version of a table's statistics: the
table's summary and freshness, and per column its statistics (as `show --json` prints them),
a histogram, the top frequencies, quantiles, each data file's bounds and nulls (drift), and
the share of files a point and a 1% range predicate would skip (pruning power). Plain JSON
data; lakestats.profile.page draws it.

Cost: one read of the version's statistics, histograms and partition index (a batch of
columns at a time), and per column its top frequencies and its quantiles (from a complete
frequency list when the table keeps one, which reads that list; else from the sketch)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.api import TableStatistics
from lakestats.core import types as ty
from lakestats.core.schema import index_column_name
from lakestats.metastore.layout import Layout
from lakestats.metastore.manifest import version_names
from lakestats.core.errors import StatisticsMissing
from lakestats.status import table_status

TOP = 10                     # frequencies shown per column
BARS = 48                    # a histogram's bars (the stored bins, regrouped)
DRIFT_POINTS = 240           # a drift chart's points; past it, neighbouring files share one
QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
PERCENTILES = [k / 100 for k in range(101)]   # probe predicates at the column's percentiles
# quantiles exact from a complete frequency list of at most this many values (or from one of
# any length when the column has no sketch), else from the sketch: a profile of a table's
# every column would otherwise read every value of every list
EXACT_QUANTILES_MAX = 4_096
INDEX_BATCH = 64             # columns read from the partition index at a time


def gather(stats: TableStatistics, columns: list[str] | None = None,
            time_zone: str | None = None,
            progress: Callable[[int, int], None] | None = None) -> dict:
    """The report of one version (the one `stats` opened); `columns`: only these."""
    summary = stats.show(columns)
    reader = stats.reader
    status = table_status(stats.uri, reader, time_zone)
    entries = reader.partition_index([], ["size", "row_count"])
    file_rows = entries["row_count"].to_numpy()
    names = [c["column"] for c in summary["columns"]]
    out = {"table": stats.uri, "version": reader.version,
           "versions": _versions(stats), "format": summary.get("format"),
           "snapshot": summary.get("snapshot"), "row_count": summary["row_count"],
           "files": summary["partitions"], "bytes": int(pc.sum(entries["size"]).as_py() or 0),
           "missing": summary["missing"], "created": status["created"],
           "checked": status["checked"], "current": status["current"],
           "pending_count": status["pending_count"], "lag": status["lag"],
           "exact": status["exact"], "columns": []}
    table_schema = reader.schema()
    for start in range(0, len(names), INDEX_BATCH):
        batch = names[start:start + INDEX_BATCH]
        index = reader.partition_index(batch, [])
        for row in summary["columns"][start:start + INDEX_BATCH]:
            name = row["column"]
            field = table_schema.field(name)
            struct = index[index_column_name(table_schema.get_field_index(name))]
            out["columns"].append(_column(stats, row, field, struct.combine_chunks(), file_rows))
            if progress:
                progress(len(out["columns"]), len(names))
    return out


def _versions(stats: TableStatistics) -> list[str]:
    """The version directories up to the one shown (a table keeps its earlier versions)."""
    shown = stats.reader.version
    return sorted(v for v in version_names(Layout(stats.root)) if v <= shown)


def _column(stats: TableStatistics, row: dict, field: pa.Field, struct: pa.StructArray,
            file_rows: np.ndarray) -> dict:
    name = row["column"]
    out = {"statistics": row, "histogram": None, "top": None, "quantiles": None,
           "drift": None, "pruning": None}
    if row["histogram_exponent"] is not None:
        out["histogram"] = _histogram(stats.reader.histogram_table(name)[name])
    if row["distinct_count"] is not None:
        top = stats.frequencies(name, top=TOP)
        out["top"] = {"exact": top["exact"], "values": top["values"]}
    qs = sorted({*QUANTILES, *PERCENTILES})
    try:
        found = stats.reader.quantiles(name, qs, longest_list=EXACT_QUANTILES_MAX)
    except StatisticsMissing:       # no sketch, no complete list: nothing to say
        found = None
    if found is not None:
        by_q = dict(zip(qs, found["quantiles"]))
        out["quantiles"] = {"exact": found["exact"], "rank_error": found.get("rank_error"),
                            "values": [{"q": q, "value": by_q[q]} for q in QUANTILES]}
    if "min" in [f.name for f in struct.type]:
        low, high = pc.struct_field(struct, "min"), pc.struct_field(struct, "max")
        out["drift"] = _drift(low, high, struct, file_rows)
        if found is not None:
            out["pruning"] = _pruning(low, high, [by_q[q] for q in PERCENTILES], field)
    return out


def _histogram(cells: pa.ChunkedArray) -> dict | None:
    """The stored bins (histograms.parquet's typed cells) regrouped into at most BARS bars of
    equal width: {"low", "high"} (canonical text of the ends) and "counts"."""
    cells = cells.combine_chunks().drop_null()
    if not len(cells):
        return None
    lower, upper = _numbers(cells.field("lower")), _numbers(cells.field("upper"))
    counts = cells.field("count").to_numpy(zero_copy_only=False)
    ends = {"low": ty.to_text(cells.field("lower")[:1])[0].as_py(),
            "high": ty.to_text(cells.field("upper")[-1:])[0].as_py()}
    finite = np.isfinite(lower) & np.isfinite(upper)
    if not finite.any():
        return {**ends, "counts": [int(counts.sum())]}
    first, last = lower[finite].min(), upper[finite].max()
    middle = np.clip(np.nan_to_num(lower, nan=first) / 2 + np.nan_to_num(upper, nan=last) / 2,
                     first, last)      # an infinite end (floats' -inf, +inf bins) is an edge
    bars = min(BARS, len(cells))
    bar = np.minimum((_unit(middle, first, last) * bars).astype(np.int64), bars - 1)
    grouped = np.bincount(bar, weights=counts, minlength=bars)
    return {**ends, "counts": [int(c) for c in grouped]}


def _unit(values: np.ndarray, first: float, last: float) -> np.ndarray:
    """Values' places in [first, last] as [0, 1] (infinities at the ends, NaN kept); halved
    first, as the span between float64's extremes overflows."""
    with np.errstate(invalid="ignore"):
        return np.clip((values / 2 - first / 2) / ((last / 2 - first / 2) or 1.0), 0, 1)


def _numbers(values: pa.Array) -> np.ndarray:
    """Values as float64 positions on an axis: numbers as they are, temporal values as their
    ticks."""
    if ty.kind_of(values.type) == ty.TEMPORAL:
        values = ty.integers(values)
    return values.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)


def _axis(low: pa.Array, high: pa.Array) -> tuple[np.ndarray, np.ndarray, str]:
    """Both bounds on one axis: linear for numbers and temporal values, else their dense
    rank among all the bounds ("rank"); NaN where a file has none."""
    if ty.kind_of(low.type) in (*ty.NUMERIC_KINDS, ty.TEMPORAL):
        return _numbers(low), _numbers(high), "linear"
    both = pc.rank(pa.concat_arrays([low, high]), tiebreaker="dense")
    ranks = both.to_numpy(zero_copy_only=False).astype(np.float64)
    ranks[pa.concat_arrays([low, high]).is_null().to_numpy(zero_copy_only=False)] = np.nan
    return ranks[:len(low)], ranks[len(low):], "rank"


def _drift(low: pa.Array, high: pa.Array, struct: pa.StructArray, rows: np.ndarray) -> dict:
    """Each file's (path order) low and high bound on [0, 1] of the column's range, and its
    share of nulls (`rows`: each file's); past DRIFT_POINTS files, neighbours share a point
    (the lowest low, the highest high, their nulls over their rows)."""
    lows, highs, scale = _axis(low, high)
    nulls = pc.fill_null(pc.struct_field(struct, "null_count"), 0).to_numpy(
        zero_copy_only=False)
    # a file written before the column was added holds it as nulls in every row
    nulls = np.where(struct.is_valid().to_numpy(zero_copy_only=False), nulls, rows)
    n = len(lows)
    starts = np.linspace(0, n, min(n, DRIFT_POINTS) + 1).astype(np.int64)[:-1]
    lows, highs = np.fmin.reduceat(lows, starts), np.fmax.reduceat(highs, starts)
    rows_in, nulls_in = np.add.reduceat(rows, starts), np.add.reduceat(nulls, starts)
    finite = np.concatenate([lows[np.isfinite(lows)], highs[np.isfinite(highs)]])
    bottom, top = (finite.min(), finite.max()) if len(finite) else (0.0, 1.0)
    share = np.divide(nulls_in, rows_in, out=np.zeros(len(starts)), where=rows_in > 0)
    def position(bound: np.ndarray) -> list:        # infinities at the ends, NaN: none
        return [None if v != v else float(v) for v in _unit(bound, bottom, top).round(4)]
    return {"files": n, "points": len(starts), "scale": scale, "low": position(lows),
            "high": position(highs), "nulls": [round(float(s), 4) for s in share]}


def _pruning(low: pa.Array, high: pa.Array, texts: list[str | None],
             field: pa.Field) -> dict | None:
    """The mean share of files that `column = v` and `column BETWEEN a AND b` skip by their
    min and max alone, v each percentile from the 1st to the 99th, [a, b] each pair of
    consecutive percentiles (`texts`: the 0th to the 100th), so that the probes weigh values
    by their rows, as queries tend to. A file without bounds (its values all null or NaN) is
    skipped by both."""
    if any(t is None for t in texts):
        return None
    probes = ty.from_text(texts, field.type).cast(low.type)
    both = pa.concat_arrays([low, high, probes])
    ranks = pc.rank(both, tiebreaker="dense").to_numpy(
        zero_copy_only=False)
    n = len(low)
    bounded = pc.and_(low.is_valid(), high.is_valid()).to_numpy(zero_copy_only=False)
    lows, highs = np.sort(ranks[:n][bounded]), np.sort(ranks[n:2 * n][bounded])
    at = ranks[2 * n:]
    # a file holds v when low <= v and not high < v; it meets [a, b] when low <= b and not
    # high < a (high < a implies low <= b)
    points = at[1:-1]
    held = np.searchsorted(lows, points, "right") - np.searchsorted(highs, points, "left")
    met = np.searchsorted(lows, at[1:], "right") - np.searchsorted(highs, at[:-1], "left")
    return {"point": round(float(1 - held.mean() / n), 4),
            "range": round(float(1 - met.mean() / n), 4), "points": len(points),
            "ranges": len(at) - 1}
