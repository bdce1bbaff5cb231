"""Exact quantiles and ranks of a table format's snapshot count the rows that the format's own
reader returns: Iceberg position deletes, Delta deletion vectors and Hudi merge-on-read logs
applied, as partition statistics apply them (formats.rows, the one way a data file is read).
Files under Iceberg equality deletes cannot be read exactly: ranking them is an error."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.ranks.driver import compute_ranks
from lakestats.core import types as ty
from lakestats.formats import FormatError
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader
from tests.test_formats import (DELTA_SAMPLES, HUDI_SAMPLES, add_delete_file, compute_snapshot,
                                position_deletes, unzipped)
from tests.test_ranks import percentile_disc, same

QS = [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1]
PROBES = 25            # values whose rank is checked, spread over each column's distinct values


def check_exact(root: str, invoker, settings, rows: pa.Table, columns: list[str]) -> None:
    """Statistics, then ranks, of the table's current snapshot; quantiles (percentile_disc)
    and ranks against `rows`, what the format's reader returns for it."""
    compute_snapshot(root, invoker, settings)
    stats_root = Layout.of_table(root).uri
    compute_ranks(stats_root, invoker, settings, columns)
    stats = StatisticsReader(stats_root)
    for name in columns:
        arrow_type = stats.schema().field(name).type
        values = rows[name].to_pylist()
        for q, text in zip(QS, stats.exact_quantiles(name, QS)):
            assert same(text, percentile_disc(values, q), arrow_type), (root, name, q, text)
        present = [v for v in values if v is not None]
        distinct = sorted(set(present))
        for probe in distinct[::max(1, len(distinct) // PROBES)] + distinct[-1:]:
            answer = stats.rank(name, ty.scalar_text(pa.scalar(probe, arrow_type)))
            expected = (sum(v < probe for v in present), present.count(probe))
            assert (answer["smaller"], answer["count"]) == expected, (root, name, probe)


def iceberg_catalog(tmp_path, name: str):
    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog(name, uri=f"sqlite:///{tmp_path}/{name}.db",
                         warehouse=f"file://{tmp_path}")
    catalog.create_namespace("lake")
    return catalog


def test_iceberg_position_deletes(tmp_path, invoker, settings):
    """Two files, most of the low values of the first deleted by position: the median moves."""
    rng = np.random.default_rng(5)
    catalog = iceberg_catalog(tmp_path, "positions")
    table = catalog.create_table("lake.t", schema=pa.schema([("x", pa.int64()),
                                                             ("s", pa.string())]))
    for low in (0, 1000):
        x = rng.permutation(np.arange(low, low + 1000))
        table.append(pa.table({"x": pa.array(x, pa.int64()),
                               "s": pa.array([f"s{v % 97:03d}" for v in x])}))
    for task in table.scan().plan_files():
        x = pq.read_table(task.file.file_path.removeprefix("file://"))["x"].to_numpy()
        if x.min() == 0:
            position_deletes(table, task.file, np.flatnonzero(x < 700).tolist())
    table = catalog.load_table("lake.t")
    rows = table.scan().to_arrow()
    assert 1000 < rows.num_rows < 2000
    check_exact(table.location().removeprefix("file://"), invoker, settings, rows, ["x", "s"])


def test_iceberg_equality_deletes_are_refused(tmp_path, invoker, settings):
    from pyiceberg.manifest import DataFileContent
    catalog = iceberg_catalog(tmp_path, "equality")
    table = catalog.create_table("lake.t", schema=pa.schema([("x", pa.int64())]))
    table.append(pa.table({"x": pa.array(range(100), pa.int64())}))
    deleted = next(iter(table.scan().plan_files())).file
    add_delete_file(table, deleted, DataFileContent.EQUALITY_DELETES,
                    pa.table({"x": pa.array(range(50), pa.int64())}),
                    equality_ids=[table.schema().find_field("x").field_id])
    root = table.location().removeprefix("file://")
    compute_snapshot(root, invoker, settings)
    rel = deleted.file_path.removeprefix(f"{table.location()}/")
    with pytest.raises(FormatError, match=f"{rel}: equality deletes"):
        compute_ranks(Layout.of_table(root).uri, invoker, settings, ["x"])


def test_delta_deletion_vectors(tmp_path, invoker, settings):
    from deltalake import DeltaTable, QueryBuilder
    roots = unzipped(sorted(DELTA_SAMPLES.glob("*.zip")), tmp_path,
                     "_delta_log/00000000000000000000.json")
    assert roots
    for root in roots:
        rows = pa.table(QueryBuilder().register("t", DeltaTable(root)).execute(
            "SELECT * FROM t").read_all())
        columns = [f.name for f in rows.schema if not pa.types.is_large_list(f.type)]
        check_exact(str(root), invoker, settings, rows, columns)


def test_hudi_merge_on_read(tmp_path, invoker, settings):
    """The log files of the samples' slices update a row: its commit time and isActive."""
    import hudi
    roots = unzipped(sorted(HUDI_SAMPLES.glob("mor_*.zip")), tmp_path,
                     "*/.hoodie/hoodie.properties")
    assert roots
    for root in roots:
        rows = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(str(root)).build()
                                     .read())
        check_exact(str(root), invoker, settings, rows,
                    ["_hoodie_commit_time", "isActive", "intField", "name"])
