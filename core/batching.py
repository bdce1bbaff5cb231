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
