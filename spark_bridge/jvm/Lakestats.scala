// The JVM half of the `lakestats` Spark data source (spark_bridge/source.py is the other).
//
// A table read through it is a Parquet HadoopFsRelation, so Spark's own vectorized Parquet scan
// reads it; only its file index is ours. At planning, the index hands the filters Spark gives
// it (as Spark SQL text) to lakestats' planner, in Python through py4j, which lists the table
// as it is now and answers with the files to read: the statistics' survivors and every file
// they do not describe. An analysis rule puts the published statistics into catalog tables
// `USING lakestats`, for the cost-based optimizer; an optimizer rule passes LIMIT and top-k to
// the index.
package org.apache.spark.sql.lakestats

import java.time.{Instant, LocalDate, ZoneOffset}
import java.time.format.DateTimeFormatter

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import org.apache.hadoop.fs.{FileStatus, Path}

import org.apache.spark.sql.{DataFrame, SQLContext, SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.catalog.{CatalogColumnStat, CatalogStatistics}
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalLimit, LogicalPlan, Project, Sort}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.FileSourceScanExec
import org.apache.spark.sql.execution.datasources._
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.sources.{BaseRelation, DataSourceRegister, RelationProvider, SchemaRelationProvider}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/** lakestats' answers, in JSON (implemented in Python: spark_bridge.source.Planner). */
trait Planner {
  /** The table's current files: {"root", "files": [[path, size, mtime_ms, [partition value
   *  text, ...]], ...], "format"}, and a table format's columns ("schema", "partitionSchema":
   *  those its files keep outside themselves; Spark's JSON). */
  def describe(uri: String, options: String): String
  /** The files to read for these filters (Spark SQL, ANDed), limit (-1: none) and order
   *  ("col ASC|DESC", Spark's null order; "": none): the describe answer's shape, plus "kept",
   *  "skipped", "unknown", "pushed", "not_pushed". */
  def plan(uri: String, options: String, pushed: String, notPushed: String, limit: Long,
           order: String, timeZone: String): String
  /** The table a plain Parquet read's directory is, if lakestats has statistics for it:
   *  {"uri": table URI or null}. */
  def covers(path: String): String
  /** For the catalog's columns ([[name, Spark type name, default size], ...]): {"version",
   *  "sizeInBytes", "rowCount", "properties": {"col.distinctCount": ...}}, or {"version": null}
   *  when the table has no statistics. */
  def statistics(uri: String, options: String, fields: String): String
}

object Lakestats {
  @volatile private var planner: Planner = _
  private val json = new ObjectMapper()

  /** Called by spark_bridge.install: the Python side that answers. */
  def install(p: Planner): Unit = planner = p

  /** The installed planner's answer, as the JSON text it returned. */
  def ask(call: Planner => String): String = {
    val p = planner
    if (p == null) {
      throw new IllegalStateException(
        "lakestats: no planner in this JVM: call spark_bridge.install(spark) first")
    }
    call(p)
  }

  def answer(call: Planner => String): JsonNode = json.readTree(ask(call))

  def toJson(value: Any): String = json.writeValueAsString(value)

  /** The plans of a DataFrame's scans through the source, as a JSON list (spark_bridge.explain). */
  def explain(df: DataFrame): String = {
    val plans = df.queryExecution.sparkPlan.collect {
      case scan: FileSourceScanExec if scan.relation.location.isInstanceOf[LakestatsFileIndex] =>
        scan.relation.location.asInstanceOf[LakestatsFileIndex]
          .plan(scan.partitionFilters ++ scan.dataFilters)
    }
    plans.mkString("[", ",", "]")
  }
}

/** `spark.sql.extensions` entry: statistics for catalog tables, LIMIT and top-k for the index. */
class Extensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectPostHocResolutionRule(_ => AttachStatistics)
    extensions.injectOptimizerRule(_ => PruneParquet)
    extensions.injectOptimizerRule(_ => PassLimit)
  }
}

/** format("lakestats"): a Parquet relation whose file index asks lakestats. */
class DefaultSource extends RelationProvider with SchemaRelationProvider with DataSourceRegister {
  override def shortName(): String = "lakestats"

  override def createRelation(sqlContext: SQLContext, parameters: Map[String, String]): BaseRelation =
    relation(sqlContext.sparkSession, parameters, None)

