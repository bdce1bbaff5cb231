"""`lakestats status` (and TableStatistics.status): the published version, the changes since,
checked against the file system (files landed, rewritten and removed, and their modification
times), the lag, and the statistics a change left inexact, since which version; its --json
typed by lakestats/schemas/status.json."""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import time
from importlib import resources
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest

import lakestats
from lakestats.algorithms.frequencies import delta
from lakestats.cli import main
from tests.tables import mixed, write

SCHEMA = json.loads((resources.files("lakestats") / "schemas" / "status.json").read_text())
HOUR = 3600


def cli(*argv) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main([str(a) for a in argv])
    return code, stdout.getvalue(), stderr.getvalue()


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """The table's data files as the file system has them: path -> (size, mtime_ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*.parquet") if "_lakestats" not in p.parts}


def status_json(root: Path, *flags: str) -> dict:
    code, out, err = cli("status", root, "--json", *flags)
    assert code == 0, err
    found = json.loads(out)
    jsonschema.validate(found, SCHEMA)
    return found


@pytest.fixture(scope="module")
def history(tmp_path_factory, run):
    """v1: four files; v2: a small file landed (frequency lists carried stale, MERGE_MAX 0);
    v3: a file removed (sketches stale). Then, uncomputed: a file lands, one is rewritten,
    one removed. Returns the root, the versions, the small file and the listings before and
    after the uncomputed changes."""
    root = tmp_path_factory.mktemp("status") / "orders"
    for i in range(4):
        write(root / f"part-{i}.parquet", mixed(500, seed=i + 1))
    v1 = run(root).version
    first = lakestats.open(str(root)).status()
    small = write(root / "part-4.parquet", mixed(20, seed=9))
    with pytest.MonkeyPatch.context() as patch:          # every touched list carried stale
        patch.setattr(delta, "MERGE_MAX", 0)
        patch.setattr(delta, "MERGE_PER_ROW", 0)
        v2 = run(root).version
    second = lakestats.open(str(root)).status()
    (root / "part-3.parquet").unlink()
    v3 = run(root).version
    before = listing(root)
    now = time.time()
    write(root / "new" / "part-5.parquet", mixed(30, seed=11))
    os.utime(root / "new" / "part-5.parquet", (now - 2 * HOUR, now - 2 * HOUR))
    write(root / "part-1.parquet", mixed(40, seed=12))              # rewritten
    os.utime(root / "part-1.parquet", (now - HOUR, now - HOUR))
    (root / "part-2.parquet").unlink()
    return dict(root=root, versions=(v1, v2, v3), first=first, second=second, small=small,
                before=before, after=listing(root))


def test_a_fresh_version_is_current_and_exact(history):
    s, (v1, _, _) = history["first"], history["versions"]
    jsonschema.validate(s, SCHEMA)
    assert (s["version"], s["current"], s["exact"], s["pending"]) == (v1, True, True, [])
    assert s["row_count"] == 4 * 500 and s["partitions"] == 4
    assert s["lag"]["pending_seconds"] == 0 and s["lag"]["oldest_pending"] is None
    assert s["lag"]["version_age_seconds"] >= 0


def test_stale_frequency_lists_say_since_which_version(history):
    """v2 carried every list the small file touched: exact as of v1, its non-null rows
    changed since."""
    s, (v1, v2, _) = history["second"], history["versions"]
    small = pq.read_table(history["small"])
    expected = {name: small[name].length() - small[name].null_count for name in small.column_names
                if small[name].null_count < small.num_rows}
    assert s["version"] == v2 and not s["exact"]
    assert {c["column"]: (c["exact_as_of"], c["stale_rows"]) for c in s["inexact"]["frequencies"]} \
        == {name: (v1, n) for name, n in expected.items()}
    assert s["inexact"]["sketches"] == {"stale": False, "exact_as_of": None}


def test_pending_changes_are_those_of_the_file_system(history):
    root, before, after = history["root"], history["before"], history["after"]
    _, v2, v3 = history["versions"]
    s = status_json(root)
    assert s == lakestats.open(str(root)).status() | {"checked": s["checked"], "lag": s["lag"]}
    expected = {"added": sorted(set(after) - set(before)),
                "changed": sorted(p for p in set(after) & set(before) if after[p] != before[p]),
                "removed": sorted(set(before) - set(after))}
    assert expected == {"added": ["new/part-5.parquet"], "changed": ["part-1.parquet"],
                        "removed": ["part-2.parquet"]}        # the test's own changes, listed
    assert {kind: [p["path"] for p in s["pending"] if p["change"] == kind]
            for kind in expected} == expected
    assert s["pending_count"] == {kind: len(paths) for kind, paths in expected.items()}
    assert s["version"] == v3 and not s["current"]
    # modification times: the file system's, to the second; none for the removed file
    for item in s["pending"]:
        mtime = after[item["path"]][1] // 10 ** 9 if item["path"] in after else None
        found = item["modified"] and dt.datetime.fromisoformat(item["modified"]).timestamp()
        assert found == mtime, item
    # the lag: the oldest pending file's age when status looked
    oldest = min((after[p][1], p) for p in expected["added"] + expected["changed"])
    checked = dt.datetime.fromisoformat(s["checked"]).timestamp()
    assert s["lag"]["oldest_pending"] == oldest[1] == "new/part-5.parquet"
    assert abs(s["lag"]["pending_seconds"] - (checked - oldest[0] / 1e9)) < 1.001
    # v3 removed a file: sketches stale since, exact as of v2
    assert s["inexact"]["sketches"] == {"stale": True, "exact_as_of": v2}


def test_time_zone_and_text(history):
    root = history["root"]
    s = status_json(root, "--time-zone", "+05:30")
    assert s["checked"].endswith("+05:30") and s["created"].endswith("+05:30")
    code, out, _ = cli("status", root)
    assert code == 0
    for item in s["pending"]:
        assert item["path"] in out
    assert "added" in out and s["version"] in out


def test_a_table_without_statistics_has_every_file_pending(tmp_path):
    root = tmp_path / "fresh"
    for i in range(2):
        write(root / f"f{i}.parquet", mixed(10, seed=i))
    s = status_json(root)
    assert (s["version"], s["row_count"], s["current"]) == (None, None, False)
    assert [(p["path"], p["change"]) for p in s["pending"]] == \
        [(p, "added") for p in sorted(listing(root))]
    code, out, err = cli("status", tmp_path / "nothing-here")
    assert code == 1 and "no such table" in err and not out
