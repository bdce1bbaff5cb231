"""How each Arrow type is treated: its statistics kind and its canonical lossless text.

Every layer (kernel, reduction, CLI, Spark bridge) renders values through `to_text`, so a
value has one spelling everywhere: ISO 8601 for temporal values (with the UTC offset when
zoned), the shortest round-trip text for floats, exact decimal text, lowercase hex for binary.
"""
from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BOOLEAN, INTEGER, FLOAT, DECIMAL, TEMPORAL, STRING, BINARY, OTHER = (
    "boolean", "integer", "float", "decimal", "temporal", "string", "binary", "other")

# decimal256 holds 76 digits; Python's default context would round sums to 28
EXACT_DECIMALS = decimal.Context(prec=120)

NUMERIC_KINDS = (INTEGER, FLOAT, DECIMAL)            # sum, mean, stddev
BINNED_KINDS = (INTEGER, FLOAT, DECIMAL, TEMPORAL)   # histograms and KLL sketches
LENGTH_KINDS = (STRING, BINARY)                      # min/max/avg length


def kind_of(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return kind_of(t.value_type)
    if pa.types.is_boolean(t):
        return BOOLEAN
    if pa.types.is_integer(t):
        return INTEGER
    if pa.types.is_floating(t):
        return FLOAT
    if pa.types.is_decimal(t):
        return DECIMAL
    if pa.types.is_temporal(t):
        return TEMPORAL
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
            or pa.types.is_fixed_size_binary(t)):
        return BINARY
    return OTHER


def value_type(t: pa.DataType) -> pa.DataType:
    """The type statistics are computed in: dictionaries decoded, float16 widened
    (Arrow's kernels do not cover it), views made plain."""
    if pa.types.is_dictionary(t):
        return value_type(t.value_type)
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    return t


def storage_type(t: pa.DataType) -> pa.DataType:
    """The integer type a temporal type's values are stored as (Arrow views one as the other)."""
    return pa.int32() if t.bit_width == 32 else pa.int64()


def integers(arr: pa.Array) -> pa.Array:
    """Integers as they are; temporal values as their storage integers (no copy)."""
    return arr if pa.types.is_integer(arr.type) else arr.view(storage_type(arr.type))


def min_max(values: pa.Array) -> list[pa.Scalar]:
    """[min, max] of non-null values; durations compare as their integer counts."""
    if pa.types.is_duration(values.type):
        mm = pc.min_max(values.view(pa.int64()))
        return [pa.scalar(mm[k].as_py(), pa.int64()).cast(values.type) for k in ("min", "max")]
    mm = pc.min_max(values)
    return [mm["min"], mm["max"]]


# seconds since the epoch of 0001-01-02 and 9999-12-30 UTC: a date or timestamp between them
# is a year from 1 to 9999 in any zone (offsets stay within a day)
_SAFE_SECONDS = tuple(int(dt.datetime(*ymd, tzinfo=dt.timezone.utc).timestamp())
                      for ymd in ((1, 1, 2), (9999, 12, 30)))


def reads_back(extremes: list[pa.Scalar]) -> None:
    """ValueError unless the canonical text of a date or timestamp column's extremes reads
    back as the same values: statistics keep values as text, whose years run from 0 to 9999
    (Spark's dates and timestamps end at 9999 too)."""
    kind = extremes[0].type
    if not (pa.types.is_date(kind) or pa.types.is_timestamp(kind)):
        return
    values = pa.array(extremes, kind)
    unit = "D" if pa.types.is_date32(kind) else "ms" if pa.types.is_date64(kind) else kind.unit
    ticks = values.view(pa.int32() if unit == "D" else pa.int64()).to_pylist()
    seconds = {"D": 86400, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]
    if all(_SAFE_SECONDS[0] <= t * seconds <= _SAFE_SECONDS[1] for t in ticks):
        return                                   # the common case, without rendering text
    text = to_text(values)
    try:
        same = from_text(text, values.type).equals(values)
    except (pa.ArrowException, ValueError, OverflowError):
        same = False
    if not same:      # shown by NumPy, whose years do not end at 9999 (UTC for a zoned one)
        low, high = (str(np.datetime64(t, unit)) for t in ticks)
        raise ValueError(f"values from {low} to {high}: outside the years statistics keep "
                         "(years 0 to 9999; Spark's dates and timestamps end at 9999 too)")


