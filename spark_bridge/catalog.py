"""apply_statistics: lakestats' statistics into Spark's catalog, for the cost-based optimizer.

Spark keeps table statistics as CatalogStatistics(sizeInBytes: BigInt, rowCount: Option[BigInt],
colStats: Map[String, CatalogColumnStat]). py4j turns every scala.math.BigInt that reaches
Python into an int, and a Python int cannot go back as a BigInt. So every object is built inside
the JVM: column statistics through CatalogColumnStat.fromMap (the same string properties a Hive
metastore stores), the BigInts as Options made by fromMap, and CatalogStatistics through its
constructor by reflection, with the arguments gathered in a Java list that never leaves the JVM.
"""
from __future__ import annotations

import datetime as dt
import re

import numpy as np

from lakestats.core import histogram as hist
from lakestats.core import types as ty
from lakestats.core.binning import binning_values
from lakestats.core.errors import StatisticsMissing
from lakestats.metastore import histograms
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader
from lakestats.pruning.freshness import PUBLISHED, freshness
from lakestats.spark_bridge import histogram as eqh

MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1e-3}
NUMERIC_SPARK = ("byte", "short", "integer", "long", "float", "double", "decimal")
RANGED_SPARK = NUMERIC_SPARK + ("date", "timestamp", "timestamp_ntz", "boolean")
BINNED_SPARK = NUMERIC_SPARK + ("date", "timestamp", "timestamp_ntz")
SUPPORTED_SPARK = RANGED_SPARK + ("string", "binary")     # what ANALYZE TABLE covers


class StaleStatistics(StatisticsMissing):
    """The table's files changed since the published statistics version."""


def check_fresh(table_uri: str, stats: StatisticsReader) -> None:
    """Refuse statistics that do not describe the table as it is now (pruning.freshness); files
    that --allow-partial left out are known to the version and do not count."""
    index = stats.partition_index([], PUBLISHED)
    published = set(index["path"].to_pylist())
    now = freshness(table_uri, stats.manifest, index)
    left_out = set(stats.manifest.missing)
    changes = sorted([f"{p} ({'changed' if p in published else 'new'})"
                      for p in now.unknown if p not in left_out]
                     + [f"{p} (removed)" for p in now.gone])
    if changes:
        shown = ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else "")
        raise StaleStatistics(f"{table_uri}: statistics version {stats.version} is stale: {shown}; "
                              "run lakestats compute, or pass allow_stale=True")


def lakestats_uri(location: str) -> str:
    """A location as Spark names it (file:/..., s3a://...) as lakestats names the table."""
    uri = re.sub(r"^file:(//)?", "", location).replace("s3a://", "s3://").replace("s3n://", "s3://")
    return uri.rstrip("/")


def _same_location(catalog_location: str, uri: str) -> bool:
    return lakestats_uri(catalog_location) == lakestats_uri(uri)


def apply_statistics(spark, table: str, table_uri: str, *, stats_root: str | None = None,
                     allow_stale: bool = False) -> dict:
    """Inject the published statistics of `table_uri` into Spark's catalog entry `table`.
    Returns what was applied: {"version", "row_count", "columns": [...]}."""
    stats = StatisticsReader(Layout.of_table(table_uri, stats_root).uri)
    if not allow_stale:
        check_fresh(table_uri, stats)
    jvm, jsession = spark._jvm, spark._jsparkSession
    catalog = jsession.sessionState().catalog()
    ident = jsession.sessionState().sqlParser().parseTableIdentifier(table)
    meta = catalog.getTableMetadata(ident)
    location = meta.location().toString()
    if not _same_location(location, table_uri):
        raise ValueError(f"catalog table {table} is at {location}, not at {table_uri}")

    fields = [(f.name(), f.dataType().typeName(), f.dataType().defaultSize())
              for f in meta.schema().fields()]
    found = spark_statistics(spark, stats, fields)
    properties, col_stats, applied = _scala_map(jvm, found["properties"]), jvm.java.util.HashMap(), []
    for name in (name for name, *_ in fields if f"{name}.version" in found["properties"]):
        stat = jvm.org.apache.spark.sql.catalyst.catalog.CatalogColumnStat.fromMap(
            table, name, properties)
        if stat.isDefined():
            col_stats.put(name, stat.get())
            applied.append(name)
    catalog.alterTableStats(ident, jvm.scala.Option.apply(
        _catalog_statistics(jvm, found["sizeInBytes"], found["rowCount"], col_stats)))
    return {"version": stats.version, "row_count": stats.manifest.row_count,
            "columns": applied}


def spark_statistics(spark, stats: StatisticsReader, fields: list[tuple[str, str, int]]) -> dict:
    """A version's statistics as Spark's catalog takes them: {"sizeInBytes", "rowCount",
    "properties"}, the properties `<column>.<key>` that CatalogColumnStat.fromMap reads (as a
    Hive metastore stores them). `fields`: the catalog's columns as (name, Spark type name,
    default size); a column lakestats does not describe, or of a type ANALYZE skips, has none."""
    ours = {r["column"].lower(): r for r in stats.statistics(sketches=False).to_pylist()}
    num_bins = int(spark.conf.get("spark.sql.statistics.histogram.numBins", "254"))
    properties = {}
    for name, type_name, default_size in fields:
        spark_type = type_name.split("(")[0]
        row = ours.get(name.lower())
        if row is None or spark_type not in SUPPORTED_SPARK:
            continue
        props = _column_properties(row, spark_type, default_size)
        if spark_type in BINNED_SPARK and row.get("min") is not None:
            equi = _equi_height(stats, row, num_bins)
            if equi is not None:
                props["histogram"] = _serialize(spark._jvm, spark, equi)
        properties.update({f"{name}.{k}": v for k, v in props.items()})
    return {"sizeInBytes": sum(p["size"] for p in stats.partitions()),
            "rowCount": stats.manifest.row_count, "properties": properties}


