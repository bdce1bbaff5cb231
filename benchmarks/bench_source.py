"""The `lakestats` Spark data source beside Spark's own Parquet scan, spark_bridge.read and a
pure-Python data source, in one Spark session (local[2]).

TPC-H SF1 lineitem, one file per ship month (84 files, bench_freshness.by_month); statistics
computed first if missing. Run with:

    .venv/bin/python benchmarks/bench_source.py [--repeat 2] [--skip-python-source]
                                                [--files 10000] [--scale-dir DIR]

1. The read path with nothing to prune (`sum(l_extendedprice * (1 - l_discount))` over every
   file): the source against `spark.read.parquet` (target: <= 1.3x), and the route the source
   did not take, Spark's Python Data Source API with a reader yielding Arrow batches (it gets
   no required columns, so it reads every column).
2. Ten filter queries: files and bytes read and time for the source, for `spark.read.parquet`
   with Spark's own pushdown (row groups), for the same `spark.read.parquet` with
   `spark.lakestats.parquet.enabled` (the extension swaps its file index for lakestats'), and
   for spark_bridge.read; their answers compared.
   Files: the scan's `numFiles`; bytes: what the JVM read through read(2) (/proc rchar), so
   footers and skipped row groups count as they cost.

3. At scale: bench_planning_freshness' table of --files small files, its four queries (point,
   range, LIMIT, top-k) end to end through the source and through `spark.read.parquet`.

Times are the best of --repeat rounds after a warm-up round, the ways taking turns, from a warm
page cache.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compute import ROOT  # noqa: E402
from bench_freshness import by_month  # noqa: E402
from bench_planning_freshness import DATA_DIR  # noqa: E402

CLI = str(Path(sys.executable).with_name("lakestats"))
QUERIES = [
    "l_shipdate = DATE '1995-06-17'",
    "l_shipdate BETWEEN DATE '1994-01-01' AND DATE '1994-03-31'",
    "l_orderkey = 3000000",
    "l_orderkey < 20000",
    "l_receiptdate >= DATE '1998-11-01'",
    "l_commitdate < DATE '1992-03-01'",
    "l_shipdate >= DATE '1998-06-01' AND l_quantity > 45",
    "l_shipmode = 'AIR' AND l_shipdate < DATE '1992-06-01'",
    "l_quantity > 50",
    "l_extendedprice > 104500",
]
AGGREGATE = ["count(*) AS n", "sum(l_extendedprice * (1 - l_discount)) AS revenue"]


def interleaved(runs: dict, repeat: int) -> dict[str, tuple[float, object]]:
    """Each run's best time over `repeat` rounds, the runs taking turns after a warm-up round
    (so that none is favoured by going first), and its answer."""
    answers = {name: run() for name, run in runs.items()}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: (min(times[name]), answers[name]) for name in runs}


class Reads:
    """Bytes the JVM read through read(2), and files the last scan opened."""

    def __init__(self, spark):
        self.spark = spark
        self.pid = spark._jvm.ProcessHandle.current().pid()

    def rchar(self) -> int:
        with open(f"/proc/{self.pid}/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("rchar"))

    def measure(self, df) -> tuple[int, int, object]:
        before = self.rchar()
        answer = df.collect()
        read = self.rchar() - before
        plan = df._jdf.queryExecution().executedPlan()
        return _files(plan), read, answer


def _files(plan) -> int:
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.length()):
        metric = leaves.apply(i).metrics().get("numFiles")
        if metric.isDefined():
            total += metric.get().value()
    return total


def python_source(spark, table: Path):
    """The pure-Python route: a Python data source whose reader yields each file's Arrow
    batches (every column: the API passes no required columns)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    columns = spark.read.parquet(str(table)).schema      # the class must not hold the session

    class Reader(DataSourceReader):
        def __init__(self, path):
            self.path = path

        def partitions(self):
            return [InputPartition(str(p)) for p in sorted(Path(self.path).glob("*.parquet"))]

        def read(self, partition):
            import pyarrow as pa
            import pyarrow.parquet as pq
            file = pq.ParquetFile(partition.value)
            # Spark expects nullable fields without metadata; the files' are required
            plain = pa.schema([pa.field(f.name, f.type) for f in file.schema_arrow])
            for batch in file.iter_batches(batch_size=65536):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=plain)

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "arrow_files"

        def schema(self):
            return columns

        def reader(self, schema):
            return Reader(self.options["path"])

    spark.dataSource.register(Source)
    return spark.read.format("arrow_files").load(str(table))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, default=ROOT / ".data")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--skip-python-source", action="store_true")
    p.add_argument("--parts", default="1,2,3", help="which parts to run")
    p.add_argument("--files", type=int, default=10_000,
                   help="part 3: the small-file table's size (0: skip)")
    p.add_argument("--scale-dir", type=Path, default=DATA_DIR,
                   help="where bench_planning_freshness keeps that table")
    args = p.parse_args()
    table = by_month(args.data_dir, 1)
    if not (table / "_lakestats").exists():
        subprocess.run([CLI, "compute", str(table), "--quiet"], check=True)

    from pyspark.sql import SparkSession

    from lakestats import spark_bridge
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)     # the Python source's workers
    spark = (spark_bridge.configure(SparkSession.builder).master("local[2]")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "4g")
             .config("spark.sql.adaptive.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_bridge.install(spark)
    uri = str(table)
    print(f"{os.cpu_count()} cores, local[2]; lineitem SF1 by month: {table} (84 files)\n")

    parts = set(args.parts.split(","))
    if "1" in parts:
        read_path(spark, uri, table, args)
    reads = Reads(spark)
    if "2" in parts:
        filters(spark, uri, args, reads)
    if "3" in parts and args.files:
        at_scale(spark, args.files, args.scale_dir, args.repeat, reads)
    spark.stop()


def read_path(spark, uri: str, table: Path, args) -> None:
    print("1. read path, nothing pruned: sum(l_extendedprice * (1 - l_discount))")
    scan = "sum(l_extendedprice * (1 - l_discount)) AS revenue"
    ways = {"spark.read.parquet": spark.read.parquet(uri),
            "lakestats source": spark.read.format("lakestats").load(uri)}
    if not args.skip_python_source:
        ways["Python data source"] = python_source(spark, table)
    timed = interleaved({name: lambda df=df: df.selectExpr(scan).collect()
                         for name, df in ways.items()}, args.repeat)
    base = timed["spark.read.parquet"][0]
    for name, (seconds, answer) in timed.items():
        print(f"   {name:<20} {seconds:6.2f} s  {seconds / base:5.2f}x  revenue {answer[0][0]:.6e}",
              flush=True)


def filters(spark, uri: str, args, reads: Reads) -> None:
    from lakestats import spark_bridge
    print("\n2. ten filter queries: files read / MB read (rchar) / seconds; answers compared")
    totals = {}
    names = ["lakestats source", "spark.read.parquet", "parquet, rule on", "spark_bridge.read"]
    print(f"   {'query':<58} " + " ".join(f"{n:>22}" for n in names))
    for where in QUERIES:
        frames = {
            names[0]: lambda: spark.read.format("lakestats").load(uri).where(where),
            names[1]: lambda: spark.read.parquet(uri).where(where),
            names[2]: lambda: spark.read.parquet(uri).where(where),
            names[3]: lambda: spark_bridge.read(spark, uri, where=where)}

        def run(name, measure=False):
            # spark.lakestats.parquet.enabled: plain Parquet reads pruned by the extension
            spark.conf.set("spark.lakestats.parquet.enabled", str(name == names[2]).lower())
            df = frames[name]().selectExpr(*AGGREGATE)
            return reads.measure(df) if measure else df.collect()
        measured = {name: run(name, measure=True) for name in names}
        timed = interleaved({name: lambda name=name: run(name) for name in names}, args.repeat)
        cells = []
        for name in names:
            files, read, _ = measured[name]
            t = totals.setdefault(name, [0, 0.0, 0.0])
            t[0], t[1], t[2] = t[0] + files, t[1] + read / 2**20, t[2] + timed[name][0]
            cells.append(f"{files:3d} / {read / 2**20:6.1f} / {timed[name][0]:5.2f}")
        same = "same answer" if len({repr(a) for *_, a in measured.values()}) == 1 \
            else "ANSWERS DIFFER"
        print(f"   {where:<58} " + " ".join(f"{c:>22}" for c in cells) + f"  {same}", flush=True)
    print(f"   {'total':<58} " + " ".join(f"{t[0]:3d} / {t[1]:6.1f} / {t[2]:5.2f}".rjust(22)
                                         for t in totals.values()))
    source, plain, rule, read = (totals[n][2] for n in names)
    print(f"\n   time: source {source:.2f} s = {source / plain:.2f}x spark.read.parquet, "
          f"{source / read:.2f}x spark_bridge.read; spark.read.parquet with the rule on "
          f"{rule / plain:.2f}x without")


def at_scale(spark, n: int, data: Path, repeat: int, reads: Reads) -> None:
    """The four queries of bench_planning_freshness on its table of `n` small files (Hive
    directories), end to end: the source (planning lists the table and prunes each time)
    beside spark.read.parquet (which lists once, when the DataFrame is made, and reads every
    file's footer)."""
    from bench_planning_freshness import build, queries

    from lakestats import spark_bridge
    table = str(build(data, n))
    print(f"\n3. {n:,} files of 100 rows (bench_planning_freshness' table): files read / "
          "seconds, end to end, each way's DataFrame made once")
    plain, source = spark.read.parquet(table), spark.read.format("lakestats").load(table)
    for name, where, limit, order in queries(n)[:4]:
        def frame(df, where=where, limit=limit, order=order):
            if where:
                df = df.where(where)
            if order:
                column, direction = order.split()
                df = df.orderBy(getattr(df[column], direction.lower())())
            return df.limit(limit) if limit else df
        ways = {"source": lambda: frame(source),
                "spark.read.parquet": lambda: frame(plain)}
        timed = interleaved({k: lambda f=f: f().collect() for k, f in ways.items()}, repeat)
        files = {k: reads.measure(f())[0] for k, f in ways.items()}
        kept = len(spark_bridge.explain(ways["source"]())["kept"])
        same = "same rows" if len({repr(sorted(map(repr, a))) for _, a in timed.values()}) == 1 \
            else "ROWS DIFFER"
        print(f"   {name:<30} source {kept:5d} files / {timed['source'][0]:5.2f} s   "
              f"spark.read.parquet {files['spark.read.parquet']:5d} files / "
              f"{timed['spark.read.parquet'][0]:5.2f} s   "
              f"{timed['source'][0] / timed['spark.read.parquet'][0]:.2f}x  "
              f"{same if not limit or order else ''}", flush=True)


if __name__ == "__main__":
    main()
