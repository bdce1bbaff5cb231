"""What a compute tells its caller: the report of a version, and the ways it fails."""
from __future__ import annotations

from dataclasses import dataclass, field

from lakestats.core.errors import LakestatsError, TableNotFound


@dataclass
class Report:
    table: str
    version: str | None = None
    published: bool = False
    row_count: int = 0
    computed: int = 0
    reused: int = 0
    removed: int = 0
    # files the version adds and changes, to the one it was built from (`removed` too)
    added: int = 0
    changed: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    retries: int = 0
    frequencies: dict[str, dict] = field(default_factory=dict)   # column -> algorithm, bytes
    # user-defined statistics that failed on a computed partition (the others are published)
    statistic_failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    snapshot: dict = field(default_factory=dict)   # formats.Snapshot.describe()
    ranks: dict[str, dict] | None = None   # column -> its ranks (RanksReport), when asked
    # whether the version holds nothing --exact would refold (no stale frequency list, no
    # stale sketch); None: not known (no version, or a newer one won the swap)
    exact: bool | None = None
    # a reduction's export into a followed Iceberg catalog (export --json's keys), or its error
    export: dict | None = None

    def as_json(self) -> dict:
        return {"table": self.table, "version": self.version, "published": self.published,
                "row_count": self.row_count, "computed": self.computed, "reused": self.reused,
                "removed": self.removed, "added": self.added, "changed": self.changed,
                "failed": len(self.failed),
                "failures": self.failed, "retries": self.retries,
                "frequencies": self.frequencies,
                "statistic_failures": self.statistic_failures, **self.snapshot,
                "seconds": round(self.seconds, 3), "exact": self.exact,
                **({"ranks": self.ranks} if self.ranks is not None else {}),
                **({"export": self.export} if self.export is not None else {})}


class ComputeFailed(LakestatsError):
    """The compute published nothing; its report says what was computed and what failed."""

    def __init__(self, report: Report, reason: str):
        super().__init__(reason)
        self.report = report


class NoSuchTable(TableNotFound):
    """Nothing is at the table's path: a mistyped one, most likely."""
