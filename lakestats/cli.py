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

from lakestats import api, arguments, lookup_process
from lakestats.arguments import EXIT_USAGE
from lakestats.core.settings import names
from lakestats.errors import CliError, UsageError, is_usage, message_of
from lakestats.flags import settings_of
from lakestats.monostore.report import ComputeFailed

render = lookup_process.lazy("lakestats.render")     # rich: only for a terminal
EXIT_FAILED = 1
# commands that only read statistics: their process is set up for it (lakestats.lookup_process)
LOOKUPS = {"show", "partitions", "histogram", "frequencies", "prune", "prune-query",
           "quantiles", "rank", "where", "status", "report"}


def _open(args) -> api.TableStatistics:
    return api.open(args.table, stats_root=args.stats_root,
                    snapshot=getattr(args, "snapshot", None),
                    version=getattr(args, "version", None))


def _print_json(obj) -> None:
    # the typed contract of lakestats/schemas: a value that is not plain JSON (NaN, infinity,
    # an object) raises rather than printing as a token parsers reject or as a stray string
    print(json.dumps(obj, indent=2, allow_nan=False))


def cmd_compute(args) -> int:
    settings = settings_of(args)             # a bad setting fails before any progress shows
    if args.no_follow and not args.export:
        raise UsageError("--no-follow goes with --export iceberg")
    with render.progress_bar("computing partitions", enabled=not args.quiet) as progress:
        try:
            report, failure = api.compute(
                args.table, settings=settings, invoker=args.invoker,
                stats_root=args.stats_root, ranks=list(names(args.ranks or "")),
                format=args.format, snapshot=args.snapshot, as_of=args.as_of,
                catalog=args.catalog, table_name=args.table_name,
                catalog_name=args.catalog_name, create=args.create, progress=progress,
                notice=lambda message: print(f"lakestats: {message}", file=sys.stderr,
                                             flush=True)), None
        except (ComputeFailed, api.RanksRefused) as e:
            report, failure = e.report, e
    for reason in report.failed.values():
        print(f"lakestats: failed: {reason}", file=sys.stderr)
    for message in report.statistic_failures:
        print(f"lakestats: warning: {message}", file=sys.stderr)
    exported = _export(args) if args.export and not failure else None
    if args.json:
        _print_json({**report.as_json(), **({"export": exported.as_json()} if exported
                                            else {})})
    elif not args.quiet:
        render.compute_report(report)
        if exported:
            render.exported(exported.as_json())
    if failure:
        raise failure
    return 0       # published; under --allow-partial, the failed files are reported above


def cmd_export(args) -> int:
    exported = _export(args)
    if args.json:
        _print_json(exported.as_json())
    else:
        render.exported(exported.as_json())
    return 0


def _export(args):
    """The published statistics written into the Iceberg table (formats.iceberg_export), and
    the catalog followed by the event path unless --no-follow."""
    from lakestats.formats import Selection
    from lakestats.formats.iceberg_export import export, follow, unfollow
    from lakestats.metastore.store import Store
    statistics = api.open(args.table, stats_root=args.stats_root)
    selection = Selection("iceberg", catalog=args.catalog, table_name=args.table_name,
                          catalog_name=args.catalog_name)
    exported = export(args.table, statistics.reader, selection)
    root = Store(statistics.root)
    if args.no_follow:
        unfollow(root)
    else:
        exported.followed = follow(root, selection, exported)
    return exported


def cmd_show(args) -> int:
    summary = _open(args).show(args.columns.split(",") if args.columns else None,
                               args.partition)
    if args.json:
        _print_json(summary)
    else:
        render.summary(summary)
    return 0


def cmd_partitions(args) -> int:
    result = _open(args).partitions()
    if args.json:
        _print_json(result)
    else:
        render.partitions(result["partitions"], result["missing"])
    return 0


def cmd_status(args) -> int:
    result = _open(args).status(time_zone=args.time_zone)
    if args.json:
        _print_json(result)
    else:
        render.status(result)
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
    result = _open(args).histogram(args.column, args.partition, low, high)
    if args.json:
        _print_json(result)
    else:
        render.histogram(args.column, result["bins"], rows=args.rows)
    return 0


def cmd_frequencies(args) -> int:
    result = _open(args).frequencies(args.column, args.partition, args.top)
    if args.json:
        _print_json(result)
    else:
        render.frequencies(result)
    return 0