  override def createRelation(sqlContext: SQLContext, parameters: Map[String, String],
                              schema: StructType): BaseRelation =
    relation(sqlContext.sparkSession, parameters, Some(schema))

  private def relation(spark: SparkSession, parameters: Map[String, String],
                       schema: Option[StructType]): BaseRelation = {
    val uri = parameters.getOrElse("path",
      throw new IllegalArgumentException("lakestats: load(path) or OPTIONS (path '...') is required"))
    val options = parameters - "path"
    val described = Lakestats.answer(_.describe(uri, Lakestats.toJson(options.asJava)))
    val outside = Option(described.get("partitionSchema"))
      .map(s => DataType.fromJson(s.asText()).asInstanceOf[StructType]).getOrElse(new StructType())
    val listing = Listing(spark, options, schema, described, outside)
    val partitionSchema = listing.partitionSchema
    val declared = Option(described.get("schema")).map(s => DataType.fromJson(s.asText()).asInstanceOf[StructType])
    val dataSchema = schema.orElse(declared)
      .map(s => StructType(s.filterNot(f => partitionSchema.exists(_.name == f.name))))
      .orElse(new ParquetFileFormat().inferSchema(spark, options, listing.allFiles()))
      .getOrElse(throw new IllegalArgumentException(
        s"lakestats: $uri: no Parquet files to take the table's columns from"))
    val index = new LakestatsFileIndex(spark, uri, options, listing, dataSchema, -1, "")
    HadoopFsRelation(index, partitionSchema, dataSchema, None, new ParquetFileFormat(), options)(spark)
  }
}

/** A table's files as lakestats listed them. Partitions: a directory's inferred by Spark's own
 *  rules (Hive-style directories); a table format's given per file (`explicit`: the values it
 *  keeps outside its files, none if it keeps them all inside). */
class Listing(spark: SparkSession, options: Map[String, String], schema: Option[StructType],
              val root: Path, files: Seq[FileStatus], explicit: Option[PartitionSpec])
  extends PartitioningAwareFileIndex(spark, options, schema, NoopCache) {
  override def rootPaths: Seq[Path] = Seq(root)
  override lazy val leafFiles: mutable.LinkedHashMap[Path, FileStatus] =
    mutable.LinkedHashMap(files.map(f => f.getPath -> f): _*)
  // given partitions are per file: each file stands as its own directory
  override lazy val leafDirToChildrenFiles: Map[Path, Array[FileStatus]] =
    if (explicit.isDefined) files.map(f => f.getPath -> Array(f)).toMap
    else files.toArray.groupBy(_.getPath.getParent)
  override lazy val partitionSpec: PartitionSpec = explicit.getOrElse(inferPartitioning())
  override def refresh(): Unit = ()
}

object Listing {
  /** `partitions`: a table format's columns kept outside its files (empty for a directory). */
  def apply(spark: SparkSession, options: Map[String, String], schema: Option[StructType],
            answer: JsonNode, partitions: StructType): Listing = {
    val root = new Path(answer.get("root").asText())
    val files = answer.get("files").elements().asScala.map { f =>
      val status = new FileStatus(f.get(1).asLong(), false, 1, 128L << 20, f.get(2).asLong(),
        new Path(root.toString + "/" + f.get(0).asText()))
      status -> f.get(3).elements().asScala.map(v => if (v.isNull) null else v.asText()).toSeq
    }.toSeq
    if (answer.get("format").asText() == "parquet") {
      new Listing(spark, options + ("basePath" -> root.toString), schema, root, files.map(_._1), None)
    } else {
      val given = files.map { case (status, values) => PartitionPath(row(values, partitions), status.getPath) }
      // without partition columns Spark takes the root's own files, unless recursive
      val every = if (partitions.isEmpty) Map("recursiveFileLookup" -> "true") else Map.empty
      new Listing(spark, options ++ every, schema, root, files.map(_._1),
        Some(PartitionSpec(partitions, given)))
    }
  }

  /** Partition values from their text (native.partition_texts), cast as ANSI SQL casts:
   *  a value that does not read back fails the query rather than turning null. */
  private def row(values: Seq[String], partitions: StructType): InternalRow =
    InternalRow.fromSeq(values.zip(partitions.fields).map {
      case (null, _) => null
      case (v, f) => Cast(Literal(v), f.dataType, Some("UTC"), EvalMode.ANSI).eval()
    })
}

