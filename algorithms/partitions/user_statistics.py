"""Table-level values of user-defined statistics (core.udf), from the partitions' states that the
partition index keeps: the previous version's state merged with the added partitions' (less
the removed ones', for a statistic that can be un-merged), else every partition's state merged
anew in path order. Either way the result is what a compute from scratch gives."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from core import udf
from metastore import files, index


@dataclass
class Previous:
    """The version a new one starts from, and how the partitions changed."""
    statistics: pa.Table          # its statistics.parquet, states included
    index: pa.Table               # its partition index
    schema: pa.Schema
    added: set[str]               # paths of the partitions added (or changed) since
    removed: set[str]             # and removed (or changed)


class _Recompute(Exception):
    """The previous state cannot be carried: merge every partition's."""


def reduce(statistics: list[udf.Statistic], table: pa.Schema, new_index: pa.Table,
           previous: Previous | None = None) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """Per table column, {statistic: value, <statistic>__state: state}; and per statistic the
    columns where it failed, with why (a partition's failure fails the table's value)."""
    rows: list[dict] = [{} for _ in table]
    errors: dict[str, dict[str, str]] = {}
    base = _base(previous) if previous else {}
    paths = new_index["path"]
    for k, field in enumerate(table):
        for s in statistics:
            if not s.applies(field.type):
                continue
            positions, states = index.plugin_states(new_index, k, s.name)
            rows[k][s.name] = rows[k][udf.state_column(s.name)] = None
            if states.null_count:
                failed = positions.filter(states.is_null())
                errors.setdefault(s.name, {})[field.name] = (
                    f"failed on {len(failed)} partition(s), first {paths[failed[0].as_py()]}")
                continue
            if not len(states):
                continue
            try:
                try:
                    if previous is None:
                        raise _Recompute
                    state = _carried(s, field.name, base, previous, new_index, positions, states)
                except _Recompute:
                    state = _fold(s, None, states.to_pylist())
                rows[k][s.name] = s.value(state)
                rows[k][udf.state_column(s.name)] = s.encode(state)
            except Exception as e:  # noqa: BLE001 - a plugin's failure is its own
                errors.setdefault(s.name, {})[field.name] = f"{type(e).__name__}: {e}"
    return rows, errors


def _base(previous: Previous) -> dict[str, dict[str, bytes | None]]:
    """column -> statistic -> the previous version's state (None where it failed; absent
    where the column had no values)."""
    columns = previous.statistics["column"].to_pylist()
    return dict(zip(columns, files.plugin_states(previous.statistics)))


def _carried(s: udf.Statistic, column: str, base: dict, previous: Previous,
             new_index: pa.Table, positions: pa.Array, states: pa.Array) -> Any:
    if column not in base or base[column].get(s.name, b"") is None:     # new, or failed
        raise _Recompute
    state = base[column].get(s.name)
    state = None if state is None else s.decode(state)
    k = previous.schema.get_field_index(column)
    if previous.removed and k >= 0:
        old_positions, old_states = index.plugin_states(previous.index, k, s.name)
        gone = pc.is_in(previous.index["path"].take(old_positions),
                        pa.array(sorted(previous.removed), pa.string()))
        removed = old_states.filter(gone).to_pylist()
        if removed:
            if s.unmerge is None or None in removed:
                raise _Recompute
            try:
                for r in removed:
                    state = s.checked(s.unmerge(state, s.decode(r)), "unmerge returned")
            except ArithmeticError:
                raise _Recompute from None
    came = pc.is_in(new_index["path"].take(positions),
                    pa.array(sorted(previous.added), pa.string()))
    return _fold(s, state, states.filter(came).to_pylist())


def _fold(s: udf.Statistic, state: Any, encoded: list[bytes]) -> Any:
    for e in encoded:
        decoded = s.decode(e)
        state = decoded if state is None else s.combine(state, decoded)
    if state is None:
        raise _Recompute
    return state
