"""The compute job: plan the partitions to (re)compute, fan them out through an invoker,
retry failed invocations, reduce to table level and publish a new version atomically."""
from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Callable

from functions.column_stats import BLOOM_MIN_DISTINCT
from metastore import files
from metastore.histogram import DEFAULT_BINS
from metastore.reader import read_manifest
from metastore import types as ty
from metastore.store import DataFile, Store
from monostore import frequencies, reduce
from monostore.frequencies import FrequencyOptions
from monostore.invokers import InvocationError, Invoker
from monostore.jobs import Job, client


@dataclass
class Options:
    max_bins: int = DEFAULT_BINS
    bloom_min_distinct: int = BLOOM_MIN_DISTINCT
    frequencies: FrequencyOptions = field(default_factory=FrequencyOptions)
    allow_partial: bool = False
    max_attempts: int = 3
    partition_timeout: float = 900.0     # seconds, as AWS Lambda's longest run

    def settings(self) -> dict:
        """What the published statistics depend on, recorded in the manifest: partition
        settings changed means every partition is recomputed, table settings changed means
        the table level is reduced again."""
        return {"partition": {"max_bins": self.max_bins,
                              "bloom_min_distinct": self.bloom_min_distinct},
                "table": asdict(self.frequencies)}


@dataclass
class Report:
    table: str
    version: str | None = None
    published: bool = False
    row_count: int = 0
    computed: int = 0
    reused: int = 0
    removed: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    retries: int = 0
    frequencies: dict[str, dict] = field(default_factory=dict)   # column -> algorithm, bytes
    seconds: float = 0.0

    def as_json(self) -> dict:
        return {"table": self.table, "version": self.version, "published": self.published,
                "row_count": self.row_count, "computed": self.computed, "reused": self.reused,
                "removed": self.removed, "failed": len(self.failed),
                "failures": self.failed, "retries": self.retries,
                "frequencies": self.frequencies, "seconds": round(self.seconds, 3)}


class ComputeFailed(Exception):
    def __init__(self, report: Report, reason: str):
        super().__init__(reason)
        self.report = report


Progress = Callable[..., None]    # (done, total[, phase label])


def default_stats_root(table_uri: str) -> str:
    return Store(table_uri).uri_of("_lakestats")


def compute(table_uri: str, invoker: Invoker, redis_url: str, *, stats_root: str | None = None,
            options: Options | None = None, progress: Progress | None = None) -> Report:
    options = options or Options()
    started = time.monotonic()
    table = Store(table_uri)
    stats = Store(stats_root or default_stats_root(table_uri))
    report = Report(table_uri)
    data_files = {f.rel_path: f for f in table.list_files()}
    previous = read_manifest(stats)
    published = {p: e["fingerprint"] for p, e in (previous or {}).get("partitions", {}).items()}
    settings = options.settings()
    resettled = previous is not None and previous.get("settings", {}).get("partition") \
        != settings["partition"]
    todo = [f for f in data_files.values() if resettled or (
        published.get(f.rel_path) != f.fingerprint
        and not stats.exists(*files.partition_dir(f.rel_path, f.fingerprint), files.STATISTICS))]
    report.computed, report.reused = len(todo), len(data_files) - len(todo)
    report.removed = len(set(published) - set(data_files))
    if previous and not todo and published.keys() == data_files.keys() \
            and not previous.get("missing") and previous.get("settings") == settings:
        report.version, report.row_count = previous["version"], previous["row_count"]
        report.seconds = time.monotonic() - started
        return report                            # the published version is current

    # partition statistics are read while the workers run: reused ones at once, the others as
    # they finish, so the table-level reduction starts with everything in memory
    loader = ThreadPoolExecutor(8)
    loaded: dict[str, Future] = {}

    def load(f: DataFile) -> None:
        loaded[f.rel_path] = loader.submit(
            reduce.load, f.rel_path, stats.child(*files.partition_dir(f.rel_path, f.fingerprint)))

    computing = {f.rel_path for f in todo}
    for f in data_files.values():
        if f.rel_path not in computing:
            load(f)
    job = Job(redis_url)
    job.start(table=table_uri, total=len(todo))
    try:
        _fan_out(job, invoker, todo, table, stats, options, report, progress, on_done=load)
    finally:
        job.finish()
        loader.shutdown(wait=False)
    if report.failed and not options.allow_partial:
        report.seconds = time.monotonic() - started
        first = next(iter(report.failed.values()))
        raise ComputeFailed(report, f"{len(report.failed)} of {len(data_files)} files failed "
                                    f"(first: {first}); no table version published "
                                    "(--allow-partial publishes the others)")
    good = {p: f for p, f in data_files.items() if p not in report.failed}
    _publish(stats, good, [loaded[p].result() for p in sorted(good)], report, options,
             invoker, redis_url, progress)
    report.seconds = time.monotonic() - started
    return report


