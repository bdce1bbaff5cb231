"""Exact again when quiet (monostore.reductions.refold): a table that incremental versions left
inexact (frequency lists carried stale, sketches holding a removed file's values) is refolded
with --exact once no change has come for settings.exact_after seconds: by the watcher, and on
AWS by the reduce function's schedule. Once a quiet period, never while changes come, under the
table's compute lock, recomputing no partition; its statistics then equal the data's and a
clean compute's. On moto's S3+SQS server with a real Redis."""
from __future__ import annotations

import io
import time

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.algorithms.frequencies import delta
from lakestats.core.errors import UsageError
from lakestats.core.settings import COMPACT_FRACTION, REDUCTION_COMPACT_FRACTION, Settings
from lakestats.fleet import windows
from lakestats.metastore.layout import Layout
from lakestats.metastore.manifest import latest_version
from lakestats.metastore.reader import StatisticsReader
from lakestats.monostore.reductions import reduce_pending, refold
from tests.tables import mixed, write
from tests.test_event_recovery import receive
from tests.test_serverless import (TABLE, assert_equals_clean_compute, lake, put,  # noqa: F401
                                   settled, wait_until, watching)

COLUMNS = ("id", "qty", "price", "city", "day")


@pytest.fixture
def merges_off(monkeypatch):
    """Every frequency list a change touches is carried stale instead of merged (as a large
    one would be), until the rows changed since pass settings.compact_fraction of the table."""
    monkeypatch.setattr(delta, "MERGE_MAX", 0)
    monkeypatch.setattr(delta, "MERGE_PER_ROW", 0)


def oracle(rows: pa.Table) -> dict[str, tuple[int, int]]:
    """Each column's distinct and singleton counts, counted here from the rows (NaN is one
    value, null none)."""
    out = {}
    for name in COLUMNS:
        counts = rows[name].drop_null().value_counts()
        n = counts.field("counts").to_numpy()
        out[name] = (len(n), int((n == 1).sum()))
    return out


def s3_rows(bucket: str) -> pa.Table:
    s3 = boto3.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{TABLE}/")["Contents"]
            if "_lakestats" not in o["Key"]]
    return pa.concat_tables([pq.read_table(pa.BufferReader(
        s3.get_object(Bucket=bucket, Key=k)["Body"].read())) for k in keys])


def published(table: str) -> tuple[StatisticsReader, dict[str, dict]]:
    reader = StatisticsReader(f"{table}/_lakestats")
    return reader, {r["column"]: r for r in reader.statistics(sketches=False).to_pylist()}


def assert_exact(table: str, rows: pa.Table) -> None:
    """The published version holds nothing stale, and its counts are the data's."""
    reader, stats = published(table)
    assert not reader.manifest.stale and not reader.manifest.sketches_stale
    assert all(r["distinct_count_exact"] and not r.get("exact_as_of") for r in stats.values())
    assert {c: (stats[c]["distinct_count"], stats[c]["singleton_count"]) for c in COLUMNS} \
        == oracle(rows)
    for column in ("city", "qty"):              # complete lists: the data's value counts
        counts = rows[column].value_counts()
        assert dict(zip(*reader.frequencies(column).select(["value", "frequency"]).to_pydict()
                        .values())) == {str(v): n for v, n in zip(
                            counts.field("values").to_pylist(),
                            counts.field("counts").to_pylist())}


def assert_inexact(table: str) -> None:
    reader, stats = published(table)
    assert reader.manifest.stale
    assert any(r.get("exact_as_of") and not r["distinct_count_exact"] for r in stats.values())


def quiet(redis_url: str, table: str, exact_after: float) -> bool:
    found = windows.state(redis_url, [table]).get(table)
    return found is not None and found.quiet(exact_after, time.time())


def test_the_record_says_whether_the_version_is_exact(redis_url):
    table = f"s3://lake-{time.time_ns()}/orders"
    windows.record(redis_url, table, window=0)
    claimed = windows.claim(redis_url, table)
    windows.settle(redis_url, table, claimed, exact=False)
    found = windows.state(redis_url, [table])[table]
    assert found.inexact is not None and not found.waiting
    assert not found.quiet(0, time.time() + 3600)             # 0: never
    assert found.quiet(60, found.inexact + 60) and not found.quiet(60, found.inexact + 59)
    windows.record(redis_url, table, window=60)               # a change pending: not quiet
    assert not windows.state(redis_url, [table])[table].quiet(60, time.time() + 3600)
    later = windows.claim(redis_url, table)
    windows.settle(redis_url, table, later, exact=True)
    assert windows.state(redis_url, [table])[table].inexact is None
    windows.settle(redis_url, table, claimed, exact=False)    # an older reduction, late
    assert windows.state(redis_url, [table])[table].inexact is None
    windows.record(redis_url, table, window=0)
    windows.settle(redis_url, table, windows.claim(redis_url, table), exact=False)
    windows.claim(redis_url, table, refold=True)              # a refold ends the quiet period
    assert windows.state(redis_url, [table])[table].inexact is None


