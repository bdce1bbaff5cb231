"""No unpublished version is ever visible. A coordinator that dies between any two writes of a
publication leaves readers (StatisticsReader, `lakestats show --json`) the previous version,
entirely, or the new one, entirely, and the next compute publishes past whatever it left; ranks
count once the manifest records them; an S3 write that fails leaves nothing at its key; a lost
or unreadable LATEST is an error, never a guess at a version directory."""
from __future__ import annotations

import contextlib
import json
import os
import shutil

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakestats.metastore.s3
from lakestats.algorithms.ranks.driver import compute_ranks
from lakestats.core.settings import Settings
from lakestats.fleet import protocol
from lakestats.fleet.connections import client
from lakestats.infra.faults import S3Faults
from lakestats.metastore.layout import LATEST, MANIFEST, RANKS, Layout
from lakestats.metastore.manifest import LatestLost, version_names
from lakestats.metastore.reader import StatisticsNotFound, StatisticsReader
from lakestats.metastore.store import Store, StoreError, s3_client
from lakestats.monostore import publish
from tests.tables import mixed, published_files, run_cli, write


class Crash(BaseException):
    """The coordinator dies: caught by no `except Exception`, and its clean-up is switched
    off, as a killed process runs none."""


@contextlib.contextmanager
def writes(monkeypatch, crash_after: int | None = None, crash_before: str | None = None):
    """The paths this process writes, in order; it dies once `crash_after` are written, or
    before writing a file named `crash_before` (that write never happens)."""
    log: list[str] = []
    write_bytes, atomic_output = Store.write_bytes, Store.atomic_output
    crashing = crash_after is not None or crash_before is not None

    def step(store: Store, parts: tuple) -> None:
        # at least: writes side by side may both start before either is logged
        if crash_after is not None and len(log) >= crash_after or parts[-1] == crash_before:
            raise Crash(f"before writing {store.path(*parts)}")

    def logged_write_bytes(self, data, *parts):
        step(self, parts)
        write_bytes(self, data, *parts)
        log.append(self.path(*parts))

    @contextlib.contextmanager
    def logged_atomic_output(self, *parts):
        step(self, parts)
        with atomic_output(self, *parts) as stream:
            yield stream
        log.append(self.path(*parts))

    with monkeypatch.context() as m:
        m.setattr(Store, "write_bytes", logged_write_bytes)
        m.setattr(Store, "atomic_output", logged_atomic_output)
        if crashing:
            m.setattr(Store, "delete_dir", lambda self, *parts: None)
            m.setattr(publish, "release", lambda *args: None)
        yield log


def seen(root: str) -> tuple[str, dict]:
    """The published version, and all a reader sees of it but its name."""
    stats = StatisticsReader(root)
    summary = stats.summary()
    del summary["version"]
    return stats.version, {"summary": summary, "files": published_files(root),
                           "partitions": stats.partitions()}


