"""Iceberg, Delta and Hudi tables: statistics of each snapshot equal the oracle computed over
what the format's own reader returns for it (appends, an overwrite, deletes), time travel
answers as of each snapshot, removed files never count, and unchanged files are reused."""
from __future__ import annotations

import shutil
import uuid
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakestats.formats import FormatError, Selection
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import NotPublished, StatisticsReader
from lakestats.monostore.compute import compute
from tests.oracle import check_everything, kind
from tests.oracle_data import adversarial
from tests.tables import run_cli

HUDI_SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "hudi"
DELTA_SAMPLES = HUDI_SAMPLES.parent / "delta"

# the adversarial columns every format stores (Iceberg and Delta know no unsigned integers,
# nanosecond or zoned-but-not-UTC timestamps, or times of day)
COLUMNS = {"i32": pa.int32(), "i64": pa.int64(), "i64_near": pa.int64(), "f64": pa.float64(),
           "f64_finite": pa.float64(), "f32": pa.float32(), "dec38": pa.decimal128(38, 3),
           "dec9": pa.decimal128(9, 2), "ts_ny": pa.timestamp("us", "UTC"),
           "ts_s": pa.timestamp("us"), "day": pa.date32(), "text": pa.string(),
           "blob": pa.binary(), "flag": pa.bool_()}


def batch(part: int, n: int = 120) -> pa.Table:
    data = adversarial(part, n)
    columns = {name: data[name].cast(t) for name, t in COLUMNS.items()}
    return pa.table({**columns, "part": pa.array([part % 2] * n, pa.int32())})


def check_snapshot(stats_root: str, snapshot: str, rows: pa.Table, tmp: Path) -> StatisticsReader:
    """The statistics published for `snapshot` against the oracle over `rows`, the format
    reader's rows of it. Versions are incremental: one that removed files keeps its histogram
    grid, which may then be coarser than the finest."""
    ts = StatisticsReader.of_snapshot(stats_root, snapshot)
    assert ts.manifest.row_count == rows.num_rows
    schema = plain(ts.schema())
    # every column of the format's rows, under the format's names (partition columns too)
    assert schema.names == rows.column_names
    oracle = tmp / f"oracle-{snapshot}"
    oracle.mkdir()
    pq.write_table(pa.table({f.name: rows[f.name].cast(nullable(f.type)) for f in schema}),
                   oracle / "rows.parquet")
    # nested columns: their row only (no frequencies or histograms)
    assert check_everything(oracle, ts, ["rows.parquet"], None, schema, finest=False) == sum(
        kind(f.type) != "other" for f in schema)
    return ts


