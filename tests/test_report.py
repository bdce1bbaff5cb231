"""`lakestats report`: one self-contained HTML page. Read back from headless Chromium's DOM,
every column's statistics equal `show --json`; the pruning power and the drift equal a plain
computation over the data files; the freshness is the table's as it is now; nothing in the
page points outside it; a failed report writes nothing."""
from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakestats
from lakestats.profile.gather import gather
from tests import browser
from tests.oracle_data import adversarial, write
from tests.tables import run_cli


@pytest.fixture(scope="module")
def edges(tmp_path_factory, run) -> Path:
    """Every type at its edges (NaN, infinities, -0.0, int64's ends, decimals of 76 digits,
    zoned timestamps, unicode, empty strings, nested columns), in three files."""
    root = tmp_path_factory.mktemp("report") / "edges"
    for p in range(3):
        write(root / f"part-{p}.parquet", adversarial(p))
    run(root)
    return root


def elements(page: str) -> list[dict]:
    return browser.Elements(page).found


def summary_of(found: list[dict]) -> dict:
    return {e["attrs"]["data-key"]: json.loads(e["attrs"]["data-value"])
            for e in found if "data-key" in e["attrs"]}


def shown_as(text: str, value) -> bool:
    """Whether a reader sees `value` (as show --json prints it) in `text`."""
    if value is None:
        return text == "—"
    if isinstance(value, bool):
        return text == ("yes" if value else "no")
    if isinstance(value, int):
        return text == f"{value:,}"
    if isinstance(value, float):
        return math.isclose(float(text), value, rel_tol=1e-5)
    if isinstance(value, list):
        value = ", ".join(value)
    if value == "":
        return text == '""'
    value = value.replace("\x00", "\ufffd")       # HTML has no NUL: the browser shows U+FFFD
    return text == value or (text.endswith("…") and value.startswith(text[:-1]))


def test_every_column_in_the_browser_equals_show_json(edges, tmp_path):
    if browser.missing():
        pytest.fail(browser.missing())
    out = tmp_path / "report.html"
    done = run_cli("report", edges, "-o", out, "--quiet", "--time-zone", "America/New_York")
    assert done.returncode == 0, done.stderr
    show = json.loads(run_cli("show", edges, "--json").stdout)
    found = elements(browser.dom(out))

    cards = [e["attrs"]["data-column"] for e in found if e["tag"] == "article"]
    listed = [e["attrs"]["data-column"] for e in found if e["tag"] == "tr"
              and "data-column" in e["attrs"]]
    assert cards == listed == [c["column"] for c in show["columns"]]
    checked = 0
    for column in show["columns"]:
        cells = {e["attrs"]["data-stat"]: e for e in found
                 if e["column"] == column["column"] and "data-stat" in e["attrs"]}
        assert set(cells) == set(column) - {"column", "type"}, column["column"]
        for key, cell in cells.items():
            want = column[key]
            assert json.loads(cell["attrs"]["data-value"]) == want, (column["column"], key)
            assert shown_as(cell["text"], want), (column["column"], key, cell["text"], want)
            checked += 1
    assert checked >= 20 * len(show["columns"])

    summary = summary_of(found)
    assert (summary["rows"], summary["files"], summary["version"], summary["format"]) == (
        show["row_count"], show["partitions"], show["version"], "parquet")
    assert summary["bytes"] == sum(p.stat().st_size for p in edges.glob("*.parquet"))
    assert summary["freshness"] is True
    created = next(e["text"] for e in found if e["attrs"].get("data-key") == "version")
    assert re.search(r"created \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d-0[45]:00", created)

    # the column list's filter, in the browser: from a link, as a reader would type it
    filtered = elements(browser.dom(out, fragment="q=I6"))
    shown = [e["attrs"]["data-column"] for e in filtered if e["tag"] in ("tr", "article")
             and "data-column" in e["attrs"] and "hidden" not in e["attrs"]]
    assert shown == ["i64", "i64_near", "i64", "i64_near"]
    assert next(e["text"] for e in filtered if e["attrs"].get("id") == "shown") == \
        f"2 of {len(cards)} shown"

    png = tmp_path / "report.png"
    browser.screenshot(out, png, width=1280, height=1600)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1280, 1600)
    assert png.stat().st_size > 50_000                # drawn, not blank


def test_the_page_needs_nothing_from_outside(edges, tmp_path):
    page = lakestats.html_report(str(edges))
    found = elements(page)
    assert not [e for e in found if e["tag"] in ("link", "img", "iframe", "object", "embed")]
    assert not [e for e in found if e["tag"] == "script" and "src" in e["attrs"]]
    outside = [(e["tag"], name, value) for e in found for name, value in e["attrs"].items()
               if name in ("src", "href", "action", "srcset", "poster")
               and re.match(r"\s*(https?:|//|ftp:|data:)", value or "", re.I)]
    assert outside == []
    assert not re.search(r"@import|url\(|https?://", page)


