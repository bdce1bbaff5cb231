"""User-defined statistics: a plugin declares a statistic of a column's values, its partial
state and how two states merge; lakestats computes a state per row group, merges the states of
a partition and of a table, and stores value and state beside the built-in statistics.

    from lakestats.udf import statistic

    @statistic(name="email_valid_count", types=["string", "large_string"], merge="sum")
    def email_valid_count(values):            # one row group's non-null values of one column
        return pc.sum(pc.match_substring_regex(values, EMAIL)).as_py()

A state is a JSON value (numbers, strings, booleans, lists, string-keyed dicts: it is stored as
JSON, so a tuple comes back a list), or a DataSketches sketch for the sketch merges. Plugins are
found by module name, file path or entry-point group (`load`).
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import datasketches as ds
import numpy as np
import pyarrow as pa

from lakestats.core.errors import UsageError
from lakestats.core.schema import STATISTIC_NAMES

STATE_SUFFIX = "__state"
VALUE_TYPES = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
               "bool": pa.bool_()}


class PluginError(UsageError):
    """A plugin cannot be loaded or declares a statistic wrongly."""


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _weighted(a: list, b: list) -> list:
    weight = a[1] + b[1]
    return [a[0] if not weight else (a[0] * a[1] + b[0] * b[1]) / weight, weight]


def _int_difference(a, b):
    if not (isinstance(a, int) and isinstance(b, int)):
        raise ArithmeticError("only integer sums are taken apart exactly")
    return a - b


def _hll_union(a: ds.hll_sketch, b: ds.hll_sketch) -> ds.hll_sketch:
    union = ds.hll_union(max(a.lg_config_k, b.lg_config_k))
    union.update(a)
    union.update(b)
    return union.get_result()


def _kll_merge(a: ds.kll_doubles_sketch, b: ds.kll_doubles_sketch) -> ds.kll_doubles_sketch:
    merged = ds.kll_doubles_sketch.deserialize(a.serialize())
    merged.merge(b)
    return merged


@dataclass(frozen=True)
class Merge:
    """How states of one kind combine, are checked and stored."""
    name: str
    combine: Callable[[Any, Any], Any]
    check: Callable[[Any], bool]            # a state of the right type
    finish: Callable[[Any], Any] = lambda s: s
    unmerge: Callable[[Any, Any], Any] | None = None     # combine's inverse, if it has one
    sketch: type | None = None              # stored serialized, not as JSON


MERGES = {m.name: m for m in [
    Merge("sum", lambda a, b: a + b, _is_number, unmerge=_int_difference),
    Merge("min", min, lambda s: _is_number(s) or isinstance(s, str)),
    Merge("max", max, lambda s: _is_number(s) or isinstance(s, str)),
    # state [mean, weight]
    Merge("mean", _weighted, lambda s: isinstance(s, (list, tuple)) and len(s) == 2
          and all(map(_is_number, s)) and s[1] >= 0, finish=lambda s: s[0] if s[1] else None),
    Merge("hll", _hll_union, lambda s: isinstance(s, ds.hll_sketch),
          finish=lambda s: round(s.get_estimate()), sketch=ds.hll_sketch),
    Merge("kll", _kll_merge, lambda s: isinstance(s, ds.kll_doubles_sketch),
          finish=lambda s: None if s.is_empty() else s.get_quantile(0.5),
          sketch=ds.kll_doubles_sketch),
]}


@dataclass(frozen=True)
class Statistic:
    name: str
    function: Callable[[pa.Array], Any]
    types: tuple[str, ...]
    merge: Merge
    finish: Callable[[Any], Any]
    unmerge: Callable[[Any, Any], Any] | None
    value_type: str | None
    plugin: str = ""                          # where it was found, for messages

    def applies(self, arrow_type: pa.DataType) -> bool:
        """`types` name Arrow types as str() spells them ("string", "timestamp[us, tz=UTC]"),
        a parametrized type by its base name ("timestamp", "decimal128"), or "*"."""
        text = str(arrow_type)
        return any(t in ("*", text) or text.split("[")[0].split("(")[0] == t
                   for t in self.types)

    def state_of(self, values: pa.Array) -> Any:
        return self.checked(_plain(self.function(values)), "returned")

    def checked(self, state: Any, how: str) -> Any:
        if not self.merge.check(state):
            raise TypeError(f"{how} {type(state).__name__} {_short(state)}, not a "
                            f"{self.merge.name} state")
        return state if self.merge.sketch else self.decode(self.encode(state))

    def combine(self, a: Any, b: Any) -> Any:
        return self.checked(self.merge.combine(a, b), "merge returned")

    def encode(self, state: Any) -> bytes:
        if self.merge.sketch:
            return bytes(state.serialize_compact() if hasattr(state, "serialize_compact")
                         else state.serialize())
        try:
            return json.dumps(state, separators=(",", ":")).encode()
        except (TypeError, ValueError) as e:
            raise TypeError(f"state {_short(state)} is not a JSON value ({e})") from None

    def decode(self, data: bytes) -> Any:
        return self.merge.sketch.deserialize(data) if self.merge.sketch else json.loads(data)

    def value(self, state: Any) -> bool | int | float | str | None:
        value = _plain(self.finish(state))
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise TypeError(f"finish returned {type(value).__name__} {_short(value)}, not a "
                            "number, string, boolean or None")
        return value


def _plain(x: Any) -> Any:
    """Arrow and NumPy scalars as the Python values they hold."""
    if isinstance(x, pa.Scalar):
        return x.as_py()
    return x.item() if isinstance(x, np.generic) else x


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def statistic(*, name: str, types: Iterable[str], merge: str | Callable[[Any, Any], Any],
              finish: Callable[[Any], Any] | None = None,
              unmerge: Callable[[Any, Any], Any] | None = None,
              type: str | None = None) -> Callable:    # noqa: A002 - the declared value type
    """Declare a user-defined statistic; decorates its function of one row group's non-null
    values of one column (an Arrow array), which returns a partial state.

    merge:   "sum", "min", "max", "mean" (state [mean, weight]), "hll" or "kll" (a DataSketches
             sketch), or any associative function of two states.
    finish:  the statistic's value from a merged state (default: the state itself; a sketch's
             estimate or median).
    unmerge: combine's inverse, unmerge(merge(a, b), b) == a, if the statistic has one: a
             removed partition is then taken out of the table's state instead of the table's
             state being merged again from every partition's (integer sums have one).
    type:    the value's type: int64, float64, string or bool (default: inferred).
    """
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name or "") or name.endswith(STATE_SUFFIX):
        raise PluginError(f"statistic name {name!r}: use lower-case letters, digits and _")
    if name in STATISTIC_NAMES:
        raise PluginError(f"statistic name {name!r} is a built-in statistic's")
    if isinstance(types, str) or not types:
        raise PluginError(f"statistic {name!r}: types must be a list of Arrow type names")
    if type is not None and type not in VALUE_TYPES:
        raise PluginError(f"statistic {name!r}: type must be one of {', '.join(VALUE_TYPES)}")
    if callable(merge):
        kind = Merge("custom", merge, _json_value, unmerge=unmerge)
    elif merge in MERGES:
        kind = MERGES[merge]
    else:
        raise PluginError(f"statistic {name!r}: merge must be one of {', '.join(MERGES)} or a "
                          "function of two states")

    def declare(function: Callable) -> Callable:
        function.__lakestats_statistic__ = Statistic(
            name, function, tuple(types), kind, finish or kind.finish,
            unmerge if unmerge is not None else kind.unmerge, type,
            getattr(function, "__module__", "") or "")
        return function
    return declare


def _json_value(state: Any) -> bool:
    try:
        json.dumps(state)
    except (TypeError, ValueError):
        return False
    return True


class Accumulator:
    """The states of the statistics that apply to one column, merged row group by row group.
    A statistic whose function or merge raises, or returns a state of the wrong type, fails
    alone: its error is kept, its state dropped."""

    def __init__(self, statistics: Iterable[Statistic], arrow_type: pa.DataType):
        self.statistics = [s for s in statistics if s.applies(arrow_type)]
        self.states: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def add(self, values: pa.Array) -> None:
        for s in self.statistics:
            if s.name in self.errors:
                continue
            try:
                state = s.state_of(values)
                if s.name in self.states:
                    state = s.combine(self.states[s.name], state)
                self.states[s.name] = state
            except Exception as e:  # noqa: BLE001 - a plugin's failure is its own
                self.fail(s, e)

    def fail(self, s: Statistic, e: Exception) -> None:
        self.errors[s.name] = f"{type(e).__name__}: {e}"
        self.states.pop(s.name, None)

    def row(self) -> dict:
        """Each statistic's value and encoded state (None where the column had no values or
        the statistic failed)."""
        out = {}
        for s in self.statistics:
            state = self.states.get(s.name)
            try:
                value = None if state is None else s.value(state)
                encoded = None if state is None else s.encode(state)
            except Exception as e:  # noqa: BLE001
                self.fail(s, e)
                value = encoded = None
            out[s.name], out[state_column(s.name)] = value, encoded
        return out


def state_column(name: str) -> str:
    """statistics.parquet's column of a statistic's encoded states."""
    return name + STATE_SUFFIX


def is_state_column(name: str) -> bool:
    return name.endswith(STATE_SUFFIX)


# -- values as an Arrow column

def value_array(statistic: Statistic, values: list) -> pa.Array:
    """The values of a statistic over the columns: of its declared type, else of the type the
    values share (ints and floats together are floats), else as JSON text."""
    if statistic.value_type:
        return pa.array(values, VALUE_TYPES[statistic.value_type])
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        array = None
    if array is not None and pa.types.is_null(array.type):
        return array.cast(pa.string())
    if array is not None and array.type in VALUE_TYPES.values():
        return array
    return pa.array([v if v is None or isinstance(v, str) else json.dumps(v) for v in values],
                    pa.string())


# -- discovery

def load(specs: Iterable[str]) -> list[Statistic]:
    """The statistics of plugins named by module name, .py file path or entry-point group
    (each entry point naming a module or a decorated function), in the order given."""
    return list(_load(tuple(specs)))


@functools.lru_cache(maxsize=8)
def _load(specs: tuple[str, ...]) -> tuple[Statistic, ...]:
    found: dict[str, Statistic] = {}
    for spec in specs:
        for s in _statistics_of(spec):
            other = found.get(s.name)
            if other is not None and other.function is not s.function:
                raise PluginError(f"statistic {s.name!r} is declared twice ({other.plugin} and "
                                  f"{s.plugin})")
            found[s.name] = s
    return tuple(found.values())


def _statistics_of(spec: str) -> list[Statistic]:
    if spec.endswith(".py") or "/" in spec:
        objects = _module_objects(_from_file(Path(spec)))
    else:
        import importlib.metadata        # a lookup that loads no plugin does without it
        points = importlib.metadata.entry_points(group=spec)
        if points:
            objects = []
            for point in points:
                try:
                    loaded = point.load()
                except Exception as e:   # noqa: BLE001 - a plugin's own error, named
                    raise PluginError(f"entry point {point.name} ({point.value}) of {spec}: "
                                      f"{type(e).__name__}: {e}") from e
                objects += _module_objects(loaded) if hasattr(loaded, "__dict__") and \
                    not callable(loaded) else [loaded]
        else:
            try:
                objects = _module_objects(importlib.import_module(spec))
            except ImportError as e:
                raise PluginError(f"--statistics {spec}: no module, .py file or entry-point "
                                  f"group of that name ({e})") from None
    found = [o.__lakestats_statistic__ for o in objects
             if hasattr(o, "__lakestats_statistic__")]
    if not found:
        raise PluginError(f"--statistics {spec}: declares no statistic (decorate functions "
                          "with lakestats.udf.statistic)")
    return [dataclasses.replace(s, plugin=spec) for s in found]


def _module_objects(module) -> list:
    return list(vars(module).values())


def _from_file(path: Path):
    if not path.is_file():
        raise PluginError(f"--statistics {path}: no such file")
    name = f"lakestats_plugin_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - a plugin's own error, named
        del sys.modules[name]
        raise PluginError(f"--statistics {path}: {type(e).__name__}: {e}") from e
    return module