def assert_whole(table: str, root: str, old: dict, new: dict) -> None:
    """Readers see the previous version entirely, or the new one entirely."""
    version, state = seen(root)
    assert state == (old if version == "v000001" else new), version
    shown = run_cli("show", table, "--json")
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    assert summary["version"] == version
    assert summary["row_count"] == state["summary"]["row_count"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Two data files, copied with their times into each table: the same fingerprints."""
    d = tmp_path_factory.mktemp("files")
    return (write(d / "a.parquet", mixed(400, seed=1)), write(d / "b.parquet", mixed(400, seed=2)))


def table_at_v1(path, files, run) -> str:
    path.mkdir()
    shutil.copy2(files[0], path / "a.parquet")
    assert run(str(path)).version == "v000001"
    shutil.copy2(files[1], path / "b.parquet")       # what the crashing compute publishes
    return str(path)


def test_a_crash_between_any_two_publication_writes_leaves_a_whole_version(
        tmp_path, files, run, monkeypatch, redis_url):
    clean = table_at_v1(tmp_path / "clean", files, run)
    root = f"{clean}/_lakestats"
    old = seen(root)[1]
    with writes(monkeypatch) as log:
        assert run(clean).published
    new = seen(root)[1]
    assert log[-1] == Layout(root).root.path(LATEST) and old != new
    # every file of the version is in the manifest's sizes
    version_dir = Layout(root).version("v000002")
    listed = {f.rel_path: f.size for f in version_dir.list_files() if f.rel_path != MANIFEST}
    manifest = json.loads(version_dir.read_bytes(MANIFEST))
    assert manifest["files"] == listed and "blooms.bin" in listed

    for k in range(len(log)):
        table = table_at_v1(tmp_path / f"crash-{k}", files, run)
        root = f"{table}/_lakestats"
        with pytest.raises(Crash), writes(monkeypatch, crash_after=k):
            run(table)
        assert_whole(table, root, old, new)
        # Redis forgot the numbers it handed out (a restart): the directories still count
        client(redis_url).delete(protocol.version_counter(Layout(root).uri))
        left = max(version_names(Layout(root)))
        report = run(table)
        assert report.published and report.version > left, (k, report.version, left)
        assert seen(root) == (report.version, new)


def test_a_crash_while_ranks_are_written_leaves_them_whole_or_absent(
        tmp_path, files, run, invoker, redis_url, monkeypatch):
    settings = Settings(redis_url=redis_url)
    table = table_at_v1(tmp_path / "t", files, run)
    root = f"{table}/_lakestats"
    shutil.rmtree(root)
    run(table)
    with writes(monkeypatch) as log:
        compute_ranks(root, invoker, settings, ["price"])
    want = StatisticsReader(root).exact_quantiles("price", [0.1, 0.5, 0.9])
    version = Layout(root).version(StatisticsReader(root).version)
    manifest = json.loads(version.read_bytes(MANIFEST))
    assert manifest["files"][RANKS] == version.size(RANKS)
    for k in range(len(log)):
        shutil.rmtree(root)
        run(table)
        with pytest.raises(Crash), writes(monkeypatch, crash_after=k):
            compute_ranks(root, invoker, settings, ["price"])
        stats = StatisticsReader(root)
        if stats.ranked_columns():
            assert stats.exact_quantiles("price", [0.1, 0.5, 0.9]) == want
        else:
            with pytest.raises(StatisticsNotFound, match="no ranks"):
                stats.exact_quantiles("price", [0.5])
        compute_ranks(root, invoker, settings, ["price"])
        assert StatisticsReader(root).exact_quantiles("price", [0.1, 0.5, 0.9]) == want


def test_ranks_not_the_size_recorded_are_not_taken(tmp_path, files, run, invoker, redis_url):
    """A well-formed but truncated ranks.parquet (an upload completed on failure) is no
    version's ranks; computing them again repairs it."""
    settings = Settings(redis_url=redis_url)
    table = table_at_v1(tmp_path / "t", files, run)
    root = f"{table}/_lakestats"
    compute_ranks(root, invoker, settings, ["price", "qty"])
    want = StatisticsReader(root).exact_quantiles("price", [0.5])
    path = f"{root}/versions/v000001/{RANKS}"
    ranks = pq.ParquetFile(path)
    pq.write_table(ranks.read_row_group(0), path, write_page_checksum=True)   # the first part
    stats = StatisticsReader(root)
    assert stats.ranked_columns() == []
    with pytest.raises(StatisticsNotFound, match="no ranks"):
        stats.exact_quantiles("price", [0.5])
    compute_ranks(root, invoker, settings, ["price"])
    assert StatisticsReader(root).exact_quantiles("price", [0.5]) == want


def test_a_lost_latest_is_an_error_not_the_newest_version_directory(tmp_path, files, run,
                                                                    monkeypatch):
    table = table_at_v1(tmp_path / "t", files, run)
    root = f"{table}/_lakestats"
    # dies just before the swap: v000002 is complete, manifest and all, and unpublished
    with pytest.raises(Crash), writes(monkeypatch, crash_before=LATEST):
        run(table)
    assert os.path.exists(f"{root}/versions/v000002/manifest.json")
    assert StatisticsReader(root).version == "v000001"
    os.remove(f"{root}/{LATEST}")
    with pytest.raises(LatestLost, match="LATEST is missing") as lost:
        StatisticsReader(root)
    assert root in str(lost.value) and "run lakestats compute" in str(lost.value)
    shown = run_cli("show", table, "--json")
    assert shown.returncode == 1 and shown.stdout == ""
    assert "LATEST is missing" in shown.stderr and "lakestats compute" in shown.stderr
    # LATEST that does not read: an error naming it, no guess either
    with open(f"{root}/{LATEST}", "w") as f:
        f.write('{"version": "v000001"}')
    read_bytes = Store.read_bytes

    def denied(self, *parts):
        if parts == (LATEST,):
            raise OSError("AccessDenied")
        return read_bytes(self, *parts)
    with monkeypatch.context() as m:
        m.setattr(Store, "read_bytes", denied)
        with pytest.raises(StoreError, match="cannot read LATEST .*AccessDenied"):
            StatisticsReader(root)
    report = run(table)
    assert report.version == "v000003" and StatisticsReader(root).version == "v000003"


def test_a_table_never_computed_has_no_statistics_yet(tmp_path):
    write(tmp_path / "t" / "a.parquet", mixed(10, seed=1))
    shown = run_cli("show", tmp_path / "t", "--json")
    assert shown.returncode == 1 and "no statistics published yet" in shown.stderr


def keys(bucket: str) -> list[str]:
    return [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket).get("Contents", [])]


