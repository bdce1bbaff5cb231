"""The `lakestats` Spark data source: ordinary DataFrame code and SQL pruned by lakestats.

    spark = spark_bridge.configure(SparkSession.builder).getOrCreate()
    spark_bridge.install(spark)
    spark.read.format("lakestats").load(uri).filter("k = 3").count()
    spark.sql("CREATE TABLE t USING lakestats OPTIONS (path '...')")

A table read through it is a Parquet relation scanned by Spark's own Parquet reader; its file
index (jvm/Lakestats.scala) asks the Planner below, through py4j, which files each query must
read: at every planning, the table is listed as it is then (pruning.freshness), the filters
Spark hands over (every conjunct lakestats can read as Spark SQL, OR and arithmetic included)
prune the files the statistics describe, and every other file is read. Catalog tables `USING
lakestats` carry the published statistics (catalog.spark_statistics) for the cost-based
optimizer, read again when a new version is published. Options: `stats_root`.
"""
from __future__ import annotations

import json
import threading

from lakestats.core.errors import StatisticsMissing, UsageError
from lakestats.formats import Snapshot
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from lakestats.pruning import PruneResult
from lakestats.pruning import prune as prune_files
from lakestats.pruning.freshness import freshness
from lakestats.pruning.plan import check
from lakestats.pruning.predicate import PredicateError, columns_of, parse, parse_order
from lakestats.pruning.views import Partitions
from lakestats.spark_bridge.catalog import lakestats_uri, spark_statistics
from lakestats.spark_bridge.jar import EXTENSIONS_CLASS, jar_path
from lakestats.spark_bridge.native import (FIELD_IDS, needs_field_ids, partition_texts,
                                           spark_schemas)
from lakestats.spark_bridge.read import has_s3a, infers_hive_types, spark_uri

ENTRY = "org.apache.spark.sql.lakestats.Lakestats"


def configure(builder):
    """The builder, with what the source needs before the session starts: its jar (built on
    first use, spark_bridge.jar), its extensions (catalog statistics, LIMIT and top-k), and
    Parquet columns matched by field id where the schema gives them (Iceberg tables; Spark
    matches the others by name, as before)."""
    options = builder._options
    for key, value in (("spark.jars", str(jar_path())),
                       ("spark.sql.extensions", EXTENSIONS_CLASS)):
        present = [v for v in options.get(key, "").split(",") if v]
        if value not in present:
            builder = builder.config(key, ",".join(present + [value]))
    if FIELD_IDS not in options:
        builder = builder.config(FIELD_IDS, "true")
    return builder


