"""A table of 1,000 columns in 10 files stays within the stated memory budgets (Redis peak at
most 256 MB, the coordinator's peak RSS at most 1 GB), and its statistics and frequencies
equal a plain computation over the data."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import redis

from lakestats.infra.redis_server import EmbeddedRedis
from lakestats.metastore.reader import StatisticsReader

# a Redis of its own, started here: a services test
pytestmark = [pytest.mark.services, pytest.mark.slow]

COLUMNS, FILES, ROWS = 1_000, 10, 300
REDIS_BUDGET_MB, COORDINATOR_BUDGET_MB = 256, 1024

# The coordinator in a process of its own, so that its peak RSS is its own (Linux VmHWM);
# the workers are its children, and their largest peak comes from RUSAGE_CHILDREN.
COORDINATOR = """
import json, resource, sys
from lakestats.core.settings import Settings
from lakestats.fleet.invokers.local import LocalInvoker
from lakestats.monostore.compute import compute
with LocalInvoker(workers=2) as invoker:
    report = compute(sys.argv[1], invoker, Settings(redis_url=sys.argv[2]))
peak = next(int(line.split()[1]) for line in open("/proc/self/status")
            if line.startswith("VmHWM:"))
print(json.dumps({"failed": report.failed, "coordinator_mb": peak / 1024,
                  "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def part(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    columns = {}
    for k in range(COLUMNS):
        values = rng.integers(-500, 500, ROWS) * (k + 1)
        columns[f"c{k:04d}"] = pa.array(values, mask=rng.random(ROWS) < 0.05)
    columns["c0000"] = pa.array(np.full(ROWS, np.iinfo(np.int64).max - seed))   # no overflow
    return pa.table(columns)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    root = tmp_path_factory.mktemp("wide")
    for i in range(FILES):
        pq.write_table(part(i), root / f"part-{i:02d}.parquet")
    server = EmbeddedRedis().start()        # its own: the peak is this compute's alone
    try:
        out = subprocess.run([sys.executable, "-c", COORDINATOR, str(root), server.url],
                             check=True, capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1])
        peak = redis.Redis.from_url(server.url).info("memory")["used_memory_peak"]
    finally:
        server.stop()
    return root, json.loads(out.stdout.splitlines()[-1]), peak / 2**20


def test_memory_stays_within_budget(wide):
    _, measured, redis_mb = wide
    assert not measured["failed"]
    assert redis_mb <= REDIS_BUDGET_MB, f"Redis peaked at {redis_mb:.0f} MB"
    assert measured["coordinator_mb"] <= COORDINATOR_BUDGET_MB, measured


def test_statistics_equal_a_plain_computation(wide):
    root, _, _ = wide
    data = pa.concat_tables(pq.read_table(p) for p in sorted(root.glob("*.parquet")))
    stats = StatisticsReader(f"{root}/_lakestats")
    rows = {r["column"]: r for r in stats.statistics().to_pylist()}
    assert len(rows) == COLUMNS
    for name in ("c0000", "c0001", "c0500", "c0999"):
        values = [v for v in data[name].to_pylist() if v is not None]
        row = rows[name]
        assert row["row_count"] == data.num_rows
        assert row["null_count"] == data.num_rows - len(values)
        assert int(row["sum"]) == sum(values)           # exact beyond int64
        assert (int(row["min"]), int(row["max"])) == (min(values), max(values))
        assert row["distinct_count"] == len(set(values))
        expected = sorted(Counter(values).items(), key=lambda kv: (-kv[1], str(kv[0])))
        got = stats.frequencies(name)
        assert list(zip(map(int, got["value"].to_pylist()), got["frequency"].to_pylist())) \
            == expected


def test_its_report_lists_every_column_and_opens_in_the_browser(wide, tmp_path):
    """The report of 1,000 columns: a card and a row in the searchable list for each, in
    headless Chromium (its load time is benchmarks/bench_report.py's)."""
    from lakestats.profile import html_report
    from tests import browser
    if browser.missing():
        pytest.fail(browser.missing())
    root, _, _ = wide
    page = tmp_path / "wide.html"
    page.write_text(html_report(str(root)), encoding="utf-8")
    dom = browser.dom(page)                  # 7 MB: read with patterns, not a parser
    names = [f"c{k:04d}" for k in range(COLUMNS)]
    assert re.findall(r'<article class="column" id="col-\d+" data-column="([^"]+)"', dom) \
        == names
    assert re.findall(r'<tr data-column="([^"]+)"', dom) == names
    assert '<input id="search" type="search"' in dom
    loaded = re.search(r'<html lang="en" data-loaded-ms="(\d+)"', dom)
    assert loaded and int(loaded.group(1)) > 0        # the page's script ran to its end