/** The file index of a `lakestats` relation: every listFiles asks lakestats, so each query is
 *  planned against the table as it is then, with its own filters (none is kept between queries). */
class LakestatsFileIndex(spark: SparkSession, val uri: String, val options: Map[String, String],
                         described: FileIndex, dataSchema: StructType, val limit: Long,
                         val order: String)
  extends FileIndex with PredicateHelper {
  private val schema = StructType(dataSchema ++ described.partitionSchema
    .filterNot(f => dataSchema.exists(_.name == f.name)))

  override def rootPaths: Seq[Path] = described.rootPaths
  override def partitionSchema: StructType = described.partitionSchema
  override def inputFiles: Array[String] = described.inputFiles
  override def sizeInBytes: Long = described.sizeInBytes
  override def refresh(): Unit = ()

  def withLimit(n: Long, order: String): LakestatsFileIndex =
    new LakestatsFileIndex(spark, uri, options, described, dataSchema, n, order)

  override def listFiles(partitionFilters: Seq[Expression],
                         dataFilters: Seq[Expression]): Seq[PartitionDirectory] = {
    val answer = Lakestats.answer(planCall(partitionFilters ++ dataFilters))
    val outside = if (answer.get("format").asText() == "parquet") new StructType() else partitionSchema
    Listing(spark, options, Some(schema), answer, outside).listFiles(partitionFilters, dataFilters)
  }

  /** The planner's answer for these filters, as JSON text. */
  def plan(filters: Seq[Expression]): String = Lakestats.ask(planCall(filters))

  private def planCall(filters: Seq[Expression]): Planner => String = {
    val rendered = filters.flatMap(splitConjunctivePredicates).map(f => f -> SparkSql.of(f))
    val pushed = rendered.collect { case (_, Some(sql)) => sql }
    val notPushed = rendered.collect { case (f, None) => f.sql }
    val zone = spark.sessionState.conf.sessionLocalTimeZone
    _.plan(uri, Lakestats.toJson(options.asJava), Lakestats.toJson(pushed.asJava),
      Lakestats.toJson(notPushed.asJava), limit, order, zone)
  }
}

/** Catalyst filters as the Spark SQL text lakestats' evaluator reads (pruning.predicate), or
 *  None for what it cannot be given exactly: such a conjunct is not pushed, and never prunes. */
object SparkSql {
  private val micros = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSSSS")

  def of(e: Expression): Option[String] = e match {
    case a: AttributeReference => Some("`" + a.name.replace("`", "``") + "`")
    case l: Literal => literal(l.value, l.dataType)
    case And(a, b) => binary("AND", a, b)
    case Or(a, b) => binary("OR", a, b)
    case Not(a) => of(a).map(x => s"(NOT $x)")
    case IsNull(a) => of(a).map(x => s"($x IS NULL)")
    case IsNotNull(a) => of(a).map(x => s"($x IS NOT NULL)")
    case b: BinaryComparison => binary(b.symbol, b.left, b.right)
    case In(v, list) => all(v +: list).map(x => s"(${x.head} IN (${x.tail.mkString(", ")}))")
    case InSet(v, set) =>
      all(v +: set.toSeq.map(Literal(_, v.dataType))).map(x => s"(${x.head} IN (${x.tail.mkString(", ")}))")
    case StartsWith(s, Literal(p: UTF8String, StringType)) =>
      val escaped = p.toString.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
      of(s).flatMap(x => literal(UTF8String.fromString(escaped + "%"), StringType).map(y => s"($x LIKE $y)"))
    case a: Add => binary("+", a.left, a.right)
    case s: Subtract => binary("-", s.left, s.right)
    case m: Multiply => binary("*", m.left, m.right)
    case UnaryMinus(a, _) => of(a).map(x => s"(- $x)")
    case _ => None
  }

  private def binary(op: String, a: Expression, b: Expression): Option[String] =
    for (x <- of(a); y <- of(b)) yield s"($x $op $y)"

  private def all(es: Seq[Expression]): Option[Seq[String]] = {
    val out = es.map(of)
    if (out.forall(_.isDefined)) Some(out.flatten) else None
  }

