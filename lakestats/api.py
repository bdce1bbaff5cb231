"""The Python API, re-exported by `lakestats`: compute a table's statistics, open them, plan a
pruned read. Each lookup returns the object the matching command prints with --json (the
command line is built on these), typed by lakestats/schemas."""
from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from lakestats.core.errors import UsageError
from lakestats.core.settings import Settings

if TYPE_CHECKING:
    from lakestats.fleet.invokers import Invoker
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.monostore.compute import Progress
    from lakestats.monostore.report import Report
    from lakestats.pruning.plan import PruneResult


class RanksRefused(UsageError):
    """The version is published, but the ranks asked for were not computed: a column the
    version does not have. `report` is the published version's."""

    def __init__(self, report: Report, reason: str):
        super().__init__(reason)
        self.report = report


@contextlib.contextmanager
def coordinator(settings: Settings | None = None,
                invoker: str = "local") -> Iterator[tuple[Settings, Invoker]]:
    """Settings with a running Redis (settings.redis_url, or an embedded one), and an invoker:
    "local" (worker processes), "lambda" (settings.steps_function) or "spark"."""
    from lakestats.infra.redis_server import redis_url
    settings = settings or Settings.from_env(os.environ)
    # the invoker first: local workers import the steps while Redis and the caller start
    if invoker == "spark":
        from lakestats.spark_bridge.invoker import SparkInvoker, local_session
        workers = SparkInvoker(local_session(settings.spark_master, settings.workers),
                               settings.workers)
    else:
        from lakestats.fleet.invokers import make_invoker
        workers = make_invoker(invoker, settings.workers, settings.steps_function)
    with workers, redis_url(settings.redis_url, settings.redis_password) as url:
        yield dataclasses.replace(settings, redis_url=url), workers


def compute(uri: str, *, settings: Settings | None = None, invoker: str = "local",
            stats_root: str | None = None, ranks: Sequence[str] = (),
            format: str = "auto", snapshot: str | None = None, as_of: str | None = None,
            catalog: str | None = None, table_name: str | None = None,
            catalog_name: str = "default", create: bool = False,
            progress: Progress | None = None,
            notice: Callable[[str], None] | None = None) -> Report:
    """Compute and publish a new version of the table's statistics, reusing every partition
    that did not change; with `ranks`, the exact ranks of those columns too. `settings`
    defaults to the environment's (Settings.from_env); `format` (auto, parquet, iceberg, delta,
    hudi), `snapshot`, `as_of` (ISO 8601) and `catalog`/`table_name`/`catalog_name` (an
    Iceberg catalog) select a snapshot, as compute's flags do (default: the format found, its
    current snapshot).
    Raises NoSuchTable when nothing is at `uri` (unless `create`), ComputeFailed (its
    `report` says what failed) when nothing was published, RanksRefused for an unknown rank
    column (the version is published)."""
    from lakestats.formats import Selection
    from lakestats.monostore.compute import compute as publish
    from lakestats.monostore.compute import table_exists
    selection = Selection(format, snapshot, as_of, catalog, table_name, catalog_name)
    table_exists(uri, create, selection)     # before any worker or Redis starts
    with coordinator(settings, invoker) as (settings, workers):
        report = publish(uri, workers, settings, stats_root=stats_root, progress=progress,
                         notice=notice, selection=selection, create=create)
        if ranks and report.version:
            stats = open(uri, stats_root=stats_root)
            try:                     # the columns are known once the version is
                for column in ranks:
                    stats.check_column(column)
            except UsageError as e:
                raise RanksRefused(report, f"ranks: {e}; version {report.version} has no "
                                           "ranks") from None
            report.ranks = stats.compute_ranks(list(ranks), settings=settings,
                                               invoker=workers, progress=progress)
    return report


def open(uri: str, *, stats_root: str | None = None, snapshot: str | None = None,
         version: str | None = None) -> TableStatistics:
    """The published statistics of the table at `uri` (of a table format's `snapshot`, or of
    an earlier `version` such as "v000003" or "3", when given). Opening reads nothing: the
    first lookup reads the version published then, and the object answers from that version
    from then on, consistently (open again for a newer one; `status()` always looks at the
    table as it is, against the version asked for, if any)."""
    return TableStatistics(uri, stats_root, snapshot, version)


