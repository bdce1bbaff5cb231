"""Bad input gets one clear line on stderr, the right exit code (2 a usage error, 1 a failure)
and nothing written: no Python exception's name, no traceback, no terminal escape codes in a
pipe. The command line runs in a process of its own, as a user runs it."""
from __future__ import annotations

import datetime as dt
import json
import os
import pty
import re
import subprocess
import sys

import boto3
import pyarrow as pa
import pytest

from lakestats import arguments
from lakestats.monostore.report import NoSuchTable
from lakestats.pruning.predicate import PredicateError, parse
from lakestats.pruning.validate import validate
from tests.tables import mixed, write

LAKESTATS = [sys.executable, "-m", "lakestats.cli"]
PYTHON_ERROR = re.compile(r"\b\w*(Error|Exception)\b|Traceback")


def cli(*args, stderr=subprocess.PIPE, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k != "REDIS_URL"}
    return subprocess.run([*LAKESTATS, *map(str, args)], stdout=subprocess.PIPE, stderr=stderr,
                          text=True, env=env, timeout=300)


def refused(done: subprocess.CompletedProcess, code: int, *names: str) -> str:
    """The exit code, one line of plain text on stderr naming each of `names`, no Python
    exception name; returns the line."""
    line = done.stderr.strip()
    assert done.returncode == code, done.stderr
    assert len(line.splitlines()) == 1, done.stderr
    assert "\x1b" not in done.stderr and not PYTHON_ERROR.search(line), line
    for name in names:
        assert name in line, (name, line)
    return line


@pytest.fixture(scope="module")
def table(tmp_path_factory, run):
    """Two Hive-style partitions (sale_date=...) of typed columns, computed."""
    root = tmp_path_factory.mktemp("bad") / "sales"
    for i, day in enumerate(["2024-03-01", "2024-03-02"]):
        n = 200
        write(root / f"sale_date={day}" / "part.parquet", pa.table({
            "order_id": pa.array(range(i * n, (i + 1) * n), pa.int64()),
            "region": pa.array(["eu", "us"] * (n // 2)),
            "price": pa.array([float(k) for k in range(n)]),
            "day": pa.array([dt.date(2024, 3, 1 + i)] * n, pa.date32()),
            "ts": pa.array([dt.datetime(2024, 3, 1 + i, 12)] * n, pa.timestamp("us", "UTC")),
            "flag": pa.array([True, False] * (n // 2)),
        }))
    assert run(root).published
    return root


def stats_files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "_lakestats" in p.parts)


# -- compute: a path with nothing there


def test_compute_of_a_missing_path_fails_and_writes_nothing(tmp_path):
    done = cli("compute", tmp_path / "nosuchdir", "--quiet")
    refused(done, 1, "nosuchdir", "--create")
    assert not (tmp_path / "nosuchdir").exists()
    done = cli("compute", tmp_path / "typo", "--stats-root", tmp_path / "stats", "--json")
    refused(done, 1, "typo")
    assert done.stdout == "" and os.listdir(tmp_path) == []


def test_compute_of_a_missing_s3_prefix_writes_no_object(s3_endpoint, run):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bad-input")
    s3.put_object(Bucket="bad-input", Key="orders/part.parquet", Body=b"")
    done = cli("compute", "s3://bad-input/ordres", "--quiet")      # a typo
    refused(done, 1, "s3://bad-input/ordres")
    with pytest.raises(NoSuchTable, match="ordres"):
        run("s3://bad-input/ordres")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="bad-input").get("Contents", [])]
    assert keys == ["orders/part.parquet"]


@pytest.mark.services         # compute on the command's embedded Redis
def test_compute_of_an_empty_table_warns_and_create_makes_one(tmp_path):
    (tmp_path / "empty").mkdir()
    done = cli("compute", tmp_path / "empty", "--json")
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "empty" in done.stderr
    assert (tmp_path / "empty" / "_lakestats" / "LATEST").exists()
    done = cli("compute", tmp_path / "new", "--create", "--quiet")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new" / "_lakestats" / "LATEST").exists()


@pytest.mark.services         # compute on the command's embedded Redis
def test_a_failed_compute_says_nothing_was_published(tmp_path):
    write(tmp_path / "good.parquet", mixed(50, seed=1))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 garbage")
    done = cli("compute", tmp_path)
    assert done.returncode == 1
    assert "nothing published" in done.stdout and "None" not in done.stdout, done.stdout
    assert not PYTHON_ERROR.search(done.stderr), done.stderr


def test_compute_ranks_of_a_missing_column(table):
    refused(cli("compute", table, "--quiet", "--ranks", "price,regoin"), 2, "regoin")


def test_a_file_system_error_is_one_line_naming_the_path(tmp_path, table):
    (tmp_path / "file").write_text("")
    refused(cli("compute", table, "--quiet", "--stats-root", tmp_path / "file" / "stats"), 1,
            str(tmp_path / "file"))


def test_a_statistics_root_in_the_table_must_be_hidden(table):
    """Else the table's listing would take the statistics for data files (a second compute
    computed statistics of statistics), and their writes would wake the table's watcher."""
    visible = table / "stats"
    for command in (["compute", table, "--quiet"], ["show", table]):
        refused(cli(*command, "--stats-root", visible), 2, str(visible), "hidden")
    assert not visible.exists()
    hidden = table / "_stats"
    for _ in range(2):
        done = cli("compute", table, "--quiet", "--json", "--stats-root", hidden)
        assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["computed"], json.loads(done.stdout)["reused"]) == (0, 2)