  /** Typed text: a double carries an exponent (read as a float, not a decimal); a timestamp
   *  its UTC offset (an instant, whatever the session's zone). */
  private def literal(v: Any, t: DataType): Option[String] = (v, t) match {
    case (null, _) => Some("NULL")
    case (b: Boolean, BooleanType) => Some(if (b) "TRUE" else "FALSE")
    case (n, ByteType | ShortType | IntegerType | LongType) => Some(n.toString)
    case (d: Double, DoubleType) if !d.isNaN && !d.isInfinite => Some(exponent(d.toString))
    case (f: Float, FloatType) if !f.isNaN && !f.isInfinite => Some(exponent(f.toDouble.toString))
    case (d: Decimal, _: DecimalType) => Some(d.toJavaBigDecimal.toPlainString)
    case (s: UTF8String, StringType) =>
      Some("'" + s.toString.replace("\\", "\\\\").replace("'", "\\'") + "'")
    case (days: Int, DateType) =>
      val d = LocalDate.ofEpochDay(days)
      if (d.getYear < 1 || d.getYear > 9999) None else Some(s"DATE '$d'")
    case (us: Long, TimestampType) =>
      // in seconds and nanoseconds: microseconds as nanoseconds overflow a long after 2262
      val at = Instant.ofEpochSecond(Math.floorDiv(us, 1000000L), Math.floorMod(us, 1000000L) * 1000L)
        .atOffset(ZoneOffset.UTC)
      if (at.getYear < 1 || at.getYear > 9999) None
      else Some(s"TIMESTAMP '${micros.format(at)}+00:00'")
    case _ => None
  }

  private def exponent(text: String): String = if (text.contains("E")) text else text + "E0"
}

/** Plain Parquet reads of a table lakestats has statistics for (`spark.read.parquet(uri)`, a
 *  catalog Parquet table over one directory), when `spark.lakestats.parquet.enabled` is true:
 *  their file index becomes lakestats', so that they prune as the source does. Reads that pick
 *  files themselves (globs, basePath, modification times) are left alone. */
object PruneParquet extends Rule[LogicalPlan] {
  val Enabled = "spark.lakestats.parquet.enabled"
  private val Picking = Set("pathglobfilter", "modifiedbefore", "modifiedafter", "recursivefilelookup",
    "basepath")

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!SQLConf.get.getConfString(Enabled, "false").toBoolean) plan
    else plan transformUp {
      case l @ LogicalRelation(fs: HadoopFsRelation, _, _, false, _)
          if fs.fileFormat.isInstanceOf[ParquetFileFormat] && fs.location.isInstanceOf[InMemoryFileIndex] &&
            fs.location.rootPaths.size == 1 && !fs.options.keys.exists(k => Picking(k.toLowerCase)) =>
        val table = Lakestats.answer(_.covers(fs.location.rootPaths.head.toString)).get("uri")
        if (table.isNull) l
        else l.copy(relation = fs.copy(location = new LakestatsFileIndex(fs.sparkSession, table.asText(),
          Map.empty, fs.location, fs.dataSchema, -1, ""))(fs.sparkSession))
    }
}

/** Catalog tables `USING lakestats` carry the published statistics, read when the table is
 *  resolved (so a new version is seen by the next query), for the cost-based optimizer. */
object AttachStatistics extends Rule[LogicalPlan] {
  private val Marker = "lakestats.statistics.version"

  override def apply(plan: LogicalPlan): LogicalPlan = plan transformUp {
    case l @ LogicalRelation(fs: HadoopFsRelation, _, Some(table), _, _)
        if fs.location.isInstanceOf[LakestatsFileIndex] && !table.properties.contains(Marker) =>
      val index = fs.location.asInstanceOf[LakestatsFileIndex]
      val fields = table.schema.fields.map(f =>
        Seq[Any](f.name, f.dataType.typeName, f.dataType.defaultSize).asJava).toSeq.asJava
      val answer = Lakestats.answer(
        _.statistics(index.uri, Lakestats.toJson(index.options.asJava), Lakestats.toJson(fields)))
      val version = answer.get("version")
      if (version.isNull) {
        l.copy(catalogTable = Some(table.copy(properties = table.properties + (Marker -> ""))))
      } else {
        val props = answer.get("properties").fields().asScala.map(e => e.getKey -> e.getValue.asText()).toMap
        val columns = table.schema.fields.filter(f => props.contains(f.name + ".version")).flatMap { f =>
          CatalogColumnStat.fromMap(table.identifier.table, f.name, props).map(f.name -> _)
        }.toMap
        val stats = CatalogStatistics(BigInt(answer.get("sizeInBytes").asLong()),
          Some(BigInt(answer.get("rowCount").asLong())), columns)
        l.copy(catalogTable = Some(table.copy(stats = Some(stats),
          properties = table.properties + (Marker -> version.asText()))))
      }
  }
}