def normalize(arr: pa.Array) -> pa.Array:
    """Values in their statistics type, with -0.0 folded into 0.0 and every NaN made one NaN,
    so that hashing (distinct counts, frequencies) sees value equality."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    target = value_type(arr.type)
    if target != arr.type:
        arr = arr.cast(target)
    if pa.types.is_floating(arr.type):
        arr = pc.add(arr, pa.scalar(0.0, arr.type))  # -0.0 + 0.0 == +0.0
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(float("nan"), arr.type), arr)
    return arr


def to_text(arr: pa.Array) -> pa.Array:
    """Canonical lossless text of each value (nulls stay null)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        return _timestamp_text(arr)
    if pa.types.is_date64(t):
        return arr.cast(pa.date32()).cast(pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(arr, "true", "false")
    if kind_of(t) == BINARY:
        return pa.array([None if v is None else v.hex() for v in arr.to_pylist()], pa.string())
    if pa.types.is_duration(t):
        return arr.cast(pa.int64()).cast(pa.string())
    if pa.types.is_floating(t):
        text = arr.cast(pa.string())
        return pc.replace_substring_regex(text, r"^-0$", "0")
    return arr.cast(pa.string())


_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _timestamp_text(arr: pa.Array) -> pa.Array:
    # Rendered from whole seconds plus an integer fraction: Arrow's own conversion to local time
    # wraps around near the ends of int64 nanoseconds. Offsets are +hh:mm, with :ss appended when
    # the zone's offset has seconds (local mean time before standard time), as java.time does.
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    tz, digits = arr.type.tz, _DIGITS[arr.type.unit]
    ticks = pc.fill_null(arr.view(pa.int64()), 0).to_numpy(zero_copy_only=False)
    secs, fraction = np.divmod(ticks, 10 ** digits)
    null = arr.is_null().to_numpy(zero_copy_only=False)
    offsets = None if tz is None else _utc_offsets(secs, null, tz)
    local = pa.array(secs if offsets is None else secs + offsets, pa.timestamp("s"), mask=null)
    # Arrow's cast writes "YYYY-MM-DD hh:mm:ss", the same digits as strftime, ten times faster
    text = pc.replace_substring(local.cast(pa.string()), " ", "T", max_replacements=1)
    if digits:
        text = pc.binary_join_element_wise(text, _padded(fraction, digits), ".")
    if offsets is None:
        return text
    distinct, which = np.unique(offsets, return_inverse=True)      # a zone has few offsets
    return pc.binary_join_element_wise(text, pa.array(
        map(_offset_text, distinct.tolist()), pa.string()).take(which.ravel()), "")


# Arrow takes a zone's offsets from its listed transitions alone, which the zone database
# writes up to 2037; later instants get the last listed offset (standard time all year).
# Python's zoneinfo also follows the zone's rule for later years (to 9999, its last), so it
# answers for those.
_LISTED_UNTIL = int(dt.datetime(2037, 1, 1, tzinfo=dt.timezone.utc).timestamp())
_PYTHON_UNTIL = int(dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc).timestamp())


