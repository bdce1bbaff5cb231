"""One settings object for a run: every tunable with its default, read in one place.

Entry points (the command line, the Lambda handlers, `lakestats watch`, the worker entry) build
a Settings from the environment (`from_env`) and their own flags, and pass it down; nothing
below them reads the environment.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Mapping
from urllib.parse import unquote, urlsplit

from lakestats.core.errors import UsageError

DEFAULT_BINS = 1000                 # histogram bins (10,000 selectable)
BLOOM_MIN_DISTINCT = 64             # more values in a partition: a Bloom filter; else a value set
RANGE_SET_SIZE = 20                 # ranges per partition range-set (join pruning; the paper's n_r)
# The partition statistics' own version, recorded with the settings: raised whenever the kernel
# writes other statistics for the same file, as partitions are reused by the file's
# fingerprint alone, so that the next compute recomputes every partition. 2: a plain file's
# INT96 columns as UTC instants; zoned timestamps after 2037 with zoneinfo's offsets.
KERNEL_VERSION = 2
LOW_DISTINCT_MAX = 1_000_000        # values a low-distinct column sends its reducer
LOW_DUPLICATE_MAX = 1_000_000       # repeated values one function can confirm
FREQUENCY_ALGORITHMS = ("low-distinct", "low-duplicate", "binned")
MAX_ATTEMPTS = 3
TIMEOUT_SECONDS = 900.0             # AWS Lambda's longest run
REDUCE_WINDOW_SECONDS = 10.0
# `lakestats watch`'s window: every single-file version waits for it in full, while a burst's
# files coalesce anyway (a batch takes 10 messages, and a reduction lists every file landed by
# then): benchmarks/bench_latency.py, 20 files in one version at 0, 0.5 and 2 s
WATCH_REDUCE_WINDOW_SECONDS = 0.5
LOCK_WAIT_SECONDS = 900.0           # a compute waits this long for another one of its table
# A table left inexact by incremental versions is refolded (a compute --exact) once it has been
# quiet this long: longer than the gaps within a load (files of one job, micro-batches), so the
# fold is not thrown away by the next file, yet exact again within the quarter hour of a
# daily or hourly load ending; 0 or less: never. At most EXACT_AFTER_MAX_SECONDS, well inside
# the 14 days Redis keeps a table's record (fleet.protocol.PENDING_TTL_SECONDS).
EXACT_AFTER_SECONDS = 900.0
# A stale table-level frequency list is recomputed over every partition once this share of the
# table's rows changed since it was exact (algorithms.frequencies.delta). A reduction of object
# events waits longer: that recompute costs the whole column while a new file waits for its
# version, and the quiet refold makes the list exact anyway (benchmarks/bench_latency.py).
COMPACT_FRACTION = 0.1
REDUCTION_COMPACT_FRACTION = 0.5
# Small files are packed into one worker call up to this many bytes, each file counted with
# OPEN_COST_BYTES more for opening it (Spark's maxPartitionBytes and openCostInBytes, whose
# defaults these are): a call's own cost (a Lambda invocation, the fan-out's bookkeeping) is
# paid once per pack. 0: one file a call (benchmarks/bench_scale.py, L1).
PACK_BYTES = 128 << 20
OPEN_COST_BYTES = 4 << 20
EXACT_AFTER_MAX_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class PartitionSettings:
    """What a partition's statistics depend on: a change recomputes every partition."""
    max_bins: int = DEFAULT_BINS
    bloom_min_distinct: int = BLOOM_MIN_DISTINCT
    # user-defined statistics: plugin modules, .py files or entry-point groups (core.udf)
    statistics: tuple[str, ...] = ()
    range_set_size: int = RANGE_SET_SIZE


@dataclass(frozen=True)
class FrequencySettings:
    """How table-level frequencies are reduced: a change reduces the stored partitions again."""
    algorithm: str = "auto"              # or one of FREQUENCY_ALGORITHMS, for every column
    low_distinct_max: int = LOW_DISTINCT_MAX
    low_duplicate_max: int = LOW_DUPLICATE_MAX
    all_values: bool = False             # keep values seen once for near-unique columns too


