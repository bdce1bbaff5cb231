"""Tables that other writers wrote: each is computed by lakestats and every statistic of every
column compared with the oracle (tests.oracle) over what the format's own library reads of it
(pyiceberg, delta-rs, hudi-rs), at the snapshot the statistics describe.

    python -m tests.public_tables FOLDER... [--only SUBSTRING] [--verbose]

A FOLDER is a table, a .zip of tables, or a folder holding tables at any depth (the test data
of delta-rs `crates/test/tests/data`, hudi-rs `crates/test/data`, duckdb-iceberg
`data/persistent`). An Iceberg table whose location is a relative path (duckdb-iceberg's
`data/persistent/...`) is read from the folder that path is relative to.

One line per table, then the tally. A table agrees, or both lakestats and its library refuse
it (lakestats' one-line reason is printed), or it is a miss: lakestats differs from the
library, refuses what the library reads, or reads what the library refuses. Exit status 1 if
any table is a miss.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import posixpath
import sys
import tempfile
import traceback
import zipfile
from collections import Counter
from pathlib import Path

import pyarrow as pa

AGREES, BOTH_REFUSE = "agrees", "refused, as by its library"
UNCHECKED = "unchecked"     # the oracle cannot tell its columns apart
MISSES = ("DIFFERS", "REFUSED (its library reads it)", "READ (its library refuses it)")


def tables_under(folder: Path) -> list[tuple[Path, str]]:
    """(root, format) of every table at or under `folder`; a found table is not searched."""
    if (folder / "_delta_log").is_dir():
        return [(folder, "delta")]
    if (folder / ".hoodie").is_dir():
        return [(folder, "hudi")]
    if any((folder / "metadata").glob("*.metadata.json")):
        return [(folder, "iceberg")]
    found = []
    for child in sorted(folder.iterdir()) if folder.is_dir() else []:
        if child.is_dir() and child.name != "__MACOSX":
            found += tables_under(child)
    return found


def unzipped(folder: Path, into: Path) -> Path:
    """`folder` with every zip under it (and itself, if it is one) extracted beside a copy."""
    zips = [folder] if folder.suffix == ".zip" else sorted(folder.rglob("*.zip"))
    if not zips:
        return folder
    for z in zips:
        with zipfile.ZipFile(z) as archive:
            archive.extractall(into / z.relative_to(folder.parent).with_suffix(""))
    return into


def library_rows(root: Path, fmt: str, snapshot: str | None) -> pa.Table:
    """The snapshot's rows as the format's own library reads them."""
    if fmt == "delta":
        from deltalake import DeltaTable, QueryBuilder
        table = DeltaTable(str(root))
        if snapshot is not None:
            table.load_as_version(int(snapshot))
        return pa.table(QueryBuilder().register("t", table).execute("select * from t"))
    if fmt == "hudi":
        import hudi
        reader = hudi.HudiTableBuilder.from_base_uri(str(root)).build()
        options = hudi.HudiReadOptions()
        batches = reader.read(options.with_as_of_timestamp(snapshot) if snapshot else options)
        if batches:
            return pa.Table.from_batches(batches)
        meta = reader.hudi_options().get("hoodie.populate.meta.fields") != "false"
        return (reader.get_schema_with_meta_fields() if meta else reader.get_schema()
                ).empty_table()
    from pyiceberg.table import StaticTable

    from lakestats.formats.iceberg import newest_metadata
    from lakestats.metastore.store import Store
    table = StaticTable.from_metadata(str(root / "metadata" / newest_metadata(Store(str(root)))))
    found = table.snapshot_by_id(int(snapshot)) if snapshot else None
    return table.scan(snapshot_id=found and found.snapshot_id).to_arrow()


@contextlib.contextmanager
def at_its_location(root: Path, fmt: str):
    """In the folder that an Iceberg table's relative location is relative to."""
    saved = os.getcwd()
    if fmt == "iceberg":
        from lakestats.formats.iceberg import newest_metadata
        from lakestats.metastore.store import Store
        metadata = (root / "metadata" / newest_metadata(Store(str(root)))).read_bytes()
        if metadata[:2] == b"\x1f\x8b":
            metadata = gzip.decompress(metadata)
        location = posixpath.normpath(json.loads(metadata)["location"])
        if "://" not in location and not location.startswith("/") and \
                root.as_posix().endswith("/" + location):
            os.chdir(root.as_posix()[:-len(location)])
    try:
        yield
    finally:
        os.chdir(saved)