# -- prune --where: what Spark refuses


@pytest.mark.parametrize("where, names", [
    ("order_idd = 5", ["[UNRESOLVED_COLUMN]", "'order_idd'", "'order_id'"]),
    ("order_id = 'abc'", ["order_id (bigint)", "'abc' (string)"]),
    ("order_id = '5.5'", ["order_id (bigint)", "'5.5'"]),
    ("region = 5", ["region (string)", "5 (int)"]),
    ("day = 5", ["[DATATYPE_MISMATCH]", "day (date)"]),
    ("ts > 'abc'", ["ts (timestamp)", "'abc'"]),
    ("day >= DATE '2024-02-30'", ["'2024-02-30'", "date"]),
    ("order_id = 1; drop table x", ["2 statements"]),
    ("order_id IN (1, 'x')", ["order_id", "'x'"]),
])
def test_prune_refuses_what_spark_refuses(table, where, names):
    done = cli("prune", table, "--where", where, "--json")
    refused(done, 2, *names)
    assert done.stdout == ""


@pytest.mark.parametrize("where", [
    "order_id = '5'", "day >= '2024-03-02'", "ts > '2024-03-01 13:00:00'", "ts > 'yesterday'",
    "sale_date = '2024-03-01'", "ORDER_ID < 10", "price > 1e2", "flag = 'yes'"])
def test_prune_accepts_what_spark_accepts(table, where):
    done = cli("prune", table, "--where", where, "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_parse_error_is_one_plain_line_in_a_pipe(table):
    refused(cli("prune", table, "--where", "order_id = ("), 2, "order_id = (", "column")


# -- the predicate check itself, against a schema (what Spark 4 does, checked with pyspark)

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("price", pa.float64()),
                    ("amount", pa.decimal128(12, 2)), ("city", pa.string()),
                    ("day", pa.date32()), ("ts", pa.timestamp("us", "UTC")),
                    ("flag", pa.bool_()), ("blob", pa.binary()),
                    ("nested", pa.list_(pa.int32())), ("s", pa.struct([("f", pa.int32())]))])


