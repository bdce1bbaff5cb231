"""The statistics format: the schema of each file, with the meaning of every field beside it.

Per partition (one data file) and per table version, three Parquet files:

- statistics.parquet   one row per table column, in table order; one column per statistic.
- frequencies.parquet  (column, value, frequency): exact value counts of every column,
                       ordered by column (table order), then decreasing frequency, then value
                       bytes (per partition: ties in the order values first appear).
- histograms.parquet   one struct column per binned table column, one row per bin.

Readers, writers, the CLI's JSON and the Spark bridge all derive from these definitions.
"""
from __future__ import annotations

import pyarrow as pa

# (name, type, meaning). Text statistics hold canonical lossless text (core.types.to_text).
STATISTICS_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("column", pa.string(), "column name"),
    ("type", pa.string(), "Arrow type of the column"),
    ("row_count", pa.int64(), "rows"),
    ("null_count", pa.int64(), "null values"),
    ("nan_count", pa.int64(), "NaN values (floating-point columns only)"),
    ("distinct_count", pa.int64(), "distinct non-null values; NaN counts once, -0.0 = 0.0"),
    ("distinct_count_exact", pa.bool_(), "false when distinct_count is a sketch estimate"),
    ("min", pa.string(), "smallest non-null, non-NaN value (infinities are values)"),
    ("max", pa.string(), "largest non-null, non-NaN value"),
    ("sum", pa.string(), "exact sum of non-null, non-NaN values (numeric columns)"),
    ("mean", pa.float64(), "mean of non-null, non-NaN values (numeric columns)"),
    ("stddev", pa.float64(), "sample standard deviation (n-1) of the same values"),
    ("min_length", pa.int64(), "shortest value: characters for strings, bytes for binary"),
    ("max_length", pa.int64(), "longest value"),
    ("avg_length", pa.float64(), "mean value length"),
    ("true_count", pa.int64(), "true values (boolean columns)"),
    ("histogram_exponent", pa.int16(),
     "histogram bins are 2**exponent wide in the binning domain (see histograms.parquet)"),
    ("frequencies_complete", pa.bool_(),
     "true when frequencies.parquet holds every value of the column; false at table level "
     "when values seen once are left out (see frequency_algorithm)"),
    ("frequency_algorithm", pa.string(),
     "table level: how the exact frequencies were reduced: low-distinct, low-duplicate or "
     "binned (algorithms.frequencies)"),
    ("singleton_count", pa.int64(),
     "table level: values seen exactly once; when frequencies_complete is false these are "
     "the values left out of frequencies.parquet"),
    ("exact_as_of", pa.string(),
     "table level: null when distinct_count, singleton_count and the column's frequencies "
     "describe this version; else the version they last described exactly (a new file "
     "changed a column too large to merge at once: distinct_count is then the sketch's "
     "estimate, distinct_count_exact false, until a compaction or compute --exact)"),
    ("range_set", pa.list_(pa.string()),
     "numeric and temporal columns: at most n_r (20 by default) non-overlapping ranges "
     "covering every non-NaN value, cut at the largest gaps between distinct values "
     "(core.range_sets, Lemma 1): canonical text low1, high1, low2, high2, ... Partition "
     "level; join pruning unions them into data-induced predicates"),
    # binary columns below: the bulk of the file, skipped by readers that do not need them
    ("ndv_sketch", pa.binary(),
     "KMV distinct-count sketch: the up to 4,096 smallest 64-bit hashes (core.hashing) "
     "of the distinct values' canonical text, little-endian uint64; exact below 4,096 values"),
    ("quantile_sketch", pa.binary(),
     "Apache DataSketches KLL doubles sketch (k 200) of the values in the binning domain; "
     "answers quantiles where the table's frequencies leave out values seen once"),
    ("theta_sketch", pa.binary(),
     "Apache DataSketches compact theta sketch (seed 9001, the 4,096 smallest hashes) of the "
     "distinct values under Iceberg's single-value serialization (core.theta): what Iceberg "
     "statistics files carry (lakestats export iceberg); null for types Iceberg cannot "
     "serialize and, at table level, where a partition's statistics predate it"),
    ("bloom_filter", pa.binary(),
     "partition level, columns with more distinct values than bloom_min_distinct (64 by "
     "default; the partition index keeps the others' values): Bloom filter of the values' "
     "canonical text (core.bloom), 1% false positives"),
]
# User-defined statistics (core.udf) follow the built-in ones: a column of values named after
# the statistic, typed, with STATISTIC_KEY metadata {"plugin", "merge", "type"}, and a binary
# column <name>__state of its partial states (JSON, or a serialized DataSketches sketch). Where
# a statistic failed, both are null and the file's STATISTIC_ERRORS_KEY metadata says why.
STATISTIC_KEY = b"lakestats.statistic"
STATISTIC_ERRORS_KEY = b"lakestats.statistic_errors"
STATISTICS_SCHEMA = pa.schema([pa.field(n, t) for n, t, _ in STATISTICS_FIELDS])
STATISTIC_NAMES = [n for n, _, _ in STATISTICS_FIELDS]
SKETCH_NAMES = ("ndv_sketch", "quantile_sketch", "theta_sketch", "bloom_filter")
MERGED_SKETCHES = SKETCH_NAMES[:3]          # those a table-level reduction merges

