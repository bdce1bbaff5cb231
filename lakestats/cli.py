"""The `lakestats` command line."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import warnings

from lakestats.core.settings import names
from lakestats import arguments, lookup_process, render
from lakestats.arguments import EXIT_USAGE
from lakestats.errors import CliError, UsageError, is_usage, message_of
from lakestats.flags import coordinator, settings_of

EXIT_FAILED = 1
# commands that only read statistics: their process is set up for it (lakestats.lookup_process)
LOOKUPS = {"show", "partitions", "histogram", "frequencies", "prune", "prune-query",
           "quantiles", "rank", "where"}


def _stats_root(args) -> str:
    from lakestats.metastore.layout import Layout
    return Layout.of_table(args.table, args.stats_root).uri


def _open(args):
    from lakestats.metastore.reader import TableStatistics
    if getattr(args, "snapshot", None):
        return TableStatistics.of_snapshot(_stats_root(args), args.snapshot)
    return TableStatistics(_stats_root(args))


def _print_json(obj) -> None:
    # the typed contract of lakestats/schemas: a value that is not plain JSON (NaN, infinity,
    # an object) raises rather than printing as a token parsers reject or as a stray string
    print(json.dumps(obj, indent=2, allow_nan=False))


def cmd_compute(args) -> int:
    from lakestats.formats import Selection
    from lakestats.monostore.compute import compute, table_exists
    from lakestats.monostore.report import ComputeFailed
    selection = Selection(args.format, args.snapshot, args.as_of, args.catalog, args.table_name,
                          args.catalog_name)
    table_exists(args.table, args.create, selection)     # before any worker or Redis starts
    settings_of(args)                        # a bad setting fails before any progress shows
    with render.progress_bar("computing partitions", enabled=not args.quiet) as progress, \
            coordinator(args, args.invoker) as (settings, invoker):
        try:
            report = compute(args.table, invoker, settings, stats_root=args.stats_root,
                             progress=progress, notice=lambda message: print(
                                 f"lakestats: {message}", file=sys.stderr, flush=True),
                             selection=selection, create=args.create)
        except ComputeFailed as e:
            report, failure = e.report, str(e)
        else:
            failure = None
        ranks = unranked = None
        if args.ranks and report.version and not failure:
            from lakestats.algorithms.ranks.driver import compute_ranks
            from lakestats.metastore.reader import TableStatistics
            try:           # the columns are known once the version is
                published = TableStatistics(_stats_root(args))
                for column in names(args.ranks):
                    _column(published, column)
            except UsageError as e:
                unranked = UsageError(f"--ranks: {e}; version {report.version} has no ranks")
            else:
                ranks = compute_ranks(_stats_root(args), invoker, settings,
                                      list(names(args.ranks)), progress=progress)
    for reason in report.failed.values():
        print(f"lakestats: failed: {reason}", file=sys.stderr)
    for message in report.statistic_failures:
        print(f"lakestats: warning: {message}", file=sys.stderr)
    if args.json:
        _print_json({**report.as_json(), **({"ranks": ranks.columns} if ranks else {})})
    elif not args.quiet:
        render.compute_report(report)
    if failure:
        raise CliError(failure)
    if unranked:
        raise unranked
    return 0       # published; under --allow-partial, the failed files are reported above


def cmd_show(args) -> int:
    from lakestats.metastore.reader import NotPublished, TableStatistics
    columns = args.columns.split(",") if args.columns else None
    try:
        summary = _open(args).summary(args.partition, columns)
    except NotPublished:
        if not args.partition:
            raise
        summary = TableStatistics.computed_partition(args.table, args.stats_root,
                                                     args.partition, columns)
    if args.json:
        _print_json(summary)
    else:
        render.summary(summary)
    return 0


def cmd_partitions(args) -> int:
    stats = _open(args)
    parts = stats.partitions()
    if args.json:
        _print_json({"version": stats.version, "partitions": parts,
                     "missing": stats.manifest.get("missing", {})})
    else:
        render.partitions(parts, stats.manifest.get("missing", {}))
    return 0


def _range(text: str) -> tuple[str | None, str | None]:
    """LOW..HIGH (either end may be left out) as its two texts."""
    cuts = [i for i in range(len(text) - 1) if text.startswith("..", i)]
    if not cuts:
        raise UsageError(f"--range {text!r}: expected LOW..HIGH, e.g. -10..30 or 1995-01-01..")
    # "1.5..2" cuts once; of "1...2"'s cuts, the one leaving no dot at either side
    cut = next((i for i in cuts if not text[:i].endswith(".")
                and not text[i + 2:].startswith(".")), cuts[0])
    return text[:cut] or None, text[cut + 2:] or None


def cmd_histogram(args) -> int:
    low, high = _range(args.value_range) if args.value_range else (None, None)
    stats = _open(args)
    _column(stats, args.column)
    bins = stats.histogram(args.column, args.partition, low, high)
    if args.json:
        _print_json({"column": args.column, "bins": bins})
    else:
        render.histogram(args.column, bins, rows=args.rows)
    return 0


def cmd_frequencies(args) -> int:
    stats = _open(args)
    _column(stats, args.column)
    result = stats.frequency_list(args.column, args.partition, args.top)
    if args.json:
        _print_json(result)
    else:
        render.frequencies(result)
    return 0


def cmd_where(args) -> int:
    stats = _open(args)
    _column(stats, args.column, args.value)
    result = stats.partitions_with(args.column, args.value)
    if args.json:
        _print_json(result)
    else:
        counts = result["frequency_by_partition"]
        render.out.print(f"{args.column} = {result['value']}: {len(counts):,} partitions, "
                         f"{sum(counts.values()):,} rows")
        for path, n in counts.items():
            render.out.print(f"  {path}  {n:,}")
    return 0


def cmd_prune(args) -> int:
    from lakestats.pruning import prune
    result = prune(_stats_root(args), args.where, args.limit, args.order_by,
                   table_uri=args.table, assume_current=args.assume_current,
                   time_zone=args.time_zone)
    if args.json:
        _print_json(result.as_json())
    else:
        _notice(result.freshness.notice())
        render.pruning(result)
    return 0


def _notice(message: str | None) -> None:
    if message:
        print(f"lakestats: note: {message}", file=sys.stderr)


def cmd_prune_query(args) -> int:
    from lakestats.pruning.joins import prune_query
    tables = {}
    for item in args.table:
        name, sep, path = item.partition("=")
        if not (sep and name and path):
            raise UsageError(f"--table {item!r}: expected NAME=PATH")
        if name.lower() in {t.lower() for t in tables}:     # Spark's names ignore case
            raise UsageError(f"--table {name!r} is given twice")
        tables[name] = path
    query = args.sql
    if "\n" not in query and os.path.isfile(query):
        with open(query, encoding="utf-8") as f:
            query = f.read()
    elif query.strip().lower().endswith(".sql") and " " not in query.strip():
        raise UsageError(f"--sql {query!r}: no such file")
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        result = prune_query(query, tables, assume_current=args.assume_current,
                             time_zone=args.time_zone)
    for note in notes:                  # a table without statistics, read whole
        _notice(str(note.message))
    if args.json:
        _print_json(result.as_json())
    else:
        for name, table in result.tables.items():
            if table.freshness.notice():
                _notice(f"{name}: {table.freshness.notice()}")
        render.query_pruning(result.as_json())
    return 0


def cmd_manifests(args) -> int:
    from lakestats.formats import FormatError, Selection, manifest_statistics
    from lakestats.metastore.store import Store
    from lakestats.pruning.manifests import lookup
    stats = _open(args)
    if stats.manifest.get("format") != "iceberg":
        raise FormatError(f"{args.table}: manifest statistics are Iceberg's; this table's "
                          f"statistics describe a {stats.manifest.get('format', 'parquet')} table")
    if stats.manifest["snapshot"] is None:
        raise FormatError(f"{args.table}: the Iceberg table has no snapshot yet")
    columns = args.columns.split(",") if args.columns else None
    stored = manifest_statistics.stored(
        stats.layout, Store(args.table), Selection("iceberg", catalog=args.catalog,
                                                   table_name=args.table_name,
                                                   catalog_name=args.catalog_name),
        stats.manifest["snapshot"], stats.version)
    result = {"table": args.table, "format": "iceberg", "snapshot": stats.manifest["snapshot"],
              "version": stats.version, "partition_columns": stored.partition_columns,
              "field_ids": stored.field_ids}
    result["lookup"] = lookup(stored, columns, args.where)
    result["manifests"] = manifest_statistics.as_json(
        stored.read(columns), stored.table_schema, columns or stored.table_schema.names)
    if args.json:
        _print_json(result)
    else:
        render.manifests(result)
    return 0


def _column(stats, column: str, value: str | None = None) -> None:
    """A usage error unless the version has the column and, with VALUE, VALUE (canonical
    text) reads as the column's type: checked before any work starts."""
    from lakestats.metastore.reader import StatisticsNotFound
    known = stats.schema().names
    if column not in known:
        from lakestats.pruning.validate import unknown_column
        raise UsageError(unknown_column(column, known))
    if value is not None:
        try:
            stats.typed(value, stats.column_type(column))
        except StatisticsNotFound as e:
            raise UsageError(f"{column}: {e}") from None


