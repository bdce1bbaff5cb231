"""The command-line contract: JSON shapes other tools build on, and one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.tables import mixed, write

pytestmark = pytest.mark.services   # the command line end to end, on its embedded Redis

LAKESTATS = [sys.executable, "-m", "lakestats.cli"]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}   # embedded Redis
    return subprocess.run([*LAKESTATS, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    write(root / "year=2024" / "a.parquet", mixed(3000, seed=1))
    write(root / "year=2025" / "b.parquet", mixed(2000, seed=2))
    done = cli("compute", root, "--json")
    assert done.returncode == 0, done.stderr
    assert {k: json.loads(done.stdout)[k] for k in ("computed", "reused", "removed", "failed")} \
        == {"computed": 2, "reused": 0, "removed": 0, "failed": 0}
    return root


def test_lookups_run_without_pandas_or_rich(table):
    """The command line's lookups answer without importing pandas (pyarrow would, for 0.4 s),
    and with --json without rich (the terminal's tables, 30 ms): the same answers, neither
    loaded."""
    # at exit: the command's own process ends in os._exit, after the exit handlers
    probe = ("import atexit, sys, runpy; sys.argv = ['lakestats', *sys.argv[1:]]\n"
             "atexit.register(lambda: print(','.join(sorted({'pandas', 'rich'} & "
             "set(sys.modules))) or 'neither', file=sys.stderr))\n"
             "runpy.run_module('lakestats.cli', run_name='__main__')")

    def run(args: list, first: str = "") -> tuple[dict, str]:
        done = subprocess.run([sys.executable, "-c", first + probe, *map(str, args), "--json"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout), done.stderr.split()[-1]

    for args in (["show", table, "--columns", "qty,city"], ["frequencies", table, "city"],
                 ["histogram", table, "qty"], ["quantiles", table, "price", "0.5"]):
        assert run(args) == (run(args, first="import pandas\n")[0], "neither")


def test_show_json(table):
    out = json.loads(cli("show", table, "--json").stdout)
    assert (out["row_count"], out["version"], out["partitions"]) == (5000, "v000001", 2)
    # the Hive directory column year=... is a column, typed as Spark infers it
    assert [c["column"] for c in out["columns"]] == ["id", "qty", "price", "city", "day", "year"]
    year = out["columns"][5]
    assert (year["type"], year["min"], year["max"], year["distinct_count"]) == (
        "int32", "2024", "2025", 2)
    day = out["columns"][4]
    assert {"column", "type", "row_count", "null_count", "nan_count", "distinct_count", "min",
            "max", "mean", "stddev"} <= set(day)
    data = pq.read_table(table / "year=2024" / "a.parquet")
    one = json.loads(cli("show", table, "--partition", "year=2024/a.parquet", "--columns",
                         "day,qty", "--json").stdout)
    assert [c["column"] for c in one["columns"]] == ["qty", "day"]
    assert one["row_count"] == 3000
    assert one["columns"][1]["min"] == data["day"].combine_chunks().sort()[0].as_py().isoformat()


def test_partitions_and_histogram_json(table):
    parts = json.loads(cli("partitions", table, "--json").stdout)["partitions"]
    assert [(p["path"], p["partition_values"], p["row_count"]) for p in parts] == [
        ("year=2024/a.parquet", {"year": "2024"}, 3000),
        ("year=2025/b.parquet", {"year": "2025"}, 2000)]
    hist = json.loads(cli("histogram", table, "qty", "--json").stdout)
    assert hist["column"] == "qty"
    assert sum(b["count"] for b in hist["bins"]) == 5000
    assert all(set(b) == {"lower", "upper", "count"} for b in hist["bins"])
    drawn = cli("histogram", table, "day")
    assert drawn.returncode == 0 and "█" in drawn.stdout


@pytest.mark.parametrize("args, names", [
    (["show", "{table}/nowhere"], "no statistics"),
    (["histogram", "{table}", "city"], "'city'"),
    (["show", "{table}", "--partition", "year=2030/x.parquet"], "year=2030/x.parquet"),
    (["show", "{table}", "--columns", "nope"], "'nope'"),
])
def test_errors_are_one_line(table, args, names):
    done = cli(*[a.format(table=table) for a in args])
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert names in done.stderr


def test_compute_names_each_bad_file(tmp_path):
    write(tmp_path / "good.parquet", mixed(100, seed=1))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 garbage")
    done = cli("compute", tmp_path, "--json", "--quiet")
    assert done.returncode != 0
    assert "bad.parquet" in done.stderr and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["failed"] == 1
    assert not (tmp_path / "_lakestats" / "LATEST").exists()


def test_quantiles_and_rank_json(table):
    exact = json.loads(cli("quantiles", table, "qty", "0", "0.5", "1", "--exact", "--json").stdout)
    data = sorted(v for f in table.rglob("*.parquet") if "_lakestats" not in str(f)
                  for v in pq.read_table(f)["qty"].to_pylist() if v is not None)
    assert exact["exact"] is True and exact["column"] == "qty"
    assert [item["value"] for item in exact["quantiles"]] == \
        [str(data[0]), str(data[(len(data) + 1) // 2 - 1]), str(data[-1])]
    approximate = json.loads(cli("quantiles", table, "price", "0.5", "--json").stdout)
    assert approximate["quantiles"][0]["q"] == 0.5
    ranked = json.loads(cli("rank", table, "qty", str(data[0]), "--json").stdout)
    assert (ranked["smaller"], ranked["count"]) == (0, data.count(data[0]))


def test_usage_errors_are_one_line():
    done = cli("histogram", "only-a-table")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "COLUMN" in done.stderr


def test_help_answers():
    done = cli("--help")
    assert done.returncode == 0
    for command in ("compute", "show", "partitions", "histogram"):
        assert command in done.stdout


def test_every_command_is_summarized_as_written():
    """The top-level --help shows each command's summary word for word (argparse %-formats
    summaries: a bare % once printed the parser's internals in their place)."""
    import argparse

    from lakestats.arguments import parser
    top = parser()
    words = " ".join(top.format_help().split())
    assert "option_strings" not in words
    [commands] = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    for summary in commands._choices_actions:
        assert " ".join(summary.help.replace("%%", "%").split()) in words, summary.dest
    for name, command in commands.choices.items():
        assert "option_strings" not in command.format_help(), name
