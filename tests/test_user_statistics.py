"""User-defined statistics (lakestats.udf): the test plugin package installed by `make test`
(tests/plugin: a statistic with a built-in merge and one with its own), checked against a plain
computation per partition and per table, after partitions come and go, and a plugin that
fails alone."""
from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakestats.core import udf
from lakestats.cli import main
from lakestats.metastore.layout import Layout
from lakestats.metastore.reader import StatisticsReader

PLUGIN = "lakestats.statistics"          # the entry-point group of tests/plugin
EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")


def part(k: int) -> pa.Table:
    """Emails valid and not, unicode, empty strings, nulls, words; several row groups."""
    emails = [f"user{k}.{i}@example.com" if i % 3 else f"not an email {k} {i}" for i in range(40)]
    emails[5], emails[7], emails[9] = None, "", "ünï@cödé.de"
    words = [" ".join(["w"] * ((i * k) % 11)) if i % 5 else None for i in range(40)]
    return pa.table({"email": emails,
                     "big": pa.array(emails, pa.large_string()),
                     "words": words,
                     "n": list(range(40 * k, 40 * k + 40))})


def plain(tables: list[pa.Table]) -> dict[str, dict]:
    """The statistics computed directly over the rows."""
    def valid(col):
        return sum(1 for t in tables for v in t[col].to_pylist() if v is not None and
                   EMAIL.match(v))

    def most_words(col):
        counts = [len(v.split()) for t in tables for v in t[col].to_pylist() if v is not None]
        return max(counts) if counts else None
    return {"email": {"email_valid_count": valid("email"), "max_word_count": most_words("email")},
            "big": {"email_valid_count": valid("big"), "max_word_count": None},   # not "string"
            "words": {"email_valid_count": valid("words"), "max_word_count": most_words("words")},
            "n": {"email_valid_count": None, "max_word_count": None}}


def user_values(stats: StatisticsReader, partition: str | None = None) -> dict[str, dict]:
    rows = stats.summary(partition)["columns"]
    return {r["column"]: {k: r[k] for k in ("email_valid_count", "max_word_count")}
            for r in rows}


@pytest.fixture()
def table(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    tables = {f"p{k}.parquet": part(k) for k in range(1, 5)}
    for name, t in tables.items():
        pq.write_table(t, root / name, row_group_size=16)
    return root, tables


def test_plugin_statistics_per_partition_and_table_through_changes(table, run, tmp_path):
    root, tables = table
    report = run(root, statistics=(PLUGIN,))
    assert report.published and not report.statistic_failures
    stats = StatisticsReader(Layout.of_table(str(root)).uri)
    assert user_values(stats) == plain(list(tables.values()))
    for name, t in tables.items():
        assert user_values(stats, name) == plain([t]), name

    # a partition added, then one removed: equal to the rows, and to a compute from scratch
    tables["p9.parquet"] = part(9)
    pq.write_table(tables["p9.parquet"], root / "p9.parquet")
    assert run(root, statistics=(PLUGIN,)).computed == 1
    stats = StatisticsReader(Layout.of_table(str(root)).uri)
    assert user_values(stats) == plain(list(tables.values()))
    (root / "p2.parquet").unlink()
    del tables["p2.parquet"]
    assert run(root, statistics=(PLUGIN,)).removed == 1
    stats = StatisticsReader(Layout.of_table(str(root)).uri)
    assert user_values(stats) == plain(list(tables.values()))
    scratch = tmp_path / "scratch"
    run(root, stats_root=str(scratch), statistics=(PLUGIN,))
    fresh = StatisticsReader(Layout.of_table(str(root), str(scratch)).uri)
    assert user_values(fresh) == user_values(stats)
    want = stats.statistics(columns=["email"])
    got = fresh.statistics(columns=["email"])
    assert got.column("max_word_count__state").to_pylist() == \
        want.column("max_word_count__state").to_pylist()

    # stored as typed columns with their description in the schema metadata
    field = want.schema.field("email_valid_count")
    assert field.type == pa.int64()
    assert json.loads(field.metadata[b"lakestats.statistic"])["merge"] == "sum"


FAILING = '''
import pyarrow.compute as pc
from lakestats.udf import statistic

@statistic(name="boom", types=["string"], merge="max")
def boom(values):
    if pc.any(pc.equal(values, "explode")).as_py():
        raise ValueError("cannot stand this value")
    return pc.max(values).as_py()

@statistic(name="wrong_state", types=["int64"], merge="sum")
def wrong_state(values):
    return {1, 2}

@statistic(name="row_total", types=["int64"], merge="sum")
def row_total(values):
    return len(values)
'''


@pytest.mark.services         # compute on the command's embedded Redis
def test_a_failing_plugin_fails_alone(tmp_path, capsys):
    root = tmp_path / "t"
    root.mkdir()
    pq.write_table(pa.table({"s": ["a", "b"], "n": [1, 2]}), root / "good.parquet")
    pq.write_table(pa.table({"s": ["explode", "z"], "n": [3, 4]}), root / "bad.parquet")
    plugin = tmp_path / "failing.py"
    plugin.write_text(FAILING)
    code = main(["compute", str(root), "--statistics", str(plugin), "--json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["published"] and report["failed"] == 0
    assert any("boom" in m and str(plugin) in m and "bad.parquet" in m and "cannot stand" in m
               for m in report["statistic_failures"]), report["statistic_failures"]
    assert any("wrong_state" in m and "set" in m for m in report["statistic_failures"])
    assert "bad.parquet" in err
    main(["show", str(root), "--json"])
    columns = {c["column"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert columns["s"]["boom"] is None and columns["n"]["wrong_state"] is None
    assert columns["n"]["row_total"] == 4 and columns["n"]["sum"] == "10"   # the others stand
    main(["show", str(root), "--json", "--partition", "good.parquet"])
    good = {c["column"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert good["s"]["boom"] == "b"


def test_declarations_are_checked(tmp_path):
    with pytest.raises(udf.PluginError, match="built-in"):
        udf.statistic(name="min", types=["int64"], merge="min")
    with pytest.raises(udf.PluginError, match="merge must be"):
        udf.statistic(name="x", types=["int64"], merge="median")
    with pytest.raises(udf.PluginError, match="no module"):
        udf.load(["no_such_plugin_module"])
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(udf.PluginError, match="declares no statistic"):
        udf.load([str(empty)])


def test_builtin_merges_and_sketches():
    import datasketches as ds
    mean = udf.statistic(name="m", types=["*"], merge="mean")(lambda v: [1.0, 0])
    s = mean.__lakestats_statistic__
    assert s.value(s.combine([2.0, 1], [5.0, 3])) == pytest.approx(4.25)
    hll = udf.statistic(name="h", types=["*"], merge="hll")(lambda v: None)
    s = hll.__lakestats_statistic__
    a, b = ds.hll_sketch(12), ds.hll_sketch(12)
    for i in range(1000):
        a.update(i)
        b.update(i + 500)
    merged = s.combine(s.decode(s.encode(a)), b)
    assert abs(s.value(merged) - 1500) < 60
    stamp = udf.statistic(name="t", types=["timestamp"], merge="max")(lambda v: 0)
    s = stamp.__lakestats_statistic__
    assert s.applies(pa.timestamp("us", "UTC")) and not s.applies(pa.int64())
