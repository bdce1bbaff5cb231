"""Pending reductions in Redis (fleet.windows): a change stays pending until a reduction that
claimed it settles; windows coalesce; failures back off. And the watcher's lines: text on a
terminal, JSON with aws-lambda-powertools' keys otherwise."""
from __future__ import annotations

import io
import json
import re
import time
import uuid

from lakestats.fleet import protocol, windows
from lakestats.fleet.connections import client
from lakestats.functions.lambda_handlers import Touched
from lakestats.monostore.report import Report
from lakestats.watch import WatchLog


def fresh_table() -> str:
    return f"s3://lake-{uuid.uuid4().hex[:8]}/orders"


def test_a_change_stays_pending_until_a_reduction_that_claimed_it_settles(redis_url):
    table = fresh_table()
    assert windows.state(redis_url, [table]) == {}
    assert windows.record(redis_url, table, window=60) == (1, True)     # opens the window
    assert windows.record(redis_url, table, window=60) == (2, False)    # joins it
    found = windows.state(redis_url, [table])[table]
    assert found.waiting and found.due > time.time()
    claimed = windows.claim(redis_url, table)
    assert claimed == 2 and windows.state(redis_url, [table])[table].due is None
    # a batch recorded while the reduction runs opens the next window
    assert windows.record(redis_url, table, window=60) == (3, True)
    windows.settle(redis_url, table, claimed)
    found = windows.state(redis_url, [table])[table]
    assert found.reduced == 2 and found.waiting                         # the third is not in
    windows.settle(redis_url, table, 1)                 # an older reduction, late: no step back
    assert windows.state(redis_url, [table])[table].reduced == 2
    windows.settle(redis_url, table, windows.claim(redis_url, table))
    assert not windows.state(redis_url, [table])[table].waiting
    assert windows.retry(redis_url, table) is None      # nothing pending: nothing to retry
    ttl = client(redis_url).ttl(protocol.pending_changes(table))
    assert 0 < ttl <= protocol.PENDING_TTL_SECONDS


def test_a_reduction_that_dies_leaves_its_claim_due_at_once(redis_url):
    table = fresh_table()
    windows.record(redis_url, table, window=60)
    windows.claim(redis_url, table)                     # and its process is killed
    found = windows.state(redis_url, [table])[table]
    assert found.waiting and found.due is None and found.at == 0.0
    windows.settle(redis_url, fresh_table(), 5)         # no record: none is made up
    assert windows.state(redis_url, [fresh_table()]) == {}


def test_failed_reductions_back_off(redis_url):
    table = fresh_table()
    windows.record(redis_url, table, window=0)
    windows.claim(redis_url, table)
    assert windows.retry(redis_url, table) == windows.RETRY_SECONDS
    windows.claim(redis_url, table)
    assert windows.retry(redis_url, table) == 2 * windows.RETRY_SECONDS
    assert windows.state(redis_url, [table])[table].due > time.time() + windows.RETRY_SECONDS
    windows.settle(redis_url, table, windows.claim(redis_url, table))   # it works at last
    windows.record(redis_url, table, window=0)
    windows.claim(redis_url, table)
    assert windows.retry(redis_url, table) == windows.RETRY_SECONDS     # the backoff restarts


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_watcher_writes_text_on_a_terminal_and_json_otherwise():
    # the partitions were computed by the batch: the version reuses them, and adds a file
    report = Report("s3://lake/orders", version="v000002", published=True, row_count=3000,
                    computed=0, reused=3, added=1)
    batch = Touched("s3://lake/orders", files=1, rows=1000, newest=1000.0, count=4)
    lines = {}
    for stream in (io.StringIO(), Terminal()):
        log = WatchLog(stream)
        log.version(report)
        log.batch(batch, "v000002", now=1002.5)
        lines[stream.isatty()] = stream.getvalue().splitlines()
    version, line = (json.loads(text) for text in lines[False])
    for record in (version, line):
        assert {"level", "location", "message", "timestamp"} <= set(record)
        assert record["service"] == "lakestats" and record["level"] == "INFO"
    assert (version["added"], version["changed"], version["removed"]) == (1, 0, 0)
    assert (version["computed"], version["version"]) == (0, "v000002")
    assert (line["files"], line["rows"], line["lag_seconds"]) == (1, 1000, 2.5)
    text = lines[True]
    assert re.fullmatch(r"\d\d:\d\d:\d\d s3://lake/orders: version v000002 published, 3,000 "
                        r"rows: added 1, changed 0, removed 0 files", text[0]), text
    assert re.fullmatch(r"\d\d:\d\d:\d\d s3://lake/orders: a batch of 1 file, 1,000 rows, in "
                        r"version v000002 2\.5 s after its newest file arrived", text[1]), text
