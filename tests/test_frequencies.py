"""Exact table-level frequencies: the three distributed algorithms against a Counter oracle,
byte-identical to each other, each choosing itself on its kind of data."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.core import types as ty
from lakestats.core.batching import runs
from lakestats.core.settings import FrequencySettings
from lakestats.cli import main
from lakestats.metastore.reader import StatisticsReader
from lakestats.metastore.store import Store
from tests.tables import write

ALGORITHMS = ["low-distinct", "low-duplicate", "binned"]
PARTS, ROWS = 32, 400


def tricky(part: int) -> pa.Table:
    """One partition: zipf-skewed integers, a unique id, a constant, unicode strings, floats
    with NaN, -0.0 and nulls, timestamps with a zone, and ids shared across partitions."""
    rng = np.random.default_rng(part)
    n = ROWS
    floats = rng.choice([np.nan, -0.0, 0.0, 1.5, -2.25, np.inf], n)
    return pa.table({
        "zipf": pa.array(np.minimum(rng.zipf(1.3, n), 10**9), pa.int64()),
        "uid": pa.array(np.arange(part * n, (part + 1) * n) * 7919 % 1_000_003, pa.int64()),
        "one": pa.array(["same"] * n),
        "text": pa.array(rng.choice(["a", "é", "日本", "", "ü" * 3, "a\x00b", "🦆"], n)),
        "real": pa.array(floats, mask=rng.random(n) < 0.2),
        "at": pa.array(rng.integers(0, 50, n) * 3_600_000_000, pa.timestamp("us", "Asia/Kolkata")),
        "shared": pa.array(rng.integers(0, 3_000, n), pa.int32()),
        "nulls": pa.array([None] * n, pa.string()),
    })


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("freq") / "t"
    for i in range(PARTS):
        write(root / f"p={i % 4}/part-{i:02d}.parquet", tricky(i))
    return root


def oracle(root, column: str) -> Counter:
    """Counts of each value's canonical text, computed from the data files directly."""
    counts = Counter()
    for f in Store(str(root)).list_files():
        values = pq.read_table(root / f.rel_path, columns=[column])[column].combine_chunks()
        counts.update(ty.to_text(ty.normalize(values.drop_null())).to_pylist())
    return counts


def published(root, column: str) -> list[tuple[str, int]]:
    freq = StatisticsReader(f"{root}/_lakestats").frequencies(column)
    return list(zip(freq["value"].to_pylist(), freq["frequency"].to_pylist()))


def expected_rows(counts: Counter, keep_once: bool) -> list[tuple[str, int]]:
    rows = sorted(counts.items(), key=lambda vf: (-vf[1], vf[0].encode()))
    return [r for r in rows if keep_once or r[1] > 1]


SMALL = dict(low_distinct_max=5_000, low_duplicate_max=2_000)


def frequencies_bytes(root) -> bytes:
    stats = StatisticsReader(f"{root}/_lakestats")
    return stats.version_dir().read_bytes("frequencies.parquet")


@pytest.fixture(scope="module")
def by_algorithm(table, tmp_path_factory, run):
    """The table's statistics computed once per algorithm (and automatically), in separate
    statistics roots."""
    out = {}
    for algorithm in ["auto", *ALGORITHMS]:
        root = tmp_path_factory.mktemp(algorithm)
        report = run(table, stats_root=str(root),
                     frequencies=FrequencySettings(algorithm, **SMALL))
        out[algorithm] = (root, report)
    return out


def test_automatic_choice_suits_each_column(by_algorithm):
    """Few distinct values: low-distinct. Unique ids spread over the partitions:
    low-duplicate. Values repeated across many partitions, too many for either: binned."""
    chosen = {c: r["algorithm"] for c, r in by_algorithm["auto"][1].frequencies.items()}
    assert chosen == {"zipf": "low-distinct", "uid": "low-duplicate", "one": "low-distinct",
                      "text": "low-distinct", "real": "low-distinct", "at": "low-distinct",
                      "shared": "binned", "p": "low-distinct"}      # p: the Hive directories