FREQUENCIES_SCHEMA = pa.schema([
    pa.field("column", pa.string()),      # column name
    pa.field("value", pa.string()),       # canonical text of the value; nulls are not values
    pa.field("frequency", pa.int64()),    # rows holding the value
])
# a long list has row groups of its own, so that one column's lookup reads its own only;
# short lists share groups (metastore.files.write_frequencies)
FREQUENCIES_ROW_GROUP = 65_536

# histograms.parquet: one column per binned table column, each cell a struct
# {lower, upper, count}. Bins are aligned on a power-of-two grid in the binning domain:
# integers, dates, times and timestamps bin their integer storage (a bin holds lower <= v <= upper),
# floats and decimals bin their float64 value (a bin holds lower <= v < upper). Infinities get
# bins of their own with lower = upper = -inf or +inf. Because every grid nests in any coarser
# one, partition histograms re-bin into the table's exactly: the table histogram equals the one
# computed over all the rows at once. Field metadata keeps the grid (exponent, first bin index)
# and the binned values' range (integer bins' outer edges are clipped to it).
HISTOGRAM_EXPONENT_KEY = b"lakestats.exponent"
HISTOGRAM_START_KEY = b"lakestats.first_bin"
HISTOGRAM_RANGE_KEYS = (b"lakestats.low", b"lakestats.high")   # smallest, largest binned value


def histogram_cell_type(edge_type: pa.DataType) -> pa.DataType:
    return pa.struct([("lower", edge_type), ("upper", edge_type), ("count", pa.int64())])


# ranks.parquet (table level, on request): one row per distinct non-null value of each ranked
# column, ordered by column (table order), then rank. Row groups are small and rank-sorted, so
# a quantile lookup reads one.
RANKS_SCHEMA = pa.schema([
    pa.field("column", pa.string()),      # column name
    pa.field("value", pa.string()),       # canonical text of the value
    pa.field("rank", pa.int64()),         # SQL RANK(): 1 + the number of smaller non-null values
    pa.field("count", pa.int64()),        # rows holding the value
    pa.field("last", pa.int64()),         # rank + count - 1: the value's last 1-based position
])
RANKS_ROW_GROUP = 16_384
RANKED_COLUMNS_KEY = b"lakestats.ranked_columns"
# a partition's statistics.parquet: the sizes of the files written before it, {name: bytes}
SIBLING_SIZES_KEY = b"lakestats.file_sizes"


# partitions.parquet (table level, one per version): the partition index, one row per partition
# (data file), sorted by path. A query plan or a table-level reduction reads this one file, and
# only the columns it needs, instead of one statistics file per partition.
INDEX_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("path", pa.string(), "the data file, relative to the table root"),
    ("size", pa.int64(), "bytes"),
    ("etag", pa.string(), "S3 ETag, or the local file's mtime in ns"),
    ("fingerprint", pa.string(), "names the partition's statistics directory"),
    ("row_count", pa.int64(), "rows"),
    ("partition_values", pa.map_(pa.string(), pa.string()), "Hive-style directory values"),
    ("schema", pa.string(), "the data file's Arrow schema (base64 IPC): its columns, in order"),
    ("reading", pa.string(), "how the file is read (metastore.store.reading_digest; '' as it "
     "is): with size and etag, what the fingerprint hashes; absent or null in an index "
     "written before the field"),
]
INDEX_BASE = [n for n, _, _ in INDEX_FIELDS]