def _utc_offsets(secs: np.ndarray, null: np.ndarray, tz: str) -> np.ndarray:
    """Seconds east of UTC of each instant (whole seconds since the epoch) in zone `tz`."""
    seconds = pa.array(secs, pa.timestamp("s", tz), mask=null)
    offsets = pc.fill_null(pc.local_timestamp(seconds).view(pa.int64()), 0).to_numpy(
        zero_copy_only=False) - secs
    late = np.flatnonzero((secs >= _LISTED_UNTIL) & (secs < _PYTHON_UNTIL) & ~null)
    zone = _named_zone(tz) if late.size else None
    if zone is None:
        return offsets
    # A zone's rule changes its offset a few times a year: a UTC day whose two ends share an
    # offset has it throughout, so zoneinfo is asked twice a day and once per instant only on
    # the days of a change.
    days, which = np.unique(secs[late] // 86_400, return_inverse=True)
    first, last = (np.array([_offset_at(int(d) * 86_400 + s, zone) for d in days], np.int64)
                   for s in (0, 86_399))
    found, changing = first[which.ravel()], (first != last)[which.ravel()]
    found[changing] = [_offset_at(int(s), zone) for s in secs[late[changing]]]
    offsets[late] = found
    return offsets


def _named_zone(tz: str):
    import zoneinfo
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None                                 # a fixed offset such as "+05:30"


def _offset_at(seconds: int, zone) -> int:
    return int(dt.datetime.fromtimestamp(seconds, zone).utcoffset().total_seconds())


def _offset_text(seconds_east: int) -> str:
    hours, rest = divmod(abs(seconds_east), 3600)
    text = f"{'-' if seconds_east < 0 else '+'}{hours:02d}:{rest // 60:02d}"
    return text + f":{rest % 60:02d}" if rest % 60 else text


def _padded(numbers: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(pa.array(numbers).cast(pa.string()), width, "0")


def scalar_text(value: pa.Scalar) -> str | None:
    if value is None or not value.is_valid:
        return None
    return to_text(pa.repeat(value, 1))[0].as_py()


def retext(texts: pa.Array | pa.ChunkedArray, source: pa.DataType,
           target: pa.DataType) -> pa.Array:
    """Canonical text of `source` values as the `target` type spells them (a column that is
    int32 in one file and float64 in the table is re-rendered as float64)."""
    return to_text(from_text(texts, source).cast(target))


def from_text(texts: list[str | None] | pa.Array, t: pa.DataType) -> pa.Array:
    """Parse canonical text back into typed values (the inverse of `to_text`)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    arr = texts.cast(pa.string()) if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
    t = value_type(t)
    if kind_of(t) == BINARY:
        return pa.array([None if v is None else bytes.fromhex(v) for v in arr.to_pylist()], t)
    if pa.types.is_boolean(t):
        return pc.equal(arr, "true")
    if pa.types.is_duration(t):
        return arr.cast(pa.int64()).cast(t)
    if pa.types.is_time(t):        # Arrow cannot cast text to time: parse it as a time on 1970-01-01
        stamps = pc.binary_join_element_wise("1970-01-01T", arr, "")
        ticks = from_text(stamps, pa.timestamp(t.unit)).cast(pa.int64())
        return ticks.cast(storage_type(t)).view(t)
    if pa.types.is_timestamp(t):
        return _parse_timestamps(arr, t)
    return arr.cast(t)


_TIMESTAMP = (r"^(?P<main>.*T\d\d:\d\d:\d\d)(?:\.(?P<fraction>\d+))?"
              r"(?P<offset>[+-]\d\d:\d\d|Z)?(?::(?P<offset_seconds>\d\d))?$")


def _parse_timestamps(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """Whole seconds (and the offset) through Arrow's parser, the fraction and any offset
    seconds as integers: Arrow's nanosecond parser overflows within a second of int64's ends."""
    parts = pc.extract_regex(arr, _TIMESTAMP)
    if parts.null_count > arr.null_count:     # not canonical text (a date alone, a space): Arrow's
        fine = pa.timestamp("ns" if t.unit == "ns" else "us", None if t.tz is None else "UTC")
        return arr.cast(fine).cast(t)
    main, fraction, offset, offset_seconds = parts.flatten()   # nulls where the text is null
    seconds = pc.binary_join_element_wise(main, offset, "").cast(
        pa.timestamp("s", None if t.tz is None else "UTC"))
    secs = pc.fill_null(seconds.view(pa.int64()), 0).to_numpy(zero_copy_only=False)
    extra = pc.fill_null(pc.if_else(pc.equal(offset_seconds, ""), "0", offset_seconds)
                         .cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    if extra.any():                    # +05:53:28 parsed as +05:53: 28 more seconds east
        east = pc.starts_with(offset, "+").to_numpy(zero_copy_only=False)
        secs = secs - np.where(east, extra, -extra)
    digits = _DIGITS[t.unit]
    frac = np.zeros(len(secs), np.int64)
    if digits:
        padded = pc.utf8_slice_codeunits(pc.utf8_rpad(fraction, digits, "0"), 0, digits)
        frac = pc.fill_null(padded.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    null = arr.is_null().to_numpy(zero_copy_only=False)
    _check_ticks_fit(secs, frac, digits, null, arr, t)
    with np.errstate(over="ignore"):   # int64 may wrap on the way; the final value is in range
        ticks = secs * np.int64(10 ** digits) + frac
    return pa.array(ticks, pa.int64(), mask=null).view(t)


def _check_ticks_fit(secs: np.ndarray, frac: np.ndarray, digits: int, null: np.ndarray,
                     texts: pa.Array, t: pa.DataType) -> None:
    """ValueError unless every seconds + fraction fits the unit's int64 ticks (a time past
    2262 has no nanosecond timestamp: it must not wrap around into another time)."""
    scale = 10 ** digits
    low, high = divmod(-2**63, scale), divmod(2**63 - 1, scale)     # (seconds, fraction)
    outside = (secs < low[0]) | (secs > high[0]) | ((secs == low[0]) & (frac < low[1])) \
        | ((secs == high[0]) & (frac > high[1]))
    outside &= ~null
    if outside.any():
        raise ValueError(f"{texts[int(np.flatnonzero(outside)[0])].as_py()} is outside the "
                         f"range of {t}")