def _column_properties(row: dict, spark_type: str, default_size: int) -> dict[str, str]:
    props = {"version": "2", "distinctCount": str(row["distinct_count"] or 0),
             "nullCount": str(row["null_count"])}
    if row.get("max_length") is not None:
        props["avgLen"] = str(round(row["avg_length"]))
        props["maxLen"] = str(row["max_length"])
    else:
        props["avgLen"] = props["maxLen"] = str(default_size)
    if spark_type in RANGED_SPARK and row.get("min") is not None:
        props["min"], props["max"] = (_spark_text(row[k], spark_type) for k in ("min", "max"))
        if row.get("nan_count"):
            # Spark orders NaN above +inf: the optimizer's range must reach it. (ANALYZE records
            # max = NaN, which switches range estimation off.)
            props["max"] = "Infinity"
    return props


def _spark_text(text: str, spark_type: str) -> str:
    """Canonical text to the external form Spark's CatalogColumnStat parses."""
    if spark_type in ("float", "double"):
        return {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}.get(text, text)
    if spark_type.startswith("timestamp"):
        text = re.sub(r"(\.\d{6})\d+", r"\1", text)          # Spark keeps microseconds
        value = dt.datetime.fromisoformat(text)
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return text


def _spark_domain(values: np.ndarray, arrow_type) -> np.ndarray:
    """Binning-domain numbers to Spark's internal ones (days, microseconds)."""
    import pyarrow as pa
    if pa.types.is_timestamp(arrow_type):
        return values * MICROS[arrow_type.unit]
    if pa.types.is_date64(arrow_type):
        return values / 86_400_000
    return values


def _equi_height(stats: StatisticsReader, row: dict, num_bins: int):
    import pyarrow as pa

    column = row["column"]
    arrow_type = stats.schema().field(column).type
    if row.get("frequencies_complete"):
        freq = stats.frequencies(column)
        typed = ty.from_text(freq["value"].to_pylist(), arrow_type)
        if ty.kind_of(arrow_type) == ty.FLOAT:    # NaN compares above every number in Spark
            values = typed.cast(pa.float64()).to_numpy(zero_copy_only=False).copy()
            values[np.isnan(values)] = np.inf
        else:
            values = binning_values(typed).astype(np.float64)
        return eqh.from_frequencies(_spark_domain(values, arrow_type),
                                    freq["frequency"].to_numpy(), num_bins)
    h = histograms.read_histogram(stats.histogram_table(column), column)
    if h is None or h.counts.size == 0:
        return None
    lowers, uppers = (np.array(e, dtype=np.float64) for e in hist.edges(h))
    closed = not h.float_domain                  # integer bins [lower, upper] end at upper + 1
    ends, counts, low, high = uppers + 1 if closed else uppers, h.counts, h.low, h.high
    above = h.pos_inf + (row.get("nan_count") or 0)       # NaN compares above every number
    if h.neg_inf:
        lowers, ends = np.r_[-np.inf, lowers], np.r_[-np.inf, ends]
        counts, low = np.r_[h.neg_inf, counts], -np.inf
    if above:
        lowers, ends, counts, high = np.r_[lowers, np.inf], np.r_[ends, np.inf], \
            np.r_[counts, above], np.inf

    def spark(x):
        return _spark_domain(np.asarray(x, dtype=np.float64), arrow_type)
    return eqh.from_bins(spark(lowers), spark(ends), counts, float(spark(low)), float(spark(high)),
                         closed and not pa.types.is_timestamp(arrow_type),
                         int(row["distinct_count"] or 1), num_bins)


def _serialize(jvm, spark, equi: eqh.EquiHeight) -> str:
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    bins = spark.sparkContext._gateway.new_array(logical.HistogramBin, len(equi.bins))
    for i, (lo, hi, ndv) in enumerate(equi.bins):
        bins[i] = logical.HistogramBin(lo, hi, ndv)
    return logical.HistogramSerializer.serialize(logical.Histogram(equi.height, bins))


def _scala_map(jvm, d: dict):
    m = jvm.java.util.HashMap()
    for k, v in d.items():
        m.put(k, v)
    return jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(m)


def _big_int_option(jvm, value: int):
    """Some(BigInt(value)), made in the JVM (by fromMap) so that it stays there."""
    stat = jvm.org.apache.spark.sql.catalyst.catalog.CatalogColumnStat.fromMap(
        "lakestats", "n", _scala_map(jvm, {"n.version": "2", "n.distinctCount": str(value)}))
    return stat.get().distinctCount()


def _catalog_statistics(jvm, size_in_bytes: int, row_count: int, col_stats):
    args = jvm.java.util.ArrayList()
    # the BigInt inside Some(...) moves into the list without crossing to Python
    args.addAll(jvm.scala.jdk.javaapi.CollectionConverters.asJava(
        _big_int_option(jvm, size_in_bytes).toList()))
    args.add(_big_int_option(jvm, row_count))
    args.add(jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(col_stats))
    cls = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.catalog.CatalogStatistics")
    constructor = [c for c in cls.getConstructors() if len(c.getParameterTypes()) == 3][0]
    return constructor.newInstance(args.toArray())
