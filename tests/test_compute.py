"""compute end to end: S3 over HTTP, incremental runs, bad input, schema drift, atomic versions."""
from __future__ import annotations

import json

import boto3
import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.partitions.reduce import SchemaDriftError
from lakestats.metastore.layout import HISTOGRAMS, Layout
from lakestats.metastore.manifest import read_manifest
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from lakestats.monostore.report import ComputeFailed
from tests.tables import mixed, statistics_without_sketches, write


def table_stats(root) -> StatisticsReader:
    return StatisticsReader(f"{root}/_lakestats")


def oracle(root, column: str) -> dict:
    """DuckDB over the table's data files (not the statistics beside them)."""
    paths = [f"{root}/{f.rel_path}" for f in Store(str(root)).list_files()]
    row = duckdb.sql(f"""select count(*), count({column}), min({column}), max({column}),
                                count(distinct {column}) from read_parquet({paths!r})""").fetchall()[0]
    return dict(zip(["rows", "non_null", "min", "max", "distinct"], row))


def test_s3_table_matches_local_table_and_oracle(tmp_path, s3_endpoint, run):
    """The same files, once in a local directory and once on S3 (moto's server over HTTP, Hive
    directories, keys that need URL encoding, hidden files): the statistics are identical."""
    local = tmp_path / "local"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="lake")
    for i, key in enumerate(["region=eu/a b.parquet", "region=us+ca/c%d.parquet",
                             "region=us+ca/sub/d.parquet"]):
        path = write(local / key, mixed(3000 + 500 * i, seed=i))
        s3.upload_file(str(path), "lake", f"orders/{key}")
    s3.put_object(Bucket="lake", Key="orders/_SUCCESS", Body=b"")
    s3.put_object(Bucket="lake", Key="orders/.hidden/x.parquet", Body=b"not parquet")

    assert run(local).published
    report = run("s3://lake/orders")
    assert (report.computed, report.failed, report.row_count) == (3, {}, 10500)

    on_s3, on_disk = StatisticsReader("s3://lake/orders/_lakestats"), table_stats(local)
    assert statistics_without_sketches(on_s3.statistics()) == \
        statistics_without_sketches(on_disk.statistics())
    assert on_s3.histogram("price") == on_disk.histogram("price")
    assert {p["path"]: p["partition_values"] for p in on_s3.partitions()} == {
        "region=eu/a b.parquet": {"region": "eu"},
        "region=us+ca/c%d.parquet": {"region": "us+ca"},
        "region=us+ca/sub/d.parquet": {"region": "us+ca"}}
    cols = {c["column"]: c for c in on_s3.summary()["columns"]}
    for name in ("id", "qty", "city", "day"):
        expected = oracle(local, name)
        assert cols[name]["row_count"] == expected["rows"]
        assert cols[name]["null_count"] == expected["rows"] - expected["non_null"]
        assert cols[name]["distinct_count"] == expected["distinct"]
        assert cols[name]["min"] == str(expected["min"])
        assert cols[name]["max"] == str(expected["max"])


def without_grid(stats: StatisticsReader) -> list[dict]:
    """The statistics but sketches and histogram grids: after files left, sketches hold their
    values, and a histogram whose range shrank may keep its coarser grid (its counts exact),
    until --exact merges anew."""
    return [{k: v for k, v in row.items() if k != "histogram_exponent"}
            for row in statistics_without_sketches(stats.statistics())]


def test_incremental_compute_reuses_unchanged_partitions(tmp_path, run):
    for i in range(4):
        write(tmp_path / f"p{i}.parquet", mixed(2000, seed=i))
    first = run(tmp_path)
    assert (first.computed, first.reused, first.version) == (4, 0, "v000001")

    write(tmp_path / "p4.parquet", mixed(1000, seed=4))                  # new file
    write(tmp_path / "p0.parquet", mixed(1500, seed=10))                 # changed file
    (tmp_path / "p1.parquet").unlink()                                   # removed file
    second = run(tmp_path)
    assert (second.computed, second.reused, second.removed) == (2, 2, 1)
    assert second.version == "v000002"
    # statistics of the removed file and of p0's old contents are gone; one directory per file
    partitions = tmp_path / "_lakestats" / "partitions"
    assert sorted(p.parent.name for p in partitions.glob("*/*")) == \
        ["p0.parquet", "p2.parquet", "p3.parquet", "p4.parquet"]

    again = run(tmp_path)
    assert (again.computed, again.reused, again.version, again.published) == (0, 4, "v000002", False)

    fresh_root = tmp_path.parent / f"{tmp_path.name}-fresh"
    run(tmp_path, stats_root=str(fresh_root))
    incremental, fresh = table_stats(tmp_path), StatisticsReader(str(fresh_root))
    assert without_grid(incremental) == without_grid(fresh)
    assert incremental.summary()["row_count"] == 1500 + 2000 + 2000 + 1000
    run(tmp_path, exact=True)
    assert statistics_without_sketches(table_stats(tmp_path).statistics()) == \
        statistics_without_sketches(fresh.statistics())
    assert table_stats(tmp_path).version_dir().read_parquet(HISTOGRAMS) == \
        fresh.version_dir().read_parquet(HISTOGRAMS)


