"""The step protocol: how the coordinator and the workers talk, and every Redis key lakestats
writes.

A step is a function that runs on a worker, named by its dotted path (STEPS). The coordinator
never imports it: it sends a StepEvent, as JSON (the payload an AWS Lambda function receives),
through an invoker; the worker's entry point imports the step by its name, calls it, records
the result in Redis and answers with it, as JSON too. Each step's arguments (its task) and its
result are typed dataclasses below; `to_json` / `from_json` convert any of them.

Redis keys, all with a TTL:

  lakestats:job:<job>:attempts             hash  call -> attempts so far            JOB_TTL
  lakestats:job:<job>:results              hash  call -> the step's result (JSON)   JOB_TTL
  lakestats:job:<job>:frequencies:<k>[:from:<sender>]   low-duplicate candidates    JOB_TTL
  lakestats:job:<job>:exchange:<channel>:<receiver>     hash sender -> Arrow IPC    JOB_TTL
  lakestats:job:<job>:alive                string: set at the job's start (gone: Redis lost it) JOB_TTL
  lakestats:ended:<job>                    string: the job has ended; a call still running
                                           (withdrawn, or outliving its timeout) records
                                           nothing into it                           JOB_TTL
  lakestats:lock:<stats root>              the publication lock                     LOCK_TTL
  lakestats:computing:<stats root>         the running compute of a table (renewed)  LOCK_TTL
  lakestats:version:<stats root>           the last version number handed out       JOB_TTL
  lakestats:pending:<table>                hash: the table's changes no version holds yet,
                                           its reduction window, whether its version is
                                           exact (fleet.windows)                     PENDING_TTL
  lakestats:idempotency:change#<hash>      an object event already handled          IDEMPOTENCY_TTL

A job deletes its keys when it ends, failed or not; the TTLs clean up after a coordinator that
died.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import types
import typing
from dataclasses import dataclass, field

from lakestats.core.errors import LakestatsError, ServiceUnavailable
from lakestats.core.settings import RANGE_SET_SIZE

JOB_TTL_SECONDS = 6 * 3600
LOCK_TTL_SECONDS = 60               # the lock covers a version number and a pointer swap
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
IDEMPOTENCY_PREFIX = "lakestats:idempotency:change"
PENDING_TTL_SECONDS = 14 * 24 * 3600   # as long as SQS keeps a message; renewed at each write


class InvocationError(ServiceUnavailable):
    """A call failed (the worker died, the function or the step raised): worth a retry."""


class Throttled(InvocationError):
    """The backend refused the call for now (too many requests): retried after a pause, and
    not counted as an attempt."""


class StepFailed(LakestatsError):
    """A call of a step failed after all its attempts; the message names the step and call."""


class JobLost(StepFailed, ServiceUnavailable):
    """Redis lost a job's records (it restarted, or evicted them) while its steps shared them:
    results built on them cannot be trusted."""


class ProtocolError(LakestatsError, ValueError):
    """An event that is not a registered step's."""


# -- keys


def job_key(job: str, name: str) -> str:
    return f"lakestats:job:{job}:{name}"


def ended_key(job: str) -> str:
    return f"lakestats:ended:{job}"


def frequency_set(job: str, column: int, sender: int | None = None) -> str:
    """Column k's frequencies: member = value text, score = -frequency (ascending order is
    decreasing frequency, ties by value bytes). Each sender fills a set of its own."""
    key = job_key(job, f"frequencies:{column}")
    return key if sender is None else f"{key}:from:{sender}"


def exchange_key(job: str, channel: str, receiver: int) -> str:
    return job_key(job, f"exchange:{channel}:{receiver}")


def publish_lock(stats_root: str) -> str:
    return f"lakestats:lock:{stats_root}"


def compute_lock(stats_root: str) -> str:
    return f"lakestats:computing:{stats_root}"


def version_counter(stats_root: str) -> str:
    return f"lakestats:version:{stats_root}"


def pending_changes(table: str) -> str:
    return f"lakestats:pending:{table}"