def nullable(t: pa.DataType) -> pa.DataType:
    """`t` with every nested field nullable: a struct's non-null child under a null struct
    (Spark's variant) holds nulls, which Parquet's writer refuses."""
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(nullable(f.type)).with_nullable(True) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_type, nullable(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(nullable(t.value_type))
    if pa.types.is_large_list(t):
        return pa.large_list(nullable(t.value_type))
    return t


def plain(schema: pa.Schema) -> pa.Schema:
    """View types (delta-rs writes them) as the oracle knows them: string and binary."""
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return pa.schema([f.with_type(views.get(f.type, f.type)) for f in schema])


def compute_snapshot(table: str, invoker, settings, **selection):
    report = compute(table, invoker, settings, selection=Selection(**selection))
    assert report.version and not report.failed, report.as_json()
    return report


# -- Iceberg -------------------------------------------------------------------------------------

def partitioned_iceberg(warehouse: Path, name: str, location: str | None = None,
                        **properties):
    """(catalog, table): an Iceberg table partitioned by `part`, after two appends; the
    catalog in `warehouse`, the table there too unless at `location` (the catalog's
    `properties` say how to reach it)."""
    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("test", uri=f"sqlite:///{warehouse}/catalog.db",
                         warehouse=f"file://{warehouse}", **properties)
    catalog.create_namespace("lake")
    table = catalog.create_table(f"lake.{name}", schema=batch(0).schema, location=location)
    with table.update_spec() as spec:
        spec.add_identity("part")
    table.append(batch(0))
    table.append(batch(1))
    return catalog, table


@pytest.fixture(scope="module")
def iceberg(tmp_path_factory):
    """A partitioned Iceberg table through five commits: two appends, an overwrite of one
    partition, a delete (rewriting files) and position deletes; returns the table and the
    snapshot ids in commit order."""
    from pyiceberg.expressions import EqualTo, LessThan
    catalog, table = partitioned_iceberg(tmp_path_factory.mktemp("iceberg"), "events")
    table.overwrite(batch(2), overwrite_filter=EqualTo("part", 0))
    table.delete(LessThan("i32", 0))
    task = next(iter(table.scan().plan_files()))
    position_deletes(table, task.file, [0, 5, 7])
    table = catalog.load_table("lake.events")
    return table, [s.snapshot_id for s in table.metadata.snapshots]


def add_delete_file(table, data_file, content, rows: pa.Table, **fields) -> None:
    """Commit a delete file for the partition of `data_file`, as engines write them (pyiceberg
    reads position deletes but writes no delete files)."""
    from pyiceberg.manifest import DataFile, FileFormat
    path = f"{table.location()}/data/deletes-{content.name.lower()}-{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, path.removeprefix("file://"))
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(DataFile.from_args(
            content=content, file_path=path, file_format=FileFormat.PARQUET,
            partition=data_file.partition, record_count=rows.num_rows,
            file_size_in_bytes=Path(path.removeprefix("file://")).stat().st_size,
            spec_id=data_file.spec_id, **fields))


def position_deletes(table, data_file, positions: list[int]) -> None:
    from pyiceberg.manifest import DataFileContent
    add_delete_file(table, data_file, DataFileContent.POSITION_DELETES, pa.table({
        "file_path": [data_file.file_path] * len(positions),
        "pos": pa.array(positions, pa.int64())}))


def test_iceberg_snapshots(iceberg, invoker, settings, tmp_path):
    table, snapshots = iceberg
    root = table.location().removeprefix("file://")
    stats_root = Layout.of_table(root).uri
    reports = [compute_snapshot(root, invoker, settings, snapshot=str(s)) for s in snapshots]
    # the overwrite removed files that were computed: the next snapshot's statistics drop them
    assert reports[2].removed >= 1 and reports[1].reused >= 1
    assert compute_snapshot(root, invoker, settings).as_json()["snapshot"] == str(snapshots[-1])
    for snapshot in snapshots:
        scan = table.scan(snapshot_id=snapshot)
        ts = check_snapshot(stats_root, str(snapshot), scan.to_arrow(), tmp_path)
        live = {f.file.file_path.removeprefix(f"{table.location()}/")
                for f in scan.plan_files()}
        assert {p["path"] for p in ts.partitions()} == live        # removed files never count
        assert all(p["partition_values"]["part"] in ("0", "1") for p in ts.partitions())
    with pytest.raises(NotPublished, match="no statistics of snapshot 12345"):
        StatisticsReader.of_snapshot(stats_root, "12345")


def test_iceberg_position_deletes_recompute_only_their_file(iceberg, invoker, settings):
    table, snapshots = iceberg
    root = table.location().removeprefix("file://")
    compute_snapshot(root, invoker, settings, snapshot=str(snapshots[-2]))
    report = compute_snapshot(root, invoker, settings, snapshot=str(snapshots[-1]))
    files = len(list(table.scan(snapshot_id=snapshots[-1]).plan_files()))
    assert (report.computed, report.reused, report.removed) == (1, files - 1, 0)
    assert report.row_count == table.scan(snapshot_id=snapshots[-2]).to_arrow().num_rows - 3


def test_iceberg_through_a_catalog_and_as_of(iceberg, invoker, settings, tmp_path):
    table, snapshots = iceberg
    catalog = table.catalog.properties["uri"]
    when = table.snapshot_by_id(snapshots[1]).timestamp_ms
    from datetime import datetime, timezone
    stats_root = str(tmp_path / "stats")
    report = compute(table.location(), invoker, settings, stats_root=stats_root,
                     selection=Selection("iceberg", as_of=datetime.fromtimestamp(
                         when / 1000, timezone.utc).isoformat(), catalog=catalog,
                         table_name="lake.events", catalog_name="test"))
    assert report.as_json()["snapshot"] == str(snapshots[1])


# -- Delta ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def delta(tmp_path_factory):
    """A Delta table partitioned by `part` (a null partition too) through an append, a second
    append, an overwrite and a delete."""
    from deltalake import DeltaTable, write_deltalake
    root = tmp_path_factory.mktemp("delta") / "events"
    first = batch(0)
    first = first.set_column(first.schema.get_field_index("part"), "part",
                             pa.array([0, None] * 60, pa.int32()))
    write_deltalake(root, first, partition_by=["part"])
    write_deltalake(root, batch(1), partition_by=["part"], mode="append")
    write_deltalake(root, batch(2), partition_by=["part"], mode="overwrite")
    write_deltalake(root, batch(3), partition_by=["part"], mode="append")
    DeltaTable(root).delete("i32 < 0")
    return root


def test_delta_versions(delta, invoker, settings, tmp_path):
    from deltalake import DeltaTable
    stats_root = Layout.of_table(str(delta)).uri
    latest = DeltaTable(delta).version()
    for version in range(latest + 1):
        compute_snapshot(str(delta), invoker, settings, snapshot=str(version))
    for version in range(latest + 1):
        reader = DeltaTable(delta, version=version)
        ts = check_snapshot(stats_root, str(version), reader.to_pyarrow_table(), tmp_path)
        live = set(pa.table(reader.get_add_actions())["path"].to_pylist())
        assert {p["path"] for p in ts.partitions()} == live
    first = StatisticsReader.of_snapshot(stats_root, "0").partitions()
    assert sorted(p["partition_values"]["part"] or "null" for p in first) == ["0", "null"]


def unzipped(zips: list[Path], tmp: Path, marker: str) -> list[Path]:
    """The table roots of zipped sample tables: the grandparents of the files that the glob
    `marker` finds."""
    roots = []
    for sample in zips:
        with zipfile.ZipFile(sample) as z:
            z.extractall(tmp / sample.stem)
        roots += [p.parent.parent for p in (tmp / sample.stem).glob(marker)
                  if "__MACOSX" not in str(p)]
    return roots


# -- choosing the format -------------------------------------------------------------------------

def test_formats_are_detected_and_misuse_is_a_clear_error(delta, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"x": [1]}), plain / "a.parquet")
    done = run_cli("compute", str(plain), "--snapshot", "3", "--quiet")
    assert done.returncode == 1 and "has no snapshots" in done.stderr
    done = run_cli("compute", str(plain), "--format", "iceberg", "--quiet")
    assert done.returncode == 1 and "not an Iceberg table" in done.stderr
    done = run_cli("compute", str(delta), "--snapshot", "99", "--quiet")
    assert done.returncode == 1 and "Delta" in done.stderr and "99" in done.stderr
    from lakestats.formats import detect
    from lakestats.metastore.store import Store
    assert detect(Store(str(delta))) == "delta" and detect(Store(str(plain))) == "parquet"
    with pytest.raises(FormatError, match="--format orc"):
        from lakestats.formats import open_snapshot
        open_snapshot(str(plain), Selection("orc"))
    assert pc is not None