@pytest.mark.parametrize("algorithm", ["auto", *ALGORITHMS])
def test_every_algorithm_matches_the_oracle(table, by_algorithm, algorithm):
    root, report = by_algorithm[algorithm]
    stats = StatisticsReader(str(root))
    rows = {r["column"]: r for r in stats.statistics(sketches=False).to_pylist()}
    for column in ["zipf", "uid", "one", "text", "real", "at", "shared"]:
        counts = oracle(table, column)
        near_unique = column == "uid"          # values seen once are implied, not stored
        freq = stats.frequencies(column)
        assert list(zip(freq["value"].to_pylist(), freq["frequency"].to_pylist())) == \
            expected_rows(counts, keep_once=not near_unique), (algorithm, column)
        assert rows[column]["distinct_count"] == len(counts)
        assert rows[column]["distinct_count_exact"] is True
        assert rows[column]["singleton_count"] == sum(1 for f in counts.values() if f == 1)
        assert rows[column]["frequencies_complete"] is (not near_unique or
                                                        rows[column]["singleton_count"] == 0)
        assert rows[column]["frequency_algorithm"] == report.frequencies[column]["algorithm"]
    assert rows["nulls"]["distinct_count"] == 0
    assert rows["real"]["distinct_count"] == 5      # NaN once, -0.0 = 0.0, inf


def test_algorithms_are_byte_identical(by_algorithm):
    files = {a: (root / "versions" / r.version / "frequencies.parquet").read_bytes()
             for a, (root, r) in by_algorithm.items()}
    assert len(set(files.values())) == 1, {a: len(b) for a, b in files.items()}


def test_low_distinct_in_many_batches_is_byte_identical(table, by_algorithm, tmp_path, run,
                                                        monkeypatch):
    """Columns cut into as many reducer batches as the workers allow, of unequal sizes (the
    unique ids fill more than their share, so some batch numbers go unused): the same file."""
    from lakestats.algorithms.frequencies import choice
    monkeypatch.setattr(choice, "LOW_DISTINCT_SPLIT", 1)
    report = run(table, stats_root=str(tmp_path),
                 frequencies=FrequencySettings("low-distinct", **SMALL))
    binned, binned_report = by_algorithm["binned"]
    assert (tmp_path / "versions" / report.version / "frequencies.parquet").read_bytes() == \
        (binned / "versions" / binned_report.version / "frequencies.parquet").read_bytes()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_packs_of_partitions_give_the_file_of_one_partition_a_call(tmp_path, run, monkeypatch,
                                                                   algorithm):
    """The send and confirm steps read several partitions a call, their counts summed: the
    same frequencies.parquet as one partition a call (pack_bytes 0), and the oracle's counts,
    with a column that is int32 in some files and float64 in others (re-rendered per file)."""
    from lakestats.algorithms.frequencies import driver
    root = tmp_path / "t"
    for i in range(24):
        rng = np.random.default_rng(i)
        part = tricky(i).select(["uid", "shared", "text"])
        mixed = rng.integers(0, 40, ROWS)
        write(root / f"part-{i:02d}.parquet", part.append_column(
            "mixed", pa.array(mixed, pa.int32() if i % 2 else pa.float64())))
    largest = []                        # the largest call of each pack, in partitions

    def recorded(*args):
        calls = list(runs(*args))
        largest.append(max(map(len, calls)))
        return calls
    monkeypatch.setattr(driver, "runs", recorded)
    files = []
    # one partition a call; packs; packs cut by their events' size (retyped specs are large)
    for budget, event_bytes in ((0, driver.EVENT_BYTES), (128 << 20, driver.EVENT_BYTES),
                                (128 << 20, 1)):
        monkeypatch.setattr(driver, "EVENT_BYTES", event_bytes)
        stats_root = tmp_path / f"stats-{len(files)}"
        largest.clear()
        report = run(root, stats_root=str(stats_root), pack_bytes=budget,
                     frequencies=FrequencySettings(algorithm, all_values=True, **SMALL))
        files.append((stats_root / "versions" / report.version /
                      "frequencies.parquet").read_bytes())
        assert (max(largest) > 1) == (budget > 0 and event_bytes > 1), largest
    assert files[0] == files[1] == files[2]
    counts = Counter()
    for f in sorted(root.glob("*.parquet")):
        values = pq.read_table(f, columns=["mixed"])["mixed"].combine_chunks()
        counts.update(ty.to_text(values.cast(pa.float64())).to_pylist())
    freq = StatisticsReader(str(tmp_path / "stats-1")).frequencies("mixed")
    assert list(zip(freq["value"].to_pylist(), freq["frequency"].to_pylist())) == \
        expected_rows(counts, keep_once=True)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_all_values_lists_every_value(table, tmp_path, run, algorithm):
    run(table, stats_root=str(tmp_path), frequencies=FrequencySettings(
        algorithm, all_values=True, **SMALL))
    freq = StatisticsReader(str(tmp_path)).frequencies("uid")
    assert list(zip(freq["value"].to_pylist(), freq["frequency"].to_pylist())) == \
        expected_rows(oracle(table, "uid"), keep_once=True)