def channel(algorithm: str, column: int | str, name: str) -> str:
    """An exchange channel: per algorithm and column, or group of columns (a job may work on
    several columns)."""
    return f"{algorithm}-{column}-{name}"


# -- tasks and results of the steps


@dataclass(frozen=True)
class PartitionTask:
    """Statistics of one data file, written to stats_dir."""
    table: str
    rel_path: str
    fingerprint: str
    stats_dir: str
    max_bins: int
    bloom_min_distinct: int
    statistics: tuple[str, ...] = ()        # user-defined statistics' plugins (core.udf)
    reading: tuple[str, ...] = ()           # how a table format's file is read (formats.rows)
    range_set_size: int = RANGE_SET_SIZE    # ranges per numeric or temporal column


@dataclass(frozen=True)
class PartitionResult:
    rel_path: str
    fingerprint: str
    status: str                     # ok | failed (bad data: not retried) | gone
    row_count: int | None = None
    error: str | None = None
    reused: bool = False            # the statistics already existed


@dataclass(frozen=True)
class PackTask:
    """Several small data files' statistics in one call, each to its own directory, and
    their digest (algorithms.partitions.digest) to `digest`, unless empty."""
    files: list[PartitionTask]
    digest: str = ""


@dataclass(frozen=True)
class PackResult:
    results: list[PartitionResult]      # the files', in order; status "retry": alone again


@dataclass(frozen=True)
class FoldTask:
    """A pack of partitions' sketches and histograms folded into one partial, sent to the
    coordinator (receiver 0) on FOLD_SKETCHES and FOLD_HISTOGRAMS as sender `index`."""
    index: int
    stats_dirs: list[str]
    table: str                      # the table's schema (encoded): the columns folded
    max_bins: int


@dataclass(frozen=True)
class FoldResult:
    bytes: int                      # moved through the exchange


FOLD_SKETCHES, FOLD_HISTOGRAMS = "fold-sketches", "fold-histograms"


@dataclass(frozen=True)
class FrequencyColumn:
    """One column in a frequency step."""
    k: int                          # the column's index in the job
    name: str
    algorithm: str                  # low-distinct | low-duplicate | binned
    keep_once: bool                 # values seen once are listed too
    bins: int | None = None         # binned: reducers
    type: str | None = None         # binned: the table's field (encoded schema)
    low: int | None = None          # binned by range: the table's min and max storage integers
    high: int | None = None
    retype: tuple[str, str] | None = None   # (partition field, table field) when they differ
    batch: int | None = None        # low-distinct: the reducer summing this column


@dataclass(frozen=True)
class PartitionCounts:
    """A partition whose stored frequencies a send or confirm reads."""
    stats_dir: str
    held: list[int]                 # the task's columns (k) it holds
    retyped: list[FrequencyColumn] = field(default_factory=list)  # those it types otherwise
    digest: str = ""                # its pack's frequency digest, if any (partitions.digest)


@dataclass(frozen=True)
class FrequencyTask:
    index: int                      # sender: a pack of partitions; receiver: a bin, a batch
    columns: list[FrequencyColumn]
    partitions: list[PartitionCounts] = field(default_factory=list)    # send, confirm


@dataclass(frozen=True)
class ColumnOutcome:
    k: int
    bytes: int = 0                  # moved through Redis or the exchange
    reports: int = 0                # confirm: candidates this partition holds
    distinct: int = 0               # reduce: distinct values in the bin
    singletons: int = 0             # reduce: values seen once in the bin


@dataclass(frozen=True)
class FrequencyResult:
    columns: list[ColumnOutcome]


@dataclass(frozen=True)
class RankTask:
    index: int                      # the partition (sample, scatter) or range (merge)
    column: int                     # the column's index in the job
    field: str                      # the table's field (encoded schema)
    table: str | None = None        # sample: where the data file is
    rel_path: str | None = None
    samples: int | None = None
    reading: tuple[str, ...] = ()   # sample: how a table format's file is read (formats.rows)