def test_iceberg_equality_deletes_are_flagged_and_never_certain(invoker, settings, tmp_path,
                                                                spark):
    """Equality deletes are not applied: the file is listed as inexact, its partition says
    bounds_exact false, and LIMIT and top-k pruning take none of its rows for certain (all
    of them may be deleted)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import DataFileContent
    catalog = SqlCatalog("eq", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}")
    catalog.create_namespace("lake")
    table = catalog.create_table("lake.t", schema=pa.schema([("x", pa.int64())]))
    table.append(pa.table({"x": pa.array(range(100), pa.int64())}))
    small = next(iter(table.scan().plan_files())).file
    add_delete_file(table, small, DataFileContent.EQUALITY_DELETES,
                    pa.table({"x": pa.array(range(100), pa.int64())}),
                    equality_ids=[table.schema().find_field("x").field_id])
    table.append(pa.table({"x": pa.array(range(1000, 1010), pa.int64())}))   # after: exact
    root = table.location().removeprefix("file://")
    report = compute_snapshot(root, invoker, settings)
    deleted = small.file_path.removeprefix(f"{table.location()}/")
    assert list(report.snapshot["inexact"]) == [deleted]
    stats_root = Layout.of_table(root).uri
    parts = {p["path"]: p["bounds_exact"] for p in StatisticsReader(stats_root).partitions()}
    assert parts[deleted] is False and sum(parts.values()) == 1
    (later,) = [p for p, exact in parts.items() if exact]
    from lakestats.pruning import prune
    # every row of the flagged file may be deleted: the later file's rows are the certain ones
    assert prune(stats_root, None, 5, "x ASC").kept == [deleted, later]
    assert prune(stats_root, None, 5).kept == [later]
    assert prune(stats_root, "x >= 1000", 5).kept == [later]
    # Spark reads the exact file, and refuses to read the flagged one as if nothing were deleted
    from lakestats import spark_bridge
    assert spark_bridge.read(spark, root, where="x >= 1000").count() == 10
    with pytest.raises(FormatError, match=f"{deleted}: .*cannot be read exactly"):
        spark_bridge.read(spark, root)
    # exported into the table: sketches, but no exact `ndv` claimed (the deleted rows' values
    # are counted: 110 distinct where 10 remain)
    from pyiceberg.table.puffin import PuffinFile

    from lakestats.formats import Selection
    from lakestats.formats.iceberg_export import export
    out = export(root, StatisticsReader(stats_root), Selection(
        "iceberg", catalog=f"sqlite:///{tmp_path}/catalog.db", table_name="lake.t",
        catalog_name="eq"))
    table = catalog.load_table("lake.t")
    with table.io.new_input(out.statistics_path).open() as f:
        [blob] = PuffinFile(f.read()).footer.blobs
    assert "ndv" not in blob.properties and blob.fields == [table.schema().find_field("x").field_id]
    # never partitioned: no partition statistics file, as Iceberg writes none
    assert out.partition_statistics_path is None and not table.metadata.partition_statistics


def test_spark_reads_the_rows_the_format_defines(iceberg, delta, spark, invoker, settings,
                                                 tmp_path):
    """spark_bridge.read and .sql over a format table: the snapshot's rows, its deletes applied
    (Iceberg position deletes, Delta deletion vectors), Delta's partition values added."""
    from deltalake import DeltaTable, QueryBuilder

    from lakestats import spark_bridge
    table, _ = iceberg
    expected = {table.location().removeprefix("file://"): table.scan().to_arrow()}
    for root in [delta, *unzipped(sorted(DELTA_SAMPLES.glob("*.zip")), tmp_path,
                                  "_delta_log/00000000000000000000.json")]:
        expected[str(root)] = pa.table(QueryBuilder().register("t", DeltaTable(root))
                                       .execute("SELECT * FROM t").read_all())
    for root, rows in expected.items():
        compute_snapshot(root, invoker, settings)
        column = next(f.name for f in rows.schema if pa.types.is_integer(f.type)
                      or pa.types.is_string(f.type) or pa.types.is_string_view(f.type))
        quoted = f"`{column}`"                  # column mapping allows any name
        df = spark_bridge.read(spark, root)
        assert set(df.columns) == set(rows.column_names), root
        assert sorted((r[0] for r in df.select(quoted).collect()), key=repr) == \
            sorted(rows[column].to_pylist(), key=repr), root
        counted = spark_bridge.sql(spark, f"SELECT count(*) FROM t WHERE {quoted} IS NOT NULL",
                                   {"t": root}).collect()[0][0]
        assert counted == rows.num_rows - rows[column].null_count, root
        # a filter no file can match: an empty frame, with the table's columns
        high = pc.max(rows[column].cast(plain(rows.schema).field(column).type)).as_py()
        beyond = f"{quoted} > {high!r}" if isinstance(high, int) else f"{quoted} > '{high}'"
        assert spark_bridge.prune(root, where=beyond).kept == []
        none = spark_bridge.read(spark, root, where=beyond)
        assert set(none.columns) == set(rows.column_names) and none.count() == 0, root
    # the table moves on after its statistics: sql reads its current snapshot, the files
    # added or rewritten since read whole
    from deltalake import write_deltalake
    moved = tmp_path / "moved"
    shutil.copytree(delta, moved)
    write_deltalake(moved, batch(4), partition_by=["part"], mode="append")
    DeltaTable(moved).delete("i32 > 0")
    now = pa.table(QueryBuilder().register("t", DeltaTable(moved)).execute(
        "SELECT i32 FROM t").read_all())
    got = spark_bridge.sql(spark, "SELECT i32 FROM t", {"t": str(moved)}).collect()
    assert sorted((r[0] for r in got), key=repr) == sorted(now["i32"].to_pylist(), key=repr)
