"""The `lakestats` command line's arguments: every command, flag and help text."""
from __future__ import annotations

import argparse
import sys

from lakestats.core import settings as defaults
from lakestats.formats import FORMATS

EXIT_USAGE = 2
COMPUTE_EXITS = """exit status:
  0  a version describing the table is published (or already was). Under --allow-partial
     some files may have failed: each is named on stderr and under "failures" in --json,
     and the version lists them as missing
  1  failed: nothing was published (the reason is on stderr)
  2  usage error"""
STATUS_EXITS = """--json prints {"version", "created", "row_count", "partitions", "missing", "pending":
[{"path", "change", "modified"}], "lag": {...}, "inexact": {...}, ...} (lakestats/schemas/
status.json).
exit status:
  0  the status is printed, also for a table without statistics yet ("version" null, every
     data file pending: a table waiting for its first compute is a state, not an error)
  1  nothing at TABLE, or statistics that cannot be read (LATEST lost or damaged)
  2  usage error"""

REPORT_EXITS = """The page counts the files landed, rewritten or removed since the version.
exit status:
  0  the page is written
  1  failed (no statistics, an unknown version or column): no page is written
  2  usage error"""


class _Parser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        """`--range -10..30`: the value starts with a dash but is no option."""
        args = list(sys.argv[1:] if args is None else args)
        for i, arg in enumerate(args[:-1]):
            if arg == "--range":
                args[i:i + 2] = [f"--range={args[i + 1]}"]
                break
        return super().parse_args(args, namespace)

    def error(self, message: str):
        """Usage errors are one line too, like every other error."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


MAX_COUNT = 10 ** 9     # a count past it is a typo (Python's ints have no bound, C's below them do)
MAX_SECONDS = 10 ** 9


def number(kind: type, low, high, low_open: bool = False):
    """An argparse type: a `kind` (int or float) in [low, high], or (low, high] when
    `low_open`; checked before any work starts (NaN and infinities are never in range)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None
        if not ((low < value) if low_open else (low <= value)) or not value <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is not in {'(' if low_open else '['}{low}, {high}]")
        return value
    return parse


COUNT = number(int, 1, MAX_COUNT)
THRESHOLD = number(int, 0, MAX_COUNT)
WORKERS = number(int, 1, 10_000)
BYTES = number(int, 0, 1 << 40)
SECONDS = number(float, 0, MAX_SECONDS)


def catalog_options(c: argparse.ArgumentParser) -> None:
    c.add_argument("--catalog", metavar="URI",
                   help="find the Iceberg table in this catalog (sqlite:///cat.db or "
                        "postgresql://... for a SQL catalog, http(s):// for a REST one; with "
                        "--table-name) instead of from TABLE/metadata")
    c.add_argument("--table-name", metavar="NS.NAME", help="the table's name in --catalog")
    c.add_argument("--catalog-name", metavar="NAME", default="default",
                   help="the name --catalog registers its tables under (default: default)")


def follow_option(c: argparse.ArgumentParser) -> None:
    c.add_argument("--no-follow", action="store_true",
                   help="export this snapshot only; by default the catalog is remembered in "
                        "the statistics and the event path (lakestats watch, the reduce "
                        "function) exports every new snapshot it describes (a catalog URI "
                        "holding a password is never remembered)")


def planning_options(c: argparse.ArgumentParser) -> None:
    """What a plan over the statistics assumes: the table's freshness, the time zone."""
    c.add_argument("--assume-current", action="store_true",
                   help="trust that the statistics describe the table as it is now: skip the "
                        "listing that finds files landed, rewritten or removed since (by "
                        "default such files are read whole, never skipped)")
    c.add_argument("--time-zone", metavar="ZONE", type=_time_zone, default="UTC",
                   help="the zone a timestamp without one is read in, as Spark's "
                        "spark.sql.session.timeZone (default: UTC)")


def table_prefix(text: str) -> str:
    """A table's prefix in a bucket (orders, sales/orders), as watch's --tables and S3 keys
    spell it: no part empty, . or .., nor hidden (lakestats never reads those as data)."""
    prefix = text.strip("/")
    if not prefix or any(not part or part.startswith(("_", ".")) for part in prefix.split("/")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a prefix in the bucket such as orders or sales/orders, no part of it "
            "empty or starting with _ or . (lakestats never reads those as data)")
    return prefix


