"""The `lakestats` command line."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import warnings

from core.settings import Settings, names
from lakestats import arguments, lookup_process, render
from lakestats.arguments import EXIT_USAGE

EXIT_FAILED = 1
# commands that only read statistics: their process is set up for it (lakestats.lookup_process)
LOOKUPS = {"show", "partitions", "histogram", "frequencies", "prune", "prune-query",
           "quantiles", "rank", "where"}


class CliError(Exception):
    """Printed as one line on stderr; the command exits non-zero."""


# flag -> (settings group, setting); a flag left out keeps the environment's value or default
FLAG_SETTINGS = {
    "bins": ("partition", "max_bins"), "bloom_min_distinct": ("partition", "bloom_min_distinct"),
    "range_set_size": ("partition", "range_set_size"),
    "frequency_algorithm": ("frequencies", "algorithm"),
    "low_distinct_max": ("frequencies", "low_distinct_max"),
    "low_duplicate_max": ("frequencies", "low_duplicate_max"),
    "all_values": ("frequencies", "all_values"),
    "redis_url": (None, "redis_url"), "allow_partial": (None, "allow_partial"),
    "exact": (None, "exact"),
    "max_attempts": (None, "max_attempts"), "timeout": (None, "timeout"),
    "workers": (None, "workers"), "function_name": (None, "steps_function"),
    "window": (None, "reduce_window"), "wait": (None, "lock_wait"),
}


def _settings(args) -> Settings:
    """The environment's settings, with the command's flags over them."""
    given: dict = {"partition": {}, "frequencies": {}, None: {}}
    for flag, (group, name) in FLAG_SETTINGS.items():
        value = getattr(args, flag, None)
        if value is not None and value is not False:
            given[group][name] = value
    if getattr(args, "statistics", None):    # files by absolute path: workers run elsewhere
        given["partition"]["statistics"] = tuple(
            os.path.abspath(spec) if spec.endswith(".py") else spec
            for spec in names(args.statistics))
    if getattr(args, "value_index", None):
        given[None]["value_index"] = names(args.value_index)
    if getattr(args, "tables", None):
        given[None]["tables"] = tuple(t.rstrip("/") for t in names(args.tables))
    settings = Settings.from_env(os.environ)
    return dataclasses.replace(
        settings, partition=dataclasses.replace(settings.partition, **given["partition"]),
        frequencies=dataclasses.replace(settings.frequencies, **given["frequencies"]),
        **given[None])


def _stats_root(args) -> str:
    from metastore.layout import Layout
    return Layout.of_table(args.table, args.stats_root).uri


def _open(args):
    from metastore.reader import TableStatistics
    if getattr(args, "snapshot", None):
        return TableStatistics.of_snapshot(_stats_root(args), args.snapshot)
    return TableStatistics(_stats_root(args))


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=str))


@contextlib.contextmanager
def _coordinator(args, name: str = "local"):
    """Settings with a running Redis, and an invoker."""
    from infra.redis_server import redis_url
    settings = _settings(args)
    # the invoker first: local workers import the steps while Redis and the caller start
    if name == "spark":
        from spark_bridge.invoker import SparkInvoker, local_session
        invoker = SparkInvoker(local_session(settings.spark_master, settings.workers),
                               settings.workers)
    else:
        from fleet.invokers import make_invoker
        invoker = make_invoker(name, settings.workers, settings.steps_function)
    with invoker, redis_url(settings.redis_url, os.environ.get("REDIS_PASSWORD")) as url:
        yield dataclasses.replace(settings, redis_url=url), invoker


def cmd_compute(args) -> int:
    with render.progress_bar("computing partitions", enabled=not args.quiet) as progress, \
            _coordinator(args, args.invoker) as (settings, invoker):
        from formats import Selection
        from monostore.compute import ComputeFailed, compute
        try:
            report = compute(args.table, invoker, settings, stats_root=args.stats_root,
                             progress=progress, notice=lambda message: print(
                                 f"lakestats: {message}", file=sys.stderr, flush=True),
                             selection=Selection(args.format, args.snapshot, args.as_of,
                                                 args.catalog, args.table_name,
                                                 args.catalog_name))
        except ComputeFailed as e:
            report, failure = e.report, str(e)
        else:
            failure = None
        ranks = None
        if args.ranks and report.version and not failure:
            from algorithms.ranks.driver import compute_ranks
            ranks = compute_ranks(_stats_root(args), invoker, settings, args.ranks.split(","),
                                  progress=progress)
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
    return 0       # published; under --allow-partial, the failed files are reported above


def cmd_show(args) -> int:
    from metastore.reader import NotPublished, TableStatistics
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
        raise ValueError(f"--range {text!r}: expected LOW..HIGH, e.g. -10..30 or 1995-01-01..")
    # "1.5..2" cuts once; of "1...2"'s cuts, the one leaving no dot at either side
    cut = next((i for i in cuts if not text[:i].endswith(".")
                and not text[i + 2:].startswith(".")), cuts[0])
    return text[:cut] or None, text[cut + 2:] or None


def cmd_histogram(args) -> int:
    try:
        low, high = _range(args.value_range) if args.value_range else (None, None)
    except ValueError as e:
        print(f"lakestats: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    bins = _open(args).histogram(args.column, args.partition, low, high)
    if args.json:
        _print_json({"column": args.column, "bins": bins})
    else:
        render.histogram(args.column, bins, rows=args.rows)
    return 0


def cmd_frequencies(args) -> int:
    result = _open(args).frequency_list(args.column, args.partition, args.top)
    if args.json:
        _print_json(result)
    else:
        render.frequencies(result)
    return 0


def cmd_where(args) -> int:
    result = _open(args).partitions_with(args.column, args.value)
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
    from pruning import PredicateError, prune
    try:
        result = prune(_stats_root(args), args.where, args.limit, args.order_by)
    except PredicateError as e:
        print(f"lakestats: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        _print_json(result.as_json())
    else:
        render.pruning(result)
    return 0


def cmd_prune_query(args) -> int:
    from pruning import PredicateError
    from pruning.joins import prune_query
    tables = {}
    for item in args.table:
        name, sep, path = item.partition("=")
        if not (sep and name and path):
            print(f"lakestats: error: --table {item!r}: expected NAME=PATH", file=sys.stderr)
            return EXIT_USAGE
        if name.lower() in {t.lower() for t in tables}:     # Spark's names ignore case
            print(f"lakestats: error: --table {name!r} is given twice", file=sys.stderr)
            return EXIT_USAGE
        tables[name] = path
    query = args.sql
    if "\n" not in query and os.path.isfile(query):
        with open(query, encoding="utf-8") as f:
            query = f.read()
    elif query.strip().lower().endswith(".sql") and " " not in query.strip():
        print(f"lakestats: error: --sql {query!r}: no such file", file=sys.stderr)
        return EXIT_USAGE
    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always")
            result = prune_query(query, tables)
    except PredicateError as e:
        print(f"lakestats: error: {e}".replace("\n", " "), file=sys.stderr)
        return EXIT_USAGE
    for note in notes:                  # a table without statistics, read whole
        print(f"lakestats: note: {note.message}", file=sys.stderr)
    if args.json:
        _print_json(result.as_json())
    else:
        render.query_pruning(result.as_json())
    return 0


def cmd_manifests(args) -> int:
    from formats import FormatError, Selection, manifest_statistics
    from metastore.store import Store
    from pruning import PredicateError
    from pruning.manifests import lookup
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
    try:
        result["lookup"] = lookup(stored, columns, args.where)
    except PredicateError as e:
        print(f"lakestats: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    result["manifests"] = manifest_statistics.as_json(
        stored.read(columns), stored.table_schema, columns or stored.table_schema.names)
    if args.json:
        _print_json(result)
    else:
        render.manifests(result)
    return 0


def _ensure_ranks(args, stats) -> None:
    """Exact answers need the version's ranks: compute them on the spot when missing."""
    if args.column in stats.ranked_columns():
        return
    from algorithms.ranks.driver import compute_ranks
    with render.progress_bar(f"exact ranks of {args.column} (distributed sort)") as progress, \
            _coordinator(args) as (settings, invoker):
        compute_ranks(_stats_root(args), invoker, settings, [args.column], progress=progress)


