"""The invoker interface: run a worker handler on a JSON event somewhere, get a Future.

Backends (one module each): local processes, AWS Lambda, and Spark tasks. Nothing
backend-specific leaks into the coordinator, which only submits events and waits.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from typing import Callable


class InvocationError(Exception):
    """The invocation itself failed (worker crashed, function error): worth a retry."""


class StepFailed(Exception):
    """A step of a distributed algorithm failed on some worker after its retries."""


class Invoker(ABC):
    workers: int

    @abstractmethod
    def submit(self, event: dict) -> Future:
        """Run functions.handlers.handle(event) and resolve to its JSON result."""

    def restart(self) -> None:
        """Stop stuck workers: their invocations fail (and are retried by the coordinator).
        Backends that time out invocations themselves (AWS Lambda) need not do anything."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def invoke_all(invoker: Invoker, events: list[dict], max_attempts: int = 3,
               progress: Callable[[], None] | None = None) -> list[dict]:
    """Run one step of a distributed algorithm, one event per worker, and wait for all.
    A failed invocation is retried (steps are idempotent: a retry overwrites its own
    outputs), then the step fails."""
    results: list[dict | None] = [None] * len(events)
    for attempt in range(max_attempts):
        futures = {i: invoker.submit(events[i]) for i, r in enumerate(results) if r is None}
        for i, future in futures.items():
            try:
                results[i] = future.result()
                if progress:
                    progress()
            except InvocationError as e:
                if attempt == max_attempts - 1:
                    raise StepFailed(f"{events[i]['action']} #{events[i]['index']}: {e}") from e
    return results
