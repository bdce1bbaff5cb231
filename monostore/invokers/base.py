"""The invoker interface: run a worker handler on a JSON event somewhere, get a Future.

Backends (one module each): local processes, AWS Lambda, and Spark tasks. Nothing
backend-specific leaks into the coordinator, which only submits events and waits.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future


class InvocationError(Exception):
    """The invocation itself failed (worker crashed, function error): worth a retry."""


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
