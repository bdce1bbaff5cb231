"""Human-readable output: progress, tables and histogram bars in the terminal."""
from __future__ import annotations

import contextlib
import re

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lakestats.core.schema import STATISTIC_NAMES


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader left (| head): raised to lakestats.cli.main, which ends quietly, as it
        does for print's (rich's own way exits with status 1)."""
        self.quiet = True
        raise BrokenPipeError


out = _Console(width=None if Console().is_terminal else 160)   # pipes get a wide page
err = _Console(stderr=True)
SHOWN = ("column", "type", "row_count", "null_count", "nan_count", "distinct_count", "min", "max",
         "mean", "stddev")


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool = True):
    """Yields a callback(done, total, label=None) that draws a progress bar on stderr; a label
    renames the bar (the job moved on to another phase). The bar shows from its first update:
    a command refused before any work starts prints its error alone."""
    if not enabled:
        yield None
        return
    shown: list = []             # the bar and its task, once drawn
    first_label = label

    def update(done: int, total: int, label: str | None = None) -> None:
        if not shown:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn)    # a lookup draws no bar
            bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), console=err, transient=False)
            bar.start()
            shown[:] = [bar, bar.add_task(first_label, total=None)]
        bar, task = shown
        bar.update(task, completed=done, total=total, **({"description": label} if label else {}))
    try:
        yield update
    finally:
        if shown:
            shown[0].stop()


def error(message: str) -> None:
    """An error as one line on stderr, whatever the message holds (newlines, a library's
    terminal escape codes): red on a terminal, plain text in a pipe or a file."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", message).split())
    err.print(Text.assemble(("lakestats: error:", "bold red"), " ", text), soft_wrap=True,
              highlight=False)


def _short(value, width: int = 28) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def outcome(version: str | None, published: bool) -> str:
    """What a compute did to the table's versions."""
    if version is None:
        return "nothing published"
    return f"version {version} {'published' if published else 'unchanged'}"


def compute_report(report) -> None:
    rows = f", {report.row_count:,} rows" if report.version else ""
    out.print(f"[bold]{report.table}[/]: {outcome(report.version, report.published)}{rows}; "
              f"computed {report.computed}, reused {report.reused}, "
              f"removed {report.removed}, failed {len(report.failed)} "
              f"in {report.seconds:.1f} s")


def summary(s: dict) -> None:
    where = f"partition {s['partition']}" if "partition" in s else f"{s['partitions']} partitions"
    if s.get("published") is False:
        out.print(f"{s['row_count']:,} rows, {where}: computed, not yet in a published version")
    else:
        out.print(f"version {s['version']}: {s['row_count']:,} rows, {where}")
    for path, reason in (s.get("missing") or {}).items():
        out.print(f"[red]missing[/] {path}: {reason}")
    t = Table(show_edge=False, header_style="bold")
    # user-defined statistics follow the built-in ones (core.udf)
    shown = list(SHOWN) + [k for k in (s["columns"][0] if s["columns"] else {})
                     if k not in STATISTIC_NAMES]
    for name in shown:
        t.add_column(name.replace("_count", ""), overflow="fold",
                     justify="left" if name in ("column", "type", "min", "max") else "right")
    for col in s["columns"]:
        distinct = col.get("distinct_count")
        if distinct is not None and col.get("distinct_count_exact") is False:
            distinct = f"~{distinct}"
        t.add_row(*[_short(distinct if n == "distinct_count" else col.get(n)) for n in shown])
    out.print(t)


def partitions(parts: list[dict], missing: dict) -> None:
    t = Table(show_edge=False, header_style="bold")
    for name in ("path", "rows", "bytes", "partition values"):
        t.add_column(name, justify="right" if name in ("rows", "bytes") else "left")
    for p in parts:
        values = ", ".join(f"{k}={v}" for k, v in p.get("partition_values", {}).items())
        t.add_row(p["path"], f"{p['row_count']:,}", f"{p['size']:,}", values)
    for path, reason in missing.items():
        t.add_row(f"[red]{path}[/]", "missing", "", reason)
    out.print(t)