def install(spark) -> None:
    """Register this process as the source's planner, once per session (again is harmless)."""
    from pyspark.java_gateway import ensure_callback_server_started
    try:
        entry = spark._jvm.java.lang.Class.forName(
            ENTRY + "$", True, spark._jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - py4j raises its own error for a missing class
        raise RuntimeError("the lakestats Spark source is not in this session: start it from "
                           "spark_bridge.configure(SparkSession.builder)") from None
    if EXTENSIONS_CLASS not in spark.conf.get("spark.sql.extensions", ""):
        raise RuntimeError(f"spark.sql.extensions lacks {EXTENSIONS_CLASS} (catalog statistics "
                           "and LIMIT pruning): start the session from spark_bridge.configure("
                           "SparkSession.builder)")
    ensure_callback_server_started(spark.sparkContext._gateway)
    entry.getField("MODULE$").get(None).install(Planner(spark))


def register_table(spark, name: str, table_uri: str, *, stats_root: str | None = None) -> None:
    """CREATE TABLE name USING lakestats over `table_uri` (replacing one of that name)."""
    options = {"path": table_uri} | ({"stats_root": stats_root} if stats_root else {})
    quoted = ", ".join(f"{k} '{_sql_text(v)}'" for k, v in options.items())
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING lakestats OPTIONS ({quoted})")


def explain(df) -> dict | list[dict]:
    """What the source plans for the DataFrame's scan through it: {"kept", "skipped",
    "unknown", "fully_matching", "pushed", "not_pushed", "limit", "order_by", "version"}
    (relative paths; `kept` includes `unknown`). A list of them when the DataFrame scans
    several times."""
    jvm = df.sparkSession._jvm
    plans = json.loads(getattr(jvm, ENTRY).explain(df._jdf))
    if not plans:
        raise ValueError("the DataFrame reads no table through the lakestats source")
    shown = [{k: v for k, v in p.items() if k not in ("root", "files", "format")} for p in plans]
    return shown[0] if len(shown) == 1 else shown


class Planner:
    """The answers Lakestats.scala asks for (its Planner trait), in JSON."""

    class Java:
        implements = ["org.apache.spark.sql.lakestats.Planner"]

    def __init__(self, spark):
        self.spark = spark
        self._statistics: dict[tuple, dict] = {}      # (uri, root, version, fields) -> answer
        self._lock = threading.Lock()

    def describe(self, uri: str, options: str) -> str:
        """Every current file, and a table format's columns (native.spark_schemas)."""
        answer, snapshot = self._plan(uri, options, "[]", "[]", -1, "", "UTC")
        return json.dumps(answer | (spark_schemas(snapshot) if snapshot else {}))

    def plan(self, uri: str, options: str, pushed: str, not_pushed: str, limit: int,
             order: str, time_zone: str) -> str:
        return json.dumps(self._plan(uri, options, pushed, not_pushed, limit, order,
                                     time_zone)[0])

    def _plan(self, uri: str, options: str, pushed: str, not_pushed: str, limit: int,
              order: str, time_zone: str) -> tuple[dict, Snapshot | None]:
        pushed, not_pushed = _readable(json.loads(pushed), json.loads(not_pushed))
        # LIMIT may skip a file only when what lakestats read is the whole filter
        limit = None if limit < 0 or not_pushed else limit
        order = order if limit is not None and order else None
        table = Store(uri)
        if table.is_s3 and not has_s3a(self.spark):     # before any work is done for it
            raise UsageError(f"{uri}: the lakestats source reads S3 through Spark's S3A "
                             "filesystem, which this session lacks (hadoop-aws); "
                             "spark_bridge.read reads it through Arrow")
        root = json.loads(options).get("stats_root")
        hive_types = infers_hive_types(self.spark)
        try:
            result = _prune(uri, root, _where(pushed), limit, order, time_zone, hive_types)
        except PredicateError:
            # Spark checked the filter against its own types: what the statistics type
            # otherwise (a column of files landed since, a directory of timestamps) is left to
            # Spark, and so are LIMIT and top-k, which need the whole filter or the column
            refused, order_refused = _refused_alone(_published(uri, root), pushed, order)
            if not (refused or order_refused):
                raise
            pushed = [c for c in pushed if c not in refused]
            not_pushed, limit, order = not_pushed + refused, None, None
            result = _prune(uri, root, _where(pushed), limit, order, time_zone, hive_types)
        now = result.freshness.now
        snapshot = result.freshness.snapshot
        if snapshot and needs_field_ids(snapshot) and \
                self.spark.conf.get(FIELD_IDS, "false") != "true":
            raise UsageError(f"{uri}: Iceberg's columns are matched by field id, which Spark's "
                             f"Parquet reader does only with {FIELD_IDS}=true (configure sets it)")
        values = partition_texts(uri, snapshot, result.kept) if snapshot else {}
        files = [[rel, now[rel].size, (now[rel].modified_ns or 0) // 1_000_000,
                  values.get(rel, [])] for rel in result.kept]
        return {"root": spark_uri(table), "format": result.freshness.form, "files": files,
                "pushed": pushed, "not_pushed": not_pushed, "limit": limit,
                "order_by": order} | result.as_json(), snapshot

    def covers(self, path: str) -> str:
        """A plain directory's statistics only: a table format's directory read as plain
        Parquet holds files its snapshot does not, whose rows the user asked for."""
        uri = lakestats_uri(path)
        stats = _published(uri, None)
        return json.dumps({"uri": uri if stats and stats.manifest.format == "parquet" else None})

    def statistics(self, uri: str, options: str, fields: str) -> str:
        stats = _published(uri, json.loads(options).get("stats_root"))
        if stats is None:
            return json.dumps({"version": None})
        key = (uri, options, stats.version, fields)
        with self._lock:
            if key not in self._statistics:
                found = spark_statistics(self.spark, stats, [tuple(f) for f in json.loads(fields)])
                self._statistics[key] = found | {"version": stats.version}
            return json.dumps(self._statistics[key])

    def toString(self) -> str:   # noqa: N802 - py4j asks every proxy for it
        return "lakestats.spark_bridge.source.Planner"


def _prune(uri: str, stats_root: str | None, where: str | None, limit: int | None,
           order_by: str | None, time_zone: str, hive_types: bool) -> PruneResult:
    """pruning.prune; a table without statistics has every file unknown, so every one read."""
    stats = _published(uri, stats_root)
    if stats is None:
        now = freshness(uri, None, None)
        return PruneResult(kept=list(now.unknown), unknown=list(now.unknown), freshness=now)
    return prune_files(stats, where, limit, order_by, table_uri=uri, time_zone=time_zone,
                       hive_types=hive_types)


def _published(uri: str, stats_root: str | None) -> StatisticsReader | None:
    """The table's published statistics, None when it has none."""
    try:
        return StatisticsReader(Layout.of_table(uri, stats_root).uri)
    except StatisticsMissing:
        return None


def _readable(pushed: list[str], not_pushed: list[str]) -> tuple[list[str], list[str]]:
    """Conjuncts lakestats parses stay pushed; the others join the ones Spark could not render."""
    ok = []
    for conjunct in pushed:
        try:
            parse(conjunct)
            ok.append(conjunct)
        except PredicateError:
            not_pushed = not_pushed + [conjunct]
    return ok, not_pushed


def _refused_alone(stats: StatisticsReader, conjuncts: list[str], order_by: str | None = None
                   ) -> tuple[list[str], bool]:
    """The conjuncts (Spark SQL, each parsed alone) a plan over these statistics refuses, and
    whether it refuses the order's column: for a caller whose engine checked them against
    its own types (Spark's columns of files landed since the statistics, its timestamp
    directories), to leave those to the engine."""
    schema = stats.schema()
    nodes = [parse(c) for c in conjuncts]
    order = parse_order(order_by)
    wanted = set().union(*map(columns_of, nodes)) | ({order[0]} if order else set())
    hive = Partitions.of(stats, wanted, None).hive_names - set(schema.names)
    return ([c for c, node in zip(conjuncts, nodes) if _refuses(node, None, schema, hive)],
            _refuses(None, order, schema, hive))


def _refuses(node, order, schema, hive) -> bool:
    try:
        check(node, order, schema, hive)
        return False
    except PredicateError:
        return True


def _where(conjuncts: list[str]) -> str | None:
    return " AND ".join(f"({c})" for c in conjuncts) or None


def _sql_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