def cmd_quantiles(args) -> int:
    stats = _open(args)
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
    _ensure_ranks(args, _open(args))
    result = _open(args).rank(args.column, args.value)
    if args.json:
        _print_json(result)
    else:
        render.out.print(f"{args.column} = {result['value']}: {result['smaller']:,} smaller "
                         f"non-null values, {result['count']:,} equal")
    return 0


def cmd_watch(args) -> int:
    from infra.redis_server import redis_url
    from lakestats.watch import watch
    settings = _settings(args)
    if not settings.tables:
        raise CliError("which tables? --tables s3://bucket/prefix[,...] (or LAKESTATS_TABLES)")
    with redis_url(settings.redis_url, os.environ.get("REDIS_PASSWORD")) as url:
        settings = dataclasses.replace(settings, redis_url=url)
        render.err.print(f"watching {args.queue} for {','.join(settings.tables)} (Ctrl-C stops)")
        try:
            watch(args.queue, settings, visibility_seconds=args.visibility,
                  on_reduced=lambda r: render.out.print(
                      f"{r['table']}: version {r['version']} "
                      f"{'published' if r['published'] else 'unchanged'}, {r['row_count']:,} rows, "
                      f"computed {r['computed']}, reused {r['reused']}, removed {r['removed']}"))
        except KeyboardInterrupt:
            return 0
    return 0


def cmd_local(args) -> int:
    from infra import local_stack
    if args.action == "up":
        print(local_stack.exports(local_stack.up(bucket=args.bucket)))
    else:
        print(f"stopped {local_stack.down()} processes")
    return 0


def cmd_demo(args) -> int:
    from lakestats import demo
    return demo.run(args, _settings(args))


COMMANDS = {name[4:].replace("_", "-"): f for name, f in list(globals().items())
            if name.startswith("cmd_")}


def main(argv: list[str] | None = None) -> int:
    args = arguments.parser().parse_args(argv)
    if argv is None and args.command in LOOKUPS:      # the command line's own process only
        lookup_process.prepare()
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("lakestats: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - every error is one line, never a traceback
        if os.environ.get("LAKESTATS_DEBUG"):
            raise
        message = str(e) if isinstance(e, CliError) or _is_ours(e) else f"{type(e).__name__}: {e}"
        print(f"lakestats: error: {message}".replace("\n", " "), file=sys.stderr)
        return EXIT_FAILED


def _is_ours(e: Exception) -> bool:
    return type(e).__module__.split(".")[0] in (
        "core", "metastore", "fleet", "algorithms", "monostore", "functions", "infra", "pruning",
        "formats")


if __name__ == "__main__":
    sys.exit(main())
