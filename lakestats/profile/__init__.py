"""`lakestats report`: one version of a table's statistics as a profile people look at, one
self-contained HTML page (gather: the data; page: the HTML)."""
from __future__ import annotations

from collections.abc import Callable, Sequence


def html_report(uri: str, *, columns: Sequence[str] | None = None, version: str | None = None,
                snapshot: str | None = None, stats_root: str | None = None,
                time_zone: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> str:
    """One version of the table's statistics (the published one by default) as one
    self-contained HTML page, what `lakestats report` writes: the table's summary and
    freshness, and per column its statistics, histogram, top frequencies, quantiles, drift
    across files and pruning power. `progress(done, total)` follows the columns."""
    from lakestats import api
    from lakestats.profile.gather import gather
    from lakestats.profile.page import page
    stats = api.open(uri, stats_root=stats_root, snapshot=snapshot, version=version)
    return page(gather(stats, list(columns) if columns else None, time_zone, progress))