def _fan_out(job: Job, invoker: Invoker, todo: list[DataFile], table: Store, stats: Store,
             options: Options, report: Report, progress: Progress | None,
             on_done: Callable[[DataFile], None]) -> None:
    def event(f: DataFile) -> dict:
        return {"action": "partition_stats", "job": job.id, "redis_url": job.redis_url,
                "table": table.uri, "rel_path": f.rel_path, "fingerprint": f.fingerprint,
                "stats_dir": stats.uri_of(*files.partition_dir(f.rel_path, f.fingerprint)),
                "max_bins": options.max_bins, "bloom_min_distinct": options.bloom_min_distinct}

    pending: dict[Future, DataFile] = {}
    started: dict[Future, float] = {}
    timed_out: set[Future] = set()

    def submit(f: DataFile) -> None:
        job.attempt(f.rel_path)
        future = invoker.submit(event(f))
        pending[future], started[future] = f, time.monotonic()

    for f in todo:
        submit(f)
    succeeded = 0
    while pending:
        done, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
        late = {fu for fu in pending if fu not in timed_out
                and time.monotonic() - started[fu] > options.partition_timeout}
        if late:   # a stuck worker: stop the workers; their invocations fail and are retried
            timed_out |= late
            invoker.restart()
        for future in done:
            f = pending.pop(future)
            # the worker's own report in Redis is the truth: it survives a pool that broke
            # after the worker finished
            result = job.result(f.rel_path)
            error = None if result else (
                f"timed out after {options.partition_timeout:g} s" if future in timed_out
                else _error_of(future))
            if result and result["status"] == "ok":
                succeeded += 1
                on_done(f)
            elif result:                       # bad data: retrying will not help
                report.failed[f.rel_path] = result["error"]
            elif job.attempts(f.rel_path) < options.max_attempts:
                report.retries += 1
                submit(f)
                continue
            else:
                report.failed[f.rel_path] = f"{f.rel_path}: {error}"
            if progress:
                progress(succeeded + len(report.failed), len(todo))


def _error_of(future: Future) -> str:
    try:
        future.result()
        return "worker finished without reporting a result"
    except InvocationError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - any invocation failure is reported, then retried
        return f"{type(e).__name__}: {e}"


def _publish(stats: Store, good: dict[str, DataFile], parts: list[reduce.Partition],
             report: Report, options: Options, invoker: Invoker, redis_url: str,
             progress: Progress | None) -> None:
    row_counts = {p.rel_path: files.row_count_of(p.statistics) for p in parts}
    table_stats = reduce.reduce(parts, row_counts, options.max_bins)
    # one publisher per statistics root at a time; the lock expires if its holder dies
    with client(redis_url).lock(f"lakestats:lock:{stats.uri}", timeout=3600,
                                blocking_timeout=3600):
        latest = read_manifest(stats)
        number = int(latest["version"].lstrip("v")) + 1 if latest else 1
        version = f"v{number:06d}"
        out = stats.child(*files.version_dir(version))
        rows = table_stats.statistics.to_pylist()
        exact = frequencies.compute(
            table_stats.schema, rows, {p.rel_path: p.statistics for p in parts},
            {p: stats.uri_of(*files.partition_dir(p, f.fingerprint)) for p, f in good.items()},
            invoker, redis_url, stats.uri_of("exchange"), out, options.frequencies,
            progress and (lambda step, i: progress(i, len(frequencies.STEPS),
                                                  f"table frequencies: {step}")))
        for row in rows:
            if row["column"] in exact:
                c = exact[row["column"]]
                row.update(distinct_count=c.distinct_count, distinct_count_exact=True,
                           singleton_count=c.singleton_count, frequencies_complete=c.complete,
                           frequency_algorithm=c.algorithm)
                report.frequencies[c.name] = c.as_json()
            elif ty.kind_of(table_stats.schema.field(row["column"]).type) != ty.OTHER:
                row.update(distinct_count=0, distinct_count_exact=True, singleton_count=0,
                           frequencies_complete=True)            # no values at all
        statistics = files.statistics_table(rows, table_stats.schema, table_stats.row_count)
        out.write_parquet(table_stats.histograms, files.HISTOGRAMS)
        out.write_parquet(statistics, files.STATISTICS)
        manifest = {
            "version": version, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "table": report.table, "row_count": table_stats.row_count,
            "schema": files.encode_schema(table_stats.schema),
            "partitions": {p: {"size": f.size, "etag": f.etag, "fingerprint": f.fingerprint,
                               "partition_values": f.partition_values,
                               "row_count": row_counts[p]} for p, f in good.items()},
            "missing": dict(report.failed),
            "settings": options.settings(),
        }
        out.write_bytes(files.dumps(manifest), files.MANIFEST)
        stats.write_bytes(files.dumps({"version": version}), files.LATEST)  # the atomic switch
    report.version, report.published, report.row_count = version, True, table_stats.row_count
    # partition statistics of files since changed or removed are no longer referenced
    for path, entry in (latest or {}).get("partitions", {}).items():
        if path not in good or good[path].fingerprint != entry["fingerprint"]:
            stats.delete_dir(*files.partition_dir(path, entry["fingerprint"]))