def percentile_disc(ordered: list, q: float):
    n = len(ordered)
    return ordered[max(1, -(-round(q * 100) * n // 100)) - 1]


def oracle_pruning(paths: list[Path], column: str) -> tuple[float, float]:
    """The mean share of files skipped by their min and max, for each percentile 1..99 as a
    point and each pair of consecutive percentiles 0..100 as a range, computed plainly."""
    files = [pq.read_table(p, columns=[column])[column] for p in paths]
    as_key = (lambda a: a.cast(pa.int64()).to_pylist()) if pa.types.is_timestamp(
        files[0].type) else (lambda a: a.to_pylist())
    values = [[v for v in as_key(f) if v is not None] for f in files]
    bounds = [(min(v), max(v)) if v else None for v in values]
    ordered = sorted(v for vs in values for v in vs)
    points = [percentile_disc(ordered, k / 100) for k in range(101)]
    n = len(files)

    def skipped(low, high) -> float:
        return sum(b is None or b[1] < low or b[0] > high for b in bounds) / n
    point = sum(skipped(v, v) for v in points[1:-1]) / 99
    ranged = sum(skipped(a, b) for a, b in zip(points, points[1:])) / 100
    return point, ranged


@pytest.fixture(scope="module")
def clustered(tmp_path_factory, run) -> Path:
    """Twelve files: `key` and `day` clustered (each file a range of its own), `noise` and
    `name` spread over every file, `sparse` with a share of nulls that grows file by file
    (all null in the first). Each has fewer values than the report's exact quantiles take
    (EXACT_QUANTILES_MAX) but `spread`, whose probes come from its sketch."""
    root = tmp_path_factory.mktemp("report") / "clustered"
    rng = np.random.default_rng(7)
    for i in range(12):
        n = 500 + 37 * i
        day = np.datetime64("2024-01-01T00:00:00", "us") + np.timedelta64(1, "D") * i
        nulls = rng.random(n) < i / 12 if i else np.ones(n, bool)
        write(root / f"part-{i:02d}.parquet", pa.table({
            "key": pa.array(i * 10_000 + rng.integers(0, 300, n)),
            "day": pa.array(day + rng.integers(0, 300, n) * np.timedelta64(1, "s"),
                            pa.timestamp("us", "Asia/Kolkata")),
            "noise": pa.array(rng.integers(-1500, 1500, n)),
            "name": pa.array([f"n{x:05d}" for x in rng.integers(0, 3_000, n)]),
            "sparse": pa.array(rng.normal(0, 1, n).round(2), mask=nulls),
            "spread": pa.array(rng.integers(-10 ** 6, 10 ** 6, n))}))
    run(root)
    return root


def test_pruning_power_and_drift_equal_a_plain_computation(clustered):
    paths = sorted(clustered.glob("*.parquet"))
    report = gather(lakestats.open(str(clustered)))
    by_name = {c["statistics"]["column"]: c for c in report["columns"]}
    for column in ("key", "day", "noise", "name", "sparse", "spread"):
        assert by_name[column]["quantiles"]["exact"] == (column != "spread")
        point, ranged = oracle_pruning(paths, column)
        got = by_name[column]["pruning"]
        close = 1e-4 if column != "spread" else 0.02       # probes within the sketch's error
        assert got["point"] == pytest.approx(point, abs=close), column
        assert got["range"] == pytest.approx(ranged, abs=close), column
    assert by_name["key"]["pruning"]["point"] > 0.9 > by_name["noise"]["pruning"]["point"]

    tables = [pq.read_table(p) for p in paths]
    drift = by_name["sparse"]["drift"]
    assert drift["files"] == drift["points"] == len(paths)
    assert drift["nulls"] == [round(t["sparse"].null_count / t.num_rows, 4) for t in tables]
    assert drift["low"][0] is None                    # all null: no bounds
    keys = by_name["key"]["drift"]
    assert keys["low"] == sorted(keys["low"]) and keys["low"][0] == 0.0
    assert keys["high"][-1] == 1.0
    histogram = by_name["noise"]["histogram"]["counts"]
    assert sum(histogram) == sum(t.num_rows for t in tables)

    page = lakestats.html_report(str(clustered))      # the page shows the same numbers
    shown = {e["column"]: e["attrs"] for e in elements(page) if e["tag"] == "p"
             and "data-point" in e["attrs"]}
    assert {c: (float(a["data-point"]), float(a["data-range"])) for c, a in shown.items()} \
        == {c: (by_name[c]["pruning"]["point"], by_name[c]["pruning"]["range"])
            for c in shown}


def test_freshness_versions_and_time_zones_are_the_table_as_it_is_now(tmp_path, run):
    root = tmp_path / "t"
    rows = {}
    for i in range(4):
        rows[i] = 100 * (i + 1)
        write(root / f"part-{i}.parquet", pa.table({"x": pa.array(np.arange(rows[i]))}))
        if i in (1, 2):
            run(root)                   # v1: two files, v2: three; the fourth lands after

    def report(*flags: str) -> tuple[dict, list[dict]]:
        out = tmp_path / "r.html"
        done = run_cli("report", root, "-o", out, "--quiet", *flags)
        assert done.returncode == 0, done.stderr
        found = elements(out.read_text(encoding="utf-8"))
        return summary_of(found), found

    summary, found = report("--time-zone", "Asia/Kolkata")
    assert summary["versions"] == ["v000001", "v000002"] and summary["version"] == "v000002"
    assert summary["rows"] == rows[0] + rows[1] + rows[2] and summary["files"] == 3
    assert summary["freshness"] is False
    freshness = next(e["text"] for e in found if e["attrs"].get("data-key") == "freshness")
    assert "1 file changed since (1 added, 0 changed, 0 removed)" in freshness
    created = next(e["text"] for e in found if e["attrs"].get("data-key") == "version")
    assert created.endswith("+05:30")

    earlier, _ = report("--version", "1")
    assert (earlier["version"], earlier["rows"], earlier["files"]) == (
        "v000001", rows[0] + rows[1], 2)
    assert earlier["versions"] == ["v000001"]

    (root / "part-0.parquet").unlink()
    (root / "part-3.parquet").unlink()
    _, found = report()
    freshness = next(e["text"] for e in found if e["attrs"].get("data-key") == "freshness")
    assert "(0 added, 0 changed, 1 removed)" in freshness


def test_a_failed_report_says_why_and_writes_nothing(edges, tmp_path):
    out = tmp_path / "report.html"
    out.write_text("before", encoding="utf-8")
    for flags, status, reason in [
            (["--columns", "i8,nope"], 1, "no column 'nope'"),
            (["--version", "9"], 1, "no version v000009 (the published one is v000001)"),
            (["--version", "x1"], 2, "expected a version such as 3"),
            (["--time-zone", "Mars/Olympus"], 2, "Mars/Olympus")]:
        done = run_cli("report", edges, "-o", out, "--quiet", *flags)
        assert done.returncode == status, (flags, done.stderr)
        assert reason in done.stderr
        assert out.read_text(encoding="utf-8") == "before"
    empty = tmp_path / "never"
    write(empty / "a.parquet", pa.table({"x": [1]}))
    done = run_cli("report", empty, "-o", out)
    assert done.returncode == 1 and "no statistics published yet" in done.stderr
    assert out.read_text(encoding="utf-8") == "before"


def test_columns_limits_the_page(edges):
    page = lakestats.html_report(str(edges), columns=["i64", "text"])
    found = elements(page)
    assert [e["attrs"]["data-column"] for e in found if e["tag"] == "article"] == ["i64", "text"]
    stats = {e["attrs"]["data-stat"]: json.loads(e["attrs"]["data-value"]) for e in found
             if e["column"] == "i64" and "data-stat" in e["attrs"]}
    data = pa.concat_tables(pq.read_table(p, columns=["i64"]) for p in sorted(
        edges.glob("*.parquet")))["i64"]
    assert (stats["min"], stats["max"], stats["null_count"]) == (
        str(pc.min(data).as_py()), str(pc.max(data).as_py()), data.null_count)


def test_an_empty_table_has_a_report(tmp_path, run):
    root = tmp_path / "empty"
    write(root / "a.parquet", pa.table({"x": pa.array([], pa.int64()),
                                        "s": pa.array([], pa.string())}))
    run(root)
    found = elements(lakestats.html_report(str(root)))
    summary = summary_of(found)
    assert (summary["rows"], summary["files"]) == (0, 1)
    assert [e["attrs"]["data-column"] for e in found if e["tag"] == "article"] == ["x", "s"]


def test_a_table_on_s3_has_a_report_that_counts_what_landed_since(proxied_bucket, run):
    import boto3
    name, _ = proxied_bucket
    s3 = boto3.client("s3")
    sizes = []
    for i, n in enumerate((300, 400, 500)):
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"x": pa.array(np.arange(n) + 1000 * i)}), sink)
        body = sink.getvalue().to_pybytes()
        s3.put_object(Bucket=name, Key=f"t/part-{i}.parquet", Body=body)
        sizes.append(len(body))
        if i == 1:
            run(f"s3://{name}/t")                   # the third lands after
    found = elements(lakestats.html_report(f"s3://{name}/t"))
    summary = summary_of(found)
    assert (summary["rows"], summary["files"], summary["bytes"]) == (700, 2, sum(sizes[:2]))
    freshness = next(e["text"] for e in found if e["attrs"].get("data-key") == "freshness")
    assert "1 file changed since (1 added, 0 changed, 0 removed)" in freshness
    pruning = next(e["attrs"] for e in found if e["column"] == "x" and "data-point" in e["attrs"])
    assert float(pruning["data-point"]) == 0.5        # two files, disjoint ranges
