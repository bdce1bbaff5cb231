"""Statistics files check themselves, and a failed compute loses nothing: --allow-partial exits
0 after publishing, a partition computed by a failed compute answers `show --partition`, a
corrupt or truncated statistics file is computed again instead of trusted, a lost or damaged
LATEST, or a lost manifest, fails lookups clearly (never a guess at the published version) until
the next compute publishes anew."""
from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from lakestats.metastore.layout import HISTOGRAMS, STATISTICS, Layout
from lakestats.metastore.manifest import LatestLost
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import DataFile
from tests.tables import mixed, published_files, run_cli, write


def corrupt(path: str) -> None:
    """Flip the last byte of the first column chunk: inside a page's (compressed) data."""
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    at = chunk.data_page_offset + chunk.total_compressed_size - 1
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


def table_with_a_bad_file(root):
    write(root / "good.parquet", mixed(1000, seed=1))
    write(root / "other.parquet", mixed(1000, seed=2))
    (root / "bad.parquet").write_bytes(b"PAR1 not really parquet")
    return str(root)


def partition_dir(table: str, rel_path: str) -> str:
    path = os.path.join(table, rel_path)
    f = DataFile(rel_path, os.path.getsize(path), str(os.stat(path).st_mtime_ns))
    return Layout.of_table(table).partition(rel_path, f.fingerprint).root


@pytest.mark.services         # compute on the command's embedded Redis
def test_allow_partial_publishes_and_exits_0_naming_the_failed_file(tmp_path):
    table = table_with_a_bad_file(tmp_path / "t")
    failed = run_cli("compute", table, "--json", "--quiet")
    assert failed.returncode == 1 and "no table version published" in failed.stderr
    partial = run_cli("compute", table, "--json", "--quiet", "--allow-partial")
    assert partial.returncode == 0, partial.stderr
    assert "bad.parquet" in partial.stderr
    report = json.loads(partial.stdout)
    assert report["published"] and list(report["failures"]) == ["bad.parquet"]
    assert "--allow-partial" in run_cli("compute", "--help").stdout
    assert "exit status" in run_cli("compute", "--help").stdout


@pytest.mark.services         # compute on the command's embedded Redis
def test_show_partition_answers_before_any_version_is_published(tmp_path):
    table = table_with_a_bad_file(tmp_path / "t")
    assert run_cli("compute", table, "--quiet").returncode == 1
    shown = run_cli("show", table, "--partition", "good.parquet", "--json")
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    assert summary["published"] is False and summary["version"] is None
    data = pq.read_table(os.path.join(table, "good.parquet"))
    assert summary["row_count"] == data.num_rows
    by_name = {c["column"]: c for c in summary["columns"]}
    assert by_name["price"]["null_count"] == data["price"].null_count
    assert "not yet in a published version" in run_cli("show", table, "--partition",
                                                   "good.parquet").stdout
    missing = run_cli("show", table, "--partition", "bad.parquet", "--json")
    assert missing.returncode == 1 and "bad.parquet" in missing.stderr


@pytest.mark.parametrize("damage", ["corrupt statistics", "truncated histograms"])
def test_damaged_partition_statistics_are_computed_again(tmp_path, run, damage):
    table = table_with_a_bad_file(tmp_path / "t")
    with pytest.raises(Exception, match="no table version published"):
        run(table)
    good = partition_dir(table, "good.parquet")
    if damage == "corrupt statistics":
        corrupt(os.path.join(good, STATISTICS))
    else:
        path = os.path.join(good, HISTOGRAMS)
        os.truncate(path, os.path.getsize(path) // 2)
    os.remove(os.path.join(table, "bad.parquet"))
    report = run(table)
    assert report.computed == 1 and report.reused == 1       # good.parquet again, other kept
    run(table, stats_root=str(tmp_path / "clean"))
    assert published_files(f"{table}/_lakestats") == published_files(str(tmp_path / "clean"))


def test_a_corrupt_version_fails_lookups_and_is_not_built_upon(tmp_path, run):
    table = str(tmp_path / "t")
    write(tmp_path / "t" / "a.parquet", mixed(2000, seed=1))
    run(table)
    stats = StatisticsReader(f"{table}/_lakestats")
    corrupt(os.path.join(stats.version_dir().root, STATISTICS))
    shown = run_cli("show", table, "--json")
    assert shown.returncode == 1 and "checksum" in shown.stderr.lower(), shown.stderr
    write(tmp_path / "t" / "b.parquet", mixed(2000, seed=2))
    run(table)                                   # from the partitions, not the corrupt version
    run(table, stats_root=str(tmp_path / "clean"))
    assert published_files(f"{table}/_lakestats") == published_files(str(tmp_path / "clean"))


def assert_lost(root, why: str) -> None:
    """Lookups fail naming the statistics root and what to do, in the API and the CLI."""
    with pytest.raises(LatestLost, match=why) as lost:
        StatisticsReader(str(root))
    assert str(root) in str(lost.value) and "run lakestats compute" in str(lost.value)
    shown = run_cli("show", str(root.parent), "--json")
    assert shown.returncode == 1 and shown.stdout == "", shown.stdout
    assert str(root) in shown.stderr and why in shown.stderr, shown.stderr


def test_a_lost_latest_or_manifest_fails_lookups_until_a_compute_publishes_anew(tmp_path, run):
    table = str(tmp_path / "t")
    write(tmp_path / "t" / "a.parquet", mixed(500, seed=1))
    run(table)
    write(tmp_path / "t" / "b.parquet", mixed(500, seed=2))
    run(table)
    root = tmp_path / "t" / "_lakestats"
    (root / "LATEST").unlink()                   # v000002 is complete, but was it published?
    assert_lost(root, "LATEST is missing")
    report = run(table)                          # publishes anew, past both
    assert report.published and report.version == "v000003" and report.row_count == 1000
    assert StatisticsReader(str(root)).version == "v000003"
    (root / "versions" / "v000003" / "manifest.json").unlink()
    assert_lost(root, "v000003, whose manifest.json is missing")   # not v000002
    assert run(table).version == "v000004"
    (root / "LATEST").write_text('{"vers')
    assert_lost(root, "LATEST is damaged")
    report = run(table)
    assert report.version == "v000005" and StatisticsReader(str(root)).summary()["row_count"] == 1000