def test_the_watcher_refolds_a_quiet_table_once_and_never_while_changes_come(
        lake, run, redis_url, merges_off):  # noqa: F811
    bucket, queue, table = lake
    for i in range(4):
        put(bucket, f"{TABLE}/part-{i}.parquet", mixed(2000, seed=i + 1))
    put(bucket, f"{TABLE}/small.parquet", mixed(10, seed=50))
    run(table)                                          # a first version, computed whole
    boto3.client("sqs").purge_queue(QueueUrl=queue)
    assert_exact(table, s3_rows(bucket))
    exact_after = 3.0
    settings = Settings(redis_url=redis_url, tables=(table,), reduce_window=0.5,
                        exact_after=exact_after)
    stop, thread, reports = watching(queue, settings, io.StringIO())
    try:
        # a small file removed (sketches stale), then one landed every half second (lists
        # carried stale), for twice the quiet interval
        boto3.client("s3").delete_object(Bucket=bucket, Key=f"{TABLE}/small.parquet")
        for i in range(12):
            put(bucket, f"{TABLE}/more-{i}.parquet", mixed(10, seed=60 + i))
            time.sleep(0.5)
        wait_until(lambda: settled(queue, table), 60)
        wait_until(lambda: any(r["exact"] for r in reports), 60)
        time.sleep(exact_after + 1)                      # more than the interval: no other
    finally:
        stop.set()
        thread.join(timeout=30)
    published = [r for r in reports if r["published"]]
    # every version while changes came was incremental, and inexact: none was a refold (a
    # version's report may come after the queue settled: they are told apart by `exact`)
    during = [r for r in published if not r["exact"]]
    assert during and all(r["added"] + r["removed"] and r["exact"] is False for r in during)
    assert sum(r["added"] for r in during) == 12 and sum(r["removed"] for r in during) == 1
    # one refold, after every change: exact, a new version of the same files, no partition
    # computed
    [refolded] = [r for r in published if r["exact"]]
    assert published[-1] is refolded
    assert (refolded["computed"], refolded["added"], refolded["removed"]) == (0, 0, 0)
    assert refolded["version"] > during[-1]["version"]
    assert windows.state(redis_url, [table])[table].inexact is None
    assert_exact(table, s3_rows(bucket))
    assert_equals_clean_compute(table, run)


def test_a_refold_waits_for_pending_changes_and_gives_way_to_new_ones(
        tmp_path, invoker, redis_url, merges_off):
    root = tmp_path / "orders"
    table = str(root)
    for i in range(4):
        write(root / f"part-{i}.parquet", mixed(2000, seed=i + 1))
    settings = Settings(redis_url=redis_url, tables=(table,), reduce_window=0, exact_after=0.2)

    def change(n: int) -> None:
        write(root / f"more-{n}.parquet", mixed(10, seed=70 + n))
        windows.record(redis_url, table, window=0)

    def rows() -> pa.Table:
        return pa.concat_tables(pq.read_table(p) for p in sorted(root.glob("*.parquet")))

    change(0)
    assert reduce_pending(table, invoker, settings).exact          # computed whole
    assert refold(table, invoker, settings) is None                # exact: nothing to refold
    change(1)
    inexact = reduce_pending(table, invoker, settings)
    assert inexact.published and inexact.exact is False
    assert_inexact(table)
    # a change pending: no refold, however long the version has been inexact
    change(2)
    time.sleep(2 * settings.exact_after)
    assert refold(table, invoker, settings) is None
    assert latest_version(Layout.of_table(table)) == inexact.version
    assert not reduce_pending(table, invoker, settings).exact
    # a change recorded while the refold runs: it gives way before the table-level work
    wait_until(lambda: quiet(redis_url, table, settings.exact_after), 10)
    before = latest_version(Layout.of_table(table))
    assert refold(table, invoker, settings, checkpoint=lambda moment: moment == "listing"
                  and change(3)) is None
    assert latest_version(Layout.of_table(table)) == before
    assert windows.state(redis_url, [table])[table].waiting
    # the change's reduction leaves the table inexact again: a new quiet period, a refold
    assert not reduce_pending(table, invoker, settings).exact
    assert_inexact(table)
    wait_until(lambda: quiet(redis_url, table, settings.exact_after), 10)
    report = refold(table, invoker, settings)
    assert report.published and report.exact and report.computed == 0
    assert_exact(table, rows())
    time.sleep(settings.exact_after)
    assert refold(table, invoker, settings) is None                # once a quiet period