def one_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def check(root: Path, fmt: str, work: Path, invoker, settings) -> tuple[str, str]:
    """(outcome, detail) of one table."""
    from lakestats.errors import LakestatsError
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.monostore.compute import compute
    from tests.test_formats import check_snapshot
    stats_root = work / "stats"
    with at_its_location(root, fmt):
        try:
            report = compute(str(root), invoker, settings, stats_root=str(stats_root))
            refused = None if report.version else LakestatsError(
                f"no version published: {report.as_json().get('failed')}")
        except LakestatsError as e:     # a refusal: anything else is a crash, a miss
            refused = e
        snapshot = None if refused else StatisticsReader(str(stats_root)).manifest.snapshot
        try:
            rows = library_rows(root, fmt, snapshot)
        except Exception as e:      # noqa: BLE001 (the libraries' errors have no common base)
            return (BOTH_REFUSE, one_line(refused)) if refused else (MISSES[2], one_line(e))
        if refused:
            return MISSES[1], one_line(refused)
        if len({n.lower() for n in rows.column_names}) < rows.num_columns:
            return UNCHECKED, "columns named alike but for case: DuckDB, the oracle, " \
                              "cannot tell them apart"
        try:
            if snapshot is None:        # a table without snapshots
                reader = StatisticsReader(str(stats_root))
                assert (reader.manifest.row_count, reader.schema().names) == (
                    rows.num_rows, rows.column_names), (reader.schema().names, rows.schema)
            else:
                check_snapshot(str(stats_root), snapshot, rows, work)
        except AssertionError as e:
            return MISSES[0], one_line(e) if str(e) else traceback.extract_tb(e.__traceback__)[-1].line
    return AGREES, f"{rows.num_rows} rows, {rows.num_columns} columns"


def run_all(folders: list[Path], invoker, settings, tmp: Path, only: str | None = None,
            verbose: bool = False) -> Counter:
    """Check every table under `folders`, one line each; the tally of outcomes."""
    tally: Counter = Counter()
    tables = []
    for k, folder in enumerate(folders):
        tables += tables_under(unzipped(folder.resolve(), tmp / f"zips{k}"))
    for n, (root, fmt) in enumerate(tables):
        if only and only not in str(root):
            continue
        work = tmp / f"t{n}"
        work.mkdir()
        try:
            outcome, detail = check(root, fmt, work, invoker, settings)
        except Exception as e:      # noqa: BLE001 (a crash is a miss; the others go on)
            outcome, detail = MISSES[0], f"{type(e).__name__}: {one_line(e)}"
            if verbose:
                traceback.print_exc()
        tally[outcome] += 1
        print(f"{fmt:8} {outcome:32} {root.relative_to(root.parents[1])}: {detail}",
              flush=True)
    print("\n" + ", ".join(f"{n} {outcome}" for outcome, n in tally.most_common()))
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--only", help="tables whose path holds this text")
    parser.add_argument("--verbose", action="store_true", help="tracebacks of misses")
    args = parser.parse_args(argv)

    from lakestats.fleet.invokers.local import LocalInvoker
    from lakestats.infra.redis_server import EmbeddedRedis
    from tests.conftest import settings_with
    redis = EmbeddedRedis().start()
    try:
        with tempfile.TemporaryDirectory() as tmp, LocalInvoker(workers=2) as invoker:
            tally = run_all(args.folders, invoker, settings_with(redis.url), Path(tmp),
                            args.only, args.verbose)
    finally:
        redis.stop()
    return 1 if any(tally[m] for m in MISSES) else 0


if __name__ == "__main__":
    sys.exit(main())