def _ensure_ranks(args, stats) -> None:
    """Exact answers need the version's ranks: compute them on the spot when missing."""
    if args.column in stats.ranked_columns():
        return
    from lakestats.algorithms.ranks.driver import compute_ranks
    with render.progress_bar(f"exact ranks of {args.column} (distributed sort)") as progress, \
            coordinator(args) as (settings, invoker):
        compute_ranks(_stats_root(args), invoker, settings, [args.column], progress=progress)


def cmd_quantiles(args) -> int:
    stats = _open(args)
    _column(stats, args.column)
    if args.exact:
        _ensure_ranks(args, stats)
        out = {"exact": True, "quantiles": _open(args).exact_quantiles(args.column, args.q)}
    else:
        out = stats.quantiles(args.column, args.q)
    result = {"column": args.column, "exact": out["exact"],
              "quantiles": [{"q": q, "value": v} for q, v in zip(args.q, out["quantiles"])]}
    if "rank_error" in out:
        result["rank_error"] = out["rank_error"]
    if args.json:
        _print_json(result)
    else:
        render.quantiles(result)
    return 0


def cmd_rank(args) -> int:
    stats = _open(args)
    _column(stats, args.column, args.value)           # before the distributed sort
    _ensure_ranks(args, stats)
    result = _open(args).rank(args.column, args.value)
    if args.json:
        _print_json(result)
    else:
        render.out.print(f"{args.column} = {result['value']}: {result['smaller']:,} smaller "
                         f"non-null values, {result['count']:,} equal")
    return 0


