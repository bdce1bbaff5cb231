"""Iceberg manifest-level statistics: each manifest's totals and bounds equal an oracle over
the rows pyiceberg reads from that manifest's data files (deletes applied), and the
optimizer's lookup prunes manifests by partition filters without applying them twice."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakestats.formats import Selection
from lakestats.formats.manifest_statistics import Stored
from lakestats.metastore.layout import Layout
from lakestats.monostore.compute import compute
from lakestats.pruning.manifests import lookup
from tests.tables import run_cli
from tests.test_formats import batch, position_deletes

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=d) for d in range(4)]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Partitioned by day, three appends a day (a manifest each), one day overwritten, and
    position deletes in one file."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo
    warehouse = tmp_path_factory.mktemp("iceberg-manifests")
    catalog = SqlCatalog("test", uri=f"sqlite:///{warehouse}/catalog.db",
                         warehouse=f"file://{warehouse}")
    catalog.create_namespace("lake")

    def rows(k: int, day: dt.date) -> pa.Table:
        data = batch(k, 40)
        return data.append_column("d", pa.array([day] * data.num_rows, pa.date32()))

    iceberg = catalog.create_table("lake.daily", schema=rows(0, DAYS[0]).schema)
    with iceberg.update_spec() as spec:
        spec.add_identity("d")
    for k, day in enumerate(DAYS * 3):
        iceberg.append(rows(k, day))
    iceberg.overwrite(rows(99, DAYS[1]), overwrite_filter=EqualTo("d", DAYS[1].isoformat()))
    third_day = (DAYS[2] - dt.date(1970, 1, 1)).days      # Iceberg keeps dates as days
    task = next(t for t in iceberg.scan().plan_files() if t.file.partition[0] == third_day)
    position_deletes(iceberg, task.file, [1, 4])
    return catalog.load_table("lake.daily")


@pytest.fixture(scope="module")
def computed(table, invoker, settings):
    root = table.location().removeprefix("file://")
    report = compute(root, invoker, settings, selection=Selection())
    assert report.published and report.snapshot["snapshot"] == str(
        table.current_snapshot().snapshot_id)
    return root, Stored(Layout.of_table(root), report.snapshot["snapshot"])


def manifest_rows(table) -> dict[str, tuple[pa.Table, list]]:
    """manifest path -> (the rows pyiceberg reads from its live data files, its entries)."""
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.manifest import DataFileContent, ManifestContent
    scan = table.scan()
    tasks = {t.file.file_path: t for t in scan.plan_files()}
    out = {}
    for m in table.current_snapshot().manifests(table.io):
        if m.content != ManifestContent.DATA:
            continue
        entries = [e for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
                   if e.data_file.content == DataFileContent.DATA]
        mine = [tasks[e.data_file.file_path] for e in entries]
        reader = ArrowScan(table.metadata, table.io, table.schema(), scan.row_filter)
        out[m.manifest_path] = (reader.to_table(mine), entries)
    return out


def bound(values: pa.ChunkedArray, which: str):
    """min or max of the non-null, non-NaN values."""
    if pa.types.is_floating(values.type):
        values = values.filter(pc.invert(pc.is_nan(values)))
    return getattr(pc, which)(values).as_py()


def test_each_manifest_matches_the_rows_of_its_files(table, computed):
    _, stored = computed
    expected = manifest_rows(table)
    manifests = stored.read()
    assert sorted(manifests["manifest_path"].to_pylist()) == sorted(expected)
    assert len(expected) > len(DAYS)     # several manifests a day
    schema = stored.table_schema
    for m in manifests.to_pylist():
        rows, entries = expected[m["manifest_path"]]
        assert m["snapshot_id"] == table.current_snapshot().snapshot_id
        assert m["file_count"] == len(entries) and m["missing_file_count"] == 0
        assert m["total_record_count"] == rows.num_rows
        assert m["total_file_size_in_bytes"] == sum(e.data_file.file_size_in_bytes
                                                    for e in entries)
        for k, field in enumerate(schema):
            column, got = rows[field.name], m[f"c{k}"]
            field_id = stored.field_ids[field.name]
            assert got["total_column_size"] == sum(e.data_file.column_sizes[field_id]
                                                   for e in entries)
            assert got["total_null_value_count"] == column.null_count
            nan = pc.sum(pc.is_nan(column)).as_py() or 0 if pa.types.is_floating(
                column.type) else 0
            assert got["total_nan_value_count"] == nan, field.name
            assert got["lower_bound"] == bound(column, "min"), field.name
            assert got["upper_bound"] == bound(column, "max"), field.name
    # the position deletes took two rows from one manifest's file, exactly
    assert sum(manifests["total_record_count"].to_pylist()) == table.scan().to_arrow().num_rows


def test_lookup_prunes_manifests_by_partition_filters_once(table, computed):
    _, stored = computed
    day = DAYS[2]
    rows = table.scan().to_arrow()
    of_day = rows.filter(pc.equal(rows["d"], pa.scalar(day, pa.date32())))
    found = lookup(stored, ["i32", "f64"], f"d = DATE'{day}' AND i32 > 0")
    # the partition filter pruned manifests and is applied: the rows are exactly the day's,
    # not the day's times the filter's selectivity again; the rest is left to the optimizer
    assert found["partition_filter"] == "d = CAST('2026-11-03' AS DATE)"
    assert found["residual_filter"] == "i32 > 0"
    assert found["manifests_kept"] == 3 < found["manifests"]
    assert found["record_count"] == of_day.num_rows
    assert found["columns"]["f64"]["total_null_value_count"] == of_day["f64"].null_count
    assert found["columns"]["i32"]["lower_bound"] == str(pc.min(of_day["i32"]).as_py())
    everything = lookup(stored, ["i32"], "i32 > 0")           # no partition filter
    assert everything["partition_filter"] is None and everything["residual_filter"] == "i32 > 0"
    assert everything["record_count"] == rows.num_rows
    assert everything["manifests_kept"] == everything["manifests"]
    # OR across a partition and a data column is no partition filter
    assert lookup(stored, [], f"d = DATE'{day}' OR i32 > 0")["partition_filter"] is None


def test_manifests_command(table, computed):
    root, stored = computed
    done = run_cli("manifests", root, "--json", "--columns", "i32,d", "--where",
                   f"d >= DATE'{DAYS[2]}'")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["format"] == "iceberg" and out["partition_columns"] == ["d"]
    assert out["snapshot"] == str(table.current_snapshot().snapshot_id)
    # every data manifest of the snapshot, several a day
    assert sorted(m["manifest_path"] for m in out["manifests"]) == sorted(
        stored.read()["manifest_path"].to_pylist()) and len(out["manifests"]) > len(DAYS)
    first = out["manifests"][0]
    for key in ("manifest_path", "total_record_count", "total_file_size_in_bytes",
                "total_column_sizes", "total_null_value_counts", "total_nan_value_counts",
                "lower_bounds", "upper_bounds"):
        assert key in first
    assert set(first["lower_bounds"]) <= {"i32", "d"}
    late = [m for m in out["manifests"] if m["upper_bounds"].get("d", "") >= str(DAYS[2])]
    assert out["lookup"]["record_count"] == sum(m["total_record_count"] for m in late)
    # lost manifest statistics are built again from the version
    Path(stored.directory.path(stored.name)).unlink()
    again = run_cli("manifests", root, "--json", "--columns", "i32,d")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["manifests"] == json.loads(run_cli(
        "manifests", root, "--json", "--columns", "i32,d").stdout)["manifests"]
    bad = run_cli("manifests", root, "--where", "d >=")
    assert bad.returncode == 2 and "cannot parse" in bad.stderr
