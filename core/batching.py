"""Consecutive runs of items whose sizes add up to about a limit: what is read or held at once."""
from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def runs(items: Iterable[tuple[T, int]], limit: int) -> Iterator[list[T]]:
    """(item, size) pairs in runs whose sizes sum to at most `limit`; an item larger than the
    limit is a run of its own."""
    run, held = [], 0
    for item, size in items:
        if run and held + size > limit:
            yield run
            run, held = [], 0
        run.append(item)
        held += size
    if run:
        yield run


def packs(sizes: list[int], budget: int, open_cost: int, workers: int,
          per_worker: int = 4) -> list[list[int]]:
    """Items (by index, in order) in packs, one worker call each, by Spark's rule for splits:
    each item counts its size plus `open_cost` (what opening it costs, counted as size), and a
    pack holds at most `budget`, no less than one open cost, and no more than an even share of
    the whole over `per_worker` calls per worker (so that every worker gets work). `budget` 0:
    one item a pack."""
    if budget <= 0:
        return [[i] for i in range(len(sizes))]
    costs = [size + open_cost for size in sizes]
    split = min(budget, max(open_cost, sum(costs) // (per_worker * max(1, workers))))
    return list(runs(enumerate(costs), split))