def cmd_watch(args) -> int:
    from lakestats.infra.redis_server import redis_url
    from lakestats.watch import watch
    settings = settings_of(args)
    if not settings.tables:
        raise CliError("which tables? --tables s3://bucket/prefix[,...] (or LAKESTATS_TABLES)")
    with redis_url(settings.redis_url, settings.redis_password) as url:
        settings = dataclasses.replace(settings, redis_url=url)
        render.err.print(f"watching {args.queue} for {','.join(settings.tables)} (Ctrl-C stops)")
        try:
            watch(args.queue, settings, visibility_seconds=args.visibility,
                  on_reduced=lambda r: render.out.print(
                      f"{r['table']}: {render.outcome(r['version'], r['published'])}, "
                      f"{r['row_count']:,} rows, "
                      f"computed {r['computed']}, reused {r['reused']}, removed {r['removed']}"))
        except KeyboardInterrupt:
            return 0
    return 0


def cmd_local(args) -> int:
    from lakestats.infra import local_stack
    if args.action == "up":
        print(local_stack.exports(local_stack.up(bucket=args.bucket)))
    else:
        print(f"stopped {local_stack.down()} processes")
    return 0


def cmd_demo(args) -> int:
    from lakestats import demo
    return demo.run(args, settings_of(args))


COMMANDS = {name[4:].replace("_", "-"): f for name, f in list(globals().items())
            if name.startswith("cmd_")}


def main(argv: list[str] | None = None) -> int:
    args = arguments.parser().parse_args(argv)
    if argv is None and args.command in LOOKUPS:      # the command line's own process only
        lookup_process.prepare()
    logging.getLogger("sqlglot").setLevel(logging.ERROR)   # its warnings: a second line
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()           # a closed pipe shows here, not at exit
        return code
    except KeyboardInterrupt:
        print("lakestats: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader left (| head): end quietly, as a process killed by SIGPIPE; stdout goes
        # to /dev/null so that the interpreter's flush at exit does not fail again
        with contextlib.suppress(OSError, ValueError):      # stdout is no file: nothing to do
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as e:  # noqa: BLE001 - every error is one line, never a traceback
        if os.environ.get("LAKESTATS_DEBUG"):
            raise
        render.error(message_of(e))
        return EXIT_USAGE if is_usage(e) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
