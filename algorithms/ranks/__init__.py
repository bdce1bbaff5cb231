"""Exact ranks by distributed sort, in a fixed number of steps, and ranks.parquet.

 1. every worker sorts its partition's column into (value, count) runs     steps.sample
 2-4. the coordinator merges the workers' equi-depth samples and cuts the value range into
    ranges holding about the same number of values, a few per worker. (Equal-width
    histograms would do for numbers only; equi-depth samples balance skewed data and work
    for strings, which have no width. A value repeated for most rows is a single run, so heavy
    duplicates cannot unbalance memory.)
 5. every worker scatters its runs by range through the exchange            steps.scatter
 6. every range owner merges and sorts its slices                           steps.merge
 7. range totals give each range's offset; local ranks become global ones as the coordinator
    streams the ranges, in order, into ranks.parquet                        driver
 8. quantiles are lookups in ranks.parquet (metastore.reader)

The coordinator holds the samples and one range's ranks at a time, never a whole column.
Order is Arrow's: numbers numerically with NaN after +inf, temporal values by instant,
decimals numerically, strings and binary bytewise.
"""
from __future__ import annotations

from lakestats.fleet import protocol


def channel(column: int, name: str) -> str:
    """The exchange channels of the job's column k: sorted, samples, splitters, range, ranked."""
    return protocol.channel("ranks", column, name)