@dataclass(frozen=True)
class RankResult:
    values: int = 0
    distinct: int = 0
    bytes: int = 0


PARTITION_STATISTICS = "lakestats.algorithms.partitions.step.partition_statistics"
PARTITION_PACK = "lakestats.algorithms.partitions.step.partition_pack"
PARTITION_FOLD = "lakestats.algorithms.partitions.step.fold"
FREQUENCY_SEND = "lakestats.algorithms.frequencies.steps.send"
FREQUENCY_CONFIRM = "lakestats.algorithms.frequencies.steps.confirm"
FREQUENCY_REDUCE = "lakestats.algorithms.frequencies.steps.reduce"
RANK_SAMPLE = "lakestats.algorithms.ranks.steps.sample"
RANK_SCATTER = "lakestats.algorithms.ranks.steps.scatter"
RANK_MERGE = "lakestats.algorithms.ranks.steps.merge"
# step -> (its task, its result): the only functions a worker will run
STEPS: dict[str, tuple[type, type]] = {
    PARTITION_STATISTICS: (PartitionTask, PartitionResult),
    PARTITION_PACK: (PackTask, PackResult),
    PARTITION_FOLD: (FoldTask, FoldResult),
    FREQUENCY_SEND: (FrequencyTask, FrequencyResult),
    FREQUENCY_CONFIRM: (FrequencyTask, FrequencyResult),
    FREQUENCY_REDUCE: (FrequencyTask, FrequencyResult),
    RANK_SAMPLE: (RankTask, RankResult),
    RANK_SCATTER: (RankTask, RankResult),
    RANK_MERGE: (RankTask, RankResult),
}
# what every invoker runs a StepEvent with: the steps function's code on AWS Lambda
WORKER_ENTRY = "lakestats.functions.worker.run"
# what a fresh local worker runs before its first call
WORKER_WARM = "lakestats.functions.worker.warm"


@dataclass(frozen=True)
class StepEvent:
    """One call of a step. The coordinator's fan-out fills in the job's part."""
    step: str                       # a key of STEPS
    call: str                       # which call of the step: a partition's path, a bin, ...
    task: object                    # STEPS[step][0]
    job: str = ""                   # "" when no coordinator waits for the result
    redis_url: str = ""
    scratch: str = ""               # the job's object-store scratch space (the exchange)

    @property
    def name(self) -> str:
        """The step's short name: its algorithm and function, e.g. frequencies.send."""
        parts = self.step.split(".")
        return f"{parts[-3]}.{parts[-1]}"

    @property
    def key(self) -> str:
        """The call's name in the job's records."""
        return f"{self.name}:{self.call}"

    def to_json(self) -> dict:
        return to_json(self)

    @classmethod
    def from_json(cls, data: dict) -> StepEvent:
        if data.get("step") not in STEPS:
            raise ProtocolError(f"not a lakestats step: {data.get('step')!r}")
        task_type = STEPS[data["step"]][0]
        return cls(**{**data, "task": from_json(task_type, data["task"])})

    def result_from_json(self, data: dict):
        return from_json(STEPS[self.step][1], data)


def resolve(dotted: str):
    """The function a dotted name points to."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


# -- JSON


def to_json(obj) -> dict:
    return dataclasses.asdict(obj)


def from_json(tp, value):
    """A dataclass (nested ones, lists, tuples and optionals of them too) from its JSON."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return from_json(inner[0], value) if len(inner) == 1 else value
    if origin in (list, tuple):
        items = [from_json(typing.get_args(tp)[0], v) for v in value]
        return items if origin is list else tuple(items)
    if dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        return tp(**{name: from_json(hints[name], value[name]) for name in hints
                     if name in value})
    return value


@functools.lru_cache(maxsize=None)
def _hints(tp: type) -> dict:
    """A dataclass's fields and their types (resolving annotations is slow: once per class)."""
    hints = typing.get_type_hints(tp)
    return {f.name: hints[f.name] for f in dataclasses.fields(tp)}