def uploads(bucket: str) -> list:
    return boto3.client("s3").list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def blob_table(mib: int) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table({"b": [rng.bytes(64 * 1024) for _ in range(16 * mib)]})


def test_an_s3_write_that_fails_leaves_nothing_at_the_key(proxied_bucket, monkeypatch):
    name, proxy = proxied_bucket
    monkeypatch.setattr(lakestats.metastore.s3, "PART_SIZE", 5 * 1024 * 1024)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")      # the failed part is not retried
    s3_client.cache_clear()
    store = Store(f"s3://{name}/t")
    big = blob_table(12)                             # three parts
    with store.parquet_writer("whole.parquet", big.schema, compression="none") as writer:
        writer.write_table(big, row_group_size=64)
    assert store.read_parquet("whole.parquet").equals(big)
    for size in (1, 12):                             # one PUT, or a multipart upload
        with pytest.raises(RuntimeError, match="the writer failed"):
            with store.parquet_writer(f"failed-{size}.parquet", big.schema,
                                      compression="none") as writer:
                writer.write_table(blob_table(size), row_group_size=64)
                raise RuntimeError("the writer failed")
    with pytest.raises(OSError):                     # S3 fails after the first part
        with store.atomic_output("cut.bin") as stream:
            stream.write(b"x" * (5 * 1024 * 1024 + 10))
            proxy.faults = S3Faults(kind=500, every=1, method="PUT")
            stream.write(b"y" * (5 * 1024 * 1024))
    proxy.faults = S3Faults(every=0)
    assert keys(name) == ["t/whole.parquet"] and uploads(name) == []


def test_latest_on_s3_is_read_through_transient_errors(proxied_bucket, run, monkeypatch):
    name, proxy = proxied_bucket
    sink = pa.BufferOutputStream()
    pq.write_table(mixed(300, seed=1), sink)
    boto3.client("s3").put_object(Bucket=name, Key="t/a.parquet", Body=sink.getvalue().to_pybytes())
    table = f"s3://{name}/t"
    run(table)
    proxy.faults = S3Faults(kind=503, every=1, method="GET", limit=2)
    assert StatisticsReader(f"{table}/_lakestats").version == "v000001"
    assert proxy.faults.injected == 2
    proxy.faults = S3Faults(every=0)
    boto3.client("s3").delete_object(Bucket=name, Key="t/_lakestats/LATEST")
    with pytest.raises(LatestLost, match="LATEST is missing"):
        StatisticsReader(f"{table}/_lakestats")