def test_incremental_update_reuses_partitions(tmp_path, run):
    root = tmp_path / "t"
    for i in range(6):
        write(root / f"part-{i}.parquet", tricky(i))
    run(root, frequencies=FrequencySettings(**SMALL))
    write(root / "part-new.parquet", tricky(99))
    (root / "part-0.parquet").unlink()
    report = run(root, frequencies=FrequencySettings(**SMALL))
    assert (report.computed, report.reused, report.removed) == (1, 5, 1)
    for column in ["zipf", "shared", "text"]:
        assert published(root, column) == expected_rows(oracle(root, column), keep_once=True)


def test_redis_holds_nothing_after_a_job(table, by_algorithm, redis_url):
    import redis
    assert list(redis.Redis.from_url(redis_url).scan_iter("lakestats:job:*")) == []


def test_failed_step_leaves_no_keys_and_publishes_nothing(tmp_path, run, redis_url):
    """A partition's stored frequencies turn unreadable, and other frequency settings make
    the table level read every partition's again: the frequency step fails, no new version
    appears, and the job's Redis keys are gone."""
    import redis

    from lakestats.fleet.protocol import StepFailed
    root = tmp_path / "t"
    for i in range(3):
        write(root / f"part-{i}.parquet", tricky(i))
    first = run(root)
    write(root / "part-3.parquet", tricky(3))
    stats_dir = next((root / "_lakestats" / "partitions").glob("part-1.parquet/*"))
    (stats_dir / "frequencies.parquet").write_bytes(b"not parquet")
    with pytest.raises(StepFailed):
        run(root, frequencies=FrequencySettings("binned"))
    assert StatisticsReader(f"{root}/_lakestats").version == first.version
    assert list(redis.Redis.from_url(redis_url).scan_iter("lakestats:job:*")) == []


def test_cli_frequencies_json(by_algorithm, table, capsys):
    root, _ = by_algorithm["auto"]
    assert main(["frequencies", str(table), "zipf", "--stats-root", str(root), "--json",
                 "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    counts = oracle(table, "zipf")
    assert out == {"column": "zipf", "exact": True, "algorithm": "low-distinct",
                   "distinct_count": len(counts), "null_count": 0,
                   "values": [{"value": v, "frequency": f}
                              for v, f in expected_rows(counts, True)[:3]]}
    assert main(["frequencies", str(table), "uid", "--stats-root", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithm"] == "low-duplicate"
    assert out["omitted_singletons"] == out["distinct_count"] - len(out["values"])
    part = "p=1/part-05.parquet"
    assert main(["frequencies", str(table), "real", "--stats-root", str(root), "--json",
                 "--partition", part]) == 0
    out = json.loads(capsys.readouterr().out)
    values = pq.read_table(table / part, columns=["real"])["real"].combine_chunks()
    counts = Counter(ty.to_text(ty.normalize(values.drop_null())).to_pylist())
    assert out["algorithm"] == "partition" and out["null_count"] == values.null_count
    listed = [v["frequency"] for v in out["values"]]
    assert listed == sorted(listed, reverse=True)     # ties: in order of first appearance
    assert {v["value"]: v["frequency"] for v in out["values"]} == counts


def test_changed_settings_republish(tmp_path, run):
    """Other frequency options reduce the stored partitions again; other histogram bins
    recompute the partitions; the same options change nothing."""
    for i in range(3):
        write(tmp_path / f"part-{i}.parquet", tricky(i))
    run(tmp_path)
    assert not run(tmp_path).published
    again = run(tmp_path, frequencies=FrequencySettings("binned"))
    assert (again.published, again.computed, again.reused) == (True, 0, 3)
    assert again.frequencies["zipf"]["algorithm"] == "binned"
    rebinned = run(tmp_path, max_bins=100, frequencies=FrequencySettings("binned"))
    assert (rebinned.published, rebinned.computed) == (True, 3)
    assert len(StatisticsReader(f"{tmp_path}/_lakestats").histogram("real")) <= 100


def test_partitions_an_older_kernel_wrote_are_computed_again(tmp_path, run):
    """Partition statistics are reused by the file's fingerprint alone: ones written by a
    kernel since corrected (its version recorded with the settings) are computed again."""
    from lakestats.metastore.layout import Layout
    from lakestats.metastore.manifest import read_manifest, write_manifest
    for i in range(3):
        write(tmp_path / f"part-{i}.parquet", tricky(i))
    run(tmp_path)
    layout = Layout.of_table(str(tmp_path))
    manifest = read_manifest(layout)
    del manifest.settings["partition"]["kernel"]          # as a version before it wrote it
    write_manifest(layout, manifest)
    again = run(tmp_path)
    assert (again.published, again.computed, again.reused) == (True, 3, 0)
    assert (run(tmp_path).published, run(tmp_path).computed) == (False, 0)