@pytest.mark.parametrize("where", [
    "id = '5'", "id = ' 5 '", "id IN ('5', 1)", "id = 5.5", "id = 1e3", "qty = 99999999999",
    "price = '1.5'", "price = 'NaN'", "amount = '12.5'", "amount = 5", "city = 'x'",
    "city = NULL", "day >= '2024-01-01'", "day >= '2024'", "day >= 'yesterday'",
    "day = '2024-01-01 10:00:00'", "day >= TIMESTAMP '2024-01-01 10:00:00'",
    "ts > 'today'", "ts > '2024-01-01T10:00:00Z'", "ts > '2024-01-01 10:00:00 America/New_York'",
    "ts > DATE '2024-01-01'", "flag = 'true'", "flag = 'y'", "flag", "NOT 'true'",
    "blob = 'abc'", "x'41' = blob", "id BETWEEN '1' AND '5'", "city LIKE 5", "id LIKE 'x%'",
    "Id = 5", "t.id = 5", "s.f = 1", "id <=> '5'", "try_cast('abc' AS INT) = qty",
    "CAST(city AS BIGINT) = 5", "upper(city) = 5", "day = current_date", "p = 5",
    "exists(nested, x -> x > 5)", "id IN (SELECT other FROM elsewhere)"])
def test_valid_predicates_pass(where):
    validate(parse(where), SCHEMA, {"p"})


@pytest.mark.parametrize("where, message", [
    ("order_idd = 5", "[UNRESOLVED_COLUMN] column 'order_idd' does not exist"),
    ("upper(nosuch) = 'A'", "'nosuch'"),
    ("id = 'abc'", "cannot compare id (bigint) with 'abc' (string)"),
    ("qty = '5.0'", "'5.0' is not a bigint"),
    ("id > '9223372036854775808'", "is not a bigint"),
    ("'abc' = id", "'abc'"),
    ("id BETWEEN 'a' AND 5", "'a'"),
    ("id <=> 'abc'", "'abc'"),
    ("NOT (id = 'abc')", "'abc'"),
    ("price = 'abc'", "price (double)"),
    ("amount = 'abc'", "amount (decimal(12,2))"),
    ("city = 5", "cannot compare city (string) with 5 (int)"),
    ("city IN (5, 6)", "city (string)"),
    ("city = TRUE", "city (string)"),
    ("day >= 'abc'", "'abc' is not a date"),
    ("day >= '2024-13-01'", "'2024-13-01'"),
    ("ts > '2024-01-01 25:00:00'", "is not a timestamp"),
    ("ts > '2024-01-01 10:00:00 Nowhere/Zone'", "is not a timestamp"),
    ("flag = 'abc'", "flag (boolean)"),
    ("flag = 1", "[DATATYPE_MISMATCH] cannot compare flag (boolean) with 1 (int)"),
    ("id = TRUE", "[DATATYPE_MISMATCH]"),
    ("day = 5", "day (date)"),
    ("ts = 5", "ts (timestamp)"),
    ("blob = 5", "blob (binary)"),
    ("nested = 5", "nested (array)"),
    ("DATE 'abc' = day", "'abc' is not a valid date"),
    ("CAST('abc' AS INT) = qty", "'abc' is not a valid int"),
    ("id", "is not a boolean"),
    ("city", "is not a boolean"),
    ("id AND flag", "id (bigint) is not a boolean"),
])
def test_invalid_predicates_are_refused_naming_what(where, message):
    with pytest.raises(PredicateError) as e:
        validate(parse(where), SCHEMA, {"p"})
    assert message in str(e.value)


@pytest.mark.parametrize("where", ["a = 1; drop table x", "a = 1; a = 2", "SELECT 1", ";"])
def test_parse_takes_one_expression(where):
    with pytest.raises(PredicateError):
        parse(where)


# -- numbers are range-checked before any work