def index_column_name(k: int) -> str:
    """The index's struct column of the table's column k. Positional, as column names may
    hold dots, which Parquet readers take for nesting."""
    return f"c{k}"


def index_column_type(value_type: pa.DataType | None) -> pa.DataType:
    """A partition's statistics of one column, min and max typed (value_type; None for nested
    columns, which have none). The struct is null where the partition lacks the column."""
    fields = [("row_count", pa.int64()), ("null_count", pa.int64()), ("nan_count", pa.int64()),
              ("distinct_count", pa.int64())]
    if value_type is not None:
        fields += [("min", value_type), ("max", value_type)]
    fields += [("sum", pa.string()), ("mean", pa.float64()), ("stddev", pa.float64()),
               ("min_length", pa.int64()), ("max_length", pa.int64()),
               ("avg_length", pa.float64()), ("true_count", pa.int64()),
               ("histogram_exponent", pa.int16()),
               # membership without opening the partition (metastore.membership): the values
               # and counts of a column with few, or where its Bloom filter lies in a pack
               ("values", pa.list_(pa.struct([("value", pa.string()),
                                              ("frequency", pa.int64())]))),
               ("bloom_pack", pa.string()), ("bloom_offset", pa.int64()),
               ("bloom_length", pa.int64()),
               # user-defined statistics' states (statistic -> state; null: it failed)
               ("plugin_states", pa.map_(pa.string(), pa.binary()))]
    if value_type is not None:        # the range-set (numeric and temporal columns), typed
        fields.append(("range_set", range_set_type(value_type)))
    return pa.struct(fields)


def range_set_type(value_type: pa.DataType) -> pa.DataType:
    return pa.list_(pa.struct([("low", value_type), ("high", value_type)]))


# snapshots/<snapshot>.manifests.parquet (Iceberg tables): manifest-level statistics, the
# fields of the Iceberg proposal for cost-based optimizers, one row per data manifest of the
# snapshot, keyed by (snapshot_id, manifest_path). Totals are over the manifest's live data
# files, from their exact statistics (deletes applied). Each table column's in a struct column
# of its own, c<k> as in the partition index, so a lookup reads the columns it asks for.
MANIFEST_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("snapshot_id", pa.int64(), "the Iceberg snapshot"),
    ("manifest_path", pa.string(), "the manifest file, as the manifest list names it"),
    ("manifest_length", pa.int64(), "its size in bytes"),
    ("partition_spec_id", pa.int32(), "the partition spec it was written with"),
    ("added_snapshot_id", pa.int64(), "the snapshot that added it"),
    ("file_count", pa.int64(), "live data files it tracks"),
    ("missing_file_count", pa.int64(), "of those, files without statistics (--allow-partial)"),
    ("total_record_count", pa.int64(), "rows, deleted ones left out"),
    ("total_file_size_in_bytes", pa.int64(), "bytes of its data files"),
]
MANIFEST_BASE = [n for n, _, _ in MANIFEST_FIELDS]
MANIFEST_TABLE_SCHEMA_KEY = b"lakestats.table_schema"      # the columns c<k> stand for
MANIFEST_FIELD_IDS_KEY = b"lakestats.field_ids"            # JSON: column -> Iceberg field id
MANIFEST_PARTITION_COLUMNS_KEY = b"lakestats.partition_columns"   # JSON: every spec's sources


def manifest_column_type(value_type: pa.DataType | None) -> pa.DataType:
    """A manifest's statistics of one column (bounds typed; none for nested columns). Sizes
    are the writer's (Iceberg's column_sizes), null where it recorded none."""
    fields = [("total_column_size", pa.int64()), ("total_null_value_count", pa.int64()),
              ("total_nan_value_count", pa.int64())]
    if value_type is not None:
        fields += [("lower_bound", value_type), ("upper_bound", value_type)]
    return pa.struct(fields)