def cmd_where(args) -> int:
    result = _open(args).where(args.column, args.value)
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
    result = api.prune(args.table, args.where, args.limit, args.order_by,
                       stats_root=args.stats_root, assume_current=args.assume_current,
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
    stats = _open(args).reader
    manifest = stats.manifest
    if manifest.format != "iceberg":
        raise FormatError(f"{args.table}: manifest statistics are Iceberg's; this table's "
                          f"statistics describe a {manifest.format} table")
    if manifest.snapshot is None:
        raise FormatError(f"{args.table}: the Iceberg table has no snapshot yet")
    columns = args.columns.split(",") if args.columns else None
    stored = manifest_statistics.stored(
        stats.layout, Store(args.table), Selection("iceberg", catalog=args.catalog,
                                                   table_name=args.table_name,
                                                   catalog_name=args.catalog_name),
        manifest.snapshot, stats.version)
    result = {"table": args.table, "format": "iceberg", "snapshot": manifest.snapshot,
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


def _ranked(args, stats: api.TableStatistics) -> None:
    """Exact answers need the version's ranks: computed on the spot, with a progress bar,
    when missing."""
    if not stats.has_ranks(args.column):
        with render.progress_bar(f"exact ranks of {args.column} (distributed sort)") as bar:
            stats.compute_ranks([args.column], settings=settings_of(args), progress=bar)


def cmd_quantiles(args) -> int:
    stats = _open(args)
    if args.exact:
        stats.check_column(args.column)
        _ranked(args, stats)
    result = stats.quantiles(args.column, args.q, args.exact)
    if args.json:
        _print_json(result)
    else:
        render.quantiles(result)
    return 0


def cmd_rank(args) -> int:
    stats = _open(args)
    stats.check_column(args.column, args.value)       # before the distributed sort
    _ranked(args, stats)
    result = stats.rank(args.column, args.value)
    if args.json:
        _print_json(result)
    else:
        render.out.print(f"{args.column} = {result['value']}: {result['smaller']:,} smaller "
                         f"non-null values, {result['count']:,} equal")
    return 0


def cmd_report(args) -> int:
    from lakestats.metastore.store import Store
    from lakestats.profile import html_report
    columns = args.columns.split(",") if args.columns else None
    with render.progress_bar("report: columns", enabled=not args.quiet) as progress:
        page = html_report(args.table, columns=columns, version=args.version,
                           snapshot=args.snapshot, stats_root=args.stats_root,
                           time_zone=args.time_zone, progress=progress)
    if args.output == "-":
        sys.stdout.write(page)
        return 0
    data = page.encode()
    target = args.output if "://" in args.output else os.path.abspath(args.output)
    folder, _, name = target.rpartition("/")
    Store(folder).write_bytes(data, name)          # whole or not at all, local or S3
    render.err.print(f"wrote {args.output} ({len(data) / 1024:,.0f} KiB)")
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
            # its lines (a version's, a batch's) go to stdout: text on a terminal, else JSON
            watch(args.queue, settings, visibility_seconds=args.visibility)
        except KeyboardInterrupt:
            return 0
    return 0


def cmd_local(args) -> int:
    from lakestats.infra import local_stack
    if args.action == "down":
        if args.bucket or args.table or args.localstack:
            raise UsageError("--bucket, --table and --localstack go with local up")
        print(f"stopped {local_stack.down()} processes")
        return 0
    if args.table and not args.bucket:
        raise UsageError("--table names a table in --bucket: give --bucket too")
    s3_server = None
    if args.localstack:
        from lakestats.infra import localstack
        python = localstack.installed()              # before anything starts
        s3_server = lambda: localstack.detached(python)     # noqa: E731
        render.err.print("starting localstack (about 15 s)")
    print(local_stack.exports(local_stack.up(bucket=args.bucket, s3_server=s3_server,
                                             table=args.table or local_stack.TABLE)))
    return 0


def cmd_demo(args) -> int:
    from lakestats import demo
    return demo.run(args, settings_of(args))


COMMANDS = {name[4:].replace("_", "-"): f for name, f in list(globals().items())
            if name.startswith("cmd_")}


def main(argv: list[str] | None = None) -> int:
    """The `lakestats` command's exit status. In the command line's own process (no `argv`:
    the console script, python -m) SIGTERM stops a command as Ctrl-C does, and the process
    ends in end_process, with that status, whatever Arrow's threads still do."""
    if argv is not None:
        return _command(argv)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        code = _command(None)
    except KeyboardInterrupt:                   # before the command started
        print("lakestats: interrupted", file=sys.stderr)
        code = 130
    from lakestats.metastore.s3 import end_process
    for stop in (signal.SIGTERM, signal.SIGINT):      # what is left is the process's end
        signal.signal(stop, signal.SIG_IGN)
    end_process(code)


def _terminated(signum, frame) -> None:
    """SIGTERM, as Ctrl-C: KeyboardInterrupt in the main thread, so that the embedded Redis,
    the worker processes and the temporary folders go as they do on Ctrl-C. Once: a second
    SIGTERM does not interrupt that cleanup."""
    signal.signal(signal.SIGTERM, lambda *_: None)
    raise KeyboardInterrupt


def _command(argv: list[str] | None) -> int:
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