def _time_zone(name: str) -> str:
    from lakestats.pruning.temporal import zone_of
    try:
        zone_of(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return name


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="lakestats",
        description="Exact column statistics for tables of Parquet files (local or s3://).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def table_command(name, help_text, epilog=None, json=True):
        c = sub.add_parser(name, help=help_text, description=help_text, epilog=epilog,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        c.add_argument("table", metavar="TABLE",
                       help="a table root, local or s3://bucket/prefix: a directory of Parquet "
                            "files, or an Iceberg, Delta or Hudi table")
        c.add_argument("--stats-root", metavar="URI",
                       help="where statistics live (default: TABLE/_lakestats)")
        if json:
            c.add_argument("--json", action="store_true", help="machine-readable output")
        return c

    c = table_command("compute", "compute (incrementally) and publish the table's statistics",
                      COMPUTE_EXITS)
    c.add_argument("--create", action="store_true",
                   help="publish an empty version when nothing is at TABLE yet (without it, "
                        "a path with nothing there is an error: a mistyped one, most likely)")
    c.add_argument("--bins", type=number(int, 1, 10_000),
                   help=f"histogram bins (default {defaults.DEFAULT_BINS}, or $LAKESTATS_BINS)")
    c.add_argument("--frequency-algorithm", choices=["auto", *defaults.FREQUENCY_ALGORITHMS],
                   help="how exact table-level frequencies are reduced (default: auto, chosen "
                        "per column from the partitions' counts)")
    c.add_argument("--low-distinct-max", type=THRESHOLD, metavar="N",
                   help="auto: low-distinct when the partitions' distinct counts sum to at most "
                        f"N (default {defaults.LOW_DISTINCT_MAX})")
    c.add_argument("--low-duplicate-max", type=THRESHOLD, metavar="N",
                   help="auto: low-duplicate when at most N values can repeat "
                        f"(default {defaults.LOW_DUPLICATE_MAX})")
    c.add_argument("--exact", action="store_true",
                   help="make every table-level distinct count and frequency list exact now: "
                        "lists too large to merge with each new file otherwise wait for a "
                        "compaction, marked with the version they last described")
    c.add_argument("--all-values", action="store_true",
                   help="list values seen once too, also for near-unique columns")
    c.add_argument("--bloom-min-distinct", type=THRESHOLD, metavar="N",
                   help="write a partition Bloom filter for columns with more than N distinct "
                        f"values in the partition (default {defaults.BLOOM_MIN_DISTINCT})")
    c.add_argument("--range-set-size", type=COUNT, metavar="N",
                   help="ranges per partition range-set of numeric and temporal columns, for "
                        f"join pruning (default {defaults.RANGE_SET_SIZE}, or "
                        "$LAKESTATS_RANGE_SET_SIZE)")
    c.add_argument("--pack-bytes", type=BYTES, metavar="N",
                   help="pack small files into one worker call up to N bytes, each file "
                        f"counting {defaults.OPEN_COST_BYTES >> 20} MiB more for its opening, "
                        "as Spark packs splits (default "
                        f"{defaults.PACK_BYTES:,}, or $LAKESTATS_PACK_BYTES; 0: a call a file)")
    c.add_argument("--allow-partial", action="store_true",
                   help="publish over the good partitions when some files fail; "
                        "the missing ones are recorded, and the exit status is 0")
    c.add_argument("--wait", type=SECONDS, metavar="SECONDS",
                   help="how long to wait while another compute of the table runs (default "
                        f"{defaults.LOCK_WAIT_SECONDS:g}; 0 fails at once)")
    c.add_argument("--workers", type=WORKERS, help="concurrent workers (default: CPU count)")
    c.add_argument("--invoker", choices=["local", "lambda", "spark"], default="local",
                   help="local worker processes (default), AWS Lambda, or Spark tasks "
                        "(the active or a local SparkSession; SPARK_MASTER picks the master)")
    c.add_argument("--function-name",
                   help="the steps function for --invoker lambda (default: "
                        "$LAKESTATS_STEPS_FUNCTION)")
    c.add_argument("--redis-url", help="coordinator Redis (default: $REDIS_URL, else embedded)")
    c.add_argument("--max-attempts", type=number(int, 1, 1000), metavar="N",
                   help=f"attempts per call of a step (default {defaults.MAX_ATTEMPTS})")
    c.add_argument("--timeout", type=number(float, 0, MAX_SECONDS, low_open=True),
                   metavar="SECONDS",
                   help="a call of any step (a partition, a frequency or sort step) running "
                        "longer is stopped and retried; on Lambda and Spark, which cannot stop "
                        "one call, it is left running and retried "
                        f"(default {defaults.TIMEOUT_SECONDS:g})")
    c.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    c.add_argument("--ranks", metavar="COL[,COL...]",
                   help="also compute exact ranks (ranks.parquet) of these columns")
    c.add_argument("--statistics", metavar="PLUGIN[,PLUGIN...]",
                   help="user-defined statistics: a module name, a .py file or an entry-point "
                        "group (e.g. lakestats.statistics) of functions decorated with "
                        "lakestats.udf.statistic (default: $LAKESTATS_STATISTICS); a change "
                        "recomputes every partition")
    c.add_argument("--value-index", metavar="COL[,COL...]",
                   help="keep, for each value of these columns, the partitions holding it "
                        "(lakestats where, and = / IN pruning); 'auto' stands for every "
                        "low-distinct column, 'none' for none (default: auto)")

    c.add_argument("--format", choices=["auto", *FORMATS], default="auto",
                   help="the table's format (default auto: Hudi if TABLE/.hoodie holds "
                        "hoodie.properties, Delta if TABLE/_delta_log exists, Iceberg if "
                        "TABLE/metadata holds *.metadata.json, else a directory of Parquet files)")
    c.add_argument("--snapshot", metavar="ID",
                   help="the snapshot to describe: an Iceberg snapshot id, a Delta version or "
                        "a Hudi instant (default: the current one); the version published "
                        "becomes the table's, and show --snapshot ID finds it later")
    c.add_argument("--as-of", metavar="TIMESTAMP",
                   help="the snapshot current at this ISO 8601 time (e.g. 2026-11-01T12:00:00Z)")
    catalog_options(c)
    c.add_argument("--export", choices=["iceberg"],
                   help="then write the statistics into the Iceberg table for engines to read "
                        "(as export iceberg does; needs --catalog and --table-name)")
    follow_option(c)

    c = table_command("show", "show the table's (or one partition's) statistics")
    c.add_argument("--snapshot", metavar="ID",
                   help="as of a table format's snapshot (Iceberg snapshot id, Delta version, "
                        "Hudi instant) that lakestats compute --snapshot described")
    c.add_argument("--partition", metavar="REL_PATH", help="a data file, relative to TABLE")
    c.add_argument("--columns", metavar="a,b", help="only these columns")

    table_command("partitions", "list the partitions of the published version")

    c = table_command("status", "the published version, the changes to the table since (files "
                      "landed, rewritten or removed) and how long the oldest has waited, and "
                      "the statistics a change left inexact, since which version",
                      STATUS_EXITS)
    c.add_argument("--time-zone", metavar="ZONE", type=_time_zone, default="UTC",
                   help="the zone times are shown in: an IANA name or an offset such as +05:30 "
                        "(default: UTC)")

    c = table_command("histogram", "show a column's histogram")
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("--partition", metavar="REL_PATH", help="a data file, relative to TABLE")
    c.add_argument("--rows", type=COUNT, default=24, help="bars to draw (default 24)")
    c.add_argument("--range", metavar="LOW..HIGH", dest="value_range",
                   help="only the bins that overlap [LOW, HIGH], in the column's canonical "
                        "text (e.g. -10..30, 1995-01-01..1995-12-31; LOW.. or ..HIGH leave "
                        "an end open); reads only the row groups that hold them")

    c = table_command("frequencies", "exact value frequencies of a column, most frequent first")
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("--top", type=COUNT, metavar="K", help="only the K most frequent values")
    c.add_argument("--partition", metavar="REL_PATH", help="a data file, relative to TABLE")

    c = table_command("prune", "the data files a query must read (filter, LIMIT, top-k pruning)")
    c.add_argument("--where", metavar="EXPR", help="a Spark SQL boolean expression")
    c.add_argument("--limit", type=THRESHOLD, metavar="K", help="the query's LIMIT")
    c.add_argument("--order-by", metavar="'COL [ASC|DESC]'", help="the query's ORDER BY")
    planning_options(c)

    c = sub.add_parser(
        "prune-query", help="the data files each table of a SQL query must read: filter "
        "pruning, then join pruning by data-induced predicates",
        description="Reads each table's published statistics (not its data), extracts the "
        "query's join graph, prunes each scan by its local predicates, then sends data-induced "
        "predicates (range-sets of join keys) along the joins.",
        epilog='--json prints {"tables": {NAME: {"kept", "skipped", "files_before", '
        '"files_after_local", "files_after_dips", "bytes_before", "bytes_after", "dips": '
        '[{"from", "column", "files_after"}]}}, "planning_ms"}; paths relative to the table.')
    c.add_argument("--sql", required=True, metavar="FILE_OR_TEXT",
                   help="a Spark SQL query, or a file holding one")
    c.add_argument("--table", action="append", required=True, metavar="NAME=PATH",
                   help="a table the query names and its root (repeat for each table)")
    planning_options(c)
    c.add_argument("--json", action="store_true", help="machine-readable output")

    c = table_command(
        "manifests", "Iceberg manifest-level statistics (per data manifest: record count, "
        "file and column sizes, null and NaN counts, bounds) and the optimizer's lookup over "
        "them", "The lookup sums the manifests that --where's partition filters keep (filters "
        "on columns every manifest's spec partitions by); those filters are then applied, and\n"
        "the rest is reported as residual_filter, for the optimizer's selectivity estimate.")
    c.add_argument("--snapshot", metavar="ID",
                   help="an Iceberg snapshot that lakestats compute described (default: the "
                        "published version's)")
    c.add_argument("--columns", metavar="a,b", help="only these columns")
    c.add_argument("--where", metavar="EXPR", help="a Spark SQL boolean expression")
    catalog_options(c)

    c = sub.add_parser(
        "export", help="write the statistics into the table for other engines: Iceberg's "
        "Puffin statistics file and partition statistics file, committed for the snapshot they "
        "describe",
        description="Writes, for the Iceberg snapshot the published statistics describe, a "
        "Puffin file with one apache-datasketches-theta-v1 blob per primitive column (property "
        "ndv: the exact distinct count) and a partition statistics file, and commits both "
        "through the catalog (set-statistics, set-partition-statistics). Spark's Iceberg "
        "integration then reports the NDV to its cost-based optimizer; Trino reads it for its "
        "estimates. Nothing else in the table changes.",
        epilog='--json prints {"snapshot", "statistics_path", "partition_statistics_path", '
        '"blobs", "followed"}.')
    c.add_argument("target", choices=["iceberg"], help="the table format to write into")
    c.add_argument("table", metavar="TABLE", help="the Iceberg table's root")
    c.add_argument("--stats-root", metavar="URI",
                   help="where statistics live (default: TABLE/_lakestats)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    catalog_options(c)
    follow_option(c)

    c = table_command("where", "the partitions that hold VALUE in COLUMN, with its frequency "
                      "in each, from the table's value index")
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("value", metavar="VALUE", help="canonical text, e.g. 1995-01-01 or 12.50 "
                   "(after -- if it starts with a dash: where T c -- -5)")

    def sort_options(c):
        c.add_argument("--workers", type=WORKERS,
                       help="concurrent workers for the distributed sort")
        c.add_argument("--redis-url", help="coordinator Redis (default: $REDIS_URL, else embedded)")

    c = table_command("quantiles", "quantiles of a column: from sketches, or exact (--exact)")
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("q", metavar="Q", type=number(float, 0, 1), nargs="+",
                   help="fractions in [0, 1]")
    c.add_argument("--exact", action="store_true",
                   help="percentile_disc from exact ranks (computed on the spot if missing)")
    sort_options(c)

    c = table_command("rank", "how many non-null values are smaller than VALUE, and its count")
    c.add_argument("column", metavar="COLUMN")
    c.add_argument("value", metavar="VALUE", help="canonical text, e.g. 1995-01-01 or 12.50")
    sort_options(c)

    c = table_command(
        "report", "the table's statistics as one HTML page that opens offline: the table's "
        "summary and freshness, and per column its statistics, histogram, top frequencies, "
        "quantiles, bounds and nulls across files, and the share of files a point or a one-percent "
        "range predicate skips", REPORT_EXITS, json=False)
    c.add_argument("-o", "--output", metavar="FILE", default="report.html",
                   help="the page to write, a path or s3://bucket/key, '-' for stdout "
                        "(default: report.html); written whole or not at all")
    c.add_argument("--columns", metavar="a,b", help="only these columns")
    c.add_argument("--version", metavar="N", help="an earlier version of the statistics, "
                   "e.g. 3 or v000003 (default: the published one)")
    c.add_argument("--snapshot", metavar="ID",
                   help="the version that describes this snapshot of a table format (as show "
                        "--snapshot)")
    c.add_argument("--time-zone", metavar="ZONE", type=_time_zone, default="UTC",
                   help="the zone times are shown in (default: UTC)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")

    c = sub.add_parser("watch", help="run the serverless event flow locally: consume S3 "
                       "notifications from SQS, compute statistics, publish table versions",
                       description="Long-polls an SQS queue fed by S3 notifications (moto's "
                       "server, localstack via AWS_ENDPOINT_URL, or AWS) and runs the Lambda "
                       "handlers on the same SQS event payloads.")
    c.add_argument("--queue", required=True, metavar="SQS_URL")
    c.add_argument("--tables", metavar="s3://b/prefix[,...]",
                   help="table roots to maintain (default: $LAKESTATS_TABLES)")
    c.add_argument("--window", type=SECONDS, default=defaults.WATCH_REDUCE_WINDOW_SECONDS,
                   metavar="SECONDS", help="coalesce a table's changes for this long before "
                   f"reducing (default {defaults.WATCH_REDUCE_WINDOW_SECONDS:g})")
    c.add_argument("--exact-after", metavar="SECONDS", type=number(
                       float, -defaults.EXACT_AFTER_MAX_SECONDS, defaults.EXACT_AFTER_MAX_SECONDS),
                   help="refold a table left inexact by incremental versions (compute --exact) "
                        "once it has had no change for this long; 0 or less: never (default: "
                        "$LAKESTATS_EXACT_AFTER_SECONDS, else 900)")
    c.add_argument("--visibility", type=number(int, 0, 43_200), default=120, metavar="SECONDS",
                   help="a message being handled stays invisible this long; if the watcher "
                        "dies it comes back after it (default 120)")
    c.add_argument("--redis-url", help="coordinator Redis (default: $REDIS_URL, else embedded)")

    c = sub.add_parser(
        "local", help="start or stop the local stack (moto's or localstack's S3+SQS, and Redis)",
        description="up starts moto's S3+SQS server (or localstack's) and a Redis in the "
        "background and prints what to export, for eval \"$(lakestats local up ...)\"; with "
        "--bucket, also the bucket, a queue its object events go to, and, as a comment, the "
        "lakestats watch command for --table in it, ready to run. down stops whichever runs.")
    c.add_argument("action", choices=["up", "down"])
    c.add_argument("--bucket", help="with up: create this bucket with notifications to a queue, "
                   "and print the watch command of --table in it")
    c.add_argument("--table", metavar="PREFIX", type=table_prefix,
                   help="with up --bucket: the table the printed watch command maintains, a "
                        "prefix in the bucket (default: orders)")
    c.add_argument("--localstack", action="store_true",
                   help="with up: localstack's S3 and SQS instead of moto's, started without "
                        "Docker from .localstack-venv (make .localstack-venv/.installed "
                        "installs it; it takes about 15 s to start)")

    c = sub.add_parser("demo", help="generate a TPC-H table, compute and show its statistics")
    c.add_argument("--dir", default=".demo", help="where the sample table goes (default .demo)")
    c.add_argument("--scale", type=number(float, 0, 1000, low_open=True), default=0.25,
                   help="TPC-H scale factor (default 0.25: 1.5M lineitem rows)")
    c.add_argument("--parts", type=number(int, 1, 10_000), default=12,
                   help="files to split lineitem into")
    return p