@dataclass(frozen=True)
class Settings:
    partition: PartitionSettings = field(default_factory=PartitionSettings)
    frequencies: FrequencySettings = field(default_factory=FrequencySettings)
    redis_url: str | None = None         # the coordinator's Redis (None: the CLI embeds one)
    # what Redis requires (AUTH): $REDIS_PASSWORD, or the password a given URL carried. Never
    # serialized or shown: the URL travels in step events and task payloads, the password must not
    redis_password: str | None = field(default=None, repr=False)
    allow_partial: bool = False          # publish over the good partitions when some fail
    exact: bool = False                  # recompute every stale table-level frequency list
    max_attempts: int = MAX_ATTEMPTS     # per call of a step
    timeout: float = TIMEOUT_SECONDS     # a call running longer is stopped and retried
    workers: int | None = None           # concurrent workers (None: the invoker's default)
    steps_function: str | None = None    # the AWS Lambda function that runs steps
    spark_master: str | None = None      # for a SparkSession lakestats starts itself
    tables: tuple[str, ...] = ()         # table roots whose object events are followed
    reduce_window: float = REDUCE_WINDOW_SECONDS   # changes coalesce this long into one version
    reduce_queue_url: str | None = None  # where delayed reduction requests go (AWS)
    lock_wait: float = LOCK_WAIT_SECONDS  # wait for another compute of the table (0: fail)
    # a table quiet this long after a version left inexact is refolded exact (<= 0: never)
    exact_after: float = EXACT_AFTER_SECONDS
    # columns whose values map to the partitions holding them ("auto": the low-distinct ones)
    value_index: tuple[str, ...] = ("auto",)
    compact_fraction: float = COMPACT_FRACTION
    pack_bytes: int = PACK_BYTES             # small files per worker call, up to this many bytes

    def __post_init__(self):
        # every way a URL enters (from_env, a flag through dataclasses.replace, the
        # constructor) passes here: its password is taken out once, before the URL travels
        url, password = split_password(self.redis_url)
        object.__setattr__(self, "redis_url", url)
        if password:
            object.__setattr__(self, "redis_password", password)

    def recorded(self) -> dict:
        """What published statistics depend on, as the manifest records it: the settings and
        the partition statistics' version (no plugins: recorded as before plugins existed)."""
        partition = asdict(self.partition)
        partition["statistics"] = list(partition["statistics"])
        if not partition["statistics"]:
            del partition["statistics"]
        partition["kernel"] = KERNEL_VERSION
        return {"partition": partition, "table": asdict(self.frequencies),
                "value_index": list(self.value_index)}

    def to_json(self) -> dict:
        """Without the password: workers read theirs from their own environment."""
        data = asdict(self)
        del data["redis_password"]
        return data

    @classmethod
    def from_json(cls, data: dict) -> Settings:
        plain = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        partition = data.get("partition", {})
        plain["partition"] = PartitionSettings(**{
            **partition, "statistics": tuple(partition.get("statistics", ()))})
        plain["frequencies"] = FrequencySettings(**data.get("frequencies", {}))
        plain["value_index"] = tuple(data.get("value_index", ("auto",)))
        plain["tables"] = tuple(data.get("tables", ()))
        return cls(**plain)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The settings the environment gives (template.yaml sets these on AWS Lambda)."""
        def number(name: str, default, kind=int, low=0, high=10**9):
            """The variable's number, in the range its flag takes, else a usage error: a bin
            count of 0 would never finish."""
            if not env.get(name):
                return default
            try:
                value = kind(env[name])
            except ValueError:
                value = None
            if value is None or not low <= value <= high:
                what = "a whole number" if kind is int else "a number"
                raise UsageError(f"{name}={env[name]!r}: expected {what} from {low} to {high:,}")
            return value

        tables = [t for t in env.get("LAKESTATS_TABLES", "").split(",")]
        bucket = env.get("LAKESTATS_BUCKET")
        if bucket:
            tables += [f"s3://{bucket}/{p.strip().strip('/')}"
                       for p in env.get("LAKESTATS_TABLE_PREFIXES", "").split(",") if p.strip()]
        return cls(
            partition=PartitionSettings(
                number("LAKESTATS_BINS", DEFAULT_BINS, low=1, high=10_000),
                number("LAKESTATS_BLOOM_MIN_DISTINCT", BLOOM_MIN_DISTINCT),
                names(env.get("LAKESTATS_STATISTICS", "")),
                number("LAKESTATS_RANGE_SET_SIZE", RANGE_SET_SIZE, low=1)),
            frequencies=FrequencySettings(
                low_distinct_max=number("LAKESTATS_LOW_DISTINCT_MAX", LOW_DISTINCT_MAX),
                low_duplicate_max=number("LAKESTATS_LOW_DUPLICATE_MAX", LOW_DUPLICATE_MAX)),
            value_index=names(env.get("LAKESTATS_VALUE_INDEX") or "auto"),
            redis_url=env.get("REDIS_URL") or None,
            redis_password=env.get("REDIS_PASSWORD") or None,     # REDIS_URL's wins
            steps_function=env.get("LAKESTATS_STEPS_FUNCTION") or env.get("LAKESTATS_FUNCTION")
            or None,
            spark_master=env.get("SPARK_MASTER") or None,
            tables=tuple(t.strip().rstrip("/") for t in tables if t.strip()),
            reduce_window=number("LAKESTATS_REDUCE_WINDOW_SECONDS", REDUCE_WINDOW_SECONDS, float),
            reduce_queue_url=env.get("LAKESTATS_REDUCE_QUEUE_URL") or None,
            lock_wait=number("LAKESTATS_LOCK_WAIT_SECONDS", LOCK_WAIT_SECONDS, float),
            exact_after=number("LAKESTATS_EXACT_AFTER_SECONDS", EXACT_AFTER_SECONDS, float,
                               low=-EXACT_AFTER_MAX_SECONDS, high=EXACT_AFTER_MAX_SECONDS),
            pack_bytes=number("LAKESTATS_PACK_BYTES", PACK_BYTES, high=1 << 40))


def names(text: str) -> tuple[str, ...]:
    """A comma-separated list (a flag's or a variable's) as its names."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def split_password(url: str | None) -> tuple[str | None, str | None]:
    """A Redis URL without its password (redis://user:pw@host -> redis://user@host), and the
    password (None: it had none). The user name stays: an ACL user is no secret."""
    parts = urlsplit(url or "")
    if parts.password is None:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return (url.replace(f"//{parts.netloc}", f"//{user}@{host}" if user else f"//{host}", 1),
            unquote(parts.password) or None)
