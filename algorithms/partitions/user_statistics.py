"""Table-level values of user-defined statistics (core.udf), from the partitions' states that the
partition index keeps: the previous version's state merged with the added partitions' (less
the removed ones', for a statistic that can be un-merged), else every partition's state merged
anew in path order. Either way the result is what a compute from scratch gives."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakestats.core import udf
from lakestats.core.errors import LakestatsError
from lakestats.metastore import files, index


@dataclass
class Previous:
    """The version a new one starts from, and how the partitions changed."""
    statistics: pa.Table          # its statistics.parquet, states included
    index: pa.Table               # its partition index
    schema: pa.Schema
    added: set[str]               # paths of the partitions added (or changed) since
    removed: set[str]             # and removed (or changed)


class _Recompute(LakestatsError):
    """The previous state cannot be carried: merge every partition's."""


def reduce(statistics: list[udf.Statistic], table: pa.Schema, new_index: pa.Table,
           previous: Previous | None = None) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """Per table column, {statistic: value, <statistic>__state: state}; and per statistic the
    columns where it failed, with why (a partition's failure fails the table's value)."""
    rows: list[dict] = [{} for _ in table]
    errors: dict[str, dict[str, str]] = {}
    carry = _Carry(previous, new_index) if previous else None
    paths = new_index["path"]
    for k, field in enumerate(table):
        applying = [s for s in statistics if s.applies(field.type)]
        held = index.plugin_states(new_index, k) if applying else None
        for s in applying:
            positions, states = _of(held, s.name)
            rows[k][s.name] = rows[k][udf.state_column(s.name)] = None
            if states.null_count:
                failed = positions[np.asarray(states.is_null())]
                errors.setdefault(s.name, {})[field.name] = (
                    f"failed on {len(failed)} partition(s), first {paths[int(failed[0])]}")
                continue
            if not len(states):
                continue
            try:
                try:
                    if carry is None:
                        raise _Recompute
                    state = carry.state(s, field.name, positions, states)
                except _Recompute:
                    state = _fold(s, None, states.to_pylist())
                rows[k][s.name] = s.value(state)
                rows[k][udf.state_column(s.name)] = s.encode(state)
            except Exception as e:  # noqa: BLE001 - a plugin's failure is its own
                errors.setdefault(s.name, {})[field.name] = f"{type(e).__name__}: {e}"
    return rows, errors


def _of(held: pa.Table, name: str) -> tuple[np.ndarray, pa.Array]:
    """The row positions and states of one statistic."""
    mine = held.filter(pc.equal(held["statistic"], name))
    return mine["row"].to_numpy(), mine["state"].combine_chunks()


class _Carry:
    """The previous version's states, and which partitions came and went: computed once."""

    def __init__(self, previous: Previous, new_index: pa.Table):
        self.previous = previous
        columns = previous.statistics["column"].to_pylist()
        # column -> statistic -> state (None where it failed; absent where no values)
        self.base = dict(zip(columns, files.plugin_states(previous.statistics)))
        self.came = _flags(new_index, previous.added)
        self.gone = _flags(previous.index, previous.removed)
        self.gone_states: dict[int, pa.Table] = {}

    def state(self, s: udf.Statistic, column: str, positions: np.ndarray,
              states: pa.Array) -> Any:
        if column not in self.base or self.base[column].get(s.name, b"") is None:  # new; failed
            raise _Recompute
        state = self.base[column].get(s.name)
        state = None if state is None else s.decode(state)
        removed = self._removed(s.name, column)
        if removed:
            if s.unmerge is None or None in removed:
                raise _Recompute
            try:
                for r in removed:
                    state = s.checked(s.unmerge(state, s.decode(r)), "unmerge returned")
            except ArithmeticError:
                raise _Recompute from None
        return _fold(s, state, states.filter(pa.array(self.came[positions])).to_pylist())

    def _removed(self, name: str, column: str) -> list[bytes | None]:
        """The removed partitions' states of the column."""
        k = self.previous.schema.get_field_index(column)
        if not self.gone.any() or k < 0:
            return []
        if k not in self.gone_states:
            self.gone_states[k] = index.plugin_states(self.previous.index, k)
        positions, states = _of(self.gone_states[k], name)
        return states.filter(pa.array(self.gone[positions])).to_pylist()


def _flags(table: pa.Table, paths: set[str]) -> np.ndarray:
    """Per index row: whether its partition is one of `paths`."""
    return np.asarray(pc.is_in(table["path"], value_set=pa.array(sorted(paths), pa.string())))


def _fold(s: udf.Statistic, state: Any, encoded: list[bytes]) -> Any:
    for e in encoded:
        decoded = s.decode(e)
        state = decoded if state is None else s.combine(state, decoded)
    if state is None:
        raise _Recompute
    return state
