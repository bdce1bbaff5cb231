"""Tables written by other people's writers (the vendored ones from the test data of delta-rs,
duckdb-iceberg and hudi-rs) agree with their own library's read, statistic by statistic:
tests/public_tables.py, the script that also runs the whole public sets."""
from __future__ import annotations

from pathlib import Path

from tests.public_tables import AGREES, BOTH_REFUSE, check, run_all, tables_under, unzipped

DATA = Path(__file__).resolve().parent / "data"


def test_vendored_public_tables_agree_with_their_libraries(invoker, settings, tmp_path, capsys):
    # the Delta table of Spark's INT96 timestamps is left out: delta-rs reads 9999-12-31 wrong
    # (tests/test_format_columns.py checks it against the values Spark wrote)
    zips = [p for folder in ("delta", "hudi", "iceberg") for p in sorted(
        (DATA / folder).glob("*.zip"))]
    tally = run_all(zips, invoker, settings, tmp_path)
    assert tally == {AGREES: len(zips)}, capsys.readouterr().out


def test_an_iceberg_deletion_vector_is_refused_naming_it(invoker, settings, tmp_path):
    """Iceberg v3 deletion vectors (Puffin delete files), which lakestats does not read yet:
    an error naming the delete file and the feature, not a data file reported unreadable."""
    [(root, fmt)] = tables_under(unzipped(
        DATA / "iceberg" / "refused" / "legacy_bare_deletion_vector.zip", tmp_path / "zips"))
    (tmp_path / "work").mkdir()
    outcome, detail = check(root, fmt, tmp_path / "work", invoker, settings)
    assert outcome == BOTH_REFUSE and "legacy-bare-deletion-vector.puffin" in detail \
        and "deletion vector" in detail, detail