def prune(uri: str, where: str | None = None, limit: int | None = None,
          order_by: str | None = None, *, stats_root: str | None = None,
          assume_current: bool = False, time_zone: str | None = None) -> PruneResult:
    """The data files a query `SELECT * FROM t WHERE where [ORDER BY order_by] LIMIT limit`
    must read, from the statistics and the table as it is now (files landed since are
    `unknown` and kept; `assume_current` skips that listing). `where` is Spark SQL;
    timestamps without a zone are read in `time_zone` (Spark's session time zone; default
    UTC)."""
    from lakestats.pruning import prune as plan
    return plan(open(uri, stats_root=stats_root).root, where, limit, order_by, table_uri=uri,
                assume_current=assume_current, time_zone=time_zone)


class TableStatistics:
    """The statistics lakestats published for one table: `show`, `partitions`, `histogram`,
    `frequencies`, `where`, `quantiles`, `rank`, and `status` (the changes to the table
    since). Values are given and returned as canonical text (`lakestats show` prints the
    same); unknown columns raise UsageError."""

    def __init__(self, uri: str, stats_root: str | None = None, snapshot: str | None = None,
                 version: str | None = None):
        from lakestats.metastore.layout import Layout
        if snapshot and version:
            raise UsageError("give a snapshot or a version, not both")
        self.uri = uri
        self.stats_root = stats_root
        self.snapshot = snapshot
        self.version_asked = _version_name(version) if version else None
        self.root = Layout.of_table(uri, stats_root).uri
        self._reader: StatisticsReader | None = None

    def __repr__(self) -> str:
        return f"lakestats.open({self.uri!r})"

    @property
    def reader(self) -> StatisticsReader:
        """The published version, read once (StatisticsMissing if there is none)."""
        if self._reader is None:
            self._reader = self._read()
        return self._reader

    def _read(self) -> StatisticsReader:
        """The version asked for (by snapshot or by name), else the published one, read anew."""
        from lakestats.metastore.reader import NotPublished, StatisticsReader
        if self.snapshot:
            return StatisticsReader.of_snapshot(self.root, self.snapshot)
        if self.version_asked is None:
            return StatisticsReader(self.root)
        published = StatisticsReader(self.root)
        latest = published.version
        if self.version_asked == latest:
            return published
        try:
            if self.version_asked > latest:
                raise NotPublished(self.version_asked)
            return StatisticsReader(self.root, self.version_asked)
        except NotPublished:
            raise NotPublished(f"{self.root}: no version {self.version_asked} (the published "
                               f"one is {latest})") from None

    @property
    def version(self) -> str:
        return self.reader.version

    def show(self, columns: Sequence[str] | None = None, partition: str | None = None) -> dict:
        """Summary statistics of the table (or of one data file, by its path in the table;
        one computed but not yet published too): `lakestats show --json`."""
        from lakestats.metastore.reader import (NotPublished, StatisticsNotFound,
                                                StatisticsReader)
        columns = list(columns) if columns else None
        try:
            return self.reader.summary(partition, columns)
        except NotPublished:
            if not partition:
                raise
            from lakestats.formats import open_snapshot
            found = {f.rel_path: f for f in open_snapshot(self.uri).files}.get(
                partition.strip("/"))
            if found is None:
                raise StatisticsNotFound(f"{partition}: no such data file in {self.uri}") \
                    from None
            return StatisticsReader.computed_partition(self.uri, self.stats_root, found,
                                                       columns)

    def partitions(self) -> dict:
        """Every data file of the version, and the files it left out: `partitions --json`."""
        return {"version": self.version, "partitions": self.reader.partitions(),
                "missing": self.reader.manifest.missing}

    def status(self, time_zone: str | None = None) -> dict:
        """The published version, the changes to the table since (files landed, rewritten or
        removed, and how long the oldest has waited) and the statistics a change left
        inexact, since which version: `lakestats status --json`, times in ISO 8601 in
        `time_zone` (default UTC). Read anew at each call. A table without statistics yet is
        no error: its `version` is None and every data file is pending; nothing at the
        table's path raises TableNotFound."""
        from lakestats.metastore.reader import NotPublished
        from lakestats.status import table_status
        try:
            reader = self._read()
        except NotPublished:
            if self.snapshot or self.version_asked:
                raise
            reader = None
        return table_status(self.uri, reader, time_zone)

    def histogram(self, column: str, partition: str | None = None, low: str | None = None,
                  high: str | None = None) -> dict:
        """The column's histogram; with `low`/`high`, the bins that overlap [low, high]."""
        self.check_column(column)
        return {"column": column,
                "bins": self.reader.histogram(column, partition, low, high)}

    def frequencies(self, column: str, partition: str | None = None,
                    top: int | None = None) -> dict:
        """Every value's exact frequency, most frequent first (the `top` first)."""
        self.check_column(column)
        return self.reader.frequency_list(column, partition, top)

    def where(self, column: str, value: str) -> dict:
        """The data files that hold `value` in `column`, from the version's value index."""
        self.check_column(column, value)
        return self.reader.partitions_with(column, value)

    def quantiles(self, column: str, qs: Sequence[float], exact: bool = False, *,
                  settings: Settings | None = None, invoker: str = "local",
                  progress: Progress | None = None) -> dict:
        """Quantiles of the column: exact from its frequencies when the table keeps them all,
        else from its sketch with the rank error; `exact` takes them from the exact ranks
        when the frequencies do not hold every value (a distributed sort of the column,
        computed once per version when missing)."""
        self.check_column(column)
        if exact:
            found = None if self.has_ranks(column) else \
                self.reader.frequency_quantiles(column, list(qs))
            if found is None:
                self.ensure_ranks(column, settings=settings, invoker=invoker, progress=progress)
                found = self.reader.exact_quantiles(column, list(qs))
            out = {"exact": True, "quantiles": found}
        else:
            out = self.reader.quantiles(column, list(qs))
        result = {"column": column, "exact": out["exact"],
                  "quantiles": [{"q": q, "value": v} for q, v in zip(qs, out["quantiles"])]}
        if "rank_error" in out:
            result["rank_error"] = out["rank_error"]
        return result

    def rank(self, column: str, value: str, *, settings: Settings | None = None,
             invoker: str = "local", progress: Progress | None = None) -> dict:
        """How many non-null values of the column are smaller than `value`, and its count:
        exact, from the version's ranks (computed once per version when missing)."""
        self.check_column(column, value)          # before the distributed sort
        self.ensure_ranks(column, settings=settings, invoker=invoker, progress=progress)
        return self.reader.rank(column, value)

    def has_ranks(self, column: str) -> bool:
        return column in self.reader.ranked_columns()

    def ensure_ranks(self, column: str, **how) -> None:
        """Compute the column's exact ranks unless the version has them."""
        if not self.has_ranks(column):
            self.compute_ranks([column], **how)

    def compute_ranks(self, columns: list[str], *, settings: Settings | None = None,
                      invoker: str | Invoker = "local",
                      progress: Progress | None = None) -> dict[str, dict]:
        """Add the columns' exact ranks to the version (a distributed sort); per column, what
        it took (rows, ranges, bytes exchanged, seconds)."""
        from lakestats.algorithms.ranks.driver import compute_ranks
        if isinstance(invoker, str):
            with coordinator(settings, invoker) as (settings, workers):
                ranked = compute_ranks(self.root, workers, settings, columns, progress=progress)
        else:
            ranked = compute_ranks(self.root, invoker, settings, columns, progress=progress)
        self._reader = None           # the manifest now records the ranks
        return ranked.columns

    def check_column(self, column: str, value: str | None = None) -> None:
        """A usage error unless the version has the column and, with `value` (canonical
        text), `value` reads as the column's type: checked before any work starts."""
        from lakestats.metastore.reader import StatisticsNotFound
        known = self.reader.schema().names
        if column not in known:
            from lakestats.pruning.validate import unknown_column   # the planner: 0.1 s
            raise UsageError(unknown_column(column, known))
        if value is not None:
            try:
                self.reader.typed(value, self.reader.column_type(column))
            except StatisticsNotFound as e:
                raise UsageError(f"{column}: {e}") from None


def _version_name(text: str) -> str:
    """A version's directory name from "v000003", "3" or "v3"."""
    from lakestats.metastore.manifest import version_name
    digits = text[1:] if text[:1] in "vV" else text
    if not digits.isdigit() or int(digits) < 1:
        raise UsageError(f"version {text!r}: expected a version such as 3 or v000003 "
                         "(lakestats status names the published one)")
    return version_name(int(digits))