def test_a_removed_file_takes_the_columns_only_it_held(tmp_path, run):
    """A version that only lost files keeps the index's other rows as they are, unless a
    column left with them: then every row is re-keyed to the columns left. Both equal a
    clean compute of the files left."""
    write(tmp_path / "a.parquet", pa.table({"x": [1, 2], "y": ["p", "q"]}))
    for k, name in enumerate(("b", "c")):
        write(tmp_path / f"{name}.parquet", pa.table({"x": np.arange(500) * (k + 2)}))
    run(tmp_path)
    for gone, columns in (("c", ["x", "y"]), ("a", ["x"])):
        (tmp_path / f"{gone}.parquet").unlink()
        assert run(tmp_path).removed == 1
        clean = tmp_path.parent / f"{tmp_path.name}-clean-{gone}"
        run(tmp_path, stats_root=str(clean))
        now, fresh = table_stats(tmp_path), StatisticsReader(str(clean))
        assert now.schema().names == fresh.schema().names == columns
        assert now.partition_index(columns).drop_columns(["etag"]) \
            == fresh.partition_index(columns).drop_columns(["etag"])
        assert without_grid(now) == without_grid(fresh)


def test_bad_files_fail_alone_and_block_publication(tmp_path, run):
    write(tmp_path / "good.parquet", mixed(1000, seed=1))
    run(tmp_path)
    good = (tmp_path / "good2.parquet")
    write(good, mixed(1000, seed=2))
    write(tmp_path / "empty.parquet", mixed(0, seed=3))                  # zero rows: valid
    whole = write(tmp_path / "cut.parquet", mixed(1000, seed=4)).read_bytes()
    (tmp_path / "cut.parquet").write_bytes(whole[: len(whole) // 2])       # truncated
    (tmp_path / "notes.parquet").write_text("this is not parquet")

    with pytest.raises(ComputeFailed) as failed:
        run(tmp_path)
    reasons = failed.value.report.failed
    assert sorted(reasons) == ["cut.parquet", "notes.parquet"]
    assert all(path in reason for path, reason in reasons.items())
    # nothing published: readers still see version 1 over the first file only
    assert table_stats(tmp_path).summary()["version"] == "v000001"
    assert table_stats(tmp_path).summary()["row_count"] == 1000

    partial = run(tmp_path, allow_partial=True)
    assert partial.published and partial.reused == 3        # good, good2, empty kept from before
    summary = table_stats(tmp_path).summary()
    assert summary["row_count"] == 2000
    assert sorted(summary["missing"]) == ["cut.parquet", "notes.parquet"]
    assert table_stats(tmp_path).summary(partition="empty.parquet")["row_count"] == 0


def test_dates_past_year_9999_fail_their_file_naming_the_column(tmp_path, run):
    """Statistics keep values as text, whose years end at 9999 (as Spark's): a file with a
    later date or timestamp fails alone, naming its column and the values, where its text
    would have been written and then not read back (or, for seconds, rendered wrong)."""
    write(tmp_path / "good.parquet", pa.table({"d": pa.array([0, 2932896], pa.date32()),
                                               "t": pa.array([0, 253402300799],
                                                             pa.timestamp("s", "UTC"))}))
    write(tmp_path / "late.parquet", pa.table({"d": pa.array([0, 3_000_000], pa.date32())}))
    write(tmp_path / "far.parquet", pa.table({"t": pa.array([2**40], pa.timestamp("s", "UTC"))}))
    with pytest.raises(ComputeFailed) as failed:
        run(tmp_path)
    reasons = failed.value.report.failed
    assert sorted(reasons) == ["far.parquet", "late.parquet"]
    assert "column 'd'" in reasons["late.parquet"] and "10183-09-21" in reasons["late.parquet"]
    assert "column 't'" in reasons["far.parquet"] and "36812-02-20" in reasons["far.parquet"]
    run(tmp_path, allow_partial=True)
    cols = {c["column"]: c for c in table_stats(tmp_path).summary()["columns"]}
    assert (cols["d"]["min"], cols["d"]["max"]) == ("1970-01-01", "9999-12-31")


def test_schema_drift_widens_or_names_the_column(tmp_path, run):
    write(tmp_path / "a.parquet", pa.table({"k": pa.array([1, 2], pa.int32())}))
    write(tmp_path / "b.parquet", pa.table({"k": pa.array([2**40, None], pa.int64()),
                                            "added": ["x", "y"]}))
    run(tmp_path)
    cols = {c["column"]: c for c in table_stats(tmp_path).summary()["columns"]}
    assert cols["k"]["type"] == "int64" and cols["k"]["max"] == str(2**40)
    assert cols["k"]["sum"] == str(1 + 2 + 2**40)
    # rows of a.parquet have no 'added': they are nulls of the table column
    assert (cols["added"]["row_count"], cols["added"]["null_count"]) == (4, 2)

    write(tmp_path / "c.parquet", pa.table({"k": ["text"]}))
    with pytest.raises(SchemaDriftError, match=r"'k'.*c\.parquet"):
        run(tmp_path)
    assert table_stats(tmp_path).summary()["version"] == "v000001"


def test_a_file_whose_values_the_widened_type_cannot_hold_is_named(tmp_path, run):
    """timestamp[ms] beside timestamp[ns] widens to ns, which ends in 2262: a later time
    cannot become a nanosecond timestamp (it wrapped around into another time before)."""
    write(tmp_path / "a.parquet", pa.table({"t": pa.array([0, 91386003059713],
                                                          pa.timestamp("ms", "UTC"))}))
    run(tmp_path)
    write(tmp_path / "b.parquet", pa.table({"t": pa.array([5], pa.timestamp("ns", "UTC"))}))
    named = r"'t' is timestamp\[ms, tz=UTC\] in a\.parquet"
    with pytest.raises(SchemaDriftError, match=named):
        run(tmp_path)                           # on the published version
    assert table_stats(tmp_path).summary()["version"] == "v000001"
    with pytest.raises(SchemaDriftError, match="4865-11-27.*" + named):
        run(tmp_path, stats_root=str(tmp_path / "_again"))      # from scratch
    # uint64 beside int64 reconciles to int64, which ends at 2**63 - 1
    unsigned = tmp_path / "unsigned"
    write(unsigned / "a.parquet", pa.table({"x": pa.array([2**64 - 1], pa.uint64())}))
    write(unsigned / "b.parquet", pa.table({"x": pa.array([-5], pa.int64())}))
    with pytest.raises(SchemaDriftError, match=r"'x' is uint64 in a\.parquet, int64 in the table"):
        run(unsigned)
    # float beside double: the float's text "0.1" would read as the double 0.1, below the
    # file's 0.10000000149011612, and `x > 0.1` would prune the file that holds it
    floats = tmp_path / "floats"
    write(floats / "a.parquet", pa.table({"x": pa.array([0.1], pa.float32())}))
    write(floats / "b.parquet", pa.table({"x": pa.array([0.0], pa.float64())}))
    with pytest.raises(SchemaDriftError, match=r"'x' is float in a\.parquet but double"):
        run(floats)


def test_versions_are_published_whole(tmp_path, run):
    """LATEST names a version only after all of that version's files exist."""
    write(tmp_path / "a.parquet", mixed(500, seed=1))
    run(tmp_path)
    stats = Store(f"{tmp_path}/_lakestats")
    manifest = read_manifest(Layout(str(stats.uri)))
    for name in ("statistics.parquet", "frequencies.parquet", "histograms.parquet",
                 "manifest.json"):
        assert stats.exists("versions", manifest.version, name)
    assert json.loads(stats.read_bytes("LATEST")) == {"version": manifest.version}


def test_partitions_indexed_in_batches_give_the_same_version(tmp_path, run, monkeypatch):
    """Five files indexed two at a time (a schema that widens between batches, Bloom filters
    packed batch by batch): the same statistics, index and plans as all at once."""
    from lakestats.monostore import compute as compute_module
    from lakestats.pruning import prune
    for i in range(5):
        columns = mixed(300, seed=i)
        if i >= 3:                                            # a column that comes later
            columns = columns.append_column("late", pa.array(range(300), pa.int64()))
        write(tmp_path / f"p{i}.parquet", columns)
    whole, batched = tmp_path.parent / f"{tmp_path.name}-whole", tmp_path / "_lakestats"
    run(tmp_path, stats_root=str(whole))
    monkeypatch.setattr(compute_module, "INDEX_BATCH", 2)
    run(tmp_path)
    a, b = StatisticsReader(str(whole)), StatisticsReader(str(batched))
    assert a.statistics().drop_columns(["quantile_sketch"]) == \
        b.statistics().drop_columns(["quantile_sketch"])         # KLL compacts at random
    offsets = [f"c{k}" for k in range(len(a.schema()))]

    def without_offsets(stats):
        table = stats.partition_index()
        return {n: [{k: v for k, v in (row or {}).items() if k != "bloom_offset"}
                    for row in table[n].to_pylist()] if n in offsets else table[n].to_pylist()
                for n in table.column_names}
    assert without_offsets(a) == without_offsets(b)
    for where in ("id = 2000150", "city = 'Oslo'", "late IS NULL", "id IN (5, 3000299)"):
        assert prune(str(whole), where) == prune(str(batched), where), where


def test_small_files_are_packed_up_to_the_split_size():
    """Spark's rule: a file counts its bytes and the open cost; a pack holds up to the budget,
    and no more than an even share of the work per worker over PACKS_PER_WORKER."""
    from lakestats.algorithms.partitions.driver import PACKS_PER_WORKER, packs
    from lakestats.core.settings import OPEN_COST_BYTES
    mb = 1 << 20
    tiny = [10_000] * 1000
    got = packs(tiny, 128 * mb, workers=2)
    assert sorted(i for g in got for i in g) == list(range(1000))
    assert all(len(g) == 128 * mb // (10_000 + OPEN_COST_BYTES) for g in got[:-1])
    # few files: an even share per worker, one file a call here
    assert packs([10_000] * 8, 128 * mb, workers=2) == [[i] for i in range(8)]
    # a file larger than the budget is a pack of its own, in order with the rest
    assert packs([10_000, 500 * mb, 10_000], 128 * mb, workers=1) == [[0], [1], [2]]
    assert packs(tiny, 0, workers=2) == [[i] for i in range(1000)]
    share = sum(s + OPEN_COST_BYTES for s in tiny) // (PACKS_PER_WORKER * 64)
    assert max(len(g) for g in packs(tiny, 128 * mb, workers=64)) == share // (
        10_000 + OPEN_COST_BYTES)


def test_a_pack_fails_only_its_bad_files_and_hands_back_the_others_errors(tmp_path):
    """Bad data fails its file for good; any other error hands the file back, for the
    coordinator to compute alone with its own retries; the pack's good files are done."""
    from lakestats.algorithms.partitions.step import partition_pack
    from lakestats.fleet.protocol import PARTITION_PACK, PackTask, PartitionTask, StepEvent
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "a.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 garbage")
    outputs = {"a.parquet": tmp_path / "_s" / "a", "bad.parquet": tmp_path / "_s" / "bad",
               # its statistics cannot be written: a file stands where their folder would
               "b.parquet": tmp_path / "a.parquet" / "stats"}
    pq.write_table(pa.table({"x": [3]}), tmp_path / "b.parquet")
    tasks = [PartitionTask(str(tmp_path), name, "fp", str(out), 10, 64)
             for name, out in outputs.items()]
    got = partition_pack(StepEvent(PARTITION_PACK, "pack", PackTask(tasks))).results
    assert [(r.rel_path, r.status) for r in got] == [
        ("a.parquet", "ok"), ("bad.parquet", "failed"), ("b.parquet", "retry")]
    assert "bad.parquet" in got[1].error and got[2].error
    assert (tmp_path / "_s" / "a" / "statistics.parquet").exists()


@pytest.mark.parametrize("on_s3", [False, True])
def test_workers_folding_packs_give_the_statistics_of_one_fold(tmp_path, run, invoker,
                                                                 monkeypatch, on_s3, request):
    """From FOLD_PAIRS (partition, column) pairs on, workers fold packs of partitions' sketches
    and histograms and the coordinator folds the partials: the table's statistics and
    histograms are those of one fold of every partition, on adversarial data; the KLL sketches
    (merged in another order, equally good) hold the same values. Locally and on S3 (the
    partials go through the exchange in the statistics root's scratch space)."""
    import math

    import datasketches as ds

    from lakestats.algorithms.partitions import driver
    from lakestats.fleet.protocol import PARTITION_FOLD
    from tests.oracle_data import adversarial
    root = tmp_path / "t"
    for i in range(7):
        write(root / f"part-{i}.parquet", adversarial(i, 120))
    table, stats = str(root), str(tmp_path)
    if on_s3:
        request.getfixturevalue("s3_endpoint")
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="folds")
        for f in root.iterdir():
            s3.upload_file(str(f), "folds", f"t/{f.name}")
        table, stats = "s3://folds/t", "s3://folds"
    folds, fan_out = [], driver.fan_out

    def counted(inv, scope, events, **options):
        folds.extend(e for e in events if e.step == PARTITION_FOLD)
        return fan_out(inv, scope, events, **options)
    monkeypatch.setattr(driver, "fan_out", counted)
    monkeypatch.setattr(driver, "FOLD_PARTITIONS", 2)
    versions = []
    for pairs in (10 ** 9, 0):
        monkeypatch.setattr(driver, "FOLD_PAIRS", pairs)
        report = run(table, stats_root=f"{stats}/stats-{pairs}")
        versions.append(Layout(f"{stats}/stats-{pairs}").version(report.version))
    assert len(folds) == invoker.workers * math.ceil(7 / (invoker.workers * 2))
    alone, spread = (v.read_parquet("statistics.parquet") for v in versions)
    assert [repr(r) for r in spread.drop_columns(["quantile_sketch"]).to_pylist()] == \
        [repr(r) for r in alone.drop_columns(["quantile_sketch"]).to_pylist()]   # NaN as NaN
    assert versions[1].read_bytes(HISTOGRAMS) == versions[0].read_bytes(HISTOGRAMS)
    for a, b in zip(alone["quantile_sketch"].to_pylist(), spread["quantile_sketch"].to_pylist()):
        assert (a is None) == (b is None)
        if a is not None:
            a, b = ds.kll_doubles_sketch.deserialize(a), ds.kll_doubles_sketch.deserialize(b)
            assert (a.n, a.get_min_value(), a.get_max_value()) == \
                (b.n, b.get_min_value(), b.get_max_value())