def test_a_reduction_leaves_compaction_to_the_quiet_refold(tmp_path, run, invoker, redis_url,
                                                          merges_off):
    """A change past settings.compact_fraction of the rows: a compute recomputes the stale
    lists, a reduction of the same change carries them (up to REDUCTION_COMPACT_FRACTION), so
    that a new file does not wait for the whole column; the refold makes them exact."""
    tables = [tmp_path / "by-compute", tmp_path / "by-reduction"]
    for root in tables:
        for i in range(4):
            write(root / f"part-{i}.parquet", mixed(1000, seed=i + 1))
        run(root)
        write(root / "more-0.parquet", mixed(300, seed=60))     # 7 % of the rows: carried
        run(root)
        write(root / "more-1.parquet", mixed(400, seed=61))     # 15 %: past COMPACT_FRACTION
    assert COMPACT_FRACTION < 700 / 4700 < REDUCTION_COMPACT_FRACTION
    run(tables[0])
    assert_exact(str(tables[0]), pa.concat_tables(
        pq.read_table(p) for p in sorted(tables[0].glob("*.parquet"))))
    table = str(tables[1])
    settings = Settings(redis_url=redis_url, tables=(table,), reduce_window=0, exact_after=0.2)
    windows.record(redis_url, table, window=0)
    assert reduce_pending(table, invoker, settings).exact is False
    assert_inexact(table)
    wait_until(lambda: quiet(redis_url, table, settings.exact_after), 10)
    assert refold(table, invoker, settings).exact
    assert_exact(table, pa.concat_tables(
        pq.read_table(p) for p in sorted(tables[1].glob("*.parquet"))))


def test_the_reduce_functions_schedule_refolds_a_quiet_table(
        lake, redis_url, monkeypatch, merges_off):  # noqa: F811
    from lakestats.functions import lambda_handlers
    from lakestats.local_lambda import LocalContext
    from lakestats.watch import lambda_event
    bucket, queue, table = lake
    settings = Settings(redis_url=redis_url, tables=(table,), reduce_window=0, exact_after=2)
    monkeypatch.setattr(lambda_handlers, "SETTINGS", settings)
    arn = "arn:aws:sqs:us-east-1:123456789012:events"
    scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}

    def deliver(n: int) -> None:
        """The partition function on the next n object events."""
        event = lambda_event(receive(queue, n), arn, "us-east-1")
        assert lambda_handlers.partition_batch(event, LocalContext(), settings)[0] == {
            "batchItemFailures": []}

    for i in range(3):
        put(bucket, f"{TABLE}/part-{i}.parquet", mixed(2000, seed=i + 1))
    put(bucket, f"{TABLE}/small.parquet", mixed(10, seed=50))
    deliver(4)
    assert lambda_handlers.table_reduce_handler(scheduled, LocalContext()) == {
        "reduced": [table], "exact_again": []}
    assert_exact(table, s3_rows(bucket))
    boto3.client("s3").delete_object(Bucket=bucket, Key=f"{TABLE}/small.parquet")
    put(bucket, f"{TABLE}/more.parquet", mixed(10, seed=51))
    deliver(2)
    # the change's version is inexact; the table is not quiet yet
    assert lambda_handlers.table_reduce_handler(scheduled, LocalContext()) == {
        "reduced": [table], "exact_again": []}
    assert_inexact(table)
    inexact = latest_version(Layout.of_table(table))
    wait_until(lambda: quiet(redis_url, table, settings.exact_after), 10)
    assert lambda_handlers.table_reduce_handler(scheduled, LocalContext()) == {
        "reduced": [], "exact_again": [table]}
    assert latest_version(Layout.of_table(table)) > inexact
    assert_exact(table, s3_rows(bucket))
    # once a quiet period: the next runs of the schedule do nothing
    time.sleep(settings.exact_after)
    assert lambda_handlers.table_reduce_handler(scheduled, LocalContext()) == {
        "reduced": [], "exact_again": []}


def test_the_template_passes_the_interval_to_the_reduce_function():
    """ExactAfterSeconds reaches the reduce function as the variable its settings read, in the
    range they take, with their default."""
    from pathlib import Path

    from samtranslator.yaml_helper import yaml_parse

    from lakestats.core import settings as defaults
    template = yaml_parse((Path(__file__).resolve().parent.parent / "template.yaml").read_text())
    parameter = template["Parameters"]["ExactAfterSeconds"]
    env = template["Resources"]["TableReduceFunction"]["Properties"]["Environment"]["Variables"]
    assert env["LAKESTATS_EXACT_AFTER_SECONDS"] == {"Ref": "ExactAfterSeconds"}
    assert parameter["Default"] == defaults.EXACT_AFTER_SECONDS
    for value in (parameter["MinValue"], parameter["MaxValue"]):
        assert Settings.from_env({"LAKESTATS_EXACT_AFTER_SECONDS": str(value)}).exact_after \
            == value
    assert Settings.from_env({}).exact_after == defaults.EXACT_AFTER_SECONDS
    with pytest.raises(UsageError, match="LAKESTATS_EXACT_AFTER_SECONDS"):
        Settings.from_env({"LAKESTATS_EXACT_AFTER_SECONDS": str(parameter["MaxValue"] + 1)})
