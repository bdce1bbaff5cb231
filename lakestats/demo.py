"""`lakestats demo`: the main job on local defaults.

Generates TPC-H lineitem (1.5M rows at the default scale, in 12 files), computes its statistics
with the embedded Redis and the local worker pool, lands one more file to show an incremental
update, prints the table summary with histograms drawn in the terminal, and writes the
table's profile as one HTML page (lakestats report).
"""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

from lakestats import render


def _generate(out: Path, scale: float, parts: int) -> Path:
    table = out / "lineitem"
    if len(list(table.glob("*.parquet"))) + len(list(out.glob("incoming/*.parquet"))) == parts:
        return table
    tool = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    if not Path(tool).exists():
        raise RuntimeError("tpchgen-cli not found: pip install tpchgen-cli (make demo does)")
    shutil.rmtree(out, ignore_errors=True)
    render.out.print(f"generating TPC-H lineitem, scale {scale}, {parts} files in {table} ...")
    subprocess.run([tool, "parquet", "-s", str(scale), "--tables=lineitem", f"--parts={parts}",
                    f"--output-dir={out}"], check=True, stdout=subprocess.DEVNULL)
    return table


def run(args, settings) -> int:
    from lakestats.fleet.invokers import make_invoker
    from lakestats.infra.redis_server import redis_url
    from lakestats.metastore.layout import Layout
    from lakestats.metastore.reader import StatisticsReader
    from lakestats.monostore.compute import compute

    out = Path(args.dir).resolve()
    table = _generate(out, args.scale, args.parts)
    # hold one file back, to land it after the first compute as an incremental update
    incoming = out / "incoming"
    incoming.mkdir(exist_ok=True)
    last = sorted(table.glob("*.parquet"), key=lambda p: int(p.stem.split(".")[-1]))[-1:]
    for path in last:
        path.rename(incoming / path.name)
    stats_root = Layout.of_table(str(table)).uri
    shutil.rmtree(stats_root, ignore_errors=True)

    with redis_url(settings.redis_url, settings.redis_password) as url, \
            make_invoker("local") as invoker:
        settings = dataclasses.replace(settings, redis_url=url)
        render.out.print(f"\n[bold]1. compute[/] {table}  (embedded Redis, "
                         f"{invoker.workers} local workers)")
        with render.progress_bar("partitions") as progress:
            report = compute(str(table), invoker, settings, progress=progress)
        render.compute_report(report)

        render.out.print("\n[bold]2. a new file lands[/]: only that partition is computed")
        for path in incoming.glob("*.parquet"):
            path.rename(table / path.name)
        with render.progress_bar("partitions") as progress:
            report = compute(str(table), invoker, settings, progress=progress)
        render.compute_report(report)

    stats = StatisticsReader(stats_root)
    render.out.print("\n[bold]3. table statistics[/]")
    render.summary(stats.summary())
    for column in ("l_shipdate", "l_extendedprice", "l_partkey"):
        render.out.print()
        render.histogram(column, stats.histogram(column), rows=16)
    render.out.print("\n[bold]l_shipmode[/] frequencies (exact):")
    for row in stats.frequencies("l_shipmode").to_pylist():
        render.out.print(f"  {row['value']:<8} {row['frequency']:>10,}")
    from lakestats.profile import html_report
    page = out / "report.html"
    page.write_text(html_report(str(table)), encoding="utf-8")
    render.out.print(f"\n[bold]4. the table's profile[/], one HTML page: open {page}")
    render.out.print(f"\nstatistics files: {stats_root}\n"
                     f"try: lakestats show {table} --columns l_tax,l_comment\n"
                     f"     lakestats histogram {table} l_receiptdate\n"
                     f"     lakestats show {table} --partition lineitem.1.parquet --json\n"
                     f"     lakestats frequencies {table} l_partkey --top 5\n"
                     f"     lakestats prune {table} --where \"l_orderkey = 4257\" --json")
    return 0
