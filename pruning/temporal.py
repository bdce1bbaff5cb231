"""Spark's date and time semantics over range bounds: the session time zone, intervals, and
the monotone functions of dates and timestamps the evaluator derives ranges through."""
from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlglot import expressions as E

# The zone a timestamp without one is read in, as Spark's spark.sql.session.timeZone: a
# literal '2024-03-02 00:00:00' against a zoned column, a TIMESTAMP_NTZ against a zoned
# value, and the day, year or truncation of a zoned timestamp.
SESSION_ZONE: contextvars.ContextVar[dt.tzinfo] = contextvars.ContextVar(
    "session_zone", default=dt.timezone.utc)


def zone_of(name: str | None) -> dt.tzinfo:
    """A zone by IANA name or Spark's fixed offsets ('+05:30', 'UTC'); None: UTC."""
    if not name or name.upper() in ("UTC", "Z", "GMT"):
        return dt.timezone.utc
    if name[0] in "+-":
        try:
            return dt.datetime.strptime(name, "%z").tzinfo
        except ValueError:
            pass
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"time zone {name!r}: not an IANA zone name (such as "
                         "America/Los_Angeles) or an offset (such as +05:30)") from None


@contextlib.contextmanager
def session_zone(name: str | None):
    token = SESSION_ZONE.set(zone_of(name))
    try:
        yield
    finally:
        SESSION_ZONE.reset(token)


def local(v: dt.datetime) -> dt.datetime:
    """A timestamp's wall-clock time in the session zone: a zoned one converted, a naive one
    (TIMESTAMP_NTZ) as it is."""
    return v.astimezone(SESSION_ZONE.get()) if v.tzinfo else v


@dataclass(frozen=True)
class Months:
    """An interval of months or years: adding it is monotone (Spark clamps the day)."""
    n: int

    def shift(self, d):
        if not isinstance(d, dt.date):
            raise TypeError("months add to dates and timestamps only")
        month = d.month - 1 + self.n
        year, month = d.year + month // 12, month % 12 + 1
        last = (dt.date(year + (month == 12), month % 12 + 1, 1) - dt.timedelta(days=1)).day
        return d.replace(year=year, month=month, day=min(d.day, last))


_UNITS = {"DAY": dt.timedelta(days=1), "HOUR": dt.timedelta(hours=1),
          "MINUTE": dt.timedelta(minutes=1), "SECOND": dt.timedelta(seconds=1),
          "WEEK": dt.timedelta(weeks=1)}


def interval_value(node: E.Interval):
    n = int(node.this.name)
    unit = (node.unit.name if node.unit else "DAY").upper().rstrip("S")
    if unit in _UNITS:
        return n * _UNITS[unit]
    if unit in ("MONTH", "YEAR"):
        return Months(n * (12 if unit == "YEAR" else 1))
    raise ValueError(unit)


def to_date(v):
    if isinstance(v, dt.datetime):
        return local(v).date()
    if isinstance(v, dt.date):
        return v
    raise TypeError(v)


def year(v):
    return to_date(v).year


_TRUNC = {"YEAR": dict(month=1, day=1, hour=0, minute=0, second=0, microsecond=0),
          "MONTH": dict(day=1, hour=0, minute=0, second=0, microsecond=0),
          "DAY": dict(hour=0, minute=0, second=0, microsecond=0),
          "HOUR": dict(minute=0, second=0, microsecond=0),
          "MINUTE": dict(second=0, microsecond=0), "SECOND": dict(microsecond=0)}


def truncating(node: E.Expression):
    """date_trunc's function of a value, for the node's unit (the unit looked up once)."""
    fields = _TRUNC[node.unit.name.upper()]
    of_date = {k: f for k, f in fields.items() if k in ("month", "day")}

    def truncate(v):
        if isinstance(v, dt.datetime):
            return local(v).replace(**fields)
        return v.replace(**of_date)
    return truncate