def test_a_column_in_two_time_units_has_no_table_histogram(tmp_path, run):
    """A timestamp[ms] file's histogram and quantile sketch count milliseconds, a
    timestamp[us] table's microseconds: no power-of-two grid converts one into the other, and
    once their merge counted the ms file's values in 1970. The table then keeps neither for
    the column (bounds and exact quantiles stay right), from scratch and incrementally, and
    has them again once one unit remains, incrementally too: a version's histogram is not
    carried into a version of another unit, nor one it does not have."""
    import lakestats
    from lakestats.core.errors import StatisticsMissing
    base = 1_700_000_000_000_000
    us = pa.array(base + np.arange(100, dtype=np.int64) * 1_000_000, pa.timestamp("us"))
    ms = pa.array(base // 1000 + np.arange(100, dtype=np.int64) * 1000 + 50_000,
                  pa.timestamp("ms"))
    write(tmp_path / "us.parquet", pa.table({"t": us}))
    run(tmp_path)
    assert sum(b["count"] for b in lakestats.open(str(tmp_path)).histogram("t")["bins"]) == 100
    write(tmp_path / "ms.parquet", pa.table({"t": ms}))
    for exact in (False, True):
        run(tmp_path, exact=exact)
        table = lakestats.open(str(tmp_path))
        with pytest.raises(StatisticsMissing, match="different units"):
            table.histogram("t")
        [column] = table.show(columns=["t"])["columns"]
        assert (column["min"], column["max"]) == ("2023-11-14T22:13:20.000000",
                                                  "2023-11-14T22:15:49.000000")
    (tmp_path / "ms.parquet").unlink()      # incremental: the last version kept none to update
    run(tmp_path)
    assert sum(b["count"] for b in lakestats.open(str(tmp_path)).histogram("t")["bins"]) == 100
    write(tmp_path / "us.parquet", pa.table({"t": ms}))     # the table's unit: us -> ms
    run(tmp_path)
    write(tmp_path.parent / "scratch" / "ms.parquet", pa.table({"t": ms}))
    run(tmp_path.parent / "scratch")
    assert lakestats.open(str(tmp_path)).histogram("t")["bins"] == \
        lakestats.open(str(tmp_path.parent / "scratch")).histogram("t")["bins"]
