"""Tables written by other people's writers (the vendored ones from the test data of delta-rs,
duckdb-iceberg and hudi-rs) agree with their own library's read, statistic by statistic:
tests/public_tables.py, the script that also runs the whole public sets."""
from __future__ import annotations

from pathlib import Path

from tests.public_tables import AGREES, run_all

DATA = Path(__file__).resolve().parent / "data"


def test_vendored_public_tables_agree_with_their_libraries(invoker, settings, tmp_path, capsys):
    # the Delta table of Spark's INT96 timestamps is left out: delta-rs reads 9999-12-31 wrong
    # (tests/test_format_columns.py checks it against the values Spark wrote)
    folders = [*sorted((DATA / "delta").glob("*.zip")), DATA / "hudi", DATA / "iceberg"]
    tally = run_all(folders, invoker, settings, tmp_path)
    tables = len(folders) - 2 + len(list((DATA / "hudi").glob("*.zip"))) + len(
        list((DATA / "iceberg").glob("*.zip")))
    assert tally == {AGREES: tables}, capsys.readouterr().out