/** LIMIT n over a filtered scan through the source, or ORDER BY one of its columns (Spark's
 *  null order) LIMIT n: the index may keep only the files that hold the first n rows for sure
 *  (the planner does so only when every filter is pushed). */
object PassLimit extends Rule[LogicalPlan] with PredicateHelper {
  override def apply(plan: LogicalPlan): LogicalPlan = plan transformDown {
    case limit @ LocalLimit(IntegerLiteral(n), sort @ Sort(Seq(key), true, child, _)) =>
      key match {
        case SortOrder(a: AttributeReference, direction, nulls, _)
            if nulls == direction.defaultNullOrdering =>
          val order = s"`${a.name.replace("`", "``")}` ${if (direction == Ascending) "ASC" else "DESC"}"
          limit.copy(child = sort.copy(child = withLimit(child, n, order, Some(a))))
        case _ => limit
      }
    case limit @ LocalLimit(IntegerLiteral(n), child) if !child.isInstanceOf[Sort] =>
      limit.copy(child = withLimit(child, n, "", None))
  }

  /** `key`: the sort column, which must be the relation's own (not a projected alias). */
  private def withLimit(plan: LogicalPlan, n: Int, order: String,
                        key: Option[AttributeReference]): LogicalPlan = plan match {
    case p @ Project(_, child) => p.copy(child = withLimit(child, n, order, key))
    case f @ Filter(condition, child) if handedWhole(condition, child) =>
      f.copy(child = withLimit(child, n, order, key))
    case l @ LogicalRelation(fs: HadoopFsRelation, output, _, _, _)
        if key.forall(k => output.exists(_.exprId == k.exprId) && !timestampDirectory(fs, k)) =>
      fs.location match {
        case index: LakestatsFileIndex if index.limit != n || index.order != order =>
          l.copy(relation = fs.copy(location = index.withLimit(n, order))(fs.sparkSession))
        case _ => l
      }
    case other => other
  }

  /** A directory column Spark types a timestamp from its text, in the session's time zone:
   *  the statistics keep it a string, whose order is not the instants' (a local time skipped
   *  at a change of offset), so no top-k by it. */
  private def timestampDirectory(fs: HadoopFsRelation, key: AttributeReference): Boolean =
    fs.partitionSchema.exists(f => f.name == key.name &&
      (f.dataType == TimestampType || f.dataType == TimestampNTZType))

  /** Whether Spark's scan hands the index every conjunct of `condition` whole, so that the
   *  index's LIMIT sees the whole filter: FileSourceStrategy drops non-deterministic conjuncts
   *  and subqueries, and weakens (or drops) one that reads partition and data columns both. */
  private def handedWhole(condition: Expression, below: LogicalPlan): Boolean =
    relation(below).exists { case (output, partitionNames) =>
      val partitions = AttributeSet(output.filter(a => partitionNames.contains(a.name)))
      splitConjunctivePredicates(condition).forall { c =>
        c.deterministic && !SubqueryExpression.hasSubquery(c) &&
          c.references.subsetOf(AttributeSet(output)) &&
          (c.references.subsetOf(partitions) || !c.references.exists(partitions.contains))
      }
    }

  /** The relation's output and partition column names, under projections and filters. */
  private def relation(plan: LogicalPlan): Option[(Seq[Attribute], Set[String])] = plan match {
    case Project(_, child) => relation(child)
    case Filter(_, child) => relation(child)
    case LogicalRelation(fs: HadoopFsRelation, output, _, _, _) =>
      Some(output -> fs.partitionSchema.fieldNames.toSet)
    case _ => None
  }
}