def regroup(bins: list[dict], rows: int) -> list[dict]:
    """Merge neighbouring bins so that at most `rows` remain (for drawing only)."""
    if len(bins) <= rows:
        return bins
    step = -(-len(bins) // rows)
    return [{"lower": g[0]["lower"], "upper": g[-1]["upper"], "count": sum(b["count"] for b in g)}
            for g in (bins[i:i + step] for i in range(0, len(bins), step))]


def histogram(column: str, bins: list[dict], rows: int = 24, width: int = 48,
              console: Console = out) -> None:
    shown = regroup(bins, rows)
    peak = max((b["count"] for b in shown), default=0) or 1
    total = sum(b["count"] for b in bins)
    console.print(f"[bold]{column}[/]: {len(bins)} bins, {total:,} values")
    label = max((len(f"{b['lower']} .. {b['upper']}") for b in shown), default=0)
    for b in shown:
        eighths = round(b["count"] / peak * width * 8)
        bar = "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]
        console.print(f"{(str(b['lower']) + ' .. ' + str(b['upper'])):>{label}} "
                      f"[cyan]{bar:<{width}}[/] {b['count']:,}", highlight=False)


def quantiles(result: dict) -> None:
    how = "exact" if result["exact"] else f"approximate, rank error ±{result['rank_error']:.2%}"
    out.print(f"[bold]{result['column']}[/] quantiles ({how})")
    for item in result["quantiles"]:
        out.print(f"  {item['q']:>8g}  {item['value']}", highlight=False)


def frequencies(result: dict) -> None:
    shown = len(result["values"])
    out.print(f"[bold]{result['column']}[/]: {result['distinct_count']:,} distinct values, "
              f"{result['null_count']:,} nulls ({result['algorithm']})")
    t = Table(show_edge=False, header_style="bold")
    t.add_column("value", overflow="fold")
    t.add_column("frequency", justify="right")
    for item in result["values"]:
        t.add_row(_short(item["value"], 60), f"{item['frequency']:,}")
    out.print(t)
    rest = result["distinct_count"] - shown
    if rest > 0:
        once = result.get("omitted_singletons", 0)
        note = f"; {once:,} values seen once are not stored" if once else ""
        out.print(f"… {rest:,} more values{note}")


def pruning(result) -> None:
    total = len(result.kept) + len(result.skipped)
    fully = set(result.fully_matching)
    out.print(f"read {len(result.kept)} of {total} files, skip {len(result.skipped)} "
              f"({len(fully & set(result.kept))} kept files match every row)")
    unknown = set(result.unknown)
    for path in result.kept:
        tag = "  (fully matching)" if path in fully else \
            "  (newer than the statistics)" if path in unknown else ""
        out.print(f"  {path}{tag}", highlight=False)


def query_pruning(result: dict) -> None:
    t = Table(show_edge=False, header_style="bold")
    for name in ("table", "files", "after local", "after diPs", "bytes read"):
        t.add_column(name, justify="left" if name == "table" else "right")
    for name, r in result["tables"].items():
        t.add_row(name, f"{r['files_before']:,}", f"{r['files_after_local']:,}",
                  f"{r['files_after_dips']:,}", f"{r['bytes_after']:,} of {r['bytes_before']:,}")
    out.print(t)
    for name, r in result["tables"].items():
        for dip in r["dips"]:
            out.print(f"  diP {dip['from']} -> {name}.{dip['column']}: "
                      f"{dip['files_after']:,} files left", highlight=False)
    out.print(f"planning {result['planning_ms']:.1f} ms")


def manifests(result: dict) -> None:
    out.print(f"snapshot {result['snapshot']} (version {result['version']}): "
              f"{len(result['manifests']):,} data manifests; partitioned by "
              f"{', '.join(result['partition_columns']) or 'nothing'}")
    t = Table(show_edge=False, header_style="bold")
    for name in ("manifest", "files", "rows", "bytes"):
        t.add_column(name, justify="left" if name == "manifest" else "right")
    for m in result["manifests"]:
        t.add_row(m["manifest_path"].rsplit("/", 1)[-1], f"{m['file_count']:,}",
                  f"{m['total_record_count']:,}", f"{m['total_file_size_in_bytes']:,}")
    out.print(t)
    found = result["lookup"]
    kept = f"{found['manifests_kept']:,} of {found['manifests']:,} manifests"
    if found["partition_filter"]:
        kept += f" kept by {found['partition_filter']} (applied)"
    out.print(f"{kept}: {found['record_count']:,} rows, {found['file_count']:,} files, "
              f"{found['file_size_in_bytes']:,} bytes")
    if found["residual_filter"]:
        out.print(f"left for selectivity estimates: {found['residual_filter']}")
    t = Table(show_edge=False, header_style="bold")
    for name in ("column", "bytes", "nulls", "NaN", "lower bound", "upper bound"):
        t.add_column(name, justify="left" if name in ("column", "lower bound", "upper bound")
                     else "right")
    for name, c in found["columns"].items():
        size = c["total_column_size"]
        t.add_row(name, "" if size is None else f"{size:,}", f"{c['total_null_value_count']:,}",
                  f"{c['total_nan_value_count']:,}", _short(c.get("lower_bound")),
                  _short(c.get("upper_bound")))
    out.print(t)


def duration(seconds: float) -> str:
    """12 s, 4 min 5 s, 3 h 20 min, 2 d 3 h: two units at most."""
    left = round(seconds)
    for name, size, minor_name, minor_size in (("d", 86_400, "h", 3_600),
                                               ("h", 3_600, "min", 60), ("min", 60, "s", 1)):
        if left >= size:
            major, minor = divmod(left, size)
            minor //= minor_size
            return f"{major} {name}" + (f" {minor} {minor_name}" if minor else "")
    return f"{left} s"


def status(s: dict, shown: int = 20) -> None:
    """`lakestats status`: the version, the pending changes (the first `shown`), the lag and
    what is inexact."""
    lag = s["lag"]
    if s["version"] is None:
        out.print(f"[bold]{s['table']}[/]: no statistics published yet (lakestats compute "
                  "publishes the first version)", highlight=False)
    else:
        snapshot = f" (snapshot {s['snapshot']})" if s["snapshot"] else ""
        age = f" ({duration(lag['version_age_seconds'])} ago)" \
            if lag["version_age_seconds"] is not None else ""
        out.print(f"[bold]{s['table']}[/]: version {s['version']}{snapshot}, published "
                  f"{s['created']}{age}: {s['row_count']:,} rows, {s['partitions']:,} "
                  "partitions", highlight=False)
    for path, reason in s["missing"].items():
        out.print(f"[red]missing[/] {path}: {reason}", highlight=False)
    if s["current_snapshot"] and s["current_snapshot"] != s["snapshot"]:
        out.print(f"the table's current snapshot: {s['current_snapshot']}", highlight=False)
    counts = s["pending_count"]
    if s["current"]:
        out.print("pending: nothing (the version describes every file as it is now)")
    else:
        waited = "" if lag["pending_seconds"] is None else \
            f"; the oldest, {lag['oldest_pending']}, has waited {duration(lag['pending_seconds'])}"
        out.print(f"pending: {counts['added']:,} added, {counts['changed']:,} changed, "
                  f"{counts['removed']:,} removed{waited}", highlight=False)
        for item in s["pending"][:shown]:
            out.print(f"  {item['change']:<8} {item['path']}  {item['modified'] or ''}".rstrip(),
                      highlight=False)
        if len(s["pending"]) > shown:
            out.print(f"  … and {len(s['pending']) - shown:,} more (--json lists every one)")
    if s["version"] is None:
        return
    if s["exact"]:
        out.print("inexact: nothing (every statistic describes the version exactly)")
        return
    out.print("inexact:")
    inexact = s["inexact"]
    for path, why in inexact["files"].items():
        out.print(f"  {path}: {why}", highlight=False)
    for c in inexact["frequencies"]:
        rows = "" if c["stale_rows"] is None else f", {c['stale_rows']:,} rows changed since"
        out.print(f"  {c['column']}: frequencies and distinct count exact as of "
                  f"{c['exact_as_of']}{rows} (until a compaction or compute --exact)",
                  highlight=False)
    if inexact["sketches"]["stale"]:
        since = inexact["sketches"]["exact_as_of"]
        out.print("  sketches (KLL quantiles, KMV estimates) hold removed files' values"
                  + (f", exact as of {since}" if since else "") + " (until compute --exact)",
                  highlight=False)


def exported(result: dict) -> None:
    partitions = result["partition_statistics_path"]
    out.print(f"snapshot {result['snapshot']}: {result['blobs']:,} theta sketches in "
              f"{result['statistics_path']}\n"
              + (f"partition statistics in {partitions}" if partitions else
                 "no partition statistics: the table is not partitioned")
              + ("\nfollowed: the event path exports every new snapshot" if result["followed"]
                 else ""))
