"""The `lakestats` command line."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys

from core import settings as defaults
from core.settings import Settings
from lakestats import lookup_process, render

EXIT_FAILED, EXIT_USAGE = 1, 2
# commands that only read statistics: their process is set up for it (lakestats.lookup_process)
LOOKUPS = {"show", "partitions", "histogram", "frequencies", "prune", "quantiles", "rank"}


class CliError(Exception):
    """Printed as one line on stderr; the command exits non-zero."""


# flag -> (settings group, setting); a flag left out keeps the environment's value or default
FLAG_SETTINGS = {
    "bins": ("partition", "max_bins"), "bloom_min_distinct": ("partition", "bloom_min_distinct"),
    "frequency_algorithm": ("frequencies", "algorithm"),
    "low_distinct_max": ("frequencies", "low_distinct_max"),
    "low_duplicate_max": ("frequencies", "low_duplicate_max"),
    "all_values": ("frequencies", "all_values"),
    "redis_url": (None, "redis_url"), "allow_partial": (None, "allow_partial"),
    "exact": (None, "exact"),
    "max_attempts": (None, "max_attempts"), "timeout": (None, "timeout"),
    "workers": (None, "workers"), "function_name": (None, "steps_function"),
    "window": (None, "reduce_window"),
}


def _settings(args) -> Settings:
    """The environment's settings, with the command's flags over them."""
    given: dict = {"partition": {}, "frequencies": {}, None: {}}
    for flag, (group, name) in FLAG_SETTINGS.items():
        value = getattr(args, flag, None)
        if value is not None and value is not False:
            given[group][name] = value
    if getattr(args, "tables", None):
        given[None]["tables"] = tuple(t.strip().rstrip("/") for t in args.tables.split(",")
                                      if t.strip())
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
    with invoker, redis_url(settings.redis_url) as url:
        yield dataclasses.replace(settings, redis_url=url), invoker


def cmd_compute(args) -> int:
    with render.progress_bar("computing partitions", enabled=not args.quiet) as progress, \
            _coordinator(args, args.invoker) as (settings, invoker):
        from monostore.compute import ComputeFailed, compute
        try:
            report = compute(args.table, invoker, settings, stats_root=args.stats_root,
                             progress=progress)
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
    if args.json:
        _print_json({**report.as_json(), **({"ranks": ranks.columns} if ranks else {})})
    elif not args.quiet:
        render.compute_report(report)
    if failure:
        raise CliError(failure)
    return EXIT_FAILED if report.failed else 0


def cmd_show(args) -> int:
    columns = args.columns.split(",") if args.columns else None
    summary = _open(args).summary(args.partition, columns)
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


def cmd_histogram(args) -> int:
    bins = _open(args).histogram(args.column, args.partition)
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
    with redis_url(settings.redis_url) as url:
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """Usage errors are one line too, like every other error."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="lakestats",
        description="Exact column statistics for tables of Parquet files (local or s3://).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def table_command(name, help_text, func):
        c = sub.add_parser(name, help=help_text, description=help_text)
        c.add_argument("table", metavar="TABLE",
                       help="a local directory or s3://bucket/prefix of Parquet files")
        c.add_argument("--stats-root", metavar="URI",
                       help="where statistics live (default: TABLE/_lakestats)")
        c.add_argument("--json", action="store_true", help="machine-readable output")
        c.set_defaults(func=func)
        return c

    c = table_command("compute", "compute (incrementally) and publish the table's statistics",
                      cmd_compute)
    c.add_argument("--bins", type=int,
                   help=f"histogram bins (default {defaults.DEFAULT_BINS}, or $LAKESTATS_BINS)")
    c.add_argument("--frequency-algorithm", choices=["auto", *defaults.FREQUENCY_ALGORITHMS],
                   help="how exact table-level frequencies are reduced (default: auto, chosen "
                        "per column from the partitions' counts)")
    c.add_argument("--low-distinct-max", type=int, metavar="N",
                   help="auto: low-distinct when the partitions' distinct counts sum to at most "
                        f"N (default {defaults.LOW_DISTINCT_MAX})")
    c.add_argument("--low-duplicate-max", type=int, metavar="N",
                   help="auto: low-duplicate when at most N values can repeat "
                        f"(default {defaults.LOW_DUPLICATE_MAX})")
    c.add_argument("--exact", action="store_true",
                   help="make every table-level distinct count and frequency list exact now: "
                        "lists too large to merge with each new file otherwise wait for a "
                        "compaction, marked with the version they last described")
    c.add_argument("--all-values", action="store_true",
                   help="list values seen once too, also for near-unique columns")
    c.add_argument("--bloom-min-distinct", type=int, metavar="N",
                   help="write a partition Bloom filter for columns with more than N distinct "
                        f"values in the partition (default {defaults.BLOOM_MIN_DISTINCT})")
    c.add_argument("--allow-partial", action="store_true",
                   help="publish over the good partitions when some files fail; "
                        "the missing ones are recorded")
    c.add_argument("--workers", type=int, help="concurrent workers (default: CPU count)")
    c.add_argument("--invoker", choices=["local", "lambda", "spark"], default="local",
                   help="local worker processes (default), AWS Lambda, or Spark tasks "
                        "(the active or a local SparkSession; SPARK_MASTER picks the master)")
    c.add_argument("--function-name",
                   help="the steps function for --invoker lambda (default: "
                        "$LAKESTATS_STEPS_FUNCTION)")
    c.add_argument("--redis-url", help="coordinator Redis (default: $REDIS_URL, else embedded)")
    c.add_argument("--max-attempts", type=int, metavar="N",
                   help=f"attempts per call of a step (default {defaults.MAX_ATTEMPTS})")
    c.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="a call of any step (a partition, a frequency or sort step) running "
                        "longer is stopped and retried; on Lambda and Spark, which cannot stop "
                        "one call, it is left running and retried "
                        f"(default {defaults.TIMEOUT_SECONDS:g})")
    c.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    c.add_argument("--ranks", metavar="COL[,COL...]",
                   help="also compute exact ranks (ranks.parquet) of these columns")

    c = table_command("show", "show the table's (or one partition's) statistics", cmd_show)
    c.add_argument("--partition", metavar="REL_PATH", help="a data file, relative to TABLE")
    c.add_argument("--columns", metavar="a,b", help="only these columns")

    table_command("partitions", "list the partitions of the published version", cmd_partitions)

    c = table_command("histogram", "show a column's histogram", cmd_histogram)
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("--partition", metavar="REL_PATH", help="a data file, relative to TABLE")
    c.add_argument("--rows", type=int, default=24, help="bars to draw (default 24)")

    c = table_command("frequencies", "exact value frequencies of a column, most frequent first",
                      cmd_frequencies)
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("--top", type=int, metavar="K", help="only the K most frequent values")
    c.add_argument("--partition", metavar="REL_PATH", help="a data file, relative to TABLE")

    c = table_command("prune", "the data files a query must read (filter, LIMIT, top-k pruning)",
                      cmd_prune)
    c.add_argument("--where", metavar="EXPR", help="a Spark SQL boolean expression")
    c.add_argument("--limit", type=int, metavar="K", help="the query's LIMIT")
    c.add_argument("--order-by", metavar="'COL [ASC|DESC]'", help="the query's ORDER BY")

    def sort_options(c):
        c.add_argument("--workers", type=int, help="concurrent workers for the distributed sort")
        c.add_argument("--redis-url", help="coordinator Redis (default: $REDIS_URL, else embedded)")

    c = table_command("quantiles", "quantiles of a column: from sketches, or exact (--exact)",
                      cmd_quantiles)
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("q", metavar="Q", type=float, nargs="+", help="fractions in [0, 1]")
    c.add_argument("--exact", action="store_true",
                   help="percentile_disc from exact ranks (computed on the spot if missing)")
    sort_options(c)

    c = table_command("rank", "how many non-null values are smaller than VALUE, and its count",
                      cmd_rank)
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("value", metavar="VALUE", help="canonical text, e.g. 1995-01-01 or 12.50")
    sort_options(c)

    c = sub.add_parser("watch", help="run the serverless event flow locally: consume S3 "
                       "notifications from SQS, compute statistics, publish table versions",
                       description="Long-polls an SQS queue fed by S3 notifications (moto's "
                       "server, localstack via AWS_ENDPOINT_URL, or AWS) and runs the Lambda "
                       "handlers on the same SQS event payloads.")
    c.add_argument("--queue", required=True, metavar="SQS_URL")
    c.add_argument("--tables", metavar="s3://b/prefix[,...]",
                   help="table roots to maintain (default: $LAKESTATS_TABLES)")
    c.add_argument("--window", type=float, default=2.0, metavar="SECONDS",
                   help="coalesce a table's changes for this long before reducing (default 2)")
    c.add_argument("--visibility", type=int, default=120, metavar="SECONDS",
                   help="a message being handled stays invisible this long; if the watcher "
                        "dies it comes back after it (default 120)")
    c.add_argument("--redis-url", help="coordinator Redis (default: $REDIS_URL, else embedded)")
    c.set_defaults(func=cmd_watch)

    c = sub.add_parser("local", help="start or stop the local stack (moto S3+SQS, Redis)")
    c.add_argument("action", choices=["up", "down"])
    c.add_argument("--bucket", help="with up: create this bucket with notifications to a queue")
    c.set_defaults(func=cmd_local)

    c = sub.add_parser("demo", help="generate a TPC-H table, compute and show its statistics")
    c.add_argument("--dir", default=".demo", help="where the sample table goes (default .demo)")
    c.add_argument("--scale", type=float, default=0.25,
                   help="TPC-H scale factor (default 0.25: 1.5M lineitem rows)")
    c.add_argument("--parts", type=int, default=12, help="files to split lineitem into")
    c.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if argv is None and args.command in LOOKUPS:      # the command line's own process only
        lookup_process.prepare()
    try:
        return args.func(args)
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
        "core", "metastore", "fleet", "algorithms", "monostore", "functions", "infra", "pruning")


if __name__ == "__main__":
    sys.exit(main())