@pytest.mark.parametrize("argv, names", [
    (["quantiles", "T", "price", "1.5"], ["Q", "1.5"]),
    (["quantiles", "T", "price", "-0.1"], ["Q", "-0.1"]),
    (["quantiles", "T", "price", "nan"], ["Q", "nan"]),
    (["frequencies", "T", "c", "--top", "1000000000000000000000"], ["--top"]),
    (["frequencies", "T", "c", "--top", "-3"], ["--top", "-3"]),
    (["frequencies", "T", "c", "--top", "0"], ["--top"]),
    (["histogram", "T", "c", "--rows", "0"], ["--rows"]),
    (["compute", "T", "--bins", "0"], ["--bins"]),
    (["compute", "T", "--workers", "0"], ["--workers"]),
    (["compute", "T", "--timeout", "0"], ["--timeout"]),
    (["compute", "T", "--timeout", "inf"], ["--timeout"]),
    (["compute", "T", "--wait", "-1"], ["--wait"]),
    (["compute", "T", "--max-attempts", "0"], ["--max-attempts"]),
    (["compute", "T", "--low-distinct-max", "-1"], ["--low-distinct-max"]),
    (["compute", "T", "--range-set-size", "0"], ["--range-set-size"]),
    (["rank", "T", "c", "v", "--workers", "-2"], ["--workers"]),
    (["watch", "--queue", "q", "--visibility", "-1"], ["--visibility"]),
    (["watch", "--queue", "q", "--window", "-1"], ["--window"]),
    (["demo", "--scale", "0"], ["--scale"]),
    (["demo", "--parts", "0"], ["--parts"]),
])
def test_numbers_out_of_range_are_usage_errors(argv, names, capsys):
    with pytest.raises(SystemExit) as e:
        arguments.parser().parse_args(argv)
    assert e.value.code == 2
    line = capsys.readouterr().err.strip()
    assert len(line.splitlines()) == 1 and not PYTHON_ERROR.search(line)
    for name in names:
        assert name in line


def test_a_number_out_of_range_in_a_process(table):
    refused(cli("quantiles", table, "price", "1.5"), 2, "1.5")
    refused(cli("frequencies", table, "region", "--top", "1000000000000000000000"), 2, "--top")


@pytest.mark.parametrize("variable, value", [("LAKESTATS_BINS", "0"),
                                             ("LAKESTATS_RANGE_SET_SIZE", "-1"),
                                             ("LAKESTATS_LOCK_WAIT_SECONDS", "soon")])
def test_a_setting_out_of_range_is_a_usage_error(tmp_path, variable, value):
    """As its flag would be: a bin count of 0 never finished."""
    write(tmp_path / "t" / "a.parquet", pa.table({"x": [1, 2]}))
    refused(cli("compute", tmp_path / "t", env={variable: value}), 2, variable, repr(value))
    assert not (tmp_path / "t" / "_lakestats").exists()


# -- columns and values are checked before the work starts


@pytest.mark.parametrize("argv, names", [
    (["rank", "{t}", "regoin", "x"], ["'regoin'", "'region'"]),
    (["rank", "{t}", "order_id", "abc"], ["order_id", "'abc'"]),
    (["quantiles", "{t}", "regoin", "0.5", "--exact"], ["'regoin'"]),
    (["quantiles", "{t}", "regoin", "0.5"], ["'regoin'"]),
    (["where", "{t}", "regoin", "eu"], ["'regoin'"]),
])
def test_a_missing_column_or_bad_value_starts_no_sort(table, argv, names):
    refused(cli(*[a.format(t=table) for a in argv]), 2, *names)
    assert not any(name.endswith("ranks.parquet") for name in stats_files(table))


# -- pipes and terminals


@pytest.mark.parametrize("argv", [["histogram", "{t}", "price", "--json"], ["show", "{t}"]])
def test_a_closed_pipe_ends_quietly(table, argv):
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    process = subprocess.Popen([*LAKESTATS, *[a.format(t=table) for a in argv]],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    process.stdout.close()                      # the reader is gone before the first write
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) in (0, 141) and err == "", err


def test_errors_are_coloured_on_a_terminal_only(table):
    argv = ["rank", table, "regoin", "x"]
    assert "\x1b" not in cli(*argv).stderr
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NO_COLOR")}
    master, slave = pty.openpty()
    process = subprocess.Popen([*LAKESTATS, *map(str, argv)], stdout=subprocess.DEVNULL,
                               stderr=slave, env={**env, "TERM": "xterm-256color"})
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:                             # the process closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert process.wait(timeout=300) == 2
    text = seen.decode()
    assert "\x1b[" in text and "'regoin'" in text
    assert len(text.strip().splitlines()) == 1, text
